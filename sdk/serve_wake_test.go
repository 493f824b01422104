package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// childThenPay registers "c", a child that doubles its input, and "p",
// which calls c and then the tool pay (asked for approval by
// countingGate), and "free", which needs nothing.
func childThenPay(bodies *atomic.Int64) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		child, _ := sdk.Register(k, "c", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
		pay := sdk.DefineTool("pay", func(_ context.Context, a payArgs) (int, error) {
			bodies.Add(1)
			return a.Amount, nil
		}, sdk.AtMostOnce())
		_, _ = sdk.Register(k, "p", func(ctx context.Context, n int) (int, error) {
			d, err := child.Call(ctx, n)
			if err != nil {
				return 0, err
			}
			return pay.Call(ctx, payArgs{Amount: d})
		})
		_, _ = sdk.Register(k, "free", func(_ context.Context, n int) (int, error) { return n, nil })
	}
}

// countDispatches counts the dispatch.started events of id's lineage.
func countDispatches(t *testing.T, k *sdk.Kernel, id eventlog.ID) int {
	t.Helper()
	n := 0
	for _, ev := range events(t, k, id) {
		if ev.Kind() == eventlog.KindDispatchStarted {
			n++
		}
	}
	return n
}

// parkForApproval runs id until its dispatch parks for its approval (a
// slow child may park it first, for the child): the lineage ends with the
// child step's outcome, approval.requested and dispatch.parked{approval}.
func parkForApproval(t *testing.T, k *sdk.Kernel, id eventlog.ID) {
	t.Helper()
	for range 100 {
		if _, err := k.Run(t.Context(), id); !errors.Is(err, sdk.ErrWaiting) {
			t.Fatalf("Run = %v, want ErrWaiting", err)
		}
		evs := events(t, k, id)
		if p := evs[len(evs)-1].Data.(*eventlog.DispatchParked); p.Reason == eventlog.ParkApproval {
			want := []string{"succeeded", "approval.requested", "dispatch.parked"}
			if diff := cmp.Diff(want, describeAll(evs[len(evs)-3:])); diff != "" {
				t.Fatalf("parked for the approval (-want +got):\n%s", diff)
			}
			return
		}
		for { // parked for the child: run again once it ended
			kids, err := k.List(t.Context(), sdk.Filter{Caller: id})
			if err != nil {
				t.Fatal(err)
			}
			if len(kids) == 1 && kids[0].Status.Terminal() {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Fatalf("%s never parked for its approval", id)
}

// testApprovalParkAfterChild: four executions that called a child (which
// ended) and then parked for an approval are runnable only by their
// decision (DESIGN §15½.6): with Concurrency(4) a fifth, pending execution
// runs at once, no waiting one gains a dispatch.started while Serve polls
// every 5 ms, and the one approved runs to completion in one more
// dispatch. The serving kernel's ParkAfter is an hour, so a waiting one
// re-dispatched (the defect) would hold its slot and starve the fifth.
func testApprovalParkAfterChild(t *testing.T, logA, logB eventlog.IndexedLog) {
	ctx := t.Context()
	var bodies, asked atomic.Int64
	kPark := newKernel(t, logA, childThenPay(&bodies), sdk.WithOwner("parker"),
		sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(20*time.Millisecond))
	kServe := newKernel(t, logB, childThenPay(&bodies), sdk.WithOwner("server"),
		sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(time.Hour))
	var waiting []eventlog.ID
	dispatches := map[eventlog.ID]int{}
	for i := range 4 {
		id, err := kPark.Start(ctx, "p", i+1)
		if err != nil {
			t.Fatal(err)
		}
		parkForApproval(t, kPark, id)
		waiting = append(waiting, id)
		dispatches[id] = countDispatches(t, kPark, id)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- kServe.Serve(sctx, sdk.Concurrency(4), sdk.PollEvery(5*time.Millisecond)) }()
	defer func() { stop(); <-served }()

	fifth, err := kServe.Start(ctx, "free", 5)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = kServe.Wait(wctx, fifth)
	cancel()
	if err != nil {
		t.Fatalf("the fifth execution did not run at once beside four waiting ones: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // twenty polls
	for i, id := range waiting {
		if n := countDispatches(t, kServe, id); n != dispatches[id] {
			t.Fatalf("waiting %d has %d dispatch.started before its decision, want %d: %q", i, n, dispatches[id], describeAll(events(t, kServe, id)))
		}
	}

	if err := kServe.Approve(ctx, waiting[0], pendingStep(t, kServe, waiting[0]).StepID, "ok"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	out, err := kServe.Wait(wctx, waiting[0])
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := decodeJSON(out.Output, &got); err != nil || got != 2 {
		t.Fatalf("approved output %s (%v), want 2", out, err)
	}
	evs := describeAll(events(t, kServe, waiting[0]))
	n := len(evs) - 5
	want := []string{"dispatch.parked", "approval.granted", fmt.Sprintf("dispatch %d", dispatches[waiting[0]]+1),
		"started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, evs[n-1:]); diff != "" {
		t.Fatalf("approved (-want +got):\n%s", diff)
	}
	for i, id := range waiting[1:] {
		if n := countDispatches(t, kServe, id); n != dispatches[id] {
			t.Fatalf("waiting %d has %d dispatch.started, want %d", i+1, n, dispatches[id])
		}
	}
	if bodies.Load() != 1 {
		t.Fatalf("pay ran %d times, want 1", bodies.Load())
	}
}

// TestServeRunsApprovalParksOnlyByDecision: testApprovalParkAfterChild on
// the Pebble store (Serve lists and claims one by one).
func TestServeRunsApprovalParksOnlyByDecision(t *testing.T) {
	s := newStore(t)
	testApprovalParkAfterChild(t, s, s)
}

// TestServeRunsApprovalParksOnlyByDecisionOnPostgres:
// testApprovalParkAfterChild on Postgres (ClaimRunnable), two connections.
func TestServeRunsApprovalParksOnlyByDecisionOnPostgres(t *testing.T) {
	stores := openPG(t, 2)
	testApprovalParkAfterChild(t, stores[0], stores[1])
}
