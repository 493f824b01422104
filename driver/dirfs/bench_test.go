package dirfs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/forkline/forkline/driver/dirfs"
)

// benchTree fills a new workspace with files files in directories of 100,
// 512 B to 8 KiB each (about 43 MB for 10,000), from a fixed seed, takes a
// first checkpoint, and waits out the racy window so that the files count as
// settled, as the files of a checked-out repository are.
func benchTree(b *testing.B, files int, noSync bool) (*dirfs.Driver, *dirfs.Workspace, string, []string) {
	b.Helper()
	d := dirfs.New(dirfs.Config{Store: b.TempDir(), NoSync: noSync})
	w, _, err := d.Create(context.Background(), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, files)
	for i := range files {
		names[i] = fmt.Sprintf("pkg%03d/file%05d.go", i/100, i)
		data := make([]byte, 512+rng.IntN(8<<10-512))
		for j := range data {
			data[j] = byte('a' + rng.IntN(26))
		}
		if err := w.WriteFile(names[i], data); err != nil {
			b.Fatal(err)
		}
	}
	ref, err := d.Checkpoint(context.Background(), w)
	if err != nil {
		b.Fatal(err)
	}
	// The first capture saw files written moments before it: racily clean,
	// so the next capture reads them again. Once the racy window has
	// passed, one more capture records them as settled.
	time.Sleep(dirfs.DefaultRacyWindow + 100*time.Millisecond)
	if again, err := d.Checkpoint(context.Background(), w); err != nil || again != ref {
		b.Fatalf("second capture: %s, %v", again, err)
	}
	return d, w, ref, names
}

// fullCopy is the baseline: the whole tree copied file by file with the
// standard library, which is what a checkpoint or a restore without content
// addressing costs.
func fullCopy(b *testing.B, src, dst string) {
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCapture stands for the checkpoint an agent takes after a tool
// call that edited one file of a checked-out repository of 10,000 files:
// the capture walks the tree, reads only the changed file, stores one blob
// and one manifest. The baseline copies the whole tree, as a snapshot by
// copying would. The changed=1 runs report their time as a ratio to the
// baseline of the same run ("x-fullcopy").
func BenchmarkCapture(b *testing.B) {
	const files = 10000
	var baseline float64 // ns per full copy
	for _, noSync := range []bool{false, true} {
		d, w, _, names := benchTree(b, files, noSync)
		if !noSync {
			b.Run(fmt.Sprintf("files=%d/baseline=fullcopy", files), func(b *testing.B) {
				b.ReportAllocs()
				root := b.TempDir()
				i := 0
				for b.Loop() {
					i++
					fullCopy(b, w.Dir(), filepath.Join(root, fmt.Sprint(i)))
				}
				baseline = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
		}
		if !noSync {
			// The first capture through a handle without a file index — a
			// later dispatch's Open, or a fork's restored workspace — reads
			// and hashes every file (its blobs are all present already).
			b.Run(fmt.Sprintf("files=%d/index=cold", files), func(b *testing.B) {
				b.ReportAllocs()
				ctx := context.Background()
				for b.Loop() {
					o, err := d.Open(ctx, dirfs.Binding{Workspace: w.ID()})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := d.Checkpoint(ctx, o); err != nil {
						b.Fatal(err)
					}
					_ = o.Close()
				}
				if baseline > 0 {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/baseline, "x-fullcopy")
				}
			})
		}
		name := fmt.Sprintf("files=%d/changed=1", files)
		if noSync {
			name += "/sync=false"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				// Same size, new content: the hardest change to notice.
				p := names[i*7919%files]
				data, err := w.ReadFile(p)
				if err != nil {
					b.Fatal(err)
				}
				data[0] = byte('A' + i%26)
				if err := w.WriteFile(p, data); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Checkpoint(ctx, w); err != nil {
					b.Fatal(err)
				}
			}
			if baseline > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/baseline, "x-fullcopy")
			}
			// The changed file, plus the files changed by captures less
			// than the racy window ago, which are read again.
			if c := dirfs.LastCapture(w); c.Hashed > files/100 {
				b.Fatalf("a capture with one change read %d files", c.Hashed)
			}
		})
	}
}

// BenchmarkRestore stands for a fork starting from a checkpoint of a
// 10,000-file repository: Create materializes a fresh workspace from the
// manifest, checking every file's hash. The baseline copies the tree.
func BenchmarkRestore(b *testing.B) {
	const files = 10000
	d, w, ref, _ := benchTree(b, files, false)
	var baseline float64
	b.Run(fmt.Sprintf("files=%d/baseline=fullcopy", files), func(b *testing.B) {
		b.ReportAllocs()
		root := b.TempDir()
		i := 0
		for b.Loop() {
			i++
			fullCopy(b, w.Dir(), filepath.Join(root, fmt.Sprint(i)))
		}
		baseline = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			r, _, err := d.Create(ctx, ref)
			if err != nil {
				b.Fatal(err)
			}
			_ = r.Close()
		}
		if baseline > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/baseline, "x-fullcopy")
		}
	})
}
