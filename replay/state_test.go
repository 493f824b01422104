package replay

import (
	"errors"
	"fmt"
	"go/build"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/eventtext"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestFoldSplitAnywhere: over generated well-formed lineages, Fold of all
// events, Apply one by one, and Fold of a prefix followed by Apply of the
// rest give identical states, and that state agrees with the generator's
// model of it (DESIGN §8.3).
func TestFoldSplitAnywhere(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 150).Draw(t, "events")
		h := generate(rapidChooser{t}, n, uniform)

		whole, err := Fold(seqOf(h.events))
		if err != nil {
			t.Fatalf("Fold: %v\n%s", err, eventtext.Format(h.events))
		}
		one := New()
		for _, ev := range h.events {
			if err := one.Apply(ev); err != nil {
				t.Fatalf("Apply: %v", err)
			}
		}
		k := rapid.IntRange(0, n).Draw(t, "split")
		split, err := Fold(seqOf(h.events[:k]))
		if err != nil {
			t.Fatalf("Fold of %d events: %v", k, err)
		}
		for _, ev := range h.events[k:] {
			if err := split.Apply(ev); err != nil {
				t.Fatalf("Apply after the split: %v", err)
			}
		}
		if d := cmp.Diff(whole, one, cmp.AllowUnexported(State{}, stepChunks{})); d != "" {
			t.Fatalf("Fold vs Apply one by one (-fold +apply):\n%s", d)
		}
		if d := cmp.Diff(whole, split, cmp.AllowUnexported(State{}, stepChunks{})); d != "" {
			t.Fatalf("Fold vs split at %d (-fold +split):\n%s", k, d)
		}
		checkModel(t, h, whole)
	})
}

// checkModel compares a folded state with the generator's model.
func checkModel(t *rapid.T, h *history, s *State) {
	if s.Head != h.head() || s.Status != h.status || s.Dispatches != h.dispatches {
		t.Fatalf("head %d status %s dispatches %d, model %d %s %d", s.Head, s.Status, s.Dispatches, h.head(), h.status, h.dispatches)
	}
	steps := s.Steps()
	if len(steps) != len(h.order) {
		t.Fatalf("%d steps, model %d", len(steps), len(h.order))
	}
	for i, st := range steps {
		m := h.steps[h.order[i]]
		if st.ID != h.order[i] || st.Status != m.status || st.Attempts != m.attempts || st.Kind != m.kind || st.Target != m.target {
			t.Fatalf("step %d = %+v, model %s %+v", i, st, h.order[i], *m)
		}
	}
	if s.CancelRequested != h.cancelReq || !slices.Equal(s.Diverged, h.diverged) {
		t.Fatalf("cancel requested %v diverged %v, model %v %v", s.CancelRequested, s.Diverged, h.cancelReq, h.diverged)
	}
	awaited := s.Awaited()
	for _, a := range s.Approvals() {
		if a.Pending() != slices.Contains(h.approvals, a.StepID) && !h.terminal {
			t.Fatalf("approval %+v: pending %v, model awaits %v", a, a.Pending(), h.approvals)
		}
	}
	if !slices.Equal(awaited, h.approvals) {
		t.Fatalf("awaited approvals %v, model %v", awaited, h.approvals)
	}
	unfired := 0
	for _, tm := range s.Timers() {
		if tm.FiredAt == 0 {
			unfired++
		}
	}
	if unfired != len(h.timers) {
		t.Fatalf("%d unfired timers, model %v", unfired, h.timers)
	}
	for id := range h.overridden {
		if st, ok := s.Step(id); !ok || st.Status != StepSucceeded || !st.Overridden {
			t.Fatalf("overridden step %s: %+v, %v", id, st, ok)
		}
	}
	if st := s.StatusState(); st.Status != s.Status || st.Head != s.Head {
		t.Fatalf("StatusState %+v, state status %s head %d", st, s.Status, s.Head)
	}
	bindings := s.Bindings()
	if len(bindings) != len(h.bound) {
		t.Fatalf("%d bindings, model %v", len(bindings), h.bound)
	}
	for i, b := range bindings {
		if b.Key != h.bound[i] || b.Seq != h.boundAt[b.Key] || b.Own != (b.Seq > h.forkSeq) {
			t.Fatalf("binding %+v, model key %s seq %d fork at %d", b, h.bound[i], h.boundAt[b.Key], h.forkSeq)
		}
	}
}

func mustParse(t *testing.T, text string) []eventlog.Event {
	t.Helper()
	evs, err := eventtext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Every Step and Binding handed out is a copy, and Apply keeps copies of
// the event's bytes.
func TestCopies(t *testing.T) {
	evs := mustParse(t, "created agent=a input=in\ndispatch 1\n"+
		"bound ws driver=d config=`{\"a\":1}` binding=`{\"b\":2}`\n"+
		"started s1 tool t args=A affects=ws\nsucceeded s1 result=R\ncompleted output=O\n"+
		"fork parent=P at=6 select=ws:r@3/g1/covered\n")
	s, err := Fold(seqOf(evs))
	if err != nil {
		t.Fatal(err)
	}
	before := dump(s)
	// Change every byte the events held.
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.ExecutionCreated:
			p.Input[0] = 'X'
		case *eventlog.ResourceBound:
			p.Configuration[0], p.Binding[0] = 'X', 'X'
		case *eventlog.StepStarted:
			p.Args[0], p.Resources[0] = 'X', "X"
		case *eventlog.StepSucceeded:
			p.Result[0] = 'X'
		case *eventlog.ForkCreated:
			p.Selections[0].Ref = "X"
		}
	}
	// And everything handed out.
	st, _ := s.Step("s1")
	st.Args[0], st.Result[0], st.Resources[0] = 'Y', 'Y', "Y"
	s.Steps()[0].Args[0] = 'Z'
	b, _ := s.Binding("ws")
	b.Configuration[0], b.Binding[0] = 'Y', 'Y'
	s.Bindings()[0].Binding[0] = 'Z'
	if after := dump(s); after != before {
		t.Errorf("state changed through a copy:\n%s\nwas:\n%s", after, before)
	}
}

func TestLookups(t *testing.T) {
	s, err := Fold(seqOf(mustParse(t, "created agent=a\ndispatch 1\nbound ws driver=d\nfork parent=P at=3 select=ws:@0/g1\n")))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Step("nope"); ok {
		t.Error("Step of an unknown id found something")
	}
	if _, ok := s.Binding("db"); ok {
		t.Error("Binding of an unbound key found something")
	}
	if sel, ok := s.Selection("ws"); !ok || sel != (eventlog.ForkSelection{Key: "ws", Generation: 1}) {
		t.Errorf("Selection(ws) = %+v, %v", sel, ok)
	}
	for _, k := range []string{"a", "db", "zz"} {
		if _, ok := s.Selection(k); ok {
			t.Errorf("Selection(%q) found something", k)
		}
	}
	if s.Parent != (eventlog.ID{'P'}) || s.ForkAt != 3 {
		t.Errorf("Parent %v ForkAt %d", s.Parent, s.ForkAt)
	}
	root, _ := Fold(seqOf(mustParse(t, "created agent=a\n")))
	if _, ok := root.Selection("ws"); ok || !root.Parent.IsZero() || root.ForkAt != 0 {
		t.Errorf("a root has fork data: %+v", root)
	}
}

// Started answers for steps with a step.started only: not for a denied
// step, an override of a step the lineage does not hold, or an unknown id.
func TestStarted(t *testing.T) {
	s, err := Fold(seqOf(mustParse(t, `created agent=a
dispatch 1
started s1 tool t
denied s2 tool t
started s3 tool t
cancelled s3
`)))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"s1": true, "s2": false, "s3": true, "s4": false, "": false} {
		if got := s.Started(id); got != want {
			t.Errorf("Started(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestFoldErrors(t *testing.T) {
	empty, err := Fold(seqOf(nil))
	if err != nil || dump(empty) != dump(New()) {
		t.Errorf("Fold of nothing = %v, %v; want New()", empty, err)
	}

	boom := errors.New("disk on fire")
	evs := mustParse(t, "created agent=a\ndispatch 1\n")
	failing := func(yield func(eventlog.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
		yield(eventlog.Event{}, boom)
	}
	s, err := Fold(iter.Seq2[eventlog.Event, error](failing))
	if s != nil || !errors.Is(err, boom) || !strings.Contains(err.Error(), "replay: reading the lineage after seq 2") {
		t.Errorf("Fold with a read error = %v, %v", s, err)
	}

	s, err = Fold(seqOf(mustParse(t, "created agent=a\n@5 dispatch 1\n")))
	if s != nil || !errors.Is(err, eventlog.ErrInvalid) || !strings.Contains(err.Error(), "replay: seq 5:") {
		t.Errorf("Fold of a gap = %v, %v", s, err)
	}

	if err := New().Apply(eventlog.Event{Seq: 1}); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("Apply without payload = %v", err)
	}
	if err := New().Apply(eventlog.Event{Seq: 1, Data: (*eventlog.ExecutionCreated)(nil)}); !errors.Is(err, eventlog.ErrInvalid) {
		t.Error("Apply of a nil payload pointer succeeded")
	}
}

// DESIGN §2: replay imports only eventlog of forkline's packages.
func TestImportsOnlyEventlog(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/forkline/forkline") && imp != "github.com/forkline/forkline/eventlog" {
			t.Errorf("replay imports %s; it may import only eventlog of forkline's packages", imp)
		}
	}
}

// A step.started of a step already started must continue it: only a
// started or cancelled step runs again, as the same kind and target, with
// the next attempt. Anything else is ErrInvalid naming the seq, and the
// State is unchanged.
func TestRestartErrors(t *testing.T) {
	const prefix = "created agent=a\ndispatch 1\n"
	tests := []struct {
		events string
		want   string
	}{
		{"started s1 tool t\nsucceeded s1\nstarted s1 tool t attempt=2", "which is already succeeded"},
		{"started s1 tool t\nfailed s1 err=x\nstarted s1 tool t attempt=2", "which is already failed"},
		{"started s1 tool t\nstarted s1 local t attempt=2", `as local "t", it started as tool "t"`},
		{"started s1 tool t\nstarted s1 tool u attempt=2", `as tool "u", it started as tool "t"`},
		{"started s1 tool t\ncancelled s1\nstarted s1 tool t attempt=3", "has attempt 3, want 2"},
		{"started s1 tool t\nstarted s1 tool t", "has attempt 1, want 2"},
	}
	for _, tc := range tests {
		evs := mustParse(t, prefix+tc.events)
		s := New()
		for _, ev := range evs[:len(evs)-1] {
			if err := s.Apply(ev); err != nil {
				t.Fatalf("%q: Apply(seq %d): %v", tc.events, ev.Seq, err)
			}
		}
		before := dump(s)
		last := evs[len(evs)-1]
		err := s.Apply(last)
		if !errors.Is(err, eventlog.ErrInvalid) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), fmt.Sprintf("seq %d", last.Seq)) {
			t.Errorf("%q: Apply = %v, want ErrInvalid at seq %d with %q", tc.events, err, last.Seq, tc.want)
		}
		if dump(s) != before {
			t.Errorf("%q: the failed Apply changed the state", tc.events)
		}
	}
	// The accepted cases: a cancelled step and an orphan run again.
	for _, ok := range []string{
		"started s1 tool t\ncancelled s1\nstarted s1 tool t attempt=2",
		"started s1 tool t\ndispatch 2\nstarted s1 tool t attempt=2",
	} {
		s := New()
		for _, ev := range mustParse(t, prefix+ok) {
			if err := s.Apply(ev); err != nil {
				t.Errorf("%q: Apply(seq %d): %v", ok, ev.Seq, err)
			}
		}
		if st, _ := s.Step("s1"); st.Attempts != 2 || st.Status != StepStarted {
			t.Errorf("%q: step %+v, want attempt 2 started", ok, st)
		}
	}
}

// Lookup returns the step's index in order of first appearance, -1 for an
// override of a step the lineage does not hold (found) and for an unknown
// id (not found).
func TestLookupIndex(t *testing.T) {
	s, err := Fold(seqOf(mustParse(t, `created agent=a
dispatch 1
started s1 tool t
succeeded s1 result=a
started s2 tool t
fork parent=P at=5 override=s1:edited override=s3:new
`)))
	if err != nil {
		t.Fatal(err)
	}
	type found struct {
		Step  Step
		Index int
		OK    bool
	}
	lookup := func(id string) found {
		st, i, ok := s.Lookup(id)
		return found{st, i, ok}
	}
	s1, _ := s.Step("s1")
	s2, _ := s.Step("s2")
	for id, want := range map[string]found{
		"s1": {s1, 0, true},
		"s2": {s2, 1, true},
		"s3": {Step{ID: "s3", Status: StepSucceeded, Result: []byte("new"), Overridden: true}, -1, true},
		"s4": {Step{}, -1, false},
	} {
		if d := cmp.Diff(want, lookup(id)); d != "" {
			t.Errorf("Lookup(%q) (-want +got):\n%s", id, d)
		}
	}
}

// At returns the i-th step for i in [0, Len()) and panics, naming the
// index, outside it.
func TestAtRange(t *testing.T) {
	s, err := Fold(seqOf(mustParse(t, "created agent=a\ndispatch 1\nstarted s1 tool t\nstarted s2 tool t\n")))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 || s.At(0).ID != "s1" || s.At(1).ID != "s2" {
		t.Fatalf("Len %d, At(0) %q, At(1) %q", s.Len(), s.At(0).ID, s.At(1).ID)
	}
	for _, i := range []int{-1, 2} {
		func() {
			defer func() {
				want := fmt.Sprintf("replay: step index %d out of range [0, 2)", i)
				if r := recover(); r != want {
					t.Errorf("At(%d) panicked with %v, want %q", i, r, want)
				}
			}()
			s.At(i)
		}()
	}
}

// A lineage of more steps than a chunk holds keeps every step, in order,
// at its index.
func TestManySteps(t *testing.T) {
	const n = 2*stepChunkSize + 1
	evs := []eventlog.Event{
		{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "a"}},
		{Seq: 2, Data: &eventlog.DispatchStarted{Dispatch: 1}},
	}
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		evs = append(evs,
			eventlog.Event{Seq: uint64(len(evs) + 1), Data: &eventlog.StepStarted{StepID: id, StepKind: eventlog.StepTool, Target: "t",
				Idempotency: eventlog.SafeToRetry, Attempt: 1}},
			eventlog.Event{Seq: uint64(len(evs) + 2), Data: &eventlog.StepSucceeded{StepID: id, Result: []byte(id)}})
	}
	s, err := Fold(seqOf(evs))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != n || len(s.Steps()) != n {
		t.Fatalf("Len %d, %d Steps, want %d", s.Len(), len(s.Steps()), n)
	}
	for i, st := range s.Steps() {
		id := fmt.Sprintf("s%d", i)
		want := Step{ID: id, Kind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Status: StepSucceeded,
			Attempts: 1, Result: []byte(id), StartedAt: uint64(2*i + 3), EndedAt: uint64(2*i + 4), Dispatch: 1}
		if d := cmp.Diff(want, st); d != "" {
			t.Fatalf("Steps()[%d] (-want +got):\n%s", i, d)
		}
		if d := cmp.Diff(want, s.At(i)); d != "" {
			t.Fatalf("At(%d) (-want +got):\n%s", i, d)
		}
		if _, j, _ := s.Lookup(id); j != i {
			t.Fatalf("Lookup(%q) index %d, want %d", id, j, i)
		}
	}
}

// A step.started whose Resources is an empty list folds like one without:
// the event as appended and as read back from a store (which omits an
// empty list) give the same Step.
func TestEmptyResources(t *testing.T) {
	fold := func(resources []string) Step {
		s, err := Fold(seqOf([]eventlog.Event{
			{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "a"}},
			{Seq: 2, Data: &eventlog.DispatchStarted{Dispatch: 1}},
			{Seq: 3, Data: &eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepTool, Target: "t",
				Resources: resources, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := s.Step("s1")
		return st
	}
	if d := cmp.Diff(fold(nil), fold([]string{})); d != "" {
		t.Errorf("Step with Resources nil (-) and empty (+):\n%s", d)
	}
}

// execution.created starts a lineage whatever a caller wrote into the
// fields of a State that has folded nothing (the doc lets callers change
// them): with no event folded there is no execution whose end a status
// could record. The status is then the fold's.
func TestCreatedOnEmptyState(t *testing.T) {
	s := New()
	s.Status = eventlog.StatusCompleted
	if err := s.Apply(eventlog.Event{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "a"}}); err != nil {
		t.Fatal(err)
	}
	if s.Head != 1 || s.Status != eventlog.StatusPending || s.Agent != "a" {
		t.Errorf("after execution.created: head %d, status %s, agent %q", s.Head, s.Status, s.Agent)
	}
}

// TestRunStart: Created, TraceParent and RunDispatches are the run's —
// execution.created's for a root, the newest fork.created's for a fork,
// whose TraceParent is its own even when empty — and an approval keeps
// its request's time.
func TestRunStart(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	evs := []eventlog.Event{
		{Seq: 1, Time: at(0), Data: &eventlog.ExecutionCreated{Agent: "a", TraceParent: tp}},
		{Seq: 2, Time: at(1), Data: &eventlog.DispatchStarted{Dispatch: 1}},
		{Seq: 3, Time: at(2), Data: &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool, Target: "t"}},
		{Seq: 4, Time: at(3), Data: &eventlog.DispatchStarted{Dispatch: 2}},
	}
	s := New()
	for _, ev := range evs {
		if err := s.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if !s.Created.Equal(at(0)) || s.TraceParent != tp || s.RunDispatches != 2 || s.Dispatches != 2 {
		t.Errorf("root: Created %v TraceParent %q RunDispatches %d Dispatches %d", s.Created, s.TraceParent, s.RunDispatches, s.Dispatches)
	}
	if a, _ := s.Approval("s"); !a.RequestedTime.Equal(at(2)) {
		t.Errorf("approval RequestedTime %v, want %v", a.RequestedTime, at(2))
	}
	if err := s.Apply(eventlog.Event{Seq: 5, Time: at(9), Data: &eventlog.ForkCreated{Parent: eventlog.NewID(), At: 4}}); err != nil {
		t.Fatal(err)
	}
	if !s.Created.Equal(at(9)) || s.TraceParent != "" || s.RunDispatches != 0 || s.Dispatches != 2 {
		t.Errorf("fork: Created %v TraceParent %q RunDispatches %d Dispatches %d", s.Created, s.TraceParent, s.RunDispatches, s.Dispatches)
	}
}
