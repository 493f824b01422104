package fork_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
)

// longCoderRun writes n events of the reference page's coder agent to s —
// one workspace with EverySteps(5), each turn an LLM call then a write_file
// (affects the workspace) or a read_file, a capture after every fifth write —
// in appends of 1,000 events, and returns its ID.
func longCoderRun(b *testing.B, s eventlog.Log, n int) eventlog.ID {
	ctx := context.Background()
	id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "coder"}, epoch)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	events := make([]eventlog.Event, 0, n+8)
	add := func(p eventlog.Payload) {
		events = append(events, eventlog.Event{Time: epoch, Data: p})
	}
	add(&eventlog.DispatchStarted{Dispatch: 1})
	add(&eventlog.ResourceBound{Key: "workspace", DriverID: "dirfs", Binding: json.RawMessage(`{}`), EverySteps: 5, OnCompletion: true})
	gen := uint64(1)
	add(&eventlog.ResourceCaptured{Key: "workspace", Ref: "ws-base", Generation: gen, Reason: eventlog.CaptureBaseline})
	writes, calls := 0, 0
	call := func(kind eventlog.StepKind, target string, affects ...string) {
		calls++
		id := fmt.Sprintf("%s#%d", target, calls)
		add(&eventlog.StepStarted{StepID: id, StepKind: kind, Target: target, Resources: affects,
			Idempotency: eventlog.SafeToRetry, Attempt: 1})
		gen++
		add(&eventlog.StepSucceeded{StepID: id, Result: []byte(`"ok"`)})
	}
	for len(events) < n-1 {
		call(eventlog.StepLLM, "llm")
		if rng.IntN(2) == 0 {
			call(eventlog.StepTool, "read_file")
			continue
		}
		call(eventlog.StepTool, "write_file", "workspace")
		if writes++; writes == 5 {
			writes = 0
			add(&eventlog.ResourceCaptured{Key: "workspace", Ref: fmt.Sprintf("ws-%d", calls), Generation: gen, Reason: eventlog.CaptureSteps})
		}
	}
	events = events[:n-1] // after execution.created
	for head := uint64(1); len(events) > 0; {
		k := min(len(events), 1000)
		if head, err = s.Append(ctx, id, head, events[:k]...); err != nil {
			b.Fatal(err)
		}
		events = events[k:]
	}
	return id
}

// BenchmarkCreate forks a 1,000,000-event execution of an in-memory store
// near its start and at its end: DESIGN §5 wants a fork's cost not to grow
// with the fork point beyond a logarithmic index lookup. The baseline
// copies the prefix into a new execution instead, the way most engines fork.
func BenchmarkCreate(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	parent := longCoderRun(b, s, n)
	if head, err := s.Head(ctx, parent); err != nil || head != n {
		b.Fatalf("head %d, %v", head, err)
	}

	ns := map[string]float64{}
	for _, at := range []uint64{10, n} {
		name := fmt.Sprintf("at=%d", at)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := fork.Create(ctx, s, parent, at, epoch); err != nil {
					b.Fatal(err)
				}
			}
			ns[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	b.Run(fmt.Sprintf("copy-prefix/at=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copyPrefix(b, s, parent, n)
		}
		ns["copy"] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if ns["at=10"] > 0 && ns["copy"] > 0 {
		b.Logf("Create at=%d / at=10 = %.2f; copy-prefix / Create at=%d = %.0f",
			n, ns[fmt.Sprintf("at=%d", n)]/ns["at=10"], n, ns["copy"]/ns[fmt.Sprintf("at=%d", n)])
	}
}

// copyPrefix makes a new execution holding parent's events 1..at, copied in
// appends of 1,000.
func copyPrefix(b *testing.B, s eventlog.Log, parent eventlog.ID, at uint64) {
	ctx := context.Background()
	var id eventlog.ID
	var head uint64
	batch := make([]eventlog.Event, 0, 1000)
	flush := func() {
		var err error
		if head, err = s.Append(ctx, id, head, batch...); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for ev, err := range s.Events(ctx, parent, 1) {
		if err != nil {
			b.Fatal(err)
		}
		if ev.Seq > at {
			break
		}
		if ec, ok := ev.Data.(*eventlog.ExecutionCreated); ok {
			if id, err = s.Create(ctx, ec, ev.Time); err != nil {
				b.Fatal(err)
			}
			head = 1
			continue
		}
		if batch = append(batch, ev); len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}
