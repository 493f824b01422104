package proptest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// DESIGN §8.1 at the model level: at every covered point of every generated
// lineage, with and without CoverageReuse, the checkpoint the model selects
// holds exactly the resource's simulated state at that point. This is the
// check that the coverage rules of §5 are sound: undeclared changes (for
// resources without CoverageReuse), bodies that changed their resource
// before failing or being killed, and forks of forks all included.
func TestModelCoverageMeansRestoredState(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t, nil, nil)
		for _, e := range w.Execs {
			checkCoverageMeaning(t, w, e)
		}
	})
}

// checkCoverageMeaning is the body of TestModelCoverageMeansRestoredState
// for one execution.
func checkCoverageMeaning(t *rapid.T, w *World, e *Exec) {
	l := e.Lineage
	for i, ev := range l.Events {
		n := uint64(i + 1)
		// The kernel captures the generation the resource is at.
		if p, ok := ev.Data.(*eventlog.ResourceCaptured); ok {
			if g := Generation(l.Events[:n], p.Key); p.Generation != g {
				t.Fatalf("%v: seq %d captures %s at generation %d, the model says %d\n%s", e, n, p.Key, p.Generation, g, dump(l))
			}
		}
		pt := PointAt(l.Events, n)
		for _, s := range pt.Resources {
			if !s.Covered {
				continue
			}
			got := w.Contents[s.Ref]
			want := RealState(l, n, s.Key, w.Contents)
			if !slices.Equal(got, want) {
				t.Fatalf("%v: seq %d: %s is covered by %s (generation %d), which holds %v; the resource holds %v\n%s",
					e, n, s.Key, s.Ref, s.Generation, got, want, dump(l))
			}
		}
	}
}

// DESIGN §8.4 in generated histories: captures with reason steps appear
// exactly after counted calls that make a capture due and that no other
// step in flight blocks (a failed capture writes resource.capture_failed
// instead), so never after replayed, denied or LLM calls; completion
// captures are taken exactly for the resources with OnCompletion that are
// uncovered (and that no step is in flight for) when the handler returns;
// a baseline follows exactly every binding from the initial environment.
// The generator keeps a kernel's incremental books; the model recounts
// from scratch.
func TestCapturesFollowPolicy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t, nil, nil)
		for _, e := range w.Execs {
			checkCapturesFollowPolicy(t, e)
		}
	})
}

// captureOf returns the key and reason of a resource.captured or
// resource.capture_failed event.
func captureOf(ev eventlog.Event) (key string, reason eventlog.CaptureReason, ok bool) {
	switch p := ev.Data.(type) {
	case *eventlog.ResourceCaptured:
		return p.Key, p.Reason, true
	case *eventlog.ResourceCaptureFailed:
		return p.Key, p.Reason, true
	}
	return "", "", false
}

// checkCapturesFollowPolicy is the body of TestCapturesFollowPolicy for the
// own events of one execution.
func checkCapturesFollowPolicy(t *rapid.T, e *Exec) {
	events := e.Lineage.Events
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v: %s\n%s", e, fmt.Sprintf(format, args...), dump(e.Lineage))
	}
	// group returns the keys captured (or failed) with reason after event
	// n, in the run of capture events that directly follows it.
	group := func(n uint64, reason eventlog.CaptureReason) []string {
		var keys []string
		for _, ev := range events[n:] {
			key, r, ok := captureOf(ev)
			if !ok {
				break
			}
			if r == reason {
				keys = append(keys, key)
			}
		}
		return keys
	}
	for i := int(e.At); i < len(events); i++ {
		n := uint64(i + 1)
		ev := events[i]

		// Every counted call that makes a capture due is followed by one,
		// unless another step in flight blocks it.
		var want []string
		for _, key := range CountedFor(events, n) {
			if Due(events, n, key) && len(InFlight(events[:n], key)) == 0 {
				want = append(want, key)
			}
		}
		if _, ok := terminalStep(ev); ok {
			if got := group(n, eventlog.CaptureSteps); !slices.Equal(got, want) {
				fail("seq %d (%s): steps captures of %v follow it, the policy says %v", n, describe(ev), got, want)
			}
		}

		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			got := group(n, eventlog.CaptureBaseline)
			if p.From == "" && !slices.Equal(got, []string{p.Key}) {
				fail("seq %d binds %s from the initial environment; baseline captures of %v follow", n, p.Key, got)
			}
			if p.From != "" && len(got) > 0 {
				fail("seq %d binds %s from %s; baseline captures of %v follow", n, p.Key, p.From, got)
			}
		case *eventlog.ExecutionCompleted:
			start := i // the completion captures of the same append precede it
			for start > 0 {
				if _, r, ok := captureOf(events[start-1]); !ok || r != eventlog.CaptureCompletion {
					break
				}
				start--
			}
			var got []string
			for _, cev := range events[start:i] {
				key, _, _ := captureOf(cev)
				got = append(got, key)
			}
			before := uint64(start)
			pt := PointAt(events[:before], before) // coverage as the handler returned
			var want []string
			for _, s := range pt.Resources {
				if !s.Covered && Binding(events[:before], s.Key).OnCompletion && len(InFlight(events[:before], s.Key)) == 0 {
					want = append(want, s.Key)
				}
			}
			if !slices.Equal(got, want) {
				fail("execution.completed at seq %d: completion captures of %v, want %v", n, got, want)
			}
		}

		// Each capture event belongs to the run that its reason says.
		if key, reason, ok := captureOf(ev); ok {
			j := i
			for j > 0 {
				if _, _, ok := captureOf(events[j-1]); !ok {
					break
				}
				j--
			}
			switch reason {
			case eventlog.CaptureSteps:
				if j == 0 || !slices.Contains(CountedFor(events, uint64(j)), key) {
					fail("seq %d: steps capture of %s does not follow a counted call of it", n, key)
				}
			case eventlog.CaptureBaseline:
				b, ok := events[i-1].Data.(*eventlog.ResourceBound)
				if !ok || b.Key != key || b.From != "" {
					fail("seq %d: baseline capture of %s does not follow its binding from the initial environment", n, key)
				}
			case eventlog.CaptureCompletion:
				k := i
				for k < len(events) && events[k].Kind() != eventlog.KindExecutionCompleted {
					if _, _, ok := captureOf(events[k]); !ok {
						break
					}
					k++
				}
				if k == len(events) || events[k].Kind() != eventlog.KindExecutionCompleted {
					fail("seq %d: completion capture of %s is not followed by execution.completed", n, key)
				}
			}
		}
	}
}

// DESIGN §8.3 (the index): the checkpoint index a store writes beside the
// events — which coverage.At and fork.PlanFromIndex read instead of folding
// — agrees with the model at every seq of every lineage: the resources bound,
// each one's generation, steps in flight, CoverageReuse and newest
// checkpoint at or before the seq.
func TestIndexAgreesWithModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t, nil, nil)
		for _, e := range w.Execs {
			checkIndexAgrees(t, w, e)
		}
	})
}

func checkIndexAgrees(t *rapid.T, w *World, e *Exec) {
	events := e.Lineage.Events
	for n := uint64(1); n <= uint64(len(events)); n++ {
		states, err := w.Store.ResourceStates(context.Background(), e.ID, n)
		if err != nil {
			t.Fatalf("%v: ResourceStates at %d: %v", e, n, err)
		}
		type view struct {
			Key           string
			Generation    uint64
			InFlight      []string
			CoverageReuse bool
			Latest        eventlog.Checkpoint
		}
		var got, want []view
		for _, st := range states {
			got = append(got, view{st.Key, st.Generation, st.InFlight, st.CoverageReuse, st.Latest})
		}
		for _, key := range BoundKeys(events[:n]) {
			v := view{Key: key, Generation: Generation(events[:n], key), InFlight: InFlight(events[:n], key),
				CoverageReuse: Binding(events[:n], key).CoverageReuse}
			for _, c := range Checkpoints(events, key) {
				if c.Pos <= n {
					v.Latest = eventlog.Checkpoint{Ref: c.Ref, At: c.CapturedAt, Generation: c.Generation}
				}
			}
			want = append(want, v)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%v: index at seq %d differs from the model (-model +index):\n%s\n%s", e, n, diff, dump(e.Lineage))
		}
	}
}
