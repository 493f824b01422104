package sdk

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/policy"
)

// wakeKernel returns a kernel on a fresh in-memory store with opts, and a
// function that reports (and clears) the signal on its wake channel.
func wakeKernel(t *testing.T, opts ...Option) (*Kernel, func() bool) {
	t.Helper()
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	k, err := New(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return k, func() bool {
		select {
		case <-k.wake:
			return true
		default:
			return false
		}
	}
}

// kindsOf returns the kinds of id's lineage, in order.
func kindsOf(t *testing.T, k *Kernel, id eventlog.ID) []eventlog.Kind {
	t.Helper()
	var kinds []eventlog.Kind
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind())
	}
	return kinds
}

// TestStartWakesServe: a Start that creates an execution signals the
// kernel's wake channel, so a Serve asleep until its next poll runs the new
// execution at once; a refused Start signals nothing. (Serve's own tests
// cannot tell: their poll would find the execution anyway, only later.)
func TestStartWakesServe(t *testing.T) {
	k, woken := wakeKernel(t)
	if _, err := Register(k, "echo", func(_ context.Context, in string) (string, error) { return in, nil }); err != nil {
		t.Fatal(err)
	}
	woken() // drop any signal from New or Register
	ctx := context.Background()
	if _, err := k.Start(ctx, "nobody", "x"); err == nil {
		t.Fatal("Start of an unknown agent succeeded")
	}
	if woken() {
		t.Fatal("a refused Start woke Serve")
	}
	id, err := k.Start(ctx, "echo", "x")
	if err != nil {
		t.Fatal(err)
	}
	if !woken() {
		t.Fatal("Start created an execution without waking Serve")
	}
	if kinds := kindsOf(t, k, id); len(kinds) != 1 || kinds[0] != eventlog.KindExecutionCreated {
		t.Fatalf("events after Start = %v, want one execution.created", kinds)
	}
}

// parkedOnPay registers agent "a" on k, which calls an at_most_once tool
// "pay" (k's gate asks approval for it), starts and runs it until it parks,
// and returns the execution and the one approval it awaits.
func parkedOnPay(t *testing.T, k *Kernel) (eventlog.ID, []PendingApproval) {
	t.Helper()
	pay := DefineTool("pay", func(_ context.Context, n int) (int, error) { return n, nil }, AtMostOnce())
	if _, err := Register(k, "a", func(ctx context.Context, n int) (int, error) { return pay.Call(ctx, n) }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := k.Start(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); !errors.Is(err, ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	pending, err := k.AwaitedApprovals(ctx, id)
	if err != nil || len(pending) != 1 {
		t.Fatalf("AwaitedApprovals = %+v, %v; want one", pending, err)
	}
	return id, pending
}

// TestApproveWakesServe: an Approve of a parked execution with no live
// owner appends approval.granted itself and signals the wake channel, so a
// Serve asleep until its next poll runs the execution again at once.
// (TestApprovalParksAndServeWakes polls every 5 ms: its Serve would find
// the execution without the signal.) The signal is given when settle
// gives up the execution it owned for the write, and again by Approve.
func TestApproveWakesServe(t *testing.T) {
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		return policy.Decision{Approval: c.Target == "pay", Allow: true, Reason: "payments need a person"}
	}
	k, woken := wakeKernel(t, WithGate(gate), ParkAfter(time.Millisecond))
	ctx := context.Background()
	id, pending := parkedOnPay(t, k)
	before := kindsOf(t, k, id)
	woken()
	if err := k.Approve(ctx, id, pending[0].StepID, Note("go")); err != nil {
		t.Fatal(err)
	}
	if !woken() {
		t.Fatal("Approve with no live owner did not wake Serve")
	}
	after := kindsOf(t, k, id)
	if len(after) != len(before)+1 || after[len(before)] != eventlog.KindApprovalGranted {
		t.Fatalf("events after Approve = %v, want %v and approval.granted", after, before)
	}
}

// failingAppends is a store whose appends (and takes of inbox requests)
// fail once fail is set.
type failingAppends struct {
	*pebblestore.Store
	fail atomic.Bool
}

var errAppendRefused = errors.New("test: append refused")

func (f *failingAppends) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if f.fail.Load() {
		return 0, errAppendRefused
	}
	return f.Store.Append(ctx, id, head, evs...)
}

func (f *failingAppends) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if f.fail.Load() {
		return 0, errAppendRefused
	}
	return f.Store.AppendUnsynced(ctx, id, head, evs...)
}

func (f *failingAppends) Take(ctx context.Context, id eventlog.ID, head uint64, ns []uint64, evs ...eventlog.Event) (uint64, error) {
	if f.fail.Load() {
		return 0, errAppendRefused
	}
	return f.Store.Take(ctx, id, head, ns, evs...)
}

// TestApproveReportsSettleFailure: with no live owner, Approve appends the
// decision itself; when that append fails, Approve returns the failure
// (it does not report a decision that is not in the lineage) and the
// lineage is unchanged.
func TestApproveReportsSettleFailure(t *testing.T) {
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	store := &failingAppends{Store: s}
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		return policy.Decision{Approval: true, Allow: true, Reason: "everything needs a person"}
	}
	k, err := New(store, WithGate(gate), ParkAfter(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, pending := parkedOnPay(t, k)
	before := kindsOf(t, k, id)
	store.fail.Store(true)
	if err := k.Approve(ctx, id, pending[0].StepID, Note("go")); !errors.Is(err, errAppendRefused) {
		t.Fatalf("Approve with failing appends = %v, want the append's error", err)
	}
	store.fail.Store(false)
	if after := kindsOf(t, k, id); !slices.Equal(after, before) {
		t.Fatalf("events after a failed Approve = %v, want %v", after, before)
	}
}

// TestApprovalRequestAppendFails: when the append of approval.requested
// fails, the call fails with it, nothing is appended, and no "approval
// requested" is logged for a request that is not in the lineage.
func TestApprovalRequestAppendFails(t *testing.T) {
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	store := &failingAppends{Store: s}
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		store.fail.Store(true) // the next append is the approval.requested
		return policy.Decision{Approval: true, Allow: true, Reason: "everything needs a person"}
	}
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	k, err := New(store, WithGate(gate), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	pay := DefineTool("pay", func(_ context.Context, n int) (int, error) { return n, nil }, AtMostOnce())
	if _, err := Register(k, "a", func(ctx context.Context, n int) (int, error) { return pay.Call(ctx, n) }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := k.Start(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	before := []eventlog.Kind{eventlog.KindExecutionCreated, eventlog.KindDispatchStarted}
	if _, err := k.Run(ctx, id); !errors.Is(err, errAppendRefused) {
		t.Fatalf("Run = %v, want the append's error", err)
	}
	store.fail.Store(false)
	if got := kindsOf(t, k, id); !slices.Equal(got, before) {
		t.Fatalf("events = %v, want %v", got, before)
	}
	if strings.Contains(logged.String(), "approval requested") {
		t.Fatalf("a failed request was logged:\n%s", logged.String())
	}
}

// TestRunnableWithARequestLeftInTheInbox: a request can be left in a
// waiting execution's inbox when it arrived while an owner held the
// execution (Approve's or Cancel's settle found it busy) and that owner
// parked before its next look in the inbox. Serve must run such an
// execution even though its wake time has not come (a sleep's) or it has
// none (an approval's): the request, not the clock, is what it awaits.
// Without the request it is not runnable; its run takes the request.
func TestRunnableWithARequestLeftInTheInbox(t *testing.T) {
	ctx := context.Background()
	runnable := func(k *Kernel, id eventlog.ID) bool {
		t.Helper()
		infos, err := k.runnable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(infos, func(i eventlog.Info) bool { return i.ID == id })
	}
	leave := func(k *Kernel, id eventlog.ID, p eventlog.Payload) {
		t.Helper()
		if _, err := k.log.(eventlog.Inbox).Request(ctx, id, p, time.Now()); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("approval", func(t *testing.T) {
		gate := func(_ context.Context, c policy.Call) policy.Decision {
			return policy.Decision{Approval: c.Target == "pay", Allow: true, Reason: "payments need a person"}
		}
		k, _ := wakeKernel(t, WithGate(gate), ParkAfter(time.Millisecond))
		id, pending := parkedOnPay(t, k)
		if info, _ := k.log.Info(ctx, id); !info.WakeAt.IsZero() {
			t.Fatalf("parked on an approval until %v, want no wake time", info.WakeAt)
		}
		if runnable(k, id) {
			t.Fatal("an execution parked on an approval with an empty inbox is runnable")
		}
		leave(k, id, &eventlog.ApprovalGranted{StepID: pending[0].StepID, By: "late"})
		if !runnable(k, id) {
			t.Fatal("an execution parked on an approval whose decision waits in its inbox is not runnable")
		}
		res, err := k.Run(ctx, id)
		var out int
		if err != nil || res.Decode(&out) != nil || out != 1 {
			t.Fatalf("Run = %d, %v", out, err)
		}
		want := []eventlog.Kind{eventlog.KindExecutionCreated, eventlog.KindDispatchStarted, eventlog.KindApprovalRequested,
			eventlog.KindDispatchParked, eventlog.KindApprovalGranted, eventlog.KindDispatchStarted,
			eventlog.KindStepStarted, eventlog.KindStepSucceeded, eventlog.KindExecutionCompleted}
		if kinds := kindsOf(t, k, id); !slices.Equal(kinds, want) {
			t.Fatalf("lineage %v, want %v", kinds, want)
		}
	})

	t.Run("sleep", func(t *testing.T) {
		k, _ := wakeKernel(t, ParkAfter(time.Millisecond))
		if _, err := Register(k, "a", func(ctx context.Context, _ int) (int, error) {
			return 0, Sleep(ctx, time.Hour)
		}); err != nil {
			t.Fatal(err)
		}
		id, _ := k.Start(ctx, "a", 1)
		if _, err := k.Run(ctx, id); !errors.Is(err, ErrWaiting) {
			t.Fatalf("Run = %v, want ErrWaiting", err)
		}
		if runnable(k, id) {
			t.Fatal("an execution asleep for an hour with an empty inbox is runnable")
		}
		leave(k, id, &eventlog.CancelRequested{Reason: "stop", By: "elsewhere"})
		if !runnable(k, id) {
			t.Fatal("an asleep execution whose cancel waits in its inbox is not runnable")
		}
		var ce *CancelledError
		if _, err := k.Run(ctx, id); !errors.As(err, &ce) {
			t.Fatalf("Run = %v, want a *CancelledError", err)
		}
		if info, _ := k.log.Info(ctx, id); info.Status != eventlog.StatusCancelled {
			t.Fatalf("status %s, want cancelled", info.Status)
		}
		want := []eventlog.Kind{eventlog.KindExecutionCreated, eventlog.KindDispatchStarted, eventlog.KindTimerStarted,
			eventlog.KindDispatchParked, eventlog.KindCancelRequested, eventlog.KindExecutionCancelled}
		if kinds := kindsOf(t, k, id); !slices.Equal(kinds, want) {
			t.Fatalf("lineage %v, want %v", kinds, want)
		}
	})
}
