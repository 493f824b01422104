package benchmarks

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Scenario 2, live tool call: a handler calls a tool again and again, every
// call live, on a kernel whose log syncs (sdk.Open on disk). DESIGN §4: a
// safe_to_retry call costs one fsync (its step.started rides on the sync of
// its step.succeeded), an at_most_once call two (its step.started is synced
// before the body runs). The baseline is one synced Pebble write of the same
// event's record, measured in the same rounds.

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
	stop  atomic.Bool
	calls int
	took  time.Duration
}

func openToolKernel(dir string) (*toolKernel, error) {
	k, err := sdk.Open(dir)
	if err != nil {
		return nil, err
	}
	tk := &toolKernel{k: k}
	body := func(ctx context.Context, i int) (int, error) { return i + 1, nil }
	safe := sdk.DefineTool("increment", body)
	once := sdk.DefineTool("charge", body, sdk.AtMostOnce())
	err = sdk.Register(k, toolAgent, func(ctx context.Context, in toolInput) (int, error) {
		t := safe
		if in.AtMostOnce {
			t = once
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
		return n, nil
	})
	if err != nil {
		k.Close()
		return nil, err
	}
	return tk, nil
}

// callsFor returns an op that runs one execution whose handler calls the
// tool for about d.
func (tk *toolKernel) callsFor(ctx context.Context, d time.Duration, atMostOnce bool) op {
	return func() (float64, time.Duration, error) {
		tk.stop.Store(false)
		id, err := tk.k.Start(ctx, toolAgent, toolInput{AtMostOnce: atMostOnce})
		if err != nil {
			return 0, 0, err
		}
		t := time.AfterFunc(d, func() { tk.stop.Store(true) })
		defer t.Stop()
		if _, err := tk.k.Run(ctx, id); err != nil {
			return 0, 0, err
		}
		return float64(tk.calls), tk.took, nil
	}
}

// toolRecord is the record of a live call's step.succeeded, the bytes the
// raw baseline writes.
func toolRecord() ([]byte, error) {
	return eventlog.AppendRecord(nil, eventlog.Event{Seq: 1, Time: buildTime, Data: &eventlog.StepSucceeded{
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
	defer tk.k.Close()
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
	a := rowOf("2a", "live tool call, safe_to_retry (one fsync), vs one synced write", "ToolCall/call=safe_to_retry", safe, base,
		div, "calls/writes", "≥ 0.7", atLeast(0.7), load)
	a.Note = "Calls of a trivial tool, every one live, timed inside the handler on a kernel from sdk.Open on disk."
	safeBase := safe
	safeBase.What = "forkline safe_to_retry calls"
	b := rowOf("2b", "live tool call, at_most_once (two fsyncs), vs safe_to_retry (one)", "ToolCall/call=at_most_once", once, safeBase,
		div, "at_most_once/safe_to_retry", "≈ 0.5: 0.35–0.65", func(r float64) bool { return r >= 0.35 && r <= 0.65 }, load)
	b.Note = fmt.Sprintf("The synced step.started costs a second fsync; against one raw synced write the at_most_once call is at %s.",
		ratioText(median(pairedRatios(once.Rounds, base.Rounds))))
	return []Row{a, b}, nil
}
