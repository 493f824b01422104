package dirfs_test

import (
	"fmt"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/driver/drivertest"
)

type (
	wsDriver  = driver.Driver[*dirfs.Workspace, dirfs.Binding]
	wsHarness = drivertest.Harness[*dirfs.Workspace, dirfs.Binding]
)

// harness changes a workspace in the ways a checkpoint must capture: new and
// rewritten files, directories, symbolic links, removals.
func harness() wsHarness {
	return wsHarness{
		Mutate: func(t testing.TB, w *dirfs.Workspace, step int) {
			t.Helper()
			must(t, w.WriteFile(fmt.Sprintf("dir%d/file.txt", step%3), fmt.Appendf(nil, "step %d\n", step)))
			must(t, w.WriteFile("last", fmt.Appendf(nil, "%d", step)))
			must(t, w.MkdirAll(fmt.Sprintf("empty%d", step), 0o755))
			_ = w.Remove("link")
			must(t, w.Symlink(fmt.Sprintf("../outside/%d", step), "link"))
			if step%2 == 0 {
				must(t, w.RemoveAll("dir1"))
			}
		},
		Snapshot: func(t testing.TB, w *dirfs.Workspace) any {
			t.Helper()
			return listTree(t, w.Dir())
		},
		DeleteCheckpoint: func(t testing.TB, d wsDriver, ref string) {
			t.Helper()
			must(t, d.(*dirfs.Driver).Delete(ref))
		},
		Close: func(w *dirfs.Workspace) { _ = w.Close() },
	}
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t testing.TB) wsDriver {
		return dirfs.New(dirfs.Config{Store: t.TempDir()})
	}, harness())
}

func TestConformanceWithTemplate(t *testing.T) {
	tmpl := t.TempDir()
	writeTree(t, tmpl, map[string]node{
		"README":      {Kind: 'f', Mode: 0o644, Data: "hello"},
		"bin":         {Kind: 'd', Mode: 0o755},
		"bin/run":     {Kind: 'f', Mode: 0o755, Data: "#!/bin/sh\n"},
		"empty":       {Kind: 'd', Mode: 0o700},
		"lib":         {Kind: 'l', Target: "bin"},
		"ro":          {Kind: 'd', Mode: 0o555},
		"ro/readonly": {Kind: 'f', Mode: 0o444, Data: "x"},
	})
	drivertest.Run(t, func(t testing.TB) wsDriver {
		return dirfs.New(dirfs.Config{Store: t.TempDir(), Template: tmpl})
	}, harness())
}
