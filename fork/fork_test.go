package fork_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openStore(t testing.TB) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// agent builds the events of a coder-agent-like execution: a workspace
// and a db (EverySteps every, CoverageReuse reuse), LLM calls, write_file
// calls that affect the workspace, insert calls that affect the db,
// read_file calls that affect nothing, and captures when the policy says so.
type agent struct {
	t      tb
	prefix []eventlog.Event // the lineage before the agent's own events
	events []eventlog.Event // the agent's own events
	fold   *coverage.Fold   // of prefix and events, for the generations
	counts map[string]int   // counted calls since the last capture
	every  int
	steps  int
}

// newAgent starts a dispatch after prefix (nil for a new root, whose first
// event is execution.created) that binds both resources, from[key] or the
// initial environment (then with a baseline capture).
func newAgent(t tb, prefix []eventlog.Event, every int, reuse bool, from map[string]string) *agent {
	a := &agent{t: t, prefix: prefix, counts: map[string]int{}, every: every, fold: coverage.New()}
	for _, ev := range prefix {
		a.apply(ev)
	}
	if len(prefix) == 0 {
		a.add(&eventlog.ExecutionCreated{Agent: "coder"})
	}
	a.add(&eventlog.DispatchStarted{Dispatch: 1})
	for _, key := range []string{"db", "workspace"} {
		a.add(&eventlog.ResourceBound{Key: key, DriverID: "test." + key, Binding: json.RawMessage(`{}`),
			From: from[key], EverySteps: every, OnCompletion: true, CoverageReuse: reuse})
		if from[key] == "" {
			a.capture(key, eventlog.CaptureBaseline)
		}
	}
	return a
}

func (a *agent) head() uint64 { return uint64(len(a.prefix) + len(a.events)) }

func (a *agent) add(p eventlog.Payload) {
	ev := eventlog.Event{Seq: a.head() + 1, Time: epoch, Data: p}
	a.apply(ev)
	a.events = append(a.events, ev)
}

func (a *agent) apply(ev eventlog.Event) {
	if err := a.fold.Apply(ev); err != nil {
		a.t.Fatal(err)
	}
}

// capture appends a capture of key at its current generation, which the
// coverage fold's State reports.
func (a *agent) capture(key string, reason eventlog.CaptureReason) {
	st, _ := a.fold.State(key)
	a.add(&eventlog.ResourceCaptured{Key: key, Ref: fmt.Sprintf("%s-%d", key, a.head()+1),
		Generation: st.Generation, Reason: reason})
}

// step appends one live call of kind k affecting keys, its outcome and the
// captures the policy makes due.
func (a *agent) step(k eventlog.StepKind, target string, keys ...string) {
	a.steps++
	id := fmt.Sprintf("%s#%d", target, a.steps)
	a.add(&eventlog.StepStarted{StepID: id, StepKind: k, Target: target, Resources: keys,
		Idempotency: eventlog.SafeToRetry, Attempt: 1})
	a.add(&eventlog.StepSucceeded{StepID: id, Result: []byte(`"ok"`)})
	for _, key := range keys {
		a.counts[key]++
		if a.counts[key] >= a.every {
			a.counts[key] = 0
			a.capture(key, eventlog.CaptureSteps)
		}
	}
}

// run appends n calls of the coder agent's mix, drawn by pick(4).
func (a *agent) run(n int, pick func(int) int) {
	for range n {
		switch pick(4) {
		case 0:
			a.step(eventlog.StepLLM, "llm")
		case 1:
			a.step(eventlog.StepTool, "write_file", "workspace")
		case 2:
			a.step(eventlog.StepTool, "read_file")
		default:
			a.step(eventlog.StepLocal, "insert", "db")
		}
	}
}

// writeRoot writes a root execution's events to s.
func writeRoot(t tb, s eventlog.Log, events []eventlog.Event) eventlog.ID {
	t.Helper()
	ctx := context.Background()
	id, err := s.Create(ctx, events[0].Data.(*eventlog.ExecutionCreated), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) > 1 {
		if _, err := s.Append(ctx, id, 1, events[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// readAll reads id's whole lineage.
func readAll(t tb, s eventlog.Log, id eventlog.ID) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	for ev, err := range s.Events(context.Background(), id, 1) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// execution is one execution in the store and its lineage's events.
type execution struct {
	id     eventlog.ID
	events []eventlog.Event
}

// buildFamily writes a root coder agent, forks of it and forks of those
// forks (each fork runs on with its own calls), drawing choices with r.
func buildFamily(t *rapid.T, s *pebblestore.Store) []execution {
	ctx := context.Background()
	every := rapid.IntRange(1, 4).Draw(t, "every")
	reuse := rapid.Bool().Draw(t, "reuse")
	pick := func(n int) int { return rapid.IntRange(0, n-1).Draw(t, "call") }

	root := newAgent(t, nil, every, reuse, nil)
	root.run(rapid.IntRange(0, 25).Draw(t, "root calls"), pick)
	family := []execution{{writeRoot(t, s, root.events), root.events}}

	for range rapid.IntRange(0, 3).Draw(t, "forks") {
		parent := rapid.SampledFrom(family).Draw(t, "parent")
		at := rapid.Uint64Range(1, uint64(len(parent.events))).Draw(t, "at")
		id, plan, err := fork.Create(ctx, s, parent.id, at, epoch)
		if err != nil {
			t.Fatal(err)
		}
		events := readAll(t, s, id)
		from := map[string]string{}
		for _, sel := range plan.Selections {
			from[sel.Key] = sel.Ref
		}
		own := newAgent(t, events, every, reuse, from)
		own.run(rapid.IntRange(0, 10).Draw(t, "fork calls"), pick)
		if _, err := s.Append(ctx, id, at+1, own.events...); err != nil {
			t.Fatal(err)
		}
		family = append(family, execution{id, append(events, own.events...)})
	}
	return family
}

// TestPlansAgree: for every seq of every execution of generated families
// (forks and forks of forks included), the plan from the index equals the
// plan from a fold of the lineage, and Event records it. DESIGN §5, §8.2.
func TestPlansAgree(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		for _, e := range buildFamily(t, s) {
			f, err := coverage.FoldEvents(s.Events(ctx, e.id, 1))
			if err != nil {
				t.Fatal(err)
			}
			for at := uint64(1); at <= f.Head(); at++ {
				want, err := fork.PlanFromFold(f, e.id, at)
				if err != nil {
					t.Fatal(err)
				}
				got, err := fork.PlanFromIndex(ctx, s, e.id, at)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("plan of %s at %d (-fold +index):\n%s", e.id, at, diff)
				}
				fc := got.Event()
				if fc.Parent != e.id || fc.At != at || len(fc.Selections) != len(got.Selections) {
					t.Fatalf("Event() = %+v for plan %+v", fc, got)
				}
				for i, sel := range fc.Selections {
					p := got.Selections[i]
					if sel != (eventlog.ForkSelection{Key: p.Key, Ref: p.Ref, CapturedAt: p.CapturedAt, Generation: p.Generation, Covered: p.Covered}) {
						t.Fatalf("Event().Selections[%d] = %+v, plan has %+v", i, sel, p)
					}
				}
			}
		}
	})
}

// TestCreateWritesHeaderAndForkCreated: Create calls Fork once and nothing
// else that writes; the fork is one more execution whose lineage is the
// parent's 1..at then the plan's fork.created; forking never changes an
// existing event of any execution. DESIGN §5 "Forking", §8.7.
func TestCreateWritesHeaderAndForkCreated(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		family := buildFamily(t, s)
		before := map[eventlog.ID][]eventlog.Event{}
		for _, e := range family {
			before[e.id] = readAll(t, s, e.id)
		}
		n := countExecutions(t, s)

		parent := rapid.SampledFrom(family).Draw(t, "parent")
		at := rapid.Uint64Range(1, uint64(len(parent.events))).Draw(t, "at")
		rec := &recordingLog{IndexedLog: s}
		id, plan, err := fork.Create(ctx, rec, parent.id, at, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if rec.forks != 1 || rec.writes != 0 {
			t.Fatalf("Create made %d Fork and %d other writing calls, want 1 and 0", rec.forks, rec.writes)
		}
		if got := countExecutions(t, s); got != n+1 {
			t.Fatalf("%d executions after Create, want %d", got, n+1)
		}
		info, err := s.Info(ctx, id)
		if err != nil || info.Parent != parent.id || info.ForkSeq != at || info.Head != at+1 {
			t.Fatalf("Info(fork) = %+v, %v", info, err)
		}
		got := readAll(t, s, id)
		want := append(append([]eventlog.Event(nil), before[parent.id][:at]...),
			eventlog.Event{Seq: at + 1, Time: epoch, Data: plan.Event()})
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("fork's lineage (-parent 1..at + fork.created +read):\n%s", diff)
		}
		if want, _ := fork.PlanFromIndex(ctx, s, parent.id, at); !cmp.Equal(want, plan) {
			t.Fatalf("Create's plan %+v, PlanFromIndex %+v", plan, want)
		}
		for _, e := range family {
			if diff := cmp.Diff(before[e.id], readAll(t, s, e.id)); diff != "" {
				t.Fatalf("forking changed %s (-before +after):\n%s", e.id, diff)
			}
		}
	})
}

// TestForkOfForkSamePlan: a fork of a fork at M, with M in the prefix the
// two share, has the same plan as a fork of the original at M. DESIGN §8.5.
func TestForkOfForkSamePlan(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		family := buildFamily(t, s)
		child := rapid.SampledFrom(family).Draw(t, "fork")
		info, err := s.Info(ctx, child.id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Parent.IsZero() {
			t.Skip("a root execution")
		}
		m := rapid.Uint64Range(1, info.ForkSeq).Draw(t, "M")
		want, err := fork.PlanFromIndex(ctx, s, info.Parent, m)
		if err != nil {
			t.Fatal(err)
		}
		id, got, err := fork.Create(ctx, s, child.id, m, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if got.Parent != child.id || got.At != m || got.Covered != want.Covered {
			t.Fatalf("plan of the fork of a fork %+v, of the original %+v", got, want)
		}
		if diff := cmp.Diff(want.Selections, got.Selections); diff != "" {
			t.Fatalf("selections at %d (-fork of the original +fork of the fork):\n%s", m, diff)
		}
		// And the grandchild's own lineage gives the same answer again.
		again, err := fork.PlanFromIndex(ctx, s, id, m)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Selections, again.Selections); diff != "" || again.Covered != want.Covered {
			t.Fatalf("plan at %d inside the fork of the fork (-original +grandchild):\n%s", m, diff)
		}
	})
}

// TestBadInput: forking at seq 0 or past the head, an unknown or zero
// parent, or a nil log is refused with a classified error and writes
// nothing (DESIGN §7).
func TestBadInput(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	a := newAgent(t, nil, 2, false, nil)
	id := writeRoot(t, s, a.events)
	head := uint64(len(a.events))
	f, err := coverage.FoldEvents(s.Events(ctx, id, 1))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		parent eventlog.ID
		at     uint64
		want   error
	}{
		{"at 0", id, 0, eventlog.ErrInvalid},
		{"past the head", id, head + 1, eventlog.ErrInvalid},
		{"unknown parent", eventlog.NewID(), 1, eventlog.ErrNotFound},
		{"zero parent", eventlog.ID{}, 1, eventlog.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := countExecutions(t, s)
			rec := &recordingLog{IndexedLog: s}
			if _, _, err := fork.Create(ctx, rec, c.parent, c.at, epoch); !errors.Is(err, c.want) {
				t.Errorf("Create = %v, want an error wrapping %v", err, c.want)
			}
			if rec.forks+rec.writes != 0 || countExecutions(t, s) != n {
				t.Errorf("Create wrote: %d forks, %d writes", rec.forks, rec.writes)
			}
			if _, err := fork.PlanFromIndex(ctx, s, c.parent, c.at); !errors.Is(err, c.want) {
				t.Errorf("PlanFromIndex = %v, want an error wrapping %v", err, c.want)
			}
			if c.want == eventlog.ErrInvalid {
				if _, err := fork.PlanFromFold(f, c.parent, c.at); !errors.Is(err, c.want) {
					t.Errorf("PlanFromFold = %v, want an error wrapping %v", err, c.want)
				}
			}
		})
	}
	if _, _, err := fork.Create(ctx, nil, id, 1, epoch); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("Create(nil log) = %v", err)
	}
	if _, err := fork.PlanFromFold(nil, id, 1); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("PlanFromFold(nil) = %v", err)
	}
	if diff := cmp.Diff(a.events, readAll(t, s, id), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("bad input changed the parent (-written +read):\n%s", diff)
	}
}

// TestPlanWithoutResources: an execution without resources forks covered,
// with no selections (DESIGN §5).
func TestPlanWithoutResources(t *testing.T) {
	s := openStore(t)
	id := writeRoot(t, s, []eventlog.Event{{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "a"}}})
	fid, plan, err := fork.Create(context.Background(), s, id, 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Covered || plan.Selections != nil || plan.Event().Selections != nil {
		t.Errorf("plan = %+v", plan)
	}
	if got := readAll(t, s, fid); len(got) != 2 || got[1].Kind() != eventlog.KindForkCreated {
		t.Errorf("fork lineage = %+v", got)
	}
}

func countExecutions(t tb, s eventlog.Log) int {
	t.Helper()
	n := 0
	for _, err := range s.List(context.Background(), eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// recordingLog counts the calls that write.
type recordingLog struct {
	eventlog.IndexedLog
	forks, writes int
}

func (r *recordingLog) Create(ctx context.Context, c *eventlog.ExecutionCreated, at time.Time, opts ...eventlog.CreateOption) (eventlog.ID, error) {
	r.writes++
	return r.IndexedLog.Create(ctx, c, at, opts...)
}

func (r *recordingLog) Append(ctx context.Context, id eventlog.ID, head uint64, events ...eventlog.Event) (uint64, error) {
	r.writes++
	return r.IndexedLog.Append(ctx, id, head, events...)
}

func (r *recordingLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, events ...eventlog.Event) (uint64, error) {
	r.writes++
	return r.IndexedLog.AppendUnsynced(ctx, id, head, events...)
}

func (r *recordingLog) Fork(ctx context.Context, parent eventlog.ID, at uint64, fc *eventlog.ForkCreated, t time.Time) (eventlog.ID, error) {
	r.forks++
	return r.IndexedLog.Fork(ctx, parent, at, fc, t)
}

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
