package benchmarks

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// Scenario 2, live tool call: a handler calls a tool again and again, every
// call live, on a kernel whose log syncs (sdk.Open on disk). DESIGN §4: a
// safe_to_retry call costs one fsync (its step.started rides on the sync of
// its step.succeeded), an at_most_once call two (its step.started is synced
// before the body runs). The baseline is one synced Pebble write of the same
// event's record, measured in the same rounds. Because the time of an fsync
// swings with the machine's other I/O, the kernel's log is wrapped to count
// the synced and unsynced appends each call makes: the count is the
// contract, the time its cost.

const toolAgent = "caller"

// toolInput says which kind of tool the handler calls.
type toolInput struct {
	AtMostOnce bool `json:"at_most_once"`
}

// toolKernel runs toolAgent: its handler calls the tool until stop is set
// and reports how many calls it made and how long they took, measured
// inside the handler so that the dispatch's own appends are not counted.
type toolKernel struct {
	k     *sdk.Kernel
	log   *appendCounter
	stop  atomic.Bool
	calls int
	took  time.Duration
	// cpu is the CPU time the process used during the calls of the last
	// execution (user and system, every thread), read only when timeCPU is
	// set (scenario 2t).
	cpu     time.Duration
	timeCPU bool
	// synced and unsynced count the appends of the calls (not of the
	// dispatch's own events), over every op of each kind of tool.
	synced, unsynced, counted [2]int64
}

// appendCounter is a log that counts synced and unsynced appends.
type appendCounter struct {
	eventlog.IndexedLog
	synced, unsynced atomic.Int64
}

// Unwrap gives the kernel the store's leases and inbox (eventlog.As), as
// on the store sdk.Open opens.
func (c *appendCounter) Unwrap() eventlog.Log { return c.IndexedLog }

// Append implements eventlog.Log.
func (c *appendCounter) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	c.synced.Add(1)
	return c.IndexedLog.Append(ctx, id, head, evs...)
}

// AppendUnsynced implements eventlog.Log.
func (c *appendCounter) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	c.unsynced.Add(1)
	return c.IndexedLog.AppendUnsynced(ctx, id, head, evs...)
}

// openToolKernel opens a kernel with opts on a synced store in dir ("" for
// one in memory), as sdk.Open does, with its log wrapped in an
// appendCounter.
func openToolKernel(dir string, opts ...sdk.Option) (*toolKernel, error) {
	st, err := pebblestore.Open(dir)
	if err != nil {
		return nil, err
	}
	tk := &toolKernel{log: &appendCounter{IndexedLog: st}}
	k, err := sdk.New(tk.log, opts...)
	if err != nil {
		st.Close()
		return nil, err
	}
	tk.k = k
	body := func(ctx context.Context, i int) (int, error) { return i + 1, nil }
	safe := sdk.DefineTool("increment", body)
	once := sdk.DefineTool("charge", body, sdk.AtMostOnce())
	_, err = sdk.Register(k, toolAgent, func(ctx context.Context, in toolInput) (int, error) {
		t := safe
		if in.AtMostOnce {
			t = once
		}
		kind := 0
		if in.AtMostOnce {
			kind = 1
		}
		synced, unsynced := tk.log.synced.Load(), tk.log.unsynced.Load()
		var cpu0 time.Duration
		if tk.timeCPU {
			var err error
			if cpu0, err = processCPU(); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		n := 0
		for ; n == 0 || !tk.stop.Load(); n++ {
			v, err := t.Call(ctx, n)
			if err != nil {
				return 0, err
			}
			if v != n+1 {
				return 0, fmt.Errorf("%w: tool returned %d for %d", errCheck, v, n)
			}
		}
		tk.calls, tk.took = n, time.Since(start)
		if tk.timeCPU {
			cpu1, err := processCPU()
			if err != nil {
				return 0, err
			}
			tk.cpu = cpu1 - cpu0
		}
		tk.synced[kind] += tk.log.synced.Load() - synced
		tk.unsynced[kind] += tk.log.unsynced.Load() - unsynced
		tk.counted[kind] += int64(n)
		return n, nil
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return tk, nil
}

// Close closes the kernel's store.
func (tk *toolKernel) Close() error { return tk.log.IndexedLog.Close() }

// perCall returns the synced and unsynced appends per call of one kind of
// tool (0: safe_to_retry, 1: at_most_once).
func (tk *toolKernel) perCall(kind int) (synced, unsynced float64) {
	n := float64(max(tk.counted[kind], 1))
	return float64(tk.synced[kind]) / n, float64(tk.unsynced[kind]) / n
}

// callsFor returns an op that runs one execution whose handler calls the
// tool for about d, timed by the wall clock.
func (tk *toolKernel) callsFor(ctx context.Context, d time.Duration, atMostOnce bool) op {
	return func() (float64, time.Duration, error) {
		if err := tk.runCalls(ctx, d, atMostOnce); err != nil {
			return 0, 0, err
		}
		return float64(tk.calls), tk.took, nil
	}
}

// cpuCallsFor returns an op like callsFor's that is timed by the CPU time
// the process used during the calls (tk.timeCPU must be set), and appends
// the same calls' wall-clock rate to wall.
func (tk *toolKernel) cpuCallsFor(ctx context.Context, d time.Duration, wall *[]float64) op {
	return func() (float64, time.Duration, error) {
		if err := tk.runCalls(ctx, d, false); err != nil {
			return 0, 0, err
		}
		*wall = append(*wall, float64(tk.calls)/max(tk.took, time.Nanosecond).Seconds())
		return float64(tk.calls), tk.cpu, nil
	}
}

// runCalls runs one execution whose handler calls the tool for about d.
func (tk *toolKernel) runCalls(ctx context.Context, d time.Duration, atMostOnce bool) error {
	tk.stop.Store(false)
	id, err := tk.k.Start(ctx, toolAgent, toolInput{AtMostOnce: atMostOnce})
	if err != nil {
		return err
	}
	t := time.AfterFunc(d, func() { tk.stop.Store(true) })
	defer t.Stop()
	_, err = tk.k.Run(ctx, id)
	return err
}

// toolRecord is the record of a live call's step.succeeded, the bytes the
// raw baseline writes.
func toolRecord() ([]byte, error) {
	return eventlog.AppendRecord(nil, eventlog.ID{}, eventlog.Event{Seq: 1, Time: buildTime, Data: &eventlog.StepSucceeded{
		StepID: "5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f", Result: []byte("1"),
	}})
}

func runToolCall(e *env) ([]Row, error) {
	dir, err := e.mkdir("toolcall")
	if err != nil {
		return nil, err
	}
	tk, err := openToolKernel(filepath.Join(dir, "kernel"))
	if err != nil {
		return nil, err
	}
	defer tk.Close()
	raw, err := openRaw(filepath.Join(dir, "raw"))
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	rec, err := toolRecord()
	if err != nil {
		return nil, err
	}
	ra := newRawAppender(raw.db, rec, 1)
	d := e.cfg.Duration
	rates, load, err := e.interleave(
		contestant{"forkline tool call, safe_to_retry", tk.callsFor(e.ctx, d, false)},
		contestant{"forkline tool call, at_most_once", tk.callsFor(e.ctx, d, true)},
		contestant{"raw Pebble synced Set, 1 writer", parallel(1, d, func(int) (float64, error) { return 1, ra.append(0) })},
	)
	if err != nil {
		return nil, err
	}
	safe := Figure{What: "forkline", Value: median(rates[0]), Unit: "calls/s", Rounds: rates[0]}
	once := Figure{What: "forkline", Value: median(rates[1]), Unit: "calls/s", Rounds: rates[1]}
	base := Figure{What: "raw Pebble, 1 synced write", Value: median(rates[2]), Unit: "writes/s", Rounds: rates[2]}
	safeSynced, safeLazy := tk.perCall(0)
	onceSynced, onceLazy := tk.perCall(1)
	a := rowOf("2a", "live tool call, safe_to_retry (one fsync), vs one synced write", "ToolCall/call=safe_to_retry", safe, base,
		div, "calls/writes", "≥ 0.7", atLeast(0.7), load)
	a.Note = fmt.Sprintf("Calls of a trivial tool, every one live, timed inside the handler on a synced kernel on disk (the store sdk.Open makes). Appends per call: %.2f synced, %.2f unsynced.",
		safeSynced, safeLazy)
	safeBase := safe
	safeBase.What = "forkline safe_to_retry calls"
	b := rowOf("2b", "live tool call, at_most_once (two fsyncs), vs safe_to_retry (one)", "ToolCall/call=at_most_once", once, safeBase,
		div, "at_most_once/safe_to_retry", "2 synced appends per call (safe_to_retry: 1)", nil, load)
	met := onceSynced == 2 && onceLazy == 0 && safeSynced == 1 && safeLazy == 1
	b.Met = &met
	b.Note = fmt.Sprintf("Counted over every measured call: at_most_once %.2f synced appends per call (step.started, then step.succeeded), safe_to_retry %.2f synced and %.2f unsynced (its step.started rides on the sync of its step.succeeded). The time ratio swings with the cost of an fsync on a shared disk; against one raw synced write the at_most_once call is at %s.",
		onceSynced, safeSynced, safeLazy, ratioText(median(pairedRatios(once.Rounds, base.Rounds))))
	return []Row{a, b}, nil
}
