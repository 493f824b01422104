package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// DeleteStore is what TestDelete needs of a store.
type DeleteStore interface {
	eventlog.IndexedLog
	eventlog.Leaser
	eventlog.Inbox
	eventlog.Deleter
}

// TestDelete checks eventlog.Deleter (DESIGN §14): a deleted execution is
// found by nothing and listed by nothing, while every surviving fork of it
// (and of its forks) reads exactly the events and index answers it read
// before; a running or leased execution is refused with nothing changed.
// open returns a fresh, empty store each call and closes it at cleanup.
func TestDelete(t *testing.T, open func(t *testing.T) DeleteStore) {
	t.Run("Gone", func(t *testing.T) { testDeleteGone(t, open(t)) })
	t.Run("Refused", func(t *testing.T) { testDeleteRefused(t, open(t)) })
	t.Run("ForksKeepTheirPrefix", func(t *testing.T) { testDeleteForks(t, open(t)) })
}

// deleteEvents are the own events, after execution.created, of an
// execution that binds a resource, runs n steps that each advance it and
// are captured, and completes.
func deleteEvents(n int) []eventlog.Event {
	evs := []eventlog.Event{
		{Data: &eventlog.DispatchStarted{Dispatch: 1}},
		{Data: &eventlog.ResourceBound{Key: "ws", DriverID: "drv", Binding: json.RawMessage(`{"n":1}`), EverySteps: 1, OnCompletion: true}},
	}
	evs = append(evs, stepEvents(n, 1)...)
	return append(evs, eventlog.Event{Data: &eventlog.ExecutionCompleted{Output: []byte(`"done"`)}})
}

// stepEvents are n captured steps on resource "ws" at generation gen.
func stepEvents(n int, gen uint64) []eventlog.Event {
	var evs []eventlog.Event
	for i := range n {
		step := fmt.Sprintf("s%d", i)
		evs = append(evs,
			eventlog.Event{Data: &eventlog.StepStarted{StepID: step, StepKind: eventlog.StepTool, Target: "t",
				Resources: []string{"ws"}, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
			eventlog.Event{Data: &eventlog.StepSucceeded{StepID: step, Result: []byte(`"ok"`)}},
			eventlog.Event{Data: &eventlog.ResourceCaptured{Key: "ws", Ref: "r-" + step, Generation: gen + uint64(i) + 1, Reason: eventlog.CaptureSteps}},
		)
	}
	return evs
}

// appendAll appends evs to id after its head and returns the new head.
func appendAll(t *testing.T, s eventlog.Log, id eventlog.ID, evs []eventlog.Event) uint64 {
	t.Helper()
	head, err := s.Head(t.Context(), id)
	if err != nil {
		t.Fatalf("Head(%s): %v", id, err)
	}
	head, err = s.Append(t.Context(), id, head, evs...)
	if err != nil {
		t.Fatalf("Append(%s): %v", id, err)
	}
	return head
}

// fork forks id at at, selecting for each bound resource its newest
// checkpoint at that point.
func fork(t *testing.T, s eventlog.IndexedLog, id eventlog.ID, at uint64) eventlog.ID {
	t.Helper()
	states, err := s.ResourceStates(t.Context(), id, at)
	if err != nil {
		t.Fatalf("ResourceStates(%s, %d): %v", id, at, err)
	}
	fc := &eventlog.ForkCreated{}
	for _, st := range states {
		fc.Selections = append(fc.Selections, eventlog.ForkSelection{Key: st.Key, Ref: st.Latest.Ref,
			CapturedAt: st.Latest.At, Generation: st.Generation, Covered: st.Latest.Generation == st.Generation})
	}
	f, err := s.Fork(t.Context(), id, at, fc, time.Now())
	if err != nil {
		t.Fatalf("Fork(%s, %d): %v", id, at, err)
	}
	return f
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("%s of a deleted execution: %v, want ErrNotFound", what, err)
	}
}

func testDeleteGone(t *testing.T, s DeleteStore) {
	ctx := t.Context()
	if err := s.Delete(ctx, eventlog.NewID()); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("Delete of an unknown ID: %v, want ErrNotFound", err)
	}
	id, err := s.Create(ctx, keyed("a", `{"x":1}`, "k1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	head := appendAll(t, s, id, deleteEvents(2))
	other := newExecution(t, s)
	if err := s.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctx, id); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	_, err = s.Head(ctx, id)
	wantNotFound(t, "Head", err)
	_, err = s.Info(ctx, id)
	wantNotFound(t, "Info", err)
	_, err = collect(t, s.Events(ctx, id, 1))
	wantNotFound(t, "Events", err)
	_, err = s.Append(ctx, id, head, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 2}})
	wantNotFound(t, "Append", err)
	_, err = s.Fork(ctx, id, 1, nil, time.Now())
	wantNotFound(t, "Fork", err)
	_, err = s.ResourceStates(ctx, id, head)
	wantNotFound(t, "ResourceStates", err)
	_, err = collect(t, s.ResourceHistory(ctx, id, "ws", 0))
	wantNotFound(t, "ResourceHistory", err)
	_, err = s.Request(ctx, id, cancelReq("late"), time.Now())
	wantNotFound(t, "Request", err)
	_, err = s.Requests(ctx, id)
	wantNotFound(t, "Requests", err)
	_, err = s.Claim(ctx, id, "w", time.Minute)
	wantNotFound(t, "Claim", err)
	if got := ids(listAll(t, s, eventlog.Filter{})); !slices.Equal(got, []eventlog.ID{other}) {
		t.Errorf("List after Delete = %v, want only %v", got, other)
	}
	// The key went with it: the same key makes a new execution.
	again, err := s.Create(ctx, keyed("a", `{"x":2}`, "k1"), time.Now())
	if err != nil {
		t.Fatalf("Create with the deleted execution's key: %v", err)
	}
	if again == id {
		t.Errorf("Create with the deleted execution's key returned the deleted execution")
	}
}

func testDeleteRefused(t *testing.T, s DeleteStore) {
	ctx := t.Context()
	running := newExecution(t, s)
	appendAll(t, s, running, []eventlog.Event{{Data: &eventlog.DispatchStarted{Dispatch: 1}}})
	claimed := newExecution(t, s) // pending, but a kernel holds it
	if _, err := s.Claim(ctx, claimed, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, id := range []eventlog.ID{running, claimed} {
		before := readEvents(t, s, id)
		info, err := s.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, id); !errors.Is(err, eventlog.ErrRunning) {
			t.Errorf("Delete of a %s execution: %v, want ErrRunning", info.Status, err)
		}
		if after := readEvents(t, s, id); !sameEvents(before, after) {
			t.Errorf("a refused Delete changed the events of %s", id)
		}
		if got, err := s.Info(ctx, id); err != nil || got.Head != info.Head || got.Status != info.Status {
			t.Errorf("after a refused Delete Info = %+v, %v; want %+v", got, err, info)
		}
	}
	// Ended (cancelled, completed) and pending executions can be deleted.
	appendAll(t, s, running, []eventlog.Event{{Data: &eventlog.ExecutionCancelled{Reason: "stop"}}})
	if err := s.Delete(ctx, running); err != nil {
		t.Errorf("Delete after the execution ended: %v", err)
	}
	if err := s.Delete(ctx, newExecution(t, s)); err != nil {
		t.Errorf("Delete of a pending execution: %v", err)
	}
}

// view is what a reader of one execution sees: its events and the index
// answer at every seq.
type view struct {
	events []eventlog.Event
	states [][]eventlog.ResourceState
}

func viewOf(t *testing.T, s eventlog.IndexedLog, id eventlog.ID) view {
	t.Helper()
	v := view{events: readEvents(t, s, id)}
	for seq := range uint64(len(v.events)) {
		st, err := s.ResourceStates(t.Context(), id, seq+1)
		if err != nil {
			t.Fatalf("ResourceStates(%s, %d): %v", id, seq+1, err)
		}
		v.states = append(v.states, st)
	}
	return v
}

func sameView(a, b view) bool {
	if !sameEvents(a.events, b.events) || len(a.states) != len(b.states) {
		return false
	}
	for i := range a.states {
		if !slices.EqualFunc(a.states[i], b.states[i], sameState) {
			return false
		}
	}
	return true
}

func sameState(x, y eventlog.ResourceState) bool {
	return x.Key == y.Key && x.Seq == y.Seq && x.Generation == y.Generation && slices.Equal(x.InFlight, y.InFlight) &&
		x.CoverageReuse == y.CoverageReuse && x.Bound == y.Bound && x.Latest == y.Latest
}

func testDeleteForks(t *testing.T, s DeleteStore) {
	ctx := t.Context()
	root := newExecution(t, s)
	appendAll(t, s, root, deleteEvents(4)) // seqs 1..16
	f1 := fork(t, s, root, 6)
	appendAll(t, s, f1, append(stepEvents(1, 2), eventlog.Event{Data: &eventlog.ExecutionCompleted{Output: []byte(`"f1"`)}}))
	f2 := fork(t, s, root, 12)
	g := fork(t, s, f1, 9) // reads root 1..6 and f1 7..9
	appendAll(t, s, g, []eventlog.Event{{Data: &eventlog.ExecutionFailed{Code: "tool_failed", Error: "no"}}})
	views := map[eventlog.ID]view{}
	for _, id := range []eventlog.ID{f1, f2, g} {
		views[id] = viewOf(t, s, id)
	}
	check := func(when string, alive ...eventlog.ID) {
		t.Helper()
		for _, id := range alive {
			if got := viewOf(t, s, id); !sameView(got, views[id]) {
				t.Errorf("%s: fork %s reads other events or index answers than before", when, id)
			}
		}
		if got := ids(listAll(t, s, eventlog.Filter{})); !slices.Equal(got, sortedIDs(alive)) {
			t.Errorf("%s: List = %v, want %v", when, got, sortedIDs(alive))
		}
	}
	steps := []struct {
		del   eventlog.ID
		alive []eventlog.ID
	}{
		{root, []eventlog.ID{f1, f2, g}},
		{f2, []eventlog.ID{f1, g}}, // the root now keeps 1..6 only
		{f1, []eventlog.ID{g}},     // f1 keeps 7..9 for g
		{g, nil},
	}
	for _, st := range steps {
		if err := s.Delete(ctx, st.del); err != nil {
			t.Fatalf("Delete(%s): %v", st.del, err)
		}
		check("after deleting "+st.del.String(), st.alive...)
	}
	// A fork of a surviving fork still reads through the tombstones.
	root2 := newExecution(t, s)
	appendAll(t, s, root2, deleteEvents(2))
	h := fork(t, s, root2, 5)
	if err := s.Delete(ctx, root2); err != nil {
		t.Fatal(err)
	}
	before := viewOf(t, s, h)
	hh := fork(t, s, h, 4)
	if got := viewOf(t, s, hh); !sameEvents(got.events[:4], before.events[:4]) {
		t.Errorf("a fork of a fork of a deleted execution reads other events than its parent")
	}
}

func sortedIDs(in []eventlog.ID) []eventlog.ID {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b eventlog.ID) int { return bytes.Compare(a[:], b[:]) })
	return out
}
