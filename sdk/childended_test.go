package sdk_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// gatedChild registers "c", a child that returns 2n once gate is closed,
// and "p", which returns what its call of c returns.
func gatedChild(gate <-chan struct{}) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		child, _ := sdk.Register(k, "c", func(ctx context.Context, n int) (int, error) {
			select {
			case <-gate:
				return 2 * n, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		_, _ = sdk.Register(k, "p", func(ctx context.Context, n int) (int, error) { return child.Call(ctx, n) })
	}
}

// inboxOf returns id's pending requests.
func inboxOf(t *testing.T, log eventlog.Log, id eventlog.ID) []eventlog.Request {
	t.Helper()
	var inbox eventlog.Inbox
	if !eventlog.As(log, &inbox) {
		t.Fatal("the log keeps no inbox")
	}
	rs, err := inbox.Requests(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// parkOnGatedChild starts p, runs it until it parks for its child (which
// waits on the gate), and returns p's ID, its child's ID and the StepID
// of p's child step.
func parkOnGatedChild(t *testing.T, k *sdk.Kernel) (parent, child eventlog.ID, stepID string) {
	t.Helper()
	ctx := t.Context()
	parent, err := k.Start(ctx, "p", 21)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, parent); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run of the parent = %v, want ErrWaiting", err)
	}
	evs := events(t, k, parent)
	want := []string{"created p", "dispatch 1", "started child c", "dispatch.parked"}
	if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
		t.Fatalf("parked parent (-want +got):\n%s", diff)
	}
	kids, err := k.List(ctx, sdk.Filter{Caller: parent})
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of the parent: %+v, %v; want one", kids, err)
	}
	return parent, kids[0].ID, evs[2].Data.(*eventlog.StepStarted).StepID
}

// TestChildEndWakesParentThroughItsInbox (DESIGN §15½.6): a parked
// parent's inbox is empty while its child runs; the child's end writes
// one child.ended{StepID of the parent's child step} request there and
// nothing into the parent's lineage; the parent's next dispatch removes
// it without an event and completes with the child's result.
func TestChildEndWakesParentThroughItsInbox(t *testing.T) {
	ctx := t.Context()
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	store := newStore(t)
	k := newKernel(t, store, gatedChild(gate), sdk.ParkAfter(20*time.Millisecond))
	parent, child, stepID := parkOnGatedChild(t, k)
	if rs := inboxOf(t, store, parent); len(rs) != 0 {
		t.Fatalf("the parent's inbox while its child runs: %+v, want empty", rs)
	}

	open()
	if _, err := k.Wait(ctx, child); err != nil {
		t.Fatalf("the child: %v", err)
	}
	rs := inboxOf(t, store, parent)
	if len(rs) != 1 {
		t.Fatalf("the parent's inbox once its child ended: %+v, want one child.ended", rs)
	}
	if p, ok := rs[0].Data.(*eventlog.ChildEnded); !ok || p.StepID != stepID {
		t.Fatalf("the parent's request %+v, want child.ended{StepID: %q}", rs[0].Data, stepID)
	}
	if n := len(events(t, k, parent)); n != 4 {
		t.Fatalf("the parent's lineage grew to %d events with its child's end, want 4", n)
	}

	res, err := k.Run(ctx, parent)
	if err != nil {
		t.Fatalf("Run of the woken parent: %v", err)
	}
	var out int
	if err := res.Decode(&out); err != nil || out != 42 {
		t.Fatalf("parent's result %d (%v), want 42", out, err)
	}
	want := []string{"created p", "dispatch 1", "started child c", "dispatch.parked", "dispatch 2", "started child c attempt=2", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, parent))); diff != "" {
		t.Fatalf("parent (-want +got):\n%s", diff)
	}
	if rs := inboxOf(t, store, parent); len(rs) != 0 {
		t.Fatalf("the parent's inbox after its dispatch: %+v, want empty", rs)
	}
}

// TestServeWakesParentByChildEnded: Serve dispatches a parent parked for
// its child when the child.ended request is in its inbox, and not before.
// Its children are not read: a parent whose child ended but whose inbox
// holds no child.ended (taken here, as a store of an older build would
// leave it) stays parked.
func TestServeWakesParentByChildEnded(t *testing.T) {
	ctx := t.Context()
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	store := newStore(t)
	k := newKernel(t, store, gatedChild(gate), sdk.ParkAfter(20*time.Millisecond))
	parent, child, _ := parkOnGatedChild(t, k)
	open()
	if _, err := k.Wait(ctx, child); err != nil {
		t.Fatalf("the child: %v", err)
	}
	rs := inboxOf(t, store, parent)
	if len(rs) != 1 {
		t.Fatalf("the parent's inbox: %+v, want one child.ended", rs)
	}
	// Take the request away without an event: the child has ended, but
	// nothing says so in the parent's inbox.
	if _, err := store.Take(ctx, parent, 4, []uint64{rs[0].N},
		eventlog.Event{Data: &eventlog.MarkerRecorded{Name: "took child.ended"}}); err != nil {
		t.Fatal(err)
	}
	serve := func(d time.Duration) {
		sctx, stop := context.WithTimeout(ctx, d)
		defer stop()
		_ = k.Serve(sctx, sdk.PollEvery(2*time.Millisecond))
	}
	serve(100 * time.Millisecond)
	if n := countDispatches(t, k, parent); n != 1 {
		t.Fatalf("Serve dispatched the parent with no child.ended pending: %d dispatches, want 1", n)
	}
	// The request, written again, wakes it.
	if _, err := store.Request(ctx, parent, &eventlog.ChildEnded{StepID: "any"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	go func() { _ = k.Serve(sctx, sdk.PollEvery(2*time.Millisecond)) }()
	if _, err := k.Wait(sctx, parent); err != nil {
		t.Fatalf("the parent after its child.ended: %v", err)
	}
	want := []string{"created p", "dispatch 1", "started child c", "dispatch.parked", "marker.recorded",
		"dispatch 2", "started child c attempt=2", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, parent))); diff != "" {
		t.Fatalf("parent (-want +got):\n%s", diff)
	}
	if rs := inboxOf(t, store, parent); len(rs) != 0 {
		t.Fatalf("the parent's inbox after its dispatch: %+v, want empty", rs)
	}
}

// TestChildCallLeavesAWaitingChildToItsWakeTime: the run Agent.Call
// starts beside its wait for a child does not dispatch a child that waits
// for a wake time still to come (the flake of
// TestServeWakesOnChildEndAcrossProcesses: a child Serve had dispatched
// and parked was dispatched again, before its wake time, by the parent's
// own background run). A parent run again while its child sleeps for an
// hour leaves the child with its one dispatch.
func TestChildCallLeavesAWaitingChildToItsWakeTime(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	k := newKernel(t, store, func(k *sdk.Kernel) {
		c, _ := sdk.Register(k, "c", func(ctx context.Context, n int) (int, error) {
			return n, sdk.Sleep(ctx, time.Hour)
		})
		_, _ = sdk.Register(k, "p", func(ctx context.Context, n int) (int, error) { return c.Call(ctx, n) })
	}, sdk.ParkAfter(20*time.Millisecond))
	parent, err := k.Start(ctx, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, parent); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run of the parent = %v, want ErrWaiting", err)
	}
	kids, err := k.List(ctx, sdk.Filter{Caller: parent})
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %+v (%v), want one", kids, err)
	}
	child := kids[0].ID
	awaitStatus(t, store, child, eventlog.StatusWaiting)
	for { // the background run that parked the child has let it go
		if _, held, err := store.Holder(ctx, child); err != nil {
			t.Fatal(err)
		} else if !held {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	want := []string{"created c", "dispatch 1", "timer.started", "dispatch.parked"}
	if diff := cmp.Diff(want, describeAll(events(t, k, child))); diff != "" {
		t.Fatalf("child after its first dispatch (-want +got):\n%s", diff)
	}

	if _, err := k.Run(ctx, parent); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("second Run of the parent = %v, want ErrWaiting", err)
	}
	time.Sleep(100 * time.Millisecond) // the background run, had it dispatched, has parked again
	if diff := cmp.Diff(want, describeAll(events(t, k, child))); diff != "" {
		t.Fatalf("child after the parent ran again (-want +got):\n%s", diff)
	}
}
