package benchmarks

import (
	"github.com/dustin/go-humanize"

	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
)

// historyFixture is the coder-agent history of scenarios 4 and 5 in a
// synced forkline store, and a raw Pebble copy of its records.
type historyFixture struct {
	st  *pebblestore.Store
	raw *rawStore
	id  eventlog.ID
	n   int // events
}

// openHistory builds a history of n events in dir: written through a store
// without sync (building is not measured), then reopened with sync, as a
// kernel's store is.
func openHistory(ctx context.Context, dir string, n int) (*historyFixture, error) {
	storeDir := filepath.Join(dir, "forkline")
	st, err := pebblestore.Open(storeDir, pebblestore.WithoutSync())
	if err != nil {
		return nil, err
	}
	id, err := buildHistory(ctx, st, n)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	h := &historyFixture{id: id, n: n}
	if h.st, err = pebblestore.Open(storeDir); err != nil {
		return nil, err
	}
	if h.raw, err = openRaw(filepath.Join(dir, "raw")); err != nil {
		h.st.Close()
		return nil, err
	}
	copied, err := h.raw.copyFrom(ctx, h.st, id)
	if err == nil && copied != n {
		err = fmt.Errorf("%w: raw copy has %d events, the history %d", errCheck, copied, n)
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *historyFixture) Close() error {
	h.raw.Close()
	return h.st.Close()
}

// history returns the run's history fixture, building it on first use.
func (e *env) history() (*historyFixture, error) {
	if e.hist != nil {
		return e.hist, nil
	}
	dir, err := e.mkdir("history")
	if err != nil {
		return nil, err
	}
	e.logf("   building a coder-agent history of %d events", e.sizes.HistoryEvents)
	h, err := openHistory(e.ctx, dir, e.sizes.HistoryEvents)
	if err != nil {
		return nil, err
	}
	e.hist = h
	e.closers = append(e.closers, h.Close)
	return h, nil
}

// forkOp forks the history at seq at with fork.Create (what Kernel.Fork
// calls): the plan from the checkpoint index, then one synced write of the
// fork's header and fork.created. It checks the plan selects the workspace.
func (h *historyFixture) forkOp(ctx context.Context, at uint64) op {
	return h.forkOpOn(ctx, h.st, at)
}

// forkOpOn is forkOp on the history in st.
func (h *historyFixture) forkOpOn(ctx context.Context, st eventlog.IndexedLog, at uint64) op {
	return timed(func() (float64, error) {
		_, plan, err := fork.Create(ctx, st, h.id, at, time.Time{})
		if err != nil {
			return 0, err
		}
		if len(plan.Selections) != 1 {
			return 0, fmt.Errorf("%w: fork at %d selects %d resources, want the workspace", errCheck, at, len(plan.Selections))
		}
		return 1, nil
	})
}

// copyOp forks the history at seq at by copying the prefix into a new
// execution of the raw store (timed), then deletes the copy (not timed).
func (h *historyFixture) copyOp(at uint64) op {
	return func() (float64, time.Duration, error) {
		to := eventlog.NewID()
		start := time.Now()
		n, err := h.raw.copyPrefix(h.id, to, at)
		took := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		if uint64(n) != at {
			return 0, 0, fmt.Errorf("%w: copied %d events, want %d", errCheck, n, at)
		}
		return 1, took, h.raw.deleteExecution(to)
	}
}

func runFork(e *env) ([]Row, error) {
	h, err := e.history()
	if err != nil {
		return nil, err
	}
	near, far := uint64(e.sizes.ForkNear), uint64(h.n)
	rates, load, err := e.interleave(
		contestant{fmt.Sprintf("forkline Fork at seq %d", near), h.forkOp(e.ctx, near)},
		contestant{fmt.Sprintf("forkline Fork at seq %d", far), h.forkOp(e.ctx, far)},
		contestant{fmt.Sprintf("copy-the-prefix fork at seq %d (raw Pebble)", far), h.copyOp(far)},
	)
	if err != nil {
		return nil, err
	}
	us := func(rs []float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = 1e6 / r
		}
		return out
	}
	atNear := Figure{What: fmt.Sprintf("forkline at seq %d", near), Value: median(us(rates[0])), Unit: "µs", Rounds: us(rates[0])}
	atFar := Figure{What: "forkline", Value: median(us(rates[1])), Unit: "µs", Rounds: us(rates[1])}
	cp := Figure{What: "copying the prefix, raw Pebble", Value: median(us(rates[2])), Unit: "µs", Rounds: us(rates[2])}
	a := rowOf("4a", fmt.Sprintf("Fork at seq %s vs at seq %d", humanize.Comma(int64(far)), near), fmt.Sprintf("Fork/method=index/at=%d", far),
		atFar, atNear, div, "time far/near", "≤ 2", atMost(2), load)
	a.Note = "Latency of one fork (plan from the checkpoint index + one synced write) of a coder-agent history with a workspace resource."
	b := rowOf("4b", fmt.Sprintf("Fork at seq %s vs copying the prefix", humanize.Comma(int64(far))), fmt.Sprintf("Fork/method=copy/at=%d", far),
		atFar, cp, inv, "copy time/fork time", "", nil, load)
	b.Note = "The copy is the cheapest possible one: raw Pebble key-value copies of the records in large batches, one sync at the end; an engine copying through its event API pays more."
	return []Row{a, b}, nil
}
