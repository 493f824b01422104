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
)

// TestCorruption damages a stored checkpoint in several ways; Verify must
// name the ref (and the path, for a blob) and Create must fail with
// ErrCorrupt and driver.ErrCheckpointUnavailable, leaving no workspace
// behind — never a panic, never a workspace with wrong content.
func TestCorruption(t *testing.T) {
	damage := map[string]func(t *testing.T, blob, manifest string){
		"flipped byte": func(t *testing.T, blob, _ string) {
			data := readWritable(t, blob)
			data[len(data)/2] ^= 0x40
			must(t, os.WriteFile(blob, data, 0o444))
		},
		"truncated": func(t *testing.T, blob, _ string) {
			data := readWritable(t, blob)
			must(t, os.WriteFile(blob, data[:len(data)-1], 0o444))
		},
		"extended": func(t *testing.T, blob, _ string) {
			data := readWritable(t, blob)
			must(t, os.WriteFile(blob, append(data, 'x'), 0o444))
		},
		"missing blob": func(t *testing.T, blob, _ string) {
			must(t, os.Remove(blob))
		},
		"blob replaced by a directory": func(t *testing.T, blob, _ string) {
			must(t, os.Remove(blob))
			must(t, os.Mkdir(blob, 0o755))
		},
		"manifest flipped byte": func(t *testing.T, _, manifest string) {
			data := readWritable(t, manifest)
			data[len(data)-3] ^= 0x01
			must(t, os.WriteFile(manifest, data, 0o444))
		},
		"manifest truncated": func(t *testing.T, _, manifest string) {
			data := readWritable(t, manifest)
			must(t, os.WriteFile(manifest, data[:len(data)/2], 0o444))
		},
	}
	for name, harm := range damage {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			d := newDriver(t)
			w, _ := create(t, d, "")
			must(t, w.WriteFile("ok.txt", []byte("intact")))
			must(t, w.WriteFile("dir/victim.txt", []byte("this content will be damaged")))
			ref := checkpoint(t, d, w)
			blobs, err := dirfs.BlobPaths(d, ref)
			must(t, err)
			harm(t, blobs["dir/victim.txt"], dirfs.ManifestPath(d, ref))

			err = d.Verify(ctx, ref)
			if !errors.Is(err, dirfs.ErrCorrupt) {
				t.Fatalf("Verify = %v; want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), ref) {
				t.Errorf("Verify error %q does not name the ref", err)
			}
			if !strings.HasPrefix(name, "manifest") && !strings.Contains(err.Error(), `"dir/victim.txt"`) {
				t.Errorf("Verify error %q does not name the path", err)
			}
			var de *dirfs.Error
			if !errors.As(err, &de) || de.Ref != ref {
				t.Errorf("Verify error is not a *dirfs.Error for the ref: %#v", err)
			}

			r, _, err := d.Create(ctx, ref)
			if err == nil {
				_ = r.Close()
				t.Fatal("Create from a corrupt checkpoint succeeded")
			}
			if !errors.Is(err, dirfs.ErrCorrupt) || !errors.Is(err, driver.ErrCheckpointUnavailable) {
				t.Errorf("Create = %v; want ErrCorrupt and driver.ErrCheckpointUnavailable", err)
			}
			des, err := os.ReadDir(filepath.Join(dirfs.StoreDir(d), "workspaces"))
			must(t, err)
			if len(des) != 1 {
				t.Errorf("a failed restore left workspaces behind: %d entries", len(des))
			}
			// The source workspace still captures: a new checkpoint of the
			// same content stores what is missing (after a GC, which
			// forgets the index) or reuses intact blobs.
			_ = os.Remove(dirfs.ManifestPath(d, ref))
			if st, err := os.Lstat(blobs["dir/victim.txt"]); err == nil && st.IsDir() {
				must(t, os.Remove(blobs["dir/victim.txt"]))
			}
			if _, err := d.GC(ctx); err != nil {
				t.Fatal(err)
			}
			ref2 := checkpoint(t, d, w)
			if err := d.Verify(ctx, ref2); err != nil {
				t.Fatalf("a new checkpoint after the damage was cleaned: %v", err)
			}
		})
	}
}

// readWritable reads a read-only store file and makes it writable.
func readWritable(t *testing.T, p string) []byte {
	t.Helper()
	must(t, os.Chmod(p, 0o644))
	data, err := os.ReadFile(p)
	must(t, err)
	return data
}
