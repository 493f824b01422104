package eventlog_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func bound(seq uint64, key, from string, reuse bool) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.ResourceBound{
		Key: key, DriverID: "drv", Binding: json.RawMessage(`{}`), From: from, EverySteps: 1,
		OnCompletion: true, CoverageReuse: reuse,
	}}
}

func start(seq uint64, id string, kind eventlog.StepKind, affects ...string) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.StepStarted{
		StepID: id, StepKind: kind, Target: "t", Resources: affects, Idempotency: eventlog.SafeToRetry, Attempt: 1,
	}}
}

func succeed(seq uint64, id string) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.StepSucceeded{StepID: id}}
}

func fail(seq uint64, id string) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.StepFailed{StepID: id, Error: "e"}}
}

func cancel(seq uint64, id string) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.StepCancelled{StepID: id}}
}

func capture(seq uint64, key, ref string, gen uint64) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.ResourceCaptured{Key: key, Ref: ref, Generation: gen, Reason: eventlog.CaptureSteps}}
}

func forkAt(seq uint64, sels ...eventlog.ForkSelection) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.ForkCreated{Parent: sampleParent, At: seq - 1, Selections: sels}}
}

func diverged(seq uint64) eventlog.Event {
	return eventlog.Event{Seq: seq, Data: &eventlog.ForkDiverged{Unconsumed: []string{"s0"}}}
}

func fold(t testing.TB, evs ...eventlog.Event) *eventlog.IndexState {
	t.Helper()
	s := eventlog.NewIndexState(nil)
	for _, ev := range evs {
		if _, err := s.Apply(ev); err != nil {
			t.Fatalf("prior event %d %s: %v", ev.Seq, ev.Kind(), err)
		}
	}
	return s
}

type cp = eventlog.Checkpoint
type rs = eventlog.ResourceState

// TestIndexStateApply checks each transition of the checkpoint-index fold
// (DESIGN §5 "Coverage: generations").
func TestIndexStateApply(t *testing.T) {
	const tool, local, llm = eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM
	withTwo := []eventlog.Event{bound(1, "w", "", false), bound(2, "d", "", false)}
	withReuse := []eventlog.Event{bound(1, "w", "", true), bound(2, "d", "", false)}
	inFlight := []eventlog.Event{bound(1, "w", "", false), bound(2, "d", "", true),
		start(3, "s1", tool, "d"), start(4, "s2", tool)}
	noChange := []rs(nil)
	for _, c := range []struct {
		name  string
		prior []eventlog.Event
		ev    eventlog.Event
		want  []rs
	}{
		// resource.bound
		{"bound new from the initial environment", nil, bound(1, "w", "", false),
			[]rs{{Key: "w", Seq: 1, Generation: 1, Bound: 1}}},
		{"bound new from a checkpoint", nil, bound(1, "w", "ref-0", false),
			[]rs{{Key: "w", Seq: 1, Generation: 1, Bound: 1, Latest: cp{"ref-0", 1, 1}}}},
		{"bound new with coverage reuse", nil, bound(1, "w", "", true),
			[]rs{{Key: "w", Seq: 1, Generation: 1, Bound: 1, CoverageReuse: true}}},
		{"bound again: new generation, in-flight emptied", []eventlog.Event{bound(1, "w", "", false), start(2, "s1", tool)},
			bound(3, "w", "", true),
			[]rs{{Key: "w", Seq: 3, Generation: 3, Bound: 3, CoverageReuse: true}}},
		{"bound again from a ref: the ref is the new generation's checkpoint",
			[]eventlog.Event{bound(1, "w", "", false), capture(2, "w", "r1", 1), start(3, "s1", tool)},
			bound(4, "w", "r2", false),
			[]rs{{Key: "w", Seq: 4, Generation: 3, Bound: 4, Latest: cp{"r2", 4, 3}}}},
		{"bound again from the initial environment keeps the newest checkpoint",
			[]eventlog.Event{bound(1, "w", "", false), capture(2, "w", "r1", 1), start(3, "s1", tool)},
			bound(4, "w", "", false),
			[]rs{{Key: "w", Seq: 4, Generation: 3, Bound: 4, Latest: cp{"r1", 2, 1}}}},
		{"a second resource changes only itself", []eventlog.Event{bound(1, "w", "", false)}, bound(2, "d", "", false),
			[]rs{{Key: "d", Seq: 2, Generation: 1, Bound: 2}}},

		// step.started without coverage reuse: every live step advances every resource
		{"tool affecting nothing advances every resource", withTwo, start(3, "s1", tool),
			[]rs{{Key: "d", Seq: 3, Generation: 2, Bound: 2, InFlight: []string{"s1"}},
				{Key: "w", Seq: 3, Generation: 2, Bound: 1, InFlight: []string{"s1"}}}},
		{"llm call advances every resource", withTwo, start(3, "s1", llm),
			[]rs{{Key: "d", Seq: 3, Generation: 2, Bound: 2, InFlight: []string{"s1"}},
				{Key: "w", Seq: 3, Generation: 2, Bound: 1, InFlight: []string{"s1"}}}},
		{"local step affecting one advances both", withTwo, start(3, "s1", local, "w"),
			[]rs{{Key: "d", Seq: 3, Generation: 2, Bound: 2, InFlight: []string{"s1"}},
				{Key: "w", Seq: 3, Generation: 2, Bound: 1, InFlight: []string{"s1"}}}},

		// step.started with coverage reuse: only affecting tool and local steps
		{"reuse: affecting tool advances it", withReuse, start(3, "s1", tool, "w"),
			[]rs{{Key: "d", Seq: 3, Generation: 2, Bound: 2, InFlight: []string{"s1"}},
				{Key: "w", Seq: 3, Generation: 2, Bound: 1, CoverageReuse: true, InFlight: []string{"s1"}}}},
		{"reuse: affecting local step advances it", withReuse, start(3, "s1", local, "w"),
			[]rs{{Key: "d", Seq: 3, Generation: 2, Bound: 2, InFlight: []string{"s1"}},
				{Key: "w", Seq: 3, Generation: 2, Bound: 1, CoverageReuse: true, InFlight: []string{"s1"}}}},
		{"reuse: tool not affecting it leaves it", withReuse, start(3, "s1", tool, "d"),
			[]rs{{Key: "d", Seq: 3, Generation: 2, Bound: 2, InFlight: []string{"s1"}}}},
		{"reuse: llm call never advances it, even naming it", withReuse, start(3, "s1", llm, "w"),
			[]rs{{Key: "d", Seq: 3, Generation: 2, Bound: 2, InFlight: []string{"s1"}}}},
		{"reuse only: unaffecting step changes nothing", []eventlog.Event{bound(1, "w", "", true)}, start(2, "s1", tool),
			noChange},
		{"no resources: a step changes nothing", nil, start(1, "s1", tool), noChange},

		// retries and order
		{"retry of an in-flight step: new generation, listed once",
			[]eventlog.Event{bound(1, "w", "", false), start(2, "s1", tool)},
			eventlog.Event{Seq: 3, Data: &eventlog.StepStarted{StepID: "s1", StepKind: tool, Idempotency: eventlog.SafeToRetry, Attempt: 2}},
			[]rs{{Key: "w", Seq: 3, Generation: 3, Bound: 1, InFlight: []string{"s1"}}}},
		{"in-flight is sorted", []eventlog.Event{bound(1, "w", "", false), start(2, "s2", tool)}, start(3, "s1", tool),
			[]rs{{Key: "w", Seq: 3, Generation: 3, Bound: 1, InFlight: []string{"s1", "s2"}}}},

		// terminals land the step wherever it is in flight
		{"succeeded lands everywhere", inFlight, succeed(5, "s1"),
			[]rs{{Key: "d", Seq: 5, Generation: 2, Bound: 2, CoverageReuse: true},
				{Key: "w", Seq: 5, Generation: 3, Bound: 1, InFlight: []string{"s2"}}}},
		{"failed lands only where in flight", inFlight, fail(5, "s2"),
			[]rs{{Key: "w", Seq: 5, Generation: 3, Bound: 1, InFlight: []string{"s1"}}}},
		{"cancelled lands", inFlight, cancel(5, "s2"),
			[]rs{{Key: "w", Seq: 5, Generation: 3, Bound: 1, InFlight: []string{"s1"}}}},
		{"indeterminate failure lands", inFlight,
			eventlog.Event{Seq: 5, Data: &eventlog.StepFailed{StepID: "s1", Error: "orphan", Indeterminate: true}},
			[]rs{{Key: "d", Seq: 5, Generation: 2, Bound: 2, CoverageReuse: true},
				{Key: "w", Seq: 5, Generation: 3, Bound: 1, InFlight: []string{"s2"}}}},
		{"terminal of a step not in flight changes nothing", inFlight, succeed(5, "s9"), noChange},

		// events that leave the index alone
		{"dispatch.started", inFlight, eventlog.Event{Seq: 5, Data: &eventlog.DispatchStarted{Dispatch: 2}}, noChange},
		{"step.denied", inFlight, eventlog.Event{Seq: 5, Data: &eventlog.StepDenied{StepID: "s3", StepKind: tool}}, noChange},
		{"resource.capture_failed", inFlight,
			eventlog.Event{Seq: 5, Data: &eventlog.ResourceCaptureFailed{Key: "w", Reason: eventlog.CaptureSteps}}, noChange},
		{"execution.completed", inFlight, eventlog.Event{Seq: 5, Data: &eventlog.ExecutionCompleted{}}, noChange},
		{"execution.failed", inFlight, eventlog.Event{Seq: 5, Data: &eventlog.ExecutionFailed{Code: "handler"}}, noChange},

		// resource.captured
		{"capture at the current generation", []eventlog.Event{bound(1, "w", "", false), start(2, "s1", tool), succeed(3, "s1")},
			capture(4, "w", "r", 2),
			[]rs{{Key: "w", Seq: 4, Generation: 2, Bound: 1, Latest: cp{"r", 4, 2}}}},

		// fork.created
		{"fork: covered selection is the current generation's checkpoint, uncovered keeps the parent's",
			[]eventlog.Event{bound(1, "w", "", false), capture(2, "w", "r1", 1), start(3, "s1", tool), succeed(4, "s1"), bound(5, "d", "", false)},
			forkAt(6,
				eventlog.ForkSelection{Key: "d", Generation: 1},
				eventlog.ForkSelection{Key: "w", Ref: "r9", CapturedAt: 8, Generation: 2, Covered: true}),
			[]rs{{Key: "d", Seq: 6, Generation: 1, Bound: 5},
				{Key: "w", Seq: 6, Generation: 2, Bound: 1, Latest: cp{"r9", 8, 2}}}},
		{"fork: uncovered selection with a ref keeps the parent's latest",
			[]eventlog.Event{bound(1, "w", "", false), capture(2, "w", "r1", 1), start(3, "s1", tool)},
			forkAt(3, eventlog.ForkSelection{Key: "w", Ref: "r1", CapturedAt: 2, Generation: 2}),
			[]rs{{Key: "w", Seq: 3, Generation: 2, Bound: 1, InFlight: []string{"s1"}, Latest: cp{"r1", 2, 1}}}},
		{"fork without resources", nil, forkAt(4), noChange},

		// fork.diverged marks every resource bound now, once, and advances
		// and lands nothing (DESIGN §8½, §12)
		{"diverged marks every bound resource", inFlight, diverged(5),
			[]rs{{Key: "d", Seq: 5, Generation: 2, Bound: 2, CoverageReuse: true, InFlight: []string{"s1"}, Diverged: 5},
				{Key: "w", Seq: 5, Generation: 3, Bound: 1, InFlight: []string{"s1", "s2"}, Diverged: 5}}},
		{"diverged again marks only a resource bound since",
			[]eventlog.Event{bound(1, "w", "", false), diverged(2), bound(3, "d", "", false)}, diverged(4),
			[]rs{{Key: "d", Seq: 4, Generation: 1, Bound: 3, Diverged: 4}}},
		{"diverged again with every resource marked changes nothing",
			[]eventlog.Event{bound(1, "w", "", false), diverged(2)}, diverged(3), noChange},
		{"diverged with nothing bound changes nothing", nil, diverged(1), noChange},
		{"a mark survives a new binding", []eventlog.Event{bound(1, "w", "", false), diverged(2)}, bound(3, "w", "r", false),
			[]rs{{Key: "w", Seq: 3, Generation: 2, Bound: 3, Latest: cp{"r", 3, 2}, Diverged: 2}}},
		{"a mark survives a capture", []eventlog.Event{bound(1, "w", "", false), diverged(2)}, capture(3, "w", "r", 1),
			[]rs{{Key: "w", Seq: 3, Generation: 1, Bound: 1, Latest: cp{"r", 3, 1}, Diverged: 2}}},
		{"a mark survives a fork", []eventlog.Event{bound(1, "w", "", false), diverged(2)},
			forkAt(3, eventlog.ForkSelection{Key: "w", Ref: "r", CapturedAt: 1, Generation: 1, Covered: true}),
			[]rs{{Key: "w", Seq: 3, Generation: 1, Bound: 1, Latest: cp{"r", 1, 1}, Diverged: 2}}},
		{"a marked resource still advances and lands", []eventlog.Event{bound(1, "w", "", false), diverged(2), start(3, "s1", tool)},
			succeed(4, "s1"),
			[]rs{{Key: "w", Seq: 4, Generation: 2, Bound: 1, Diverged: 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fold(t, c.prior...)
			before := s.States()
			got, err := s.Apply(c.ev)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if d := eventDiff(c.want, got); d != "" {
				t.Errorf("changed states (-want +got):\n%s", d)
			}
			// States() holds the changed states and, for every other key, the
			// state from before.
			want := map[string]rs{}
			for _, st := range before {
				want[st.Key] = st
			}
			for _, st := range got {
				want[st.Key] = st
			}
			var wantAll []rs
			for _, k := range slices.Sorted(keysOf(want)) {
				wantAll = append(wantAll, want[k])
			}
			if d := eventDiff(wantAll, s.States()); d != "" {
				t.Errorf("States() after Apply (-want +got):\n%s", d)
			}
		})
	}
}

func keysOf[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// An event that contradicts the index is refused with ErrInvalid and leaves
// the state as it was (a store then writes nothing).
func TestIndexStateApplyRejects(t *testing.T) {
	const tool = eventlog.StepTool
	prior := []eventlog.Event{bound(1, "w", "", false), start(2, "s1", tool), succeed(3, "s1"), bound(4, "d", "", false)}
	for _, c := range []struct {
		name  string
		prior []eventlog.Event
		ev    eventlog.Event
	}{
		{"capture of an unbound key", prior, capture(5, "x", "r", 1)},
		{"capture past the current generation", prior, capture(5, "w", "r", 3)},
		{"capture at generation 0", prior, capture(5, "w", "r", 0)},
		// An older generation's capture would hide the current one's checkpoints.
		{"capture at an older generation", prior, capture(5, "w", "r", 1)},
		{"capture with nothing bound", nil, capture(1, "w", "r", 1)},
		{"step affecting an unbound key", prior, start(5, "s2", tool, "w", "x")},
		{"fork with too few selections", prior, forkAt(5, eventlog.ForkSelection{Key: "w", Generation: 2})},
		{"fork with too many selections", prior, forkAt(5,
			eventlog.ForkSelection{Key: "d", Generation: 1}, eventlog.ForkSelection{Key: "w", Generation: 2},
			eventlog.ForkSelection{Key: "x", Generation: 1})},
		{"fork selecting another key", prior, forkAt(5,
			eventlog.ForkSelection{Key: "d", Generation: 1}, eventlog.ForkSelection{Key: "x", Generation: 2})},
		{"fork at another generation", prior, forkAt(5,
			eventlog.ForkSelection{Key: "d", Generation: 1}, eventlog.ForkSelection{Key: "w", Generation: 1})},
		{"fork selecting with nothing bound", nil, forkAt(2, eventlog.ForkSelection{Key: "w", Generation: 1})},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fold(t, c.prior...)
			before := s.States()
			got, err := s.Apply(c.ev)
			if !errors.Is(err, eventlog.ErrInvalid) {
				t.Fatalf("Apply = %v, %v; want ErrInvalid", got, err)
			}
			if d := cmp.Diff(before, s.States()); d != "" {
				t.Errorf("state changed by a refused event (-before +after):\n%s", d)
			}
		})
	}
}

// The states Apply returns are copies: a caller may keep or change them.
func TestIndexStateApplyReturnsCopies(t *testing.T) {
	s := fold(t, bound(1, "w", "", false), start(2, "s1", eventlog.StepTool))
	got, err := s.Apply(start(3, "s2", eventlog.StepTool))
	if err != nil {
		t.Fatal(err)
	}
	got[0].InFlight[0] = "changed"
	got[0].Generation = 99
	want := []rs{{Key: "w", Seq: 3, Generation: 3, Bound: 1, InFlight: []string{"s1", "s2"}}}
	if d := eventDiff(want, s.States()); d != "" {
		t.Errorf("state changed through a returned copy (-want +got):\n%s", d)
	}
	states := s.States()
	states[0].InFlight[1] = "changed"
	if d := eventDiff(want, s.States()); d != "" {
		t.Errorf("state changed through States() (-want +got):\n%s", d)
	}
}

// indexHistory draws a valid event sequence for IndexState: bindings,
// steps and their terminals, captures, forks, divergences and noise.
func indexHistory(t *rapid.T, n int) []eventlog.Event {
	keys := []string{"a", "b", "c"}
	shadow := eventlog.NewIndexState(nil)
	gens := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, st := range shadow.States() {
			m[st.Key] = st.Generation
		}
		return m
	}
	var evs []eventlog.Event
	var open []string // steps started and not landed
	steps := 0
	for seq := uint64(1); seq <= uint64(n); seq++ {
		g := gens()
		var bk []string
		for k := range g {
			bk = append(bk, k)
		}
		slices.Sort(bk)
		var p eventlog.Payload
		switch rapid.IntRange(0, 10).Draw(t, "action") {
		case 0:
			from := rapid.SampledFrom([]string{"", "", "ref"}).Draw(t, "from")
			p = &eventlog.ResourceBound{Key: rapid.SampledFrom(keys).Draw(t, "key"), DriverID: "d",
				Binding: json.RawMessage(`1`), From: from, EverySteps: 1,
				CoverageReuse: rapid.Bool().Draw(t, "reuse")}
		case 1, 2, 3:
			id := fmt.Sprintf("s%d", steps)
			if len(open) > 0 && rapid.IntRange(0, 3).Draw(t, "retry") == 0 {
				id = rapid.SampledFrom(open).Draw(t, "retried")
			} else {
				steps++
				open = append(open, id)
			}
			var affects []string
			for _, k := range bk {
				if rapid.Bool().Draw(t, "affects "+k) {
					affects = append(affects, k)
				}
			}
			p = &eventlog.StepStarted{StepID: id, StepKind: rapid.SampledFrom([]eventlog.StepKind{"tool", "local", "llm", "child"}).Draw(t, "kind"),
				Resources: affects, Idempotency: eventlog.SafeToRetry, Attempt: 1}
		case 4, 5:
			if len(open) == 0 {
				p = &eventlog.DispatchStarted{Dispatch: 1}
				break
			}
			i := rapid.IntRange(0, len(open)-1).Draw(t, "landed")
			id := open[i]
			open = slices.Delete(open, i, i+1)
			switch rapid.IntRange(0, 3).Draw(t, "terminal") {
			case 0:
				p = &eventlog.StepSucceeded{StepID: id}
			case 1:
				p = &eventlog.StepFailed{StepID: id}
			case 2:
				p = &eventlog.StepAbandoned{StepID: id}
			default:
				p = &eventlog.StepCancelled{StepID: id}
			}
		case 6, 7:
			if len(bk) == 0 {
				p = &eventlog.StepDenied{StepID: "x", StepKind: "tool"}
				break
			}
			k := rapid.SampledFrom(bk).Draw(t, "captured")
			p = &eventlog.ResourceCaptured{Key: k, Ref: fmt.Sprintf("r%d", seq),
				Generation: g[k], Reason: eventlog.CaptureSteps}
		case 8:
			fc := &eventlog.ForkCreated{Parent: sampleParent, At: seq - 1}
			for _, k := range bk {
				sel := eventlog.ForkSelection{Key: k, Generation: g[k]}
				if rapid.Bool().Draw(t, "covered") {
					sel.Ref, sel.CapturedAt, sel.Covered = fmt.Sprintf("f%d", seq), seq+uint64(rapid.IntRange(0, 5).Draw(t, "later")), true
				}
				fc.Selections = append(fc.Selections, sel)
			}
			if fc.At == 0 {
				fc.At = 1
			}
			p = fc
		case 9:
			p = &eventlog.ForkDiverged{Unconsumed: []string{"s0"}}
		default:
			p = &eventlog.DispatchStarted{Dispatch: 1}
		}
		ev := eventlog.Event{Seq: seq, Data: p}
		if err := ev.Validate(); err != nil {
			t.Fatalf("generated an invalid event: %v", err)
		}
		if _, err := shadow.Apply(ev); err != nil {
			t.Fatalf("generated event %d %s refused: %v", seq, ev.Kind(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// naiveStates computes, by the definitions of DESIGN §5 and without any
// incremental state, every resource's state after the first n events.
func naiveStates(evs []eventlog.Event, n int) []rs {
	prefix := evs[:n]
	keys := map[string]bool{}
	for _, ev := range prefix {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok {
			keys[b.Key] = true
		}
	}
	var out []rs
	for _, k := range slices.Sorted(keysOf(keys)) {
		st := rs{Key: k}
		bound := false
		for i, ev := range prefix {
			switch p := ev.Data.(type) {
			case *eventlog.ResourceBound:
				if p.Key != k {
					continue
				}
				bound = true
				st.Generation++
				st.Bound, st.CoverageReuse = ev.Seq, p.CoverageReuse
				if p.From != "" {
					st.Latest = cp{p.From, ev.Seq, st.Generation}
				}
				st.Seq = ev.Seq
			case *eventlog.StepStarted:
				if bound && advances(p, st.CoverageReuse, k) {
					st.Generation++
					st.Seq = ev.Seq
				}
			case *eventlog.ResourceCaptured:
				if p.Key == k {
					st.Latest = cp{p.Ref, ev.Seq, p.Generation}
					st.Seq = ev.Seq
				}
			case *eventlog.ForkCreated:
				for _, sel := range p.Selections {
					if sel.Key == k {
						if sel.Covered {
							st.Latest = cp{sel.Ref, sel.CapturedAt, st.Generation}
						}
						st.Seq = ev.Seq
					}
				}
			case *eventlog.ForkDiverged:
				// The first fork.diverged while k is bound marks it for good.
				if bound && st.Diverged == 0 {
					st.Diverged = ev.Seq
					st.Seq = ev.Seq
				}
			case *eventlog.StepSucceeded, *eventlog.StepFailed, *eventlog.StepCancelled, *eventlog.StepAbandoned:
				// A terminal changes k when it lands a step in flight for k.
				if slices.Contains(inFlightAt(prefix, k, i), terminalOf(ev)) {
					st.Seq = ev.Seq
				}
			}
		}
		st.InFlight = inFlightAt(prefix, k, len(prefix))
		out = append(out, st)
	}
	return out
}

// advances reports whether step p advances resource k (DESIGN §5).
func advances(p *eventlog.StepStarted, reuse bool, k string) bool {
	return !reuse || (p.StepKind != eventlog.StepLLM && slices.Contains(p.Resources, k))
}

func terminalOf(ev eventlog.Event) string {
	switch p := ev.Data.(type) {
	case *eventlog.StepSucceeded:
		return p.StepID
	case *eventlog.StepFailed:
		return p.StepID
	case *eventlog.StepCancelled:
		return p.StepID
	case *eventlog.StepAbandoned:
		return p.StepID
	}
	return ""
}

// inFlightAt lists, sorted, the steps in flight for k after evs[:pos]: started
// after k's newest binding, advancing k, and without a terminal since.
func inFlightAt(evs []eventlog.Event, k string, pos int) []string {
	lb := -1
	var reuse bool
	for i, ev := range evs[:pos] {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok && b.Key == k {
			lb, reuse = i, b.CoverageReuse
		}
	}
	if lb < 0 {
		return nil
	}
	var out []string
	for j := lb + 1; j < pos; j++ {
		p, ok := evs[j].Data.(*eventlog.StepStarted)
		if !ok || !advances(p, reuse, k) || slices.Contains(out, p.StepID) {
			continue
		}
		landed := false
		for _, ev := range evs[j+1 : pos] {
			landed = landed || terminalOf(ev) == p.StepID
		}
		if !landed {
			out = append(out, p.StepID)
		}
	}
	slices.Sort(out)
	return out
}

// The fold agrees with the naive model after every event, and is
// incremental: resuming it from States() at any split point gives the same
// changes and the same final state. DESIGN §8.3.
func TestIndexStateOracleAndSplit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := indexHistory(t, rapid.IntRange(1, 40).Draw(t, "events"))
		whole := eventlog.NewIndexState(nil)
		var changes [][]rs
		for i, ev := range evs {
			got, err := whole.Apply(ev)
			if err != nil {
				t.Fatalf("event %d: %v", ev.Seq, err)
			}
			changes = append(changes, got)
			for _, st := range got {
				if st.Seq != ev.Seq {
					t.Fatalf("event %d changed %s with Seq %d", ev.Seq, st.Key, st.Seq)
				}
				if st.Latest.Generation > st.Generation {
					t.Fatalf("event %d: %s latest generation %d > generation %d", ev.Seq, st.Key, st.Latest.Generation, st.Generation)
				}
				if !slices.IsSorted(st.InFlight) || len(slices.Compact(slices.Clone(st.InFlight))) != len(st.InFlight) {
					t.Fatalf("event %d: %s in-flight %v not sorted and unique", ev.Seq, st.Key, st.InFlight)
				}
			}
			if !slices.IsSortedFunc(got, func(a, b rs) int { return cmpString(a.Key, b.Key) }) {
				t.Fatalf("event %d: changes not sorted by key", ev.Seq)
			}
			if d := eventDiff(naiveStates(evs, i+1), whole.States()); d != "" {
				t.Fatalf("after event %d %s: fold differs from the naive model (-naive +fold):\n%s", ev.Seq, ev.Kind(), d)
			}
		}
		split := rapid.IntRange(0, len(evs)).Draw(t, "split")
		first := eventlog.NewIndexState(nil)
		for _, ev := range evs[:split] {
			if _, err := first.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		resumed := eventlog.NewIndexState(first.States())
		for i, ev := range evs[split:] {
			got, err := resumed.Apply(ev)
			if err != nil {
				t.Fatal(err)
			}
			if d := eventDiff(changes[split+i], got); d != "" {
				t.Fatalf("resumed at %d: event %d changes differ (-whole +resumed):\n%s", split, ev.Seq, d)
			}
		}
		if d := eventDiff(whole.States(), resumed.States()); d != "" {
			t.Fatalf("resumed at %d: final state differs (-whole +resumed):\n%s", split, d)
		}
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
