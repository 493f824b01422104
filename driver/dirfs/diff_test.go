package dirfs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/google/go-cmp/cmp"
)

// TestDiff compares two checkpoints of one workspace: files added,
// removed and changed (text with a unified diff, binary with sizes), a
// mode change, a symlink retargeted, a directory removed. DESIGN §12.
func TestDiff(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	w, _ := create(t, d, "")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteFile("main.go", []byte("package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")))
	must(w.WriteFile("logo.bin", []byte{0, 1, 2, 3}))
	must(w.WriteFile("same.txt", []byte("unchanged\n")))
	must(w.WriteFile("run.sh", []byte("echo\n")))
	must(w.MkdirAll("old", 0o755))
	must(w.WriteFile("old/notes.txt", []byte("gone\n")))
	must(w.Symlink("main.go", "link"))
	refA := checkpoint(t, d, w)

	must(w.WriteFile("main.go", []byte("package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n")))
	must(w.WriteFile("logo.bin", []byte{0, 1, 2, 3, 4, 5}))
	must(w.Chmod("run.sh", 0o755))
	must(w.RemoveAll("old"))
	must(w.WriteFile("README.md", []byte("# greeter\n")))
	must(w.Remove("link"))
	must(w.Symlink("README.md", "link"))
	refB := checkpoint(t, d, w)

	got, err := d.Diff(ctx, refA, refB)
	if err != nil {
		t.Fatal(err)
	}
	want := `+ file README.md
    10 bytes
~ symlink link
    → "main.go" became → "README.md"
~ file logo.bin
    binary: 4 bytes → 6 bytes
~ file main.go
    --- a/main.go
    +++ b/main.go
    @@ -1,5 +1,5 @@
     package main
     
     func main() {
    -	println("hi")
    +	println("hello")
     }
- directory old
- file old/notes.txt
    5 bytes
~ file run.sh
    mode 644 → 755`
	if d := cmp.Diff(want, got.String()); d != "" {
		t.Errorf("Diff (-want +got):\n%s", d)
	}
	if got.Changes[3].Op != driver.Changed || got.Changes[3].Kind != "file" || got.Changes[3].Name != "main.go" {
		t.Errorf("change 3 = %+v, want changed file main.go", got.Changes[3])
	}

	same, err := d.Diff(ctx, refB, refB)
	if err != nil || !same.Empty() || same.String() != "" {
		t.Errorf("Diff of a ref with itself = %q, %v; want empty", same.String(), err)
	}
	back, err := d.Diff(ctx, refB, refA)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), "- file README.md\n") {
		t.Errorf("reversed diff starts %q, want the README removed", back.String())
	}
}

// TestDiffUnavailable: a malformed, missing or corrupt ref is
// driver.ErrCheckpointUnavailable.
func TestDiffUnavailable(t *testing.T) {
	ctx := context.Background()
	store := t.TempDir()
	d := dirfs.New(dirfs.Config{Store: store})
	w, _ := create(t, d, "")
	if err := w.WriteFile("a.txt", []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	refA := checkpoint(t, d, w)
	if err := w.WriteFile("a.txt", []byte("b\n")); err != nil {
		t.Fatal(err)
	}
	refB := checkpoint(t, d, w)
	missing := strings.Repeat("0", 64)
	for _, tc := range []struct{ a, b string }{{"../x", refB}, {refA, missing}} {
		if _, err := d.Diff(ctx, tc.a, tc.b); !errors.Is(err, driver.ErrCheckpointUnavailable) {
			t.Errorf("Diff(%q, %q) = %v, want ErrCheckpointUnavailable", tc.a, tc.b, err)
		}
	}
	// Damage the blob of refB's a.txt: the diff must not show wrong content.
	blobs, _ := filepath.Glob(filepath.Join(store, "blobs", "*", "*"))
	for _, b := range blobs {
		data, _ := os.ReadFile(b)
		if string(data) == "b\n" {
			_ = os.Chmod(b, 0o644)
			if err := os.WriteFile(b, []byte("X\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := d.Diff(ctx, refA, refB); !errors.Is(err, dirfs.ErrCorrupt) || !errors.Is(err, driver.ErrCheckpointUnavailable) {
		t.Errorf("Diff with a damaged blob = %v, want ErrCorrupt and ErrCheckpointUnavailable", err)
	}
}
