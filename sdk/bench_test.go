package sdk_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// The SDK's benchmarks. Every kernel here is on disk and syncs (sdk.Open),
// as a kernel in production does; only the recording of a long execution,
// which is setup, skips the sync. benchmarks/ holds the full comparison
// with baselines (go run ./benchmarks/cmd/bench).

// benchArgs is the argument of the read_file tool of the benchmarks.
type benchArgs struct {
	Path string `json:"path"`
}

// benchText is what read_file returns: a short source file.
func benchText(i int) string {
	return fmt.Sprintf("package pkg%03d\n\n// File %06d holds one function.\nfunc F%06d() int { return %d }\n", i%997, i, i, i)
}

// BenchmarkToolCall stands for an agent's tool call running live: call=
// safe_to_retry costs one fsync (DESIGN §4 "What must be durable when": its
// step.started rides on the sync of its step.succeeded). call=pebble_sync is
// the ceiling from the same run: one synced Pebble write of a record of the
// same size in a Pebble database of its own.
func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	b.Run("call=safe_to_retry", func(b *testing.B) {
		k, err := sdk.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer k.Close()
		read := sdk.DefineTool("read_file", func(ctx context.Context, a benchArgs) (string, error) { return "ok", nil })
		calls := 0
		_, err = sdk.Register(k, "calls", func(ctx context.Context, _ struct{}) (int, error) {
			// The calls are timed inside the handler, so that the
			// dispatch's own appends are not counted.
			for b.Loop() {
				if _, err := read.Call(ctx, benchArgs{Path: fmt.Sprintf("src/f%d.go", calls)}); err != nil {
					return 0, err
				}
				calls++
			}
			return calls, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		id, err := k.Start(ctx, "calls", struct{}{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.Run(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(calls)/b.Elapsed().Seconds(), "calls/s")
	})
	b.Run("call=pebble_sync", func(b *testing.B) {
		db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: quietPebble{}})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		rec, err := eventlog.AppendRecord(nil, eventlog.ID{}, eventlog.Event{Seq: 1, Data: &eventlog.StepSucceeded{
			StepID: strings.Repeat("0", 32), Result: []byte(`"ok"`)}})
		if err != nil {
			b.Fatal(err)
		}
		key := make([]byte, 25)
		key[0] = 'e'
		n := uint64(0)
		for b.Loop() {
			n++
			binary.BigEndian.PutUint64(key[17:], n)
			if err := db.Set(key, rec, pebble.Sync); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "writes/s")
	})
}

// recorded is an execution of the "reader" agent whose first dispatch
// called read_file steps times and was then stopped by its context: every
// step is recorded and the execution is still running, so each Run replays
// them all — what resuming a long execution after a crash costs.
type recorded struct {
	k     *sdk.Kernel
	id    eventlog.ID
	steps int
	live  atomic.Int64 // read_file bodies that ran
	// stop, when set, is called by the handler after its last call, and
	// the handler then returns its context's error: the dispatch ends
	// cancelled and records nothing more.
	stop context.CancelFunc
}

var errStopped = errors.New("stopped after the last call")

// record builds the execution in dir: recorded live without sync (setup),
// then reopened with sdk.Open, which syncs.
func record(b *testing.B, steps int) *recorded { return recordRetried(b, steps, false) }

// recordRetried is record; with retried, every call's first attempt fails
// and its second, after a backoff of a nanosecond, succeeds: each step is
// step.started, step.failed{RetryAt}, step.started, step.succeeded.
func recordRetried(b *testing.B, steps int, retried bool) *recorded {
	b.Helper()
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "log")
	r := &recorded{steps: steps}
	var failed sync.Map // paths whose first attempt failed
	register := func(k *sdk.Kernel) {
		read := sdk.DefineTool("read_file", func(ctx context.Context, a benchArgs) (string, error) {
			r.live.Add(1)
			if _, seen := failed.LoadOrStore(a.Path, true); retried && !seen {
				return "", errors.New("503 unavailable")
			}
			var i int
			_, err := fmt.Sscanf(a.Path, "src/f%d.go", &i)
			return benchText(i), err
		}, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2, Initial: time.Nanosecond, Max: time.Nanosecond}))
		_, err := sdk.Register(k, "reader", func(ctx context.Context, n int) (int, error) {
			total := 0
			for i := range n {
				text, err := read.Call(ctx, benchArgs{Path: fmt.Sprintf("src/f%d.go", i)})
				if err != nil {
					return 0, err
				}
				total += len(text)
			}
			if r.stop != nil {
				r.stop()
				return 0, fmt.Errorf("%w: %w", errStopped, ctx.Err())
			}
			return total, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}

	st, err := pebblestore.Open(dir, pebblestore.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	k, err := sdk.New(st)
	if err != nil {
		b.Fatal(err)
	}
	register(k)
	if r.id, err = k.Start(ctx, "reader", steps); err != nil {
		b.Fatal(err)
	}
	if err := r.run(ctx, k, true); err != nil {
		b.Fatal(err)
	}
	if n, want := r.live.Swap(0), int64(steps)*map[bool]int64{false: 1, true: 2}[retried]; n != want {
		b.Fatalf("recording ran %d calls, want %d", n, want)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}

	if r.k, err = sdk.Open(dir); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.k.Close() })
	register(r.k)
	return r
}

// run runs execution id (r.id if zero) once; with stopAfter the dispatch
// ends cancelled after the last call, otherwise the execution completes.
func (r *recorded) run(ctx context.Context, k *sdk.Kernel, stopAfter bool) error {
	return r.runID(ctx, k, r.id, stopAfter)
}

func (r *recorded) runID(ctx context.Context, k *sdk.Kernel, id eventlog.ID, stopAfter bool) error {
	r.stop = nil
	if stopAfter {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		r.stop = cancel
	}
	_, err := k.Run(ctx, id)
	if stopAfter {
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("run ended with %v, want it cancelled after the last call", err)
		}
		return nil
	}
	return err
}

// BenchmarkReplay stands for resuming a long execution after a crash: Run
// of an execution whose 100,000 steps are all recorded replays them — the
// handler runs from the top and every call returns its recorded result
// without running (DESIGN §4). The handler stops the dispatch after its
// last call, so every iteration replays the same execution.
func BenchmarkReplay(b *testing.B) {
	const steps = 100_000
	b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) {
		r := record(b, steps)
		ctx := context.Background()
		b.ReportAllocs()
		runs := 0
		for b.Loop() {
			if err := r.run(ctx, r.k, true); err != nil {
				b.Fatal(err)
			}
			runs++
		}
		if n := r.live.Load(); n != 0 {
			b.Fatalf("%d recorded calls ran live during replay", n)
		}
		b.ReportMetric(float64(runs*steps)/b.Elapsed().Seconds(), "steps/s")
	})
}

// BenchmarkReplayRetried compares, side by side, Run replaying 1,000
// recorded steps that each succeeded at once (retries=0) with 1,000 that
// each failed once and succeeded on a retry (retries=1: four events a step
// instead of two). DESIGN §10's target: the retried execution replays at
// the same rate in steps/s, within 20 %.
func BenchmarkReplayRetried(b *testing.B) {
	const steps = 1_000
	for _, retried := range []bool{false, true} {
		b.Run(fmt.Sprintf("steps=%d/retries=%d", steps, map[bool]int{false: 0, true: 1}[retried]), func(b *testing.B) {
			r := recordRetried(b, steps, retried)
			ctx := context.Background()
			b.ReportAllocs()
			runs := 0
			for b.Loop() {
				if err := r.run(ctx, r.k, true); err != nil {
					b.Fatal(err)
				}
				runs++
			}
			if n := r.live.Load(); n != 0 {
				b.Fatalf("%d recorded calls ran live during replay", n)
			}
			b.ReportMetric(float64(runs*steps)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkRunFork stands for running a fork taken at the last event of a
// 100,000-step execution: Fork (not timed) writes a header and a
// fork.created, and Run of the fork replays the whole prefix from the
// parent's events, then completes.
func BenchmarkRunFork(b *testing.B) {
	const steps = 100_000
	b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) {
		r := record(b, steps)
		ctx := context.Background()
		head, err := r.k.Log().Head(ctx, r.id)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		runs := 0
		for b.Loop() {
			b.StopTimer()
			fid, err := r.k.Fork(ctx, r.id, head)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := r.runID(ctx, r.k, fid, false); err != nil {
				b.Fatal(err)
			}
			runs++
		}
		if n := r.live.Load(); n != 0 {
			b.Fatalf("%d recorded calls ran live in the forks", n)
		}
		b.ReportMetric(float64(runs*steps)/b.Elapsed().Seconds(), "steps/s")
	})
}

// quietPebble drops Pebble's informational messages.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)           {}
func (quietPebble) Errorf(format string, a ...any) { fmt.Printf("pebble: "+format+"\n", a...) }
func (quietPebble) Fatalf(format string, a ...any) { pebble.DefaultLogger.Fatalf(format, a...) }
