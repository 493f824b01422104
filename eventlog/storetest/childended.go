package storetest

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestChildEnded checks that children wake their caller (DESIGN
// §15½.6) on the stores open makes: the append that ends a child (by
// Append, AppendUnsynced or Take) writes a child.ended{StepID} request,
// numbered after the caller's other requests, into the caller's inbox in
// the same write, and nothing into its lineage; an append that does not
// end it, a fork of a child and a child whose caller is deleted write
// none; child.ended is refused as an event of a lineage, and a caller
// step with no caller is refused by Create. On a Claimer, a pending
// child.ended makes a caller parked for a child runnable, and only such
// a caller: not one asleep until a wake time, not one awaiting an
// approval.
func TestChildEnded(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Requests", func(t *testing.T) { testChildEndedRequests(t, open(t)) })
	t.Run("Claim", func(t *testing.T) { testChildEndedClaim(t, open(t)) })
}

// newChild creates a child of caller started by the caller's step stepID
// ("" records none).
func newChild(t *testing.T, s eventlog.Log, caller eventlog.ID, stepID string) eventlog.ID {
	t.Helper()
	opts := []eventlog.CreateOption{eventlog.WithCaller(caller)}
	if stepID != "" {
		opts = append(opts, eventlog.WithCallerStep(stepID))
	}
	id, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: "c", Input: []byte(`{}`)}, time.Now(), opts...)
	if err != nil {
		t.Fatalf("Create of a child: %v", err)
	}
	return id
}

// wantChildEnded checks that r is the child.ended request of step stepID
// numbered n, made at the time of the child's terminal event at.
func wantChildEnded(t *testing.T, r eventlog.Request, n uint64, stepID string, at time.Time) {
	t.Helper()
	p, ok := r.Data.(*eventlog.ChildEnded)
	if r.N != n || !ok || p.StepID != stepID || !r.Time.Equal(at) {
		t.Fatalf("request %+v (%T), want child.ended{StepID: %q} numbered %d at %v", r, r.Data, stepID, n, at)
	}
}

func testChildEndedRequests(t *testing.T, s Store) {
	ctx := t.Context()
	caller := newExecution(t, s)
	callerLineage := readEvents(t, s, caller)

	// A caller step with no caller creates nothing.
	if id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "c"}, time.Now(), eventlog.WithCallerStep("st-1")); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Create with a caller step and no caller = %s, %v; want ErrInvalid", id, err)
	}
	if infos := listAll(t, s, eventlog.Filter{}); len(infos) != 1 {
		t.Fatalf("%d executions after a refused Create, want 1", len(infos))
	}

	// child.ended is a request, never an event of a lineage.
	a := newChild(t, s, caller, "st-1")
	if _, err := s.Append(ctx, a, 1, eventlog.Event{Data: &eventlog.ChildEnded{StepID: "st-1"}}); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Append of child.ended = %v, want ErrInvalid", err)
	}

	// Appends that do not end the child write nothing to the caller.
	t1 := time.Date(2026, 4, 5, 6, 7, 8, 0, time.UTC)
	appendAt(t, s, a, 1, t1, &eventlog.DispatchStarted{Dispatch: 1})
	appendAt(t, s, a, 2, t1, &eventlog.DispatchParked{Reason: eventlog.ParkTimer, WakeAt: t1.Add(time.Hour)})
	wantPending(t, s, caller)

	// A request of someone else takes number 1; the end of a (by
	// Append) takes number 2, with a's step and its terminal event's time.
	request(t, s, caller, cancelReq("first"), inboxT0)
	tEnd := t1.Add(time.Second)
	appendAt(t, s, a, 3, tEnd, &eventlog.ExecutionCompleted{Output: []byte(`1`)})
	rs := wantPending(t, s, caller, 1, 2)
	wantChildEnded(t, rs[1], 2, "st-1", tEnd)

	// A child whose step is not recorded (an older build's) ends by
	// AppendUnsynced: its request has no StepID.
	b := newChild(t, s, caller, "")
	if _, err := s.AppendUnsynced(ctx, b, 1, eventlog.Event{Time: tEnd, Data: &eventlog.ExecutionFailed{Error: "x", Code: eventlog.FailHandler}}); err != nil {
		t.Fatal(err)
	}
	rs = wantPending(t, s, caller, 1, 2, 3)
	wantChildEnded(t, rs[2], 3, "", tEnd)

	// A child cancelled by Take of its own cancel request.
	c := newChild(t, s, caller, "st-3")
	n := request(t, s, c, cancelReq("stop"), inboxT0)
	if _, err := s.Take(ctx, c, 1, []uint64{n}, eventlog.Event{Time: tEnd, Data: cancelReq("stop")},
		eventlog.Event{Time: tEnd, Data: &eventlog.ExecutionCancelled{Reason: "stop"}}); err != nil {
		t.Fatal(err)
	}
	wantPending(t, s, c)
	rs = wantPending(t, s, caller, 1, 2, 3, 4)
	wantChildEnded(t, rs[3], 4, "st-3", tEnd)

	// A fork of a child has no caller: its end wakes no one.
	d := newChild(t, s, caller, "st-4")
	appendAt(t, s, d, 1, t1, &eventlog.DispatchStarted{Dispatch: 1})
	fork, err := s.Fork(ctx, d, 2, &eventlog.ForkCreated{}, t1)
	if err != nil {
		t.Fatal(err)
	}
	appendAt(t, s, fork, 3, tEnd, &eventlog.ExecutionCompleted{})
	wantPending(t, s, caller, 1, 2, 3, 4)

	// The caller's lineage never changed: the requests are the inbox's.
	wantLineage(t, s, caller, callerLineage)

	// A child whose caller was deleted still ends, and writes no request.
	var del eventlog.Deleter
	if eventlog.As(s, &del) {
		gone := newExecution(t, s)
		e := newChild(t, s, gone, "st-5")
		if err := del.Delete(ctx, gone); err != nil {
			t.Fatalf("Delete(%s): %v", gone, err)
		}
		appendAt(t, s, e, 1, tEnd, &eventlog.ExecutionCompleted{})
		if _, err := s.Requests(ctx, gone); !errors.Is(err, eventlog.ErrNotFound) {
			t.Fatalf("Requests of a deleted caller = %v, want ErrNotFound", err)
		}
	}
}

// appendAt appends payloads to id at head, each at time at.
func appendAt(t *testing.T, s eventlog.Log, id eventlog.ID, head uint64, at time.Time, ps ...eventlog.Payload) {
	t.Helper()
	evs := make([]eventlog.Event, len(ps))
	for i, p := range ps {
		evs[i] = eventlog.Event{Time: at, Data: p}
	}
	if _, err := s.Append(t.Context(), id, head, evs...); err != nil {
		t.Fatalf("Append to %s at %d: %v", id, head, err)
	}
}

func testChildEndedClaim(t *testing.T, s Store) {
	var c eventlog.Claimer
	if !eventlog.As(s, &c) {
		t.Skip("the store claims nothing in bulk (eventlog.Claimer)")
	}
	ctx := t.Context()
	now := time.Now()
	// Three callers, each waiting, each with a child that runs: one
	// parked for its child, one asleep for an hour, one awaiting an
	// approval.
	parked := newExecution(t, s)
	appendAt(t, s, parked, 1, now, &eventlog.DispatchStarted{Dispatch: 1}, &eventlog.DispatchParked{Reason: eventlog.ParkChild})
	asleep := newExecution(t, s)
	appendAt(t, s, asleep, 1, now, &eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.DispatchParked{Reason: eventlog.ParkTimer, WakeAt: now.Add(time.Hour)})
	asking := newExecution(t, s)
	appendAt(t, s, asking, 1, now, &eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.ApprovalRequested{StepID: "gate", StepKind: eventlog.StepTool, Target: "rm"},
		&eventlog.DispatchParked{Reason: eventlog.ParkApproval})
	var kids []eventlog.ID
	for _, caller := range []eventlog.ID{parked, asleep, asking} {
		kid := newChild(t, s, caller, "st-kid")
		appendAt(t, s, kid, 1, now, &eventlog.DispatchStarted{Dispatch: 1})
		kids = append(kids, kid)
	}
	claim := func() []eventlog.ID {
		t.Helper()
		ls, err := c.ClaimRunnable(ctx, "w", time.Minute, []string{"a"}, 10, now)
		if err != nil {
			t.Fatalf("ClaimRunnable: %v", err)
		}
		var ids []eventlog.ID
		for _, l := range ls {
			ids = append(ids, l.ID)
			if err := c.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		return ids
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("claimed %v while every child runs, want nothing", got)
	}
	for _, kid := range kids {
		appendAt(t, s, kid, 2, now, &eventlog.ExecutionCompleted{})
	}
	if got := claim(); !slices.Equal(got, []eventlog.ID{parked}) {
		t.Fatalf("claimed %v once the children ended, want only the caller parked for its child %s", got, parked)
	}
	// A decision wakes the one awaiting it, child.ended or not.
	request(t, s, asking, &eventlog.ApprovalGranted{StepID: "gate", By: "me"}, now)
	got := claim()
	want := []eventlog.ID{parked, asking}
	slices.SortFunc(want, func(a, b eventlog.ID) int { return bytes.Compare(a[:], b[:]) })
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v after the decision, want %v", got, want)
	}
}
