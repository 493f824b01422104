package dirfs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/forkline/forkline/driver/dirfs"
)

// CheckpointSize (driver.Sizer, DESIGN §13 forkline.capture.size) says
// what a capture added to the store: every new blob and the new manifest,
// exactly the bytes that appear under blobs/ and manifests/; nothing for
// a tree captured before; only the changed file and the manifest after
// one change.
func TestCheckpointSize(t *testing.T) {
	ctx := context.Background()
	store := t.TempDir()
	d := dirfs.New(dirfs.Config{Store: store, NoSync: true})
	w, _, err := d.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for name, content := range map[string]string{"a.txt": "alpha\n", "b.txt": "bravo bravo\n", "same.txt": "alpha\n"} {
		if err := w.WriteFile(name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() int64 {
		var n int64
		for _, sub := range []string{"blobs", "manifests"} {
			err := filepath.Walk(filepath.Join(store, sub), func(_ string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					n += fi.Size()
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	manifest := func(ref string) int64 {
		fi, err := os.Stat(filepath.Join(store, "manifests", ref))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}

	ref1, n1, err := d.CheckpointSize(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	// Two distinct contents (same.txt shares a.txt's blob) and a manifest.
	if want := int64(len("alpha\n")+len("bravo bravo\n")) + manifest(ref1); n1 != want || n1 != stored() {
		t.Fatalf("first capture stored %d bytes, want %d (store holds %d)", n1, want, stored())
	}
	ref2, n2, err := d.CheckpointSize(ctx, w)
	if err != nil || ref2 != ref1 || n2 != 0 {
		t.Fatalf("capture of the same tree: %s, %d bytes, %v; want %s and 0", ref2, n2, err, ref1)
	}
	if err := w.WriteFile("b.txt", []byte("bravo, changed\n")); err != nil {
		t.Fatal(err)
	}
	before := stored()
	ref3, n3, err := d.CheckpointSize(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len("bravo, changed\n")) + manifest(ref3); n3 != want || stored()-before != n3 {
		t.Fatalf("capture after one change stored %d bytes, want %d (the store grew by %d)", n3, want, stored()-before)
	}
	if _, _, err := d.CheckpointSize(ctx, nil); err == nil {
		t.Fatal("CheckpointSize of a nil workspace succeeded")
	}
}
