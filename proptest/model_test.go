package proptest

import (
	"context"
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

// checkCapturesFollowPolicy is the body of TestCapturesFollowPolicy for the
// own events of one execution.
func checkCapturesFollowPolicy(t *rapid.T, e *Exec) {
	if seq, err := capturesFollowPolicy(e.Lineage.Events, int(e.At)); err != nil {
		t.Helper()
		t.Fatalf("%v: seq %d: %v\n%s", e, seq, err, dump(e.Lineage))
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
