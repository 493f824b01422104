package proptest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/replay"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// modelOf converts a coverage.Point into the model's form for comparison.
func modelOf(p coverage.Point) Point {
	out := Point{Seq: p.Seq, Covered: p.Covered}
	for _, s := range p.Resources {
		out.Resources = append(out.Resources, Selection{Key: s.Key, Ref: s.Ref, CapturedAt: s.CapturedAt, Generation: s.Generation, Covered: s.Covered})
	}
	return out
}

// planPoint converts a fork.Plan into the model's form for comparison.
func planPoint(p fork.Plan) Point {
	return modelOf(coverage.Point{Seq: p.At, Covered: p.Covered, Resources: p.Selections})
}

// withForkCreate makes the world create its forks with fork.Create and
// checks each one as it is made (DESIGN §8.2): the plan equals the model's
// point of the parent's lineage as it stands, and the fork.created written
// is the plan's event. plans receives each fork's plan by fork ID.
func withForkCreate(plans map[eventlog.ID]fork.Plan) func(*World) {
	return func(w *World) {
		var last fork.Plan
		w.Fork = func(ctx context.Context, log eventlog.IndexedLog, parent eventlog.ID, at uint64, edit ForkEdit) (eventlog.ID, error) {
			var opts []fork.Option
			if edit.Input != nil {
				opts = append(opts, fork.WithInput(edit.Input))
			}
			for _, o := range edit.Overrides {
				opts = append(opts, fork.WithOverride(o.StepID, o.Result))
			}
			id, plan, err := fork.Create(ctx, log, parent, at, time.Time{}, opts...)
			last = plan
			return id, err
		}
		w.OnFork = func(t *rapid.T, parent *Exec, at uint64, f *Exec) {
			if last.Parent != parent.ID || last.At != at {
				t.Fatalf("fork.Create of %v at %d returned the plan of %s at %d", parent, at, last.Parent, last.At)
			}
			wantPt := PointAt(parent.Lineage.Events, at)
			if diff := cmp.Diff(wantPt, planPoint(last)); diff != "" {
				t.Fatalf("fork.Create of %v at %d: plan differs from the model (-model +plan):\n%s\n%s", parent, at, diff, dump(parent.Lineage))
			}
			fc := f.Lineage.Events[at].Data.(*eventlog.ForkCreated)
			want := last.Event()
			want.Input, want.Overrides = f.Edit.Input, f.Edit.Overrides
			if diff := cmp.Diff(want, fc); diff != "" {
				t.Fatalf("fork.Create of %v at %d wrote a fork.created that is not its plan's (-plan +written):\n%s", parent, at, diff)
			}
			plans[f.ID] = last
		}
	}
}

// DESIGN §8.2 (fold level): every fork selects as §5 says. At every seq of
// every generated lineage (forks of forks, forks at a step.started
// included), the model's point equals coverage.Fold.Point, coverage.At
// (from the store's index), fork.PlanFromFold and fork.PlanFromIndex; and
// every fork the world made with fork.Create recorded the model's selection
// of its parent at the time (checked as it was made).
func TestForkSelectsAsDesigned(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plans := map[eventlog.ID]fork.Plan{}
		w := genWorld(t, withForkCreate(plans), nil)
		ctx := context.Background()
		for _, e := range w.Execs {
			if e.Parent != nil {
				if _, ok := plans[e.ID]; !ok {
					t.Fatalf("%v was not made by fork.Create", e)
				}
			}
			// The forks fork.Create made restore sound states too (§8.1 at
			// the model level, on lineages whose fork.created it wrote).
			checkCoverageMeaning(t, w, e)
			f, err := coverage.FoldEvents(w.Store.Events(ctx, e.ID, 1))
			if err != nil {
				t.Fatalf("%v: coverage fold: %v", e, err)
			}
			for n := uint64(1); n <= uint64(len(e.Lineage.Events)); n++ {
				want := PointAt(e.Lineage.Events, n)
				fail := func(what string, got Point) {
					t.Helper()
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("%v at seq %d: %s differs from the model (-model +%s):\n%s\n%s", e, n, what, what, diff, dump(e.Lineage))
					}
				}
				p, err := f.Point(n)
				if err != nil {
					t.Fatalf("%v: Fold.Point(%d): %v", e, n, err)
				}
				fail("Fold.Point", modelOf(p))
				p, err = coverage.At(ctx, w.Store, e.ID, n)
				if err != nil {
					t.Fatalf("%v: coverage.At(%d): %v", e, n, err)
				}
				fail("coverage.At", modelOf(p))
				plan, err := fork.PlanFromIndex(ctx, w.Store, e.ID, n)
				if err != nil {
					t.Fatalf("%v: PlanFromIndex(%d): %v", e, n, err)
				}
				if plan.Parent != e.ID {
					t.Fatalf("%v: PlanFromIndex(%d) names parent %s", e, n, plan.Parent)
				}
				fail("PlanFromIndex", planPoint(plan))
				plan, err = fork.PlanFromFold(f, e.ID, n)
				if err != nil {
					t.Fatalf("%v: PlanFromFold(%d): %v", e, n, err)
				}
				fail("PlanFromFold", planPoint(plan))
			}
		}
	})
}

// DESIGN §8.3: the coverage fold agrees with the model at every N, with and
// without CoverageReuse — both as the lineage stood when N was its head
// (Point(N), Covered and State of every resource after applying 1..N) and
// once the whole lineage is folded (every Point, checked in
// TestForkSelectsAsDesigned too).
func TestCoverageFoldAgreesWithModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t, nil, nil)
		for _, e := range w.Execs {
			events := e.Lineage.Events
			f := coverage.New()
			for i, ev := range events {
				n := uint64(i + 1)
				if err := f.Apply(ev); err != nil {
					t.Fatalf("%v: Apply(%d): %v", e, n, err)
				}
				p, err := f.Point(n)
				if err != nil {
					t.Fatalf("%v: Point(%d): %v", e, n, err)
				}
				want := PointAt(events[:n], n)
				if diff := cmp.Diff(want, modelOf(p)); diff != "" {
					t.Fatalf("%v: with seq %d as head, Point differs from the model (-model +fold):\n%s\n%s", e, n, diff, dump(e.Lineage))
				}
				physical := PhysicalPointAt(events[:n], n) // Covered leaves a divergence out
				for _, key := range Keys {
					sel := slices.IndexFunc(want.Resources, func(s Selection) bool { return s.Key == key })
					covered := sel >= 0 && physical.Resources[sel].Covered
					if got := f.Covered(key); got != covered {
						t.Fatalf("%v: with seq %d as head, Covered(%s) = %v, the model says %v\n%s", e, n, key, got, covered, dump(e.Lineage))
					}
					st, ok := f.State(key)
					if ok != (sel >= 0) {
						t.Fatalf("%v: with seq %d as head, State(%s) ok = %v, bound = %v", e, n, key, ok, sel >= 0)
					}
					if ok && (st.Generation != Generation(events[:n], key) || !slices.Equal(st.InFlight, InFlight(events[:n], key))) {
						t.Fatalf("%v: with seq %d as head, State(%s) = generation %d in flight %v; the model says %d, %v\n%s",
							e, n, key, st.Generation, st.InFlight, Generation(events[:n], key), InFlight(events[:n], key), dump(e.Lineage))
					}
				}
			}
			for n := uint64(1); n <= uint64(len(events)); n++ {
				p, err := f.Point(n)
				if err != nil {
					t.Fatalf("%v: Point(%d): %v", e, n, err)
				}
				if diff := cmp.Diff(PointAt(events, n), modelOf(p)); diff != "" {
					t.Fatalf("%v: Point(%d) of the whole lineage differs from the model (-model +fold):\n%s\n%s", e, n, diff, dump(e.Lineage))
				}
			}
		}
	})
}

// foldViews is everything the three folds answer about a lineage, so that
// two ways of folding it can be compared.
type foldViews struct {
	Points   []coverage.Point
	Windows  []coverage.Window
	Covered  map[string]bool
	States   map[string]eventlog.ResourceState
	Counts   map[string]int
	Due      map[string]bool
	Policies map[string]policy.Checkpoints
	Replay   replayView
}

// replayView is what a replay.State tells.
type replayView struct {
	Agent      string
	Input      []byte
	Status     replay.Status
	Output     []byte
	Error      string
	Code       eventlog.FailureCode
	Dispatches uint64
	Head       uint64
	Parent     eventlog.ID
	ForkAt     uint64
	Selections []eventlog.ForkSelection
	Steps      []replay.Step
	Bindings   []replay.Binding
	// The spend and budget (DESIGN §17, §21½.9).
	Tokens    eventlog.Tokens
	Budget    eventlog.Limits
	LLMCalls  uint64
	ToolCalls uint64
}

// views reads everything the folds answer after they folded events 1..head.
func views(t *rapid.T, cf *coverage.Fold, pc *policy.Counter, rs *replay.State, head uint64) foldViews {
	v := foldViews{Covered: map[string]bool{}, States: map[string]eventlog.ResourceState{}, Counts: map[string]int{},
		Due: map[string]bool{}, Policies: map[string]policy.Checkpoints{}, Windows: cf.Windows()}
	for n := uint64(1); n <= head; n++ {
		p, err := cf.Point(n)
		if err != nil {
			t.Fatalf("Point(%d): %v", n, err)
		}
		v.Points = append(v.Points, p)
	}
	for _, key := range Keys {
		v.Covered[key] = cf.Covered(key)
		if st, ok := cf.State(key); ok {
			v.States[key] = st
		}
		v.Counts[key], v.Due[key] = pc.Count(key), pc.Due(key)
		if p, ok := pc.Policy(key); ok {
			v.Policies[key] = p
		}
	}
	v.Replay = replayView{rs.Agent, rs.Input, rs.Status, rs.Output, rs.Error, rs.Code, rs.Dispatches, rs.Head,
		rs.Parent, rs.ForkAt, rs.Selections, rs.Steps(), rs.Bindings(), rs.Tokens, rs.Budget, rs.LLMCalls, rs.ToolCalls}
	return v
}

// DESIGN §8.3: the folds are pure and incremental. For every generated
// lineage and a drawn N, folding events 1..N in one go (replay.Fold,
// coverage.FoldEvents, policy.Counter over the store's iterator) and folding
// them in a drawn split — Apply in chunks, with every read method called
// between chunks — gives the same answers; folding twice gives the same
// answers again.
func TestFoldsAreIncremental(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t, nil, nil)
		for _, e := range w.Execs {
			checkIncremental(t, w, e)
		}
	})
}

// checkIncremental is TestFoldsAreIncremental for one execution, at a
// drawn N.
func checkIncremental(t *rapid.T, w *World, e *Exec) {
	ctx := context.Background()
	events := e.Lineage.Events
	head := rapid.Uint64Range(1, uint64(len(events))).Draw(t, "N")

	// In one go, from the store.
	whole := func() foldViews {
		upTo := func(yield func(eventlog.Event, error) bool) {
			for ev, err := range w.Store.Events(ctx, e.ID, 1) {
				if err == nil && ev.Seq > head {
					return
				}
				if !yield(ev, err) {
					return
				}
			}
		}
		cf, err := coverage.FoldEvents(upTo)
		if err != nil {
			t.Fatalf("%v: coverage.FoldEvents: %v", e, err)
		}
		rs, err := replay.Fold(upTo)
		if err != nil {
			t.Fatalf("%v: replay.Fold: %v", e, err)
		}
		pc := policy.NewCounter()
		for ev, err := range upTo {
			if err != nil {
				t.Fatalf("%v: read: %v", e, err)
			}
			if err := pc.Apply(ev); err != nil {
				t.Fatalf("%v: Counter.Apply(%d): %v", e, ev.Seq, err)
			}
		}
		return views(t, cf, pc, rs, head)
	}
	once := whole()
	if diff := cmp.Diff(once, whole()); diff != "" {
		t.Fatalf("%v: folding 1..%d twice gives different answers:\n%s", e, head, diff)
	}

	// In chunks, reading everything between them.
	cf, pc, rs := coverage.New(), policy.NewCounter(), replay.New()
	for from := uint64(1); from <= head; {
		to := rapid.Uint64Range(from, head).Draw(t, "chunk ends at")
		for _, ev := range events[from-1 : to] {
			if err := cf.Apply(ev); err != nil {
				t.Fatalf("%v: coverage Apply(%d): %v", e, ev.Seq, err)
			}
			if err := pc.Apply(ev); err != nil {
				t.Fatalf("%v: Counter.Apply(%d): %v", e, ev.Seq, err)
			}
			if err := rs.Apply(ev); err != nil {
				t.Fatalf("%v: replay Apply(%d): %v", e, ev.Seq, err)
			}
		}
		views(t, cf, pc, rs, to)
		from = to + 1
	}
	if diff := cmp.Diff(once, views(t, cf, pc, rs, head)); diff != "" {
		t.Fatalf("%v: folding 1..%d in one go and in chunks differ (-one go +chunks):\n%s\n%s", e, head, diff, dump(e.Lineage))
	}
}

// DESIGN §8.4 (fold level): policy.Counter's Count and Due agree with the
// model's count of counted calls — tool calls and local steps that affect
// the resource and reached a terminal event since its newest binding or
// capture; never replayed, denied or LLM calls — after every event of
// every generated lineage, and Policy is the newest binding's.
func TestPolicyCounterAgreesWithModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t, nil, nil)
		for _, e := range w.Execs {
			events := e.Lineage.Events
			c := policy.NewCounter()
			for i, ev := range events {
				n := uint64(i + 1)
				if err := c.Apply(ev); err != nil {
					t.Fatalf("%v: Apply(%d): %v", e, n, err)
				}
				for _, key := range Keys {
					count, due := CountSince(events, n, key), Due(events, n, key)
					if c.Count(key) != count || c.Due(key) != due {
						t.Fatalf("%v: after seq %d, %s: Count %d Due %v; the model says %d, %v\n%s",
							e, n, key, c.Count(key), c.Due(key), count, due, dump(e.Lineage))
					}
					p, ok := c.Policy(key)
					b := Binding(events[:n], key)
					if ok != (b != nil) || (ok && (p.EverySteps != b.EverySteps || p.OnCompletion != b.OnCompletion)) {
						t.Fatalf("%v: after seq %d, Policy(%s) = %+v, %v; newest binding %+v", e, n, key, p, ok, b)
					}
				}
			}
		}
	})
}

// DESIGN §8.5: a fork of a fork at M equals a fork of the original at M when
// M is in the shared prefix — the same plan (but for its parent) and the
// same events 1..M. "The original" is the original as it stood when the
// fork was made: a fork knows only the captures its parent had written by
// then (the fork.created it carries), so a capture the original appends
// later (a completion capture, a baseline in its own append) may cover M in
// the original and not in the fork. So at every M of the shared prefix the
// fork must plan what the original planned when the fork was made, and what
// the original plans now whenever the model's answer for the original at M
// has not changed since; for one drawn M both are forked and the forks'
// events 1..M compared.
func TestForkOfForkEqualsForkOfOriginal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plans := map[eventlog.ID]fork.Plan{}
		// then[fork ID][M-1] is the original's plan at M when the fork was made.
		then := map[eventlog.ID][]fork.Plan{}
		ctx := context.Background()
		setup := func(w *World) {
			withForkCreate(plans)(w)
			check := w.OnFork
			w.OnFork = func(t *rapid.T, parent *Exec, at uint64, f *Exec) {
				check(t, parent, at, f)
				for m := uint64(1); m <= at; m++ {
					p, err := fork.PlanFromIndex(ctx, w.Store, parent.ID, m)
					if err != nil {
						t.Fatalf("PlanFromIndex(%v, %d): %v", parent, m, err)
					}
					then[f.ID] = append(then[f.ID], p)
				}
			}
		}
		w := genWorld(t, setup, nil)
		for _, f := range w.Execs {
			if f.Parent == nil {
				continue
			}
			e := f.Parent
			plan := func(id eventlog.ID, m uint64) fork.Plan {
				p, err := fork.PlanFromIndex(ctx, w.Store, id, m)
				if err != nil {
					t.Fatalf("PlanFromIndex(%s, %d): %v", id, m, err)
				}
				return p
			}
			for m := uint64(1); m <= f.At; m++ {
				ofFork, ofOriginal := plan(f.ID, m), plan(e.ID, m)
				if diff := cmp.Diff(planPoint(then[f.ID][m-1]), planPoint(ofFork)); diff != "" {
					t.Fatalf("fork %v at %d plans differently from its original %v at %d when the fork was made (-original +fork):\n%s\n%s",
						f, m, e, m, diff, dump(f.Lineage))
				}
				if samePoint(e.Lineage.Events[:f.ParentHead], e.Lineage.Events, m) {
					if diff := cmp.Diff(planPoint(ofOriginal), planPoint(ofFork)); diff != "" {
						t.Fatalf("fork %v at %d plans differently from its original %v at %d (-original +fork):\n%s\n%s",
							f, m, e, m, diff, dump(f.Lineage))
					}
				}
			}
			m := rapid.Uint64Range(1, f.At).Draw(t, "M in the shared prefix of "+f.ID.String())
			ofFork, ofOriginal := plan(f.ID, m), plan(e.ID, m)
			// Fork both and compare what was written.
			a, pa, err := fork.Create(ctx, w.Store, f.ID, m, time.Time{})
			if err != nil {
				t.Fatalf("fork.Create(%v, %d): %v", f, m, err)
			}
			b, pb, err := fork.Create(ctx, w.Store, e.ID, m, time.Time{})
			if err != nil {
				t.Fatalf("fork.Create(%v, %d): %v", e, m, err)
			}
			if diff := cmp.Diff(planPoint(ofFork), planPoint(pa)); diff != "" {
				t.Fatalf("fork.Create(%v, %d) planned differently from PlanFromIndex:\n%s", f, m, diff)
			}
			if diff := cmp.Diff(planPoint(ofOriginal), planPoint(pb)); diff != "" {
				t.Fatalf("fork.Create(%v, %d) planned differently from PlanFromIndex:\n%s", e, m, diff)
			}
			ea, err := w.encodedOf(a, 1)
			if err != nil {
				t.Fatalf("read fork: %v", err)
			}
			eb, err := w.encodedOf(b, 1)
			if err != nil {
				t.Fatalf("read fork: %v", err)
			}
			if len(ea) != int(m)+1 || len(eb) != int(m)+1 {
				t.Fatalf("forks at %d have %d and %d events, want %d", m, len(ea), len(eb), m+1)
			}
			for i := range m {
				if !slices.Equal(ea[i], eb[i]) {
					t.Fatalf("fork of %v and fork of %v at %d differ at event %d", f, e, m, i+1)
				}
			}
		}
	})
}

// samePoint reports whether the model's point at m is the same for two
// versions of one lineage (a prefix of it and the whole).
func samePoint(a, b []eventlog.Event, m uint64) bool {
	return cmp.Equal(PointAt(a, m), PointAt(b, m))
}
