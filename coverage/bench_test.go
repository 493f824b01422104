package coverage_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
)

// coderEvents is a long run of the reference page's coder agent (DESIGN §7),
// the workload the benchmarks stand for: one workspace with EverySteps(5)
// and no CoverageReuse; each turn is an LLM call followed by a write_file
// (affects the workspace) or a read_file; a capture follows every fifth
// write; a new dispatch every 1,000 turns. n events, fixed seed.
func coderEvents(n int) []eventlog.Event {
	rng := rand.New(rand.NewPCG(1, 2))
	events := make([]eventlog.Event, 0, n+8)
	add := func(p eventlog.Payload) {
		events = append(events, eventlog.Event{Seq: uint64(len(events)) + 1, Data: p})
	}
	add(&eventlog.ExecutionCreated{Agent: "coder"})
	add(&eventlog.DispatchStarted{Dispatch: 1})
	add(&eventlog.ResourceBound{Key: "workspace", DriverID: "dirfs", Binding: json.RawMessage(`{"dir":"/w"}`), EverySteps: 5, OnCompletion: true})
	gen := uint64(1)
	add(&eventlog.ResourceCaptured{Key: "workspace", Ref: "ws-base", Generation: gen, Reason: eventlog.CaptureBaseline})
	writes, turns, dispatch := 0, 0, uint64(1)
	call := func(kind eventlog.StepKind, target string, affects ...string) {
		id := fmt.Sprintf("%s#%d", target, len(events))
		add(&eventlog.StepStarted{StepID: id, StepKind: kind, Target: target, Args: []byte(`{"path":"a.go"}`),
			Resources: affects, Idempotency: eventlog.SafeToRetry, Attempt: 1})
		gen++
		add(&eventlog.StepSucceeded{StepID: id, Result: []byte(`"ok"`)})
	}
	for len(events) < n {
		turns++
		if turns%1000 == 0 {
			dispatch++
			add(&eventlog.DispatchStarted{Dispatch: dispatch})
		}
		call(eventlog.StepLLM, "llm")
		if rng.IntN(2) == 0 {
			call(eventlog.StepTool, "read_file")
			continue
		}
		call(eventlog.StepTool, "write_file", "workspace")
		if writes++; writes == 5 {
			writes = 0
			add(&eventlog.ResourceCaptured{Key: "workspace", Ref: fmt.Sprintf("ws-%d", len(events)+1), Generation: gen, Reason: eventlog.CaptureSteps})
		}
	}
	return events[:n]
}

// BenchmarkFold folds a 1,000,000-event coder-agent lineage, as an SDK does
// when it runs a long execution or a tool loads one for its timeline. The
// events are built once; the baseline decodes the same events from their
// stored records, the least any fold over a stored lineage pays per event.
func BenchmarkFold(b *testing.B) {
	const n = 1_000_000
	events := coderEvents(n)
	records := make([][]byte, n)
	for i, ev := range events {
		rec, err := eventlog.AppendRecord(nil, eventlog.ID{}, ev)
		if err != nil {
			b.Fatal(err)
		}
		records[i] = rec
	}
	var foldNs, decodeNs float64
	b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
		foldNs = perEvent(b, n, func() {
			f := coverage.New()
			for _, ev := range events {
				if err := f.Apply(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run(fmt.Sprintf("baseline=decode/events=%d", n), func(b *testing.B) {
		decodeNs = perEvent(b, n, func() {
			for i, rec := range records {
				if _, err := eventlog.DecodeRecord(eventlog.ID{}, uint64(i+1), rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	if foldNs > 0 && decodeNs > 0 {
		b.Logf("fold %.0f ns/event, decode %.0f ns/event: fold/decode = %.2f", foldNs, decodeNs, foldNs/decodeNs)
	}
}

// perEvent runs op (which handles n events) in a b.Loop, reports events/s
// and allocs/event, and returns ns/event.
func perEvent(b *testing.B, n int, op func()) float64 {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		op()
	}
	runtime.ReadMemStats(&after)
	events := float64(n) * float64(b.N)
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/events, "allocs/event")
	return float64(b.Elapsed().Nanoseconds()) / events
}

// BenchmarkPoint asks a folded 1,000,000-event lineage for the coverage of
// random events (fixed seed), as a timeline or fork picker does while the
// user scrubs through a long execution.
func BenchmarkPoint(b *testing.B) {
	const n = 1_000_000
	f := foldAll(b, coderEvents(n))
	rng := rand.New(rand.NewPCG(3, 4))
	seqs := make([]uint64, 1<<16)
	for i := range seqs {
		seqs[i] = 1 + rng.Uint64N(n)
	}
	b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := f.Point(seqs[i%len(seqs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	})
}
