package dirfs_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/driver/dirfs"
)

// TestCaptureRefreshesCheckpointAge: capturing a tree the store already
// holds renews the checkpoint's modification time, so Live's grace period
// protects the ref until the log records the capture, however old the
// first capture of that tree is. Without the capture, the old checkpoint
// goes.
func TestCaptureRefreshesCheckpointAge(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	w, b := create(t, d, "")
	must(t, w.WriteFile("f", []byte("the same tree twice")))
	ref := checkpoint(t, d, w)
	want := listTree(t, w.Dir())
	old := time.Now().Add(-time.Hour)
	path := dirfs.ManifestPath(d, ref)
	must(t, os.Chtimes(path, old, old))

	// The same tree again: the ref the store holds, renewed.
	if again := checkpoint(t, d, w); again != ref {
		t.Fatalf("the unchanged tree captured as %s, then %s", ref, again)
	}
	if fi, err := os.Stat(path); err != nil || time.Since(fi.ModTime()) > time.Minute {
		t.Fatalf("the manifest of the recaptured ref: %v, %v; want a modification time of now", fi, err)
	}
	st, err := d.Live(ctx, nil, []dirfs.Binding{b}, 10*time.Minute)
	must(t, err)
	refs, err := d.Checkpoints()
	must(t, err)
	if st.Checkpoints != 0 || !slices.Contains(refs, ref) {
		t.Fatalf("Live within the grace period of a recapture removed %d checkpoint(s); store holds %v, want %s kept", st.Checkpoints, refs, ref)
	}
	expectRestores(t, d, ref, want)

	// Not recaptured, the same ref is past the grace period and goes.
	must(t, os.Chtimes(path, old, old))
	st, err = d.Live(ctx, nil, []dirfs.Binding{b}, 10*time.Minute)
	must(t, err)
	refs, err = d.Checkpoints()
	must(t, err)
	if st.Checkpoints != 1 || slices.Contains(refs, ref) {
		t.Fatalf("Live past the grace period removed %d checkpoint(s); store holds %v, want %s gone", st.Checkpoints, refs, ref)
	}
}

// TestLiveKeepsYoungWorkspaces: Live keeps a workspace no binding names
// while it is younger than the grace period — its binding may not be
// recorded yet — and removes it once it is older; a listed workspace stays
// whatever its age.
func TestLiveKeepsYoungWorkspaces(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	_, young := create(t, d, "")
	_, listed := create(t, d, "")
	path := func(b dirfs.Binding) string { return filepath.Join(dirfs.StoreDir(d), "workspaces", b.Workspace) }
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(path(listed), old, old))

	st, err := d.Live(ctx, nil, []dirfs.Binding{listed}, 10*time.Minute)
	must(t, err)
	for _, b := range []dirfs.Binding{young, listed} {
		if _, err := os.Stat(path(b)); err != nil {
			t.Fatalf("Live removed workspace %s (Resources %d): %v", b.Workspace, st.Resources, err)
		}
	}
	if st.Resources != 0 {
		t.Fatalf("Live removed %d workspaces, want none", st.Resources)
	}

	must(t, os.Chtimes(path(young), old, old))
	st, err = d.Live(ctx, nil, []dirfs.Binding{listed}, 10*time.Minute)
	must(t, err)
	if _, err := os.Stat(path(young)); !errors.Is(err, fs.ErrNotExist) || st.Resources != 1 {
		t.Fatalf("Live past the grace period: Resources %d, unlisted workspace: %v; want it removed", st.Resources, err)
	}
	if _, err := os.Stat(path(listed)); err != nil {
		t.Fatalf("Live removed the listed workspace: %v", err)
	}
}
