package coverage_test

import (
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// reuseModes are the three ways generated histories bind resources.
var reuseModes = []struct {
	name  string
	reuse *rapid.Generator[bool]
}{
	{"reuse=false", rapid.Just(false)},
	{"reuse=true", rapid.Just(true)},
	{"reuse=mixed", rapid.Bool()},
}

// TestOracle compares Fold.Point at every N of generated histories with the
// naive model, which recomputes each N from scratch by scanning the whole
// lineage, with and without CoverageReuse; and Windows, State and Covered
// with what the naive model implies. DESIGN §8.3, §5.
func TestOracle(t *testing.T) {
	for _, m := range reuseModes {
		t.Run(m.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				events := genHistory(t, genOpts{reuse: m.reuse, forks: true}, 80)
				f := foldAll(t, events)
				for n := uint64(1); n <= f.Head(); n++ {
					got, err := f.Point(n)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(naivePoint(events, n), got); diff != "" {
						t.Fatalf("Point(%d) (-naive +fold):\n%s", n, diff)
					}
				}
				if diff := cmp.Diff(naiveWindows(events), f.Windows()); diff != "" {
					t.Fatalf("Windows (-naive +fold):\n%s", diff)
				}
				head := naivePoint(events, f.Head())
				for _, k := range genKeys {
					i := slices.IndexFunc(head.Resources, func(s coverage.Selection) bool { return s.Key == k })
					st, ok := f.State(k)
					// Covered ignores a divergence (DESIGN §12): it says whether
					// a capture is needed, not what coverage reports.
					physical := i >= 0 && (head.Resources[i].Covered || naiveScan(events, k, len(events)).diverged && naiveCovered(events, k))
					if ok != (i >= 0) || f.Covered(k) != physical {
						t.Fatalf("State(%q) ok=%t, Covered=%t; naive head point %+v", k, ok, f.Covered(k), head)
					}
					if ok {
						if st.Key != k || st.Seq > f.Head() || st.Generation != head.Resources[i].Generation ||
							len(st.InFlight) != len(naiveScan(events, k, len(events)).inFlight) {
							t.Fatalf("State(%q) = %+v; naive generation %d", k, st, head.Resources[i].Generation)
						}
					}
				}
			})
		})
	}
}

// TestIncremental folds generated histories in random splits, trying an
// invalid event between some of them, and checks that after every split the
// Points, Windows and States equal those of a fold of the same prefix in one
// go; and that a rejected event leaves the fold unchanged. DESIGN §8.3.
func TestIncremental(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		events := genHistory(t, genOpts{reuse: rapid.Bool(), forks: true}, 60)
		split := coverage.New()
		for split.Head() < uint64(len(events)) {
			if rapid.Bool().Draw(t, "try a bad event") {
				bad := badEvent(t, split.Head())
				if err := split.Apply(bad); !errors.Is(err, eventlog.ErrInvalid) {
					t.Fatalf("Apply(%+v) = %v, want an error wrapping eventlog.ErrInvalid", bad, err)
				}
			}
			next := rapid.IntRange(int(split.Head())+1, len(events)).Draw(t, "split at")
			for _, ev := range events[split.Head():next] {
				if err := split.Apply(ev); err != nil {
					t.Fatal(err)
				}
			}
			sameFold(t, foldAll(t, events[:next]), split)
		}
		f, err := coverage.FoldEvents(lineageOf(events))
		if err != nil {
			t.Fatal(err)
		}
		sameFold(t, f, split)
	})
}

// badEvent draws an event the fold at head must reject.
func badEvent(t *rapid.T, head uint64) eventlog.Event {
	next := head + 1
	switch rapid.IntRange(0, 6).Draw(t, "bad") {
	case 0:
		return eventlog.Event{Seq: head + 2, Data: &eventlog.DispatchStarted{Dispatch: 1}}
	case 1:
		return eventlog.Event{Seq: next, Data: &eventlog.ResourceCaptured{Key: "unbound", Ref: "x", Generation: 1, Reason: eventlog.CaptureSteps}}
	case 2:
		return eventlog.Event{Seq: next, Data: &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Target: "t",
			Resources: []string{"unbound"}, Idempotency: eventlog.SafeToRetry, Attempt: 1}}
	case 3:
		return eventlog.Event{Seq: next, Data: (*eventlog.StepStarted)(nil)}
	case 4:
		return eventlog.Event{Seq: next}
	case 5:
		return eventlog.Event{Seq: next, Data: &eventlog.StepSucceeded{}}
	default:
		return eventlog.Event{Seq: next, Data: &eventlog.ForkCreated{Parent: eventlog.ID{'P'}, At: next + 1}}
	}
}

// sameFold fails unless a and b answer alike at every seq.
func sameFold(t *rapid.T, a, b *coverage.Fold) {
	t.Helper()
	if a.Head() != b.Head() {
		t.Fatalf("heads %d and %d", a.Head(), b.Head())
	}
	for n := uint64(1); n <= a.Head(); n++ {
		pa, errA := a.Point(n)
		pb, errB := b.Point(n)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if diff := cmp.Diff(pa, pb); diff != "" {
			t.Fatalf("Point(%d) (-one go +split):\n%s", n, diff)
		}
	}
	if diff := cmp.Diff(a.Windows(), b.Windows()); diff != "" {
		t.Fatalf("Windows (-one go +split):\n%s", diff)
	}
	for _, k := range genKeys {
		sa, okA := a.State(k)
		sb, okB := b.State(k)
		if diff := cmp.Diff(sa, sb); okA != okB || diff != "" || a.Covered(k) != b.Covered(k) {
			t.Fatalf("State(%q) (-one go +split):\n%s", k, diff)
		}
	}
}

// TestPointBounds: coverage at seq 0 or past the head is bad input
// (DESIGN §7).
func TestPointBounds(t *testing.T) {
	f := foldAll(t, goldenEvents(t, "coder.txt", 0))
	for _, at := range []uint64{0, f.Head() + 1, 1 << 63} {
		if _, err := f.Point(at); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Point(%d) = %v, want an error wrapping eventlog.ErrInvalid", at, err)
		}
	}
	if _, err := coverage.New().Point(1); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("Point(1) of an empty fold = %v, want an error wrapping eventlog.ErrInvalid", err)
	}
}

// TestFoldEventsError: an error yielded by the lineage stops the fold and
// is returned wrapped; so is an event the fold rejects.
func TestFoldEventsError(t *testing.T) {
	boom := errors.New("disk on fire")
	events := goldenEvents(t, "coder.txt", 0)
	_, err := coverage.FoldEvents(func(yield func(eventlog.Event, error) bool) {
		for _, ev := range events[:5] {
			if !yield(ev, nil) {
				return
			}
		}
		yield(eventlog.Event{}, boom)
	})
	if !errors.Is(err, boom) {
		t.Errorf("FoldEvents = %v, want an error wrapping %v", err, boom)
	}
	_, err = coverage.FoldEvents(lineageOf(events[1:]))
	if !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("FoldEvents from seq 2 = %v, want an error wrapping eventlog.ErrInvalid", err)
	}
}

// TestStateAndCovered: the SDK's view of a resource at the head — its
// generation, what is in flight, its latest checkpoint, and whether it is
// covered (the completion-capture question). DESIGN §5.
func TestStateAndCovered(t *testing.T) {
	const bound = `
created agent=coder
dispatch 1
bound workspace driver=dirfs every=2
`
	f := foldAll(t, parseEvents(t, bound))
	if f.Covered("workspace") {
		t.Error("a resource bound from the initial environment is covered before its baseline")
	}
	if f.Covered("nope") {
		t.Error("an unbound key is covered")
	}
	if _, ok := f.State("nope"); ok {
		t.Error("State of an unbound key is ok")
	}
	const started = bound + `
captured workspace ref=ws-base gen=1 reason=baseline
started write_file#1 tool write_file affects=workspace
`
	f = foldAll(t, parseEvents(t, started))
	st, ok := f.State("workspace")
	want := eventlog.ResourceState{Key: "workspace", Seq: 5, Generation: 2, InFlight: []string{"write_file#1"}, Bound: 3,
		Latest: eventlog.Checkpoint{Ref: "ws-base", At: 4, Generation: 1}}
	if diff := cmp.Diff(want, st); !ok || diff != "" {
		t.Errorf("State (-want +got):\n%s", diff)
	}
	if f.Covered("workspace") {
		t.Error("covered with a step in flight")
	}
	st.InFlight[0] = "scribbled"
	if st2, _ := f.State("workspace"); st2.InFlight[0] != "write_file#1" {
		t.Error("State hands out the fold's own in-flight slice")
	}
	f = foldAll(t, parseEvents(t, started+`
succeeded write_file#1
captured workspace ref=ws-1 gen=2 reason=steps
`))
	if !f.Covered("workspace") {
		t.Error("not covered after the capture committed with the step's outcome")
	}
}

// TestStaleCapture: a capture naming an older generation than the
// resource's is invalid — accepting it would hide the current generation's
// checkpoint — and leaves the fold unchanged. DESIGN §5 (a capture records
// the generation it captured, taken while nothing advances the resource).
func TestStaleCapture(t *testing.T) {
	events := parseEvents(t, `
created agent=coder
dispatch 1
bound workspace driver=dirfs
captured workspace ref=ws-base gen=1 reason=baseline
started write_file#1 tool write_file affects=workspace
succeeded write_file#1
captured workspace ref=ws-1 gen=2 reason=steps
captured workspace ref=ws-stale gen=1 reason=steps
`)
	f := foldAll(t, events[:7])
	err := f.Apply(events[7])
	if !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Apply(stale capture) = %v, want ErrInvalid", err)
	}
	if f.Head() != 7 {
		t.Fatalf("head %d after a rejected event", f.Head())
	}
	p, err := f.Point(7)
	if err != nil {
		t.Fatal(err)
	}
	want := []coverage.Selection{{Key: "workspace", Ref: "ws-1", CapturedAt: 7, Generation: 2, Covered: true}}
	if diff := cmp.Diff(want, p.Resources); diff != "" {
		t.Errorf("Point(7) (-want +got):\n%s", diff)
	}
}

// TestEmptyLineage: without resources every point is covered and has no
// selections (DESIGN §5).
func TestEmptyLineage(t *testing.T) {
	f := foldAll(t, parseEvents(t, "created agent=a\ndispatch 1\nstarted llm#1 llm chat\nsucceeded llm#1\ncompleted"))
	for n := uint64(1); n <= f.Head(); n++ {
		p, err := f.Point(n)
		if err != nil || !p.Covered || p.Resources != nil || p.Seq != n {
			t.Fatalf("Point(%d) = %+v, %v", n, p, err)
		}
	}
	if w := f.Windows(); w != nil {
		t.Errorf("Windows = %+v", w)
	}
}

// TestApplyValidates: an event that breaks its payload's invariants is
// refused with eventlog.ErrInvalid, as a store would refuse it.
func TestApplyValidates(t *testing.T) {
	f := foldAll(t, parseEvents(t, "created agent=a"))
	bad := eventlog.Event{Seq: 2, Data: &eventlog.ResourceBound{Key: "k", DriverID: "d", Binding: json.RawMessage(`{`), EverySteps: 1}}
	if err := f.Apply(bad); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("Apply(non-JSON binding) = %v", err)
	}
	if f.Head() != 1 {
		t.Errorf("head moved to %d", f.Head())
	}
}

// lineageOf yields events the way a Log's Events does.
func lineageOf(events []eventlog.Event) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		for _, ev := range events {
			if !yield(ev, nil) {
				return
			}
		}
	}
}
