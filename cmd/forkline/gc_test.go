package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/google/go-cmp/cmp"
)

// contentBytes is the size of what a dirfs store holds: its blobs,
// manifests and workspaces (not its bookkeeping files).
func contentBytes(t *testing.T, store string) int64 {
	t.Helper()
	var n int64
	for _, sub := range []string{"blobs", "manifests", "workspaces"} {
		n += dirBytes(t, filepath.Join(store, sub))
	}
	return n
}

// dirBytes is the size of the regular files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// storedBytes is what the log stores for id's own part (tombstones too).
func storedBytes(t *testing.T, dir string, id eventlog.ID) eventlog.Usage {
	t.Helper()
	s, err := pebblestore.Open(logDir(dir), pebblestore.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for u, err := range s.Usage(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if u.ID == id {
			return u
		}
	}
	t.Fatalf("no usage for %s", id)
	return eventlog.Usage{}
}

// TestDeleteParentThenGC (DESIGN §14, issue 16's acceptance): the demo,
// one more fork, then the parent is deleted and gc collects the workspace
// store. Every fork still restores exactly what its selection names and
// still runs; the parent's own share of the disk goes: its events past
// the furthest fork point, its workspace and the checkpoints only it
// could select.
func TestDeleteParentThenGC(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	dir := filepath.Join(t.TempDir(), "data")
	if _, stderr, code := runCLI(t, "--dir", dir, "demo"); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	parent := readDemoLog(t, dir)[0]
	stdout, stderr, code := runCLI(t, "--dir", dir, "--json", "fork", parent.info.ID.String(), "45")
	if code != 0 {
		t.Fatalf("fork: exit %d: %s", code, stderr)
	}
	var late struct{ ID string }
	if err := json.Unmarshal([]byte(stdout), &late); err != nil {
		t.Fatal(err)
	}
	parentWS, _ := ownWorkspaceDir(t, dir, parent)
	before := map[string]map[string]string{} // the ran forks' workspaces
	for _, x := range readDemoLog(t, dir)[1:] {
		if x.info.Head > x.info.ForkSeq+1 {
			ws, _ := ownWorkspaceDir(t, dir, x)
			before[x.info.ID.String()] = tree(t, ws)
		}
	}
	usageBefore := storedBytes(t, dir, parent.info.ID)
	storeBefore := contentBytes(t, storeDir(dir))
	parentWSBytes := dirBytes(t, parentWS)

	if _, stderr, code := runCLI(t, "--dir", dir, "delete", parent.info.ID.String()); code != 0 {
		t.Fatalf("delete: exit %d: %s", code, stderr)
	}
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "gc", "--older-than", "10000h", "--grace", "0s")
	if code != 0 {
		t.Fatalf("gc: exit %d: %s", code, stderr)
	}
	var gc struct {
		Deleted   []string
		Collected struct{ Checkpoints, Workspaces int }
	}
	if err := json.Unmarshal([]byte(stdout), &gc); err != nil {
		t.Fatal(err)
	}
	if len(gc.Deleted) != 0 || gc.Collected.Workspaces != 1 {
		t.Errorf("gc = %s; want no execution deleted (none is that old) and the parent's workspace removed", stdout)
	}

	// Measured before the checks below restore and run anything.
	if dropped := storeBefore - contentBytes(t, storeDir(dir)); dropped < parentWSBytes {
		t.Errorf("the workspace store shrank by %d bytes; the parent's workspace alone held %d", dropped, parentWSBytes)
	}
	forks := readDemoLog(t, dir)
	if len(forks) != 4 {
		t.Fatalf("%d executions listed after deleting the parent, want its 4 forks (the demo's 3 and the late one)", len(forks))
	}
	d := dirfs.New(dirfs.Config{Store: storeDir(dir)})
	for _, x := range forks {
		fc := x.events[x.info.ForkSeq].Data.(*eventlog.ForkCreated)
		if !sameEventsUpTo(parent.events, x.events, x.info.ForkSeq) {
			t.Errorf("fork %s reads another prefix after its parent was deleted", x.info.ID)
		}
		for _, sel := range fc.Selections {
			ws, _, err := d.Create(t.Context(), sel.Ref)
			if err != nil {
				t.Fatalf("fork %s: its selection %s no longer restores: %v", x.info.ID, sel.Ref[:12], err)
			}
			want := recordedWorkspace(t, parent.events, sel.CapturedAt)
			if diff := cmp.Diff(want, tree(t, ws.Dir())); diff != "" {
				t.Errorf("fork %s: checkpoint %s restores (-recorded +restored):\n%s", x.info.ID, sel.Ref[:12], diff)
			}
		}
		if w, ok := before[x.info.ID.String()]; ok {
			ws, _ := ownWorkspaceDir(t, dir, x)
			if diff := cmp.Diff(w, tree(t, ws)); diff != "" {
				t.Errorf("fork %s: its workspace changed under gc:\n%s", x.info.ID, diff)
			}
		}
	}
	// The fork made before the delete runs now, from the kept checkpoint.
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "run", late.ID)
	if code != 0 || !strings.Contains(stdout, `"status": "completed"`) {
		t.Fatalf("run of the late fork: exit %d: %s\n%s", code, stderr, stdout)
	}

	after := storedBytes(t, dir, parent.info.ID)
	if !after.Deleted || after.Events != 45 {
		t.Errorf("the parent's tombstone keeps %d events (deleted %v); want 45, the furthest fork point", after.Events, after.Deleted)
	}
	if after.Bytes >= usageBefore.Bytes {
		t.Errorf("the parent's stored bytes went from %d to %d", usageBefore.Bytes, after.Bytes)
	}
	if isDir(parentWS) {
		t.Errorf("the parent's workspace %s is still there", parentWS)
	}
	t.Logf("log: parent %d → %d stored bytes (%d → %d events); workspace store: gc removed %d checkpoints and the parent's workspace (%d bytes)",
		usageBefore.Bytes, after.Bytes, usageBefore.Events, after.Events, gc.Collected.Checkpoints, parentWSBytes)
}

// sameEventsUpTo reports whether a and b hold the same events 1..n.
func sameEventsUpTo(a, b []eventlog.Event, n uint64) bool {
	if uint64(len(a)) < n || uint64(len(b)) < n {
		return false
	}
	for i := range n {
		ra, erra := eventlog.AppendRecord(nil, eventlog.ID{}, a[i])
		rb, errb := eventlog.AppendRecord(nil, eventlog.ID{}, b[i])
		if erra != nil || errb != nil || string(ra) != string(rb) {
			return false
		}
	}
	return true
}
