package benchmarks

import (
	"github.com/dustin/go-humanize"

	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/replay"
	"github.com/forkline/forkline/sdk"
)

// Scenario 3, replay: Run of an execution whose every step is recorded, so
// that the handler runs from the top and every call returns its recorded
// result — what resuming a long execution after a crash costs. Each round
// forks the recorded execution at its last event (not timed) and times Run
// of the fork, which replays the whole prefix. The ceiling is scanning and
// msgpack-decoding the same records from Pebble directly.

// replayKernel is a kernel with replayAgent registered over a store that
// holds one recorded execution.
type replayKernel struct {
	k     *sdk.Kernel
	st    *pebblestore.Store
	id    eventlog.ID
	head  uint64
	steps int
	live  atomic.Int64 // bodies that ran live: a replay runs none
	// atEnd, when set, is called by the handler after its last call.
	atEnd func()
}

// openReplayKernel builds an execution of steps recorded calls in a new
// store in dir.
func openReplayKernel(ctx context.Context, dir string, steps int, opts ...pebblestore.Option) (*replayKernel, error) {
	return openReplayKernelRetried(ctx, dir, steps, false, opts...)
}

// openReplayKernelRetried is openReplayKernel; with retried, every
// recorded call succeeded on its second attempt (buildReplay).
func openReplayKernelRetried(ctx context.Context, dir string, steps int, retried bool, opts ...pebblestore.Option) (*replayKernel, error) {
	st, err := pebblestore.Open(dir, opts...)
	if err != nil {
		return nil, err
	}
	rk := &replayKernel{st: st, steps: steps}
	if rk.id, rk.head, err = buildReplay(ctx, st, steps, retried); err != nil {
		st.Close()
		return nil, err
	}
	if rk.k, err = sdk.New(st); err != nil {
		st.Close()
		return nil, err
	}
	read := sdk.DefineTool(replayTool, func(ctx context.Context, a readArgs) (string, error) {
		rk.live.Add(1)
		return "", nil
	})
	_, err = sdk.Register(rk.k, replayAgent, func(ctx context.Context, in replayInput) (int, error) {
		n := 0
		for i := range in.Files {
			text, err := read.Call(ctx, readArgs{Path: replayPath(i)})
			if err != nil {
				return 0, err
			}
			n += len(text)
		}
		if rk.atEnd != nil {
			rk.atEnd()
		}
		return n, nil
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return rk, nil
}

func (rk *replayKernel) Close() error { return rk.st.Close() }

// fork forks the recorded execution at its last event.
func (rk *replayKernel) fork(ctx context.Context) (eventlog.ID, error) {
	id, _, err := fork.Create(ctx, rk.st, rk.id, rk.head, time.Time{})
	return id, err
}

// run runs the fork id and checks that it replayed everything: no body ran
// live and the only events appended are dispatch.started and
// execution.completed.
func (rk *replayKernel) run(ctx context.Context, id eventlog.ID) error {
	before := rk.live.Load()
	if _, err := rk.k.Run(ctx, id); err != nil {
		return err
	}
	if n := rk.live.Load() - before; n != 0 {
		return fmt.Errorf("%w: %d of %d recorded calls ran live: the recorded step IDs do not match the SDK's", errCheck, n, rk.steps)
	}
	head, err := rk.st.Head(ctx, id)
	if err != nil {
		return err
	}
	if want := rk.head + 3; head != want {
		return fmt.Errorf("%w: replayed fork has head %d, want %d", errCheck, head, want)
	}
	return nil
}

// replayOp forks (untimed) and runs the fork (timed); units are events
// replayed. mallocs, when not nil, accumulates the allocations of the runs
// and steps the steps they replayed.
func (rk *replayKernel) replayOp(ctx context.Context, mallocs, steps *uint64) op {
	return func() (float64, time.Duration, error) {
		id, err := rk.fork(ctx)
		if err != nil {
			return 0, 0, err
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		err = rk.run(ctx, id)
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		if err != nil {
			return 0, 0, err
		}
		if mallocs != nil {
			*mallocs += m1.Mallocs - m0.Mallocs
			*steps += uint64(rk.steps)
		}
		return float64(rk.head), took, nil
	}
}

func runReplay(e *env) ([]Row, error) {
	dir, err := e.mkdir("replay")
	if err != nil {
		return nil, err
	}
	e.logf("   building an execution of %d recorded steps", e.sizes.ReplaySteps)
	rk, err := openReplayKernel(e.ctx, filepath.Join(dir, "kernel"), e.sizes.ReplaySteps)
	if err != nil {
		return nil, err
	}
	defer rk.Close()
	raw, err := rawCopy(e.ctx, filepath.Join(dir, "raw"), rk.st, rk.id, rk.head)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	var mallocs, steps, rawMallocs, rawScans uint64
	rates, load, err := e.interleave(
		contestant{"forkline Run replaying every step", rk.replayOp(e.ctx, &mallocs, &steps)},
		contestant{"raw Pebble scan + msgpack decode", timed(func() (float64, error) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			n, err := raw.scanDecode(rk.id)
			runtime.ReadMemStats(&m1)
			rawMallocs += m1.Mallocs - m0.Mallocs
			rawScans++
			return float64(n), err
		})},
	)
	if err != nil {
		return nil, err
	}
	perStep := float64(rk.head) / float64(rk.steps) // events per step
	fl := Figure{What: "forkline", Value: median(rates[0]) / perStep, Unit: "steps/s", Rounds: scaled(rates[0], 1/perStep)}
	base := Figure{What: "raw Pebble scan + msgpack decode", Value: median(rates[1]) / perStep, Unit: "steps/s", Rounds: scaled(rates[1], 1/perStep)}
	row := rowOf("3", fmt.Sprintf("replay: Run of %s recorded steps", humanize.Comma(int64(rk.steps))),
		fmt.Sprintf("Replay/steps=%d/system=forkline", rk.steps), fl, base, div, "forkline/decode", "≥ 0.5", atLeast(0.5), load)
	row.Note = fmt.Sprintf("A step is two events (step.started, step.succeeded); %s events/s replayed vs %s events/s decoded. %.1f allocations per replayed step (the scan+decode of its two records alone: %.1f; the benchmark handler's own fmt.Sprintf of the path: 1).",
		humanNumber(median(rates[0])), humanNumber(median(rates[1])), float64(mallocs)/float64(max(steps, 1)),
		float64(rawMallocs)/float64(max(rawScans, 1))/float64(rk.steps))
	return []Row{row}, nil
}

func scaled(xs []float64, f float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * f
	}
	return out
}

// Scenario 3m, memory: the peak live heap while Run replays a long
// execution, against the folds' own state — the replay, coverage and
// checkpoint-counter folds of the same lineage, which a dispatch must hold.
// Measured at two sizes: what Run holds beyond the folds must not grow with
// the number of events.

// memoryFigures are the heap figures of one size.
type memoryFigures struct {
	events int
	peak   uint64 // peak live heap during Run, above the heap before it
	end    uint64 // live heap when the handler returned, above the heap before Run
	fold   uint64 // live heap of the three folds of the lineage
}

// extra is what Run held beyond the folds (0 if less).
func (m memoryFigures) extra() uint64 {
	if m.peak > m.fold {
		return m.peak - m.fold
	}
	return 0
}

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// measureMemory builds a replay execution of events events (an odd count
// rounds down to whole steps) and returns its heap figures. If profile is
// not nil, the heap profile at the end of the handler is written to it.
func measureMemory(ctx context.Context, dir string, events int, profile io.Writer) (memoryFigures, error) {
	steps := max((events-2)/2, 1)
	rk, err := openReplayKernel(ctx, dir, steps, pebblestore.WithoutSync())
	if err != nil {
		return memoryFigures{}, err
	}
	defer rk.Close()
	m := memoryFigures{events: int(rk.head)}

	// The folds' own state, configured as a dispatch holds them (the
	// replay fold without args: replay.Options.DropArgs; the counter asking
	// the replay fold which steps started: policy.NewCounterOver).
	before := liveHeap()
	state := replay.NewWith(replay.Options{DropArgs: true})
	for ev, err := range rk.st.Events(ctx, rk.id, 1) {
		if err != nil {
			return m, err
		}
		if err := state.Apply(ev); err != nil {
			return m, err
		}
	}
	cov, err := coverage.FoldEvents(rk.st.Events(ctx, rk.id, 1))
	if err != nil {
		return m, err
	}
	counter := policy.NewCounterOver(state.Started)
	for ev, err := range rk.st.Events(ctx, rk.id, 1) {
		if err != nil {
			return m, err
		}
		if err := counter.Apply(ev); err != nil {
			return m, err
		}
	}
	if after := liveHeap(); after > before {
		m.fold = after - before
	}
	runtime.KeepAlive(state)
	runtime.KeepAlive(cov)
	runtime.KeepAlive(counter)

	// The peak while Run replays a fork of the execution: the live heap
	// after every collection (collections are made frequent), and exactly
	// at the end of the handler, when every fold is complete.
	id, err := rk.fork(ctx)
	if err != nil {
		return m, err
	}
	base := liveHeap()
	var atEnd uint64
	var profErr error
	rk.atEnd = func() {
		atEnd = liveHeap()
		if profile != nil {
			profErr = pprof.Lookup("heap").WriteTo(profile, 0)
		}
	}
	defer func() { rk.atEnd = nil }()
	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	stop := make(chan struct{})
	var sampled uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				metrics.Read(s)
				if s[0].Value.Kind() == metrics.KindUint64 {
					sampled = max(sampled, s[0].Value.Uint64())
				}
			}
		}
	}()
	err = rk.run(ctx, id)
	close(stop)
	wg.Wait()
	if err != nil {
		return m, err
	}
	if profErr != nil {
		return m, fmt.Errorf("heap profile: %w", profErr)
	}
	if peak := max(sampled, atEnd); peak > base {
		m.peak = peak - base
	}
	if atEnd > base {
		m.end = atEnd - base
	}
	return m, nil
}

func runMemory(e *env) ([]Row, error) {
	var figs []memoryFigures
	load := loadAverage()[0]
	for i, n := range []int{e.sizes.MemorySmall, e.sizes.MemoryEvents} {
		dir, err := e.mkdir("memory")
		if err != nil {
			return nil, err
		}
		e.logf("   replaying %d events", n)
		var profile io.Writer
		if i == 1 {
			profile = e.cfg.HeapProfile
		}
		m, err := measureMemory(e.ctx, dir, n, profile)
		if err != nil {
			return nil, err
		}
		e.logf("   %d events: peak %s B, at the end %s B, folds %s B", m.events, humanize.Comma(int64(m.peak)), humanize.Comma(int64(m.end)), humanize.Comma(int64(m.fold)))
		figs = append(figs, m)
	}
	small, large := figs[0], figs[1]
	perEvent := func(b uint64, n int) float64 { return float64(b) / float64(n) }
	fl := Figure{What: "forkline", Value: perEvent(large.peak, large.events), Unit: "B/event (peak live heap)",
		Rounds: []float64{perEvent(small.peak, small.events), perEvent(large.peak, large.events)}}
	base := Figure{What: "the folds' own state", Value: perEvent(large.fold, large.events), Unit: "B/event",
		Rounds: []float64{perEvent(small.fold, small.events), perEvent(large.fold, large.events)}}
	// The target: what Run holds beyond the folds stays flat as the
	// lineage grows ten-fold — at most twice the small figure, with 16 MiB
	// of slack for the store's caches.
	flat := large.extra() <= 2*small.extra()+16<<20
	row := rowOf("3m", fmt.Sprintf("peak heap replaying %s events", humanize.Comma(int64(large.events))),
		fmt.Sprintf("ReplayMemory/events=%d", large.events), fl, base, div, "peak/folds",
		"beyond the folds: flat in N", nil, load)
	row.Met = &flat
	// The ratio is the one at the large size, not a median over sizes.
	r := fl.Value / base.Value
	row.Ratio, row.RatioRounds = &r, nil
	row.Note = fmt.Sprintf("Peak live heap %s MB at %s events and %s MB at %s events (when the handler returned: %s MB and %s MB); the folds hold %s MB and %s MB; beyond them Run held %s MB and %s MB at the peak (%.0f and %.0f B/event). Rounds list the small size, then the large.",
		mb(small.peak), humanize.Comma(int64(small.events)), mb(large.peak), humanize.Comma(int64(large.events)), mb(small.end), mb(large.end),
		mb(small.fold), mb(large.fold), mb(small.extra()), mb(large.extra()),
		perEvent(small.extra(), small.events), perEvent(large.extra(), large.events))
	return []Row{row}, nil
}

func mb(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
