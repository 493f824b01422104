package benchmarks

import (
	"github.com/dustin/go-humanize"

	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/forkline/forkline/driver/dirfs"
)

// Scenario 6, dirfs: a checkpoint of a workspace of many files of which one
// changed since the previous checkpoint (what EverySteps captures after a
// write_file), and restoring a checkpoint into a new workspace (what a fork
// does on its first Resource call), each against a full copy of the
// workspace (os.CopyFS: the naive snapshot, without any fsync, so the
// cheapest full copy there is).

// workspaceFixture is a dirfs store with one workspace of n files that a
// previous capture has indexed, so that the next captures are incremental.
type workspaceFixture struct {
	d     *dirfs.Driver
	ws    *dirfs.Workspace
	ref   string // a checkpoint of the whole workspace
	n     int
	round int
	rng   *rand.Rand
	tmp   string // where full copies and nothing else go
}

// workspaceFile is the name of file i: 100 files per directory.
func workspaceFile(i int) string { return fmt.Sprintf("pkg%03d/file%05d.go", i/100, i) }

// openWorkspace fills a workspace with n files of 512 B to 8 KiB in
// directories of 100 (fixed seed; the tree of driver/dirfs's own
// benchmarks, about 43 MB for 10,000 files), waits out dirfs's racy window
// so that the first capture can trust what it indexes, and captures it.
func openWorkspace(ctx context.Context, dir string, n int) (*workspaceFixture, error) {
	w := &workspaceFixture{d: dirfs.New(dirfs.Config{Store: filepath.Join(dir, "store")}), n: n,
		rng: rand.New(rand.NewPCG(5, 6)), tmp: filepath.Join(dir, "copies")}
	if err := os.MkdirAll(w.tmp, 0o755); err != nil {
		return nil, err
	}
	var err error
	if w.ws, _, err = w.d.Create(ctx, ""); err != nil {
		return nil, err
	}
	buf := make([]byte, 8<<10)
	for i := range n {
		size := 512 + w.rng.IntN(8<<10-512)
		for j := range size {
			buf[j] = 'a' + byte(w.rng.IntN(26))
		}
		if err := w.ws.WriteFile(workspaceFile(i), buf[:size]); err != nil {
			return nil, err
		}
	}
	// A file whose times lie within the racy window of the capture that
	// indexes it is read again by the next capture (dirfs's racy-git
	// rule); wait so that the index the measured captures start from is
	// trusted, as in a workspace edited minutes ago.
	time.Sleep(dirfs.DefaultRacyWindow + 200*time.Millisecond)
	if w.ref, err = w.d.Checkpoint(ctx, w.ws); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *workspaceFixture) Close() error { return w.ws.Close() }

// captureOp changes one file (not timed) and checkpoints the workspace
// (timed). The change keeps the file's size, the hardest to notice.
func (w *workspaceFixture) captureOp(ctx context.Context) op {
	return func() (float64, time.Duration, error) {
		w.round++
		name := workspaceFile(w.rng.IntN(w.n))
		data, err := w.ws.ReadFile(name)
		if err != nil {
			return 0, 0, err
		}
		data[0] = 'A' + byte(w.round%26)
		if err := w.ws.WriteFile(name, data); err != nil {
			return 0, 0, err
		}
		start := time.Now()
		_, err = w.d.Checkpoint(ctx, w.ws)
		return 1, time.Since(start), err
	}
}

// restoreOp creates a workspace from the full checkpoint (timed) and
// removes it (not timed).
func (w *workspaceFixture) restoreOp(ctx context.Context) op {
	return func() (float64, time.Duration, error) {
		start := time.Now()
		ws, b, err := w.d.Create(ctx, w.ref)
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		ws.Close()
		return 1, took, w.d.RemoveWorkspace(b)
	}
}

// copyOp copies the workspace with os.CopyFS (timed) and removes the copy
// (not timed).
func (w *workspaceFixture) copyOp() op {
	return func() (float64, time.Duration, error) {
		dst := filepath.Join(w.tmp, fmt.Sprintf("copy-%d", w.round))
		w.round++
		start := time.Now()
		err := os.CopyFS(dst, os.DirFS(w.ws.Dir()))
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		return 1, took, os.RemoveAll(dst)
	}
}

func runDirfs(e *env) ([]Row, error) {
	dir, err := e.mkdir("dirfs")
	if err != nil {
		return nil, err
	}
	e.logf("   writing a workspace of %d files", e.sizes.Files)
	w, err := openWorkspace(e.ctx, dir, e.sizes.Files)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	rates, load, err := e.interleave(
		contestant{"dirfs Checkpoint, 1 file changed", w.captureOp(e.ctx)},
		contestant{"dirfs Create from a checkpoint", w.restoreOp(e.ctx)},
		contestant{"full copy (os.CopyFS)", w.copyOp()},
	)
	if err != nil {
		return nil, err
	}
	ms := func(rs []float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = 1e3 / r
		}
		return out
	}
	capture := Figure{What: "forkline", Value: median(ms(rates[0])), Unit: "ms", Rounds: ms(rates[0])}
	restore := Figure{What: "forkline", Value: median(ms(rates[1])), Unit: "ms", Rounds: ms(rates[1])}
	full := Figure{What: "full copy, os.CopyFS", Value: median(ms(rates[2])), Unit: "ms", Rounds: ms(rates[2])}
	files := humanize.Comma(int64(w.n))
	a := rowOf("6a", fmt.Sprintf("dirfs capture, 1 of %s files changed, vs a full copy", files), fmt.Sprintf("Dirfs/files=%d/op=capture", w.n),
		capture, full, div, "time capture/copy", "≤ 0.1", atMost(0.1), load)
	a.Note = "An incremental, durable checkpoint (the changed blob, the manifest and their directories fsynced); the copy is not synced at all."
	b := rowOf("6b", fmt.Sprintf("dirfs restore of %s files vs a full copy", files), fmt.Sprintf("Dirfs/files=%d/op=restore", w.n),
		restore, full, div, "time restore/copy", "", nil, load)
	b.Note = "Create from a checkpoint materializes every file (reflink where the file system has it, else a copy) and checks every hash."
	return []Row{a, b}, nil
}
