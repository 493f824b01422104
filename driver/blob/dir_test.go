package blob_test

import (
	"os"
	"testing"

	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/blob/blobtest"
)

func TestDirConformance(t *testing.T) {
	blobtest.Run(t, blobtest.Kit{
		New: func(t testing.TB) blob.Store {
			d, err := blob.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return d.WithoutSync()
		},
		Reopen: func(t testing.TB, s blob.Store) blob.Store {
			d, err := blob.NewDir(s.(*blob.Dir).Root())
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Corrupt: func(t testing.TB, s blob.Store, h blob.Hash, content []byte) {
			p := s.(*blob.Dir).Path(h)
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, content, 0o444); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestParseHash(t *testing.T) {
	h := blob.Sum([]byte("x"))
	if got, err := blob.ParseHash(h.String()); err != nil || got != h {
		t.Fatalf("ParseHash(%s) = %s, %v", h, got, err)
	}
	for _, s := range []string{"", "00", h.String()[:63] + "G", h.String() + "0", "../" + h.String()[3:]} {
		if _, err := blob.ParseHash(s); err == nil {
			t.Errorf("ParseHash(%q) succeeded", s)
		}
	}
}
