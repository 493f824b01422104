package sdk_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestApprovalOnPostgres: approvals through the Postgres inbox (DESIGN
// §8½, §11), between two hosts. Host B approves a call that host A's
// running dispatch awaits: A takes the request and runs the call. Then A
// parks a second execution past ParkAfter; B's approval, with no live
// owner, is appended by B under a fresh claim, which wakes the execution,
// and B's Serve (ClaimRunnable) runs it to completion. The gate is asked
// once per execution.
func TestApprovalOnPostgres(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	var bodies, asked atomic.Int64
	register := approvalAgent(&bodies)
	kA := newKernel(t, stores[0], register, sdk.WithOwner("A"), sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(time.Hour))
	kB := newKernel(t, stores[1], register, sdk.WithOwner("B"), sdk.WithGate(countingGate(&asked)))

	live, err := kA.Start(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := kA.Run(ctx, live); done <- err }()
	awaitStatus(t, stores[1], live, eventlog.StatusWaiting)
	p := pendingStep(t, kB, live)
	if err := kB.Approve(ctx, live, p.StepID, sdk.Note("from B")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"created a", "dispatch 1", "approval.requested", "approval.granted",
		"started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, kB, live))); diff != "" {
		t.Fatalf("live owner (-want +got):\n%s", diff)
	}
	if err := kB.Approve(ctx, live, p.StepID, sdk.Note("again")); !errors.Is(err, sdk.ErrNoPendingApproval) {
		t.Fatalf("second Approve = %v", err)
	}

	kPark := newKernel(t, stores[0], register, sdk.WithOwner("A2"), sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(10*time.Millisecond))
	parked, _ := kPark.Start(ctx, "a", 1)
	if _, err := kPark.Run(ctx, parked); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if err := kB.Approve(ctx, parked, pendingStep(t, kB, parked).StepID, sdk.Note("from B")); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- kB.Serve(sctx, sdk.PollEvery(10*time.Millisecond)) }()
	wctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard
	_, err = kB.Wait(wctx, parked)
	cancel()
	stop()
	<-served
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"created a", "dispatch 1", "approval.requested", "dispatch.parked", "approval.granted",
		"dispatch 2", "started tool pay at_most_once", "succeeded", "completed"}
	evs := events(t, kA, parked)
	if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
		t.Fatalf("parked (-want +got):\n%s", diff)
	}
	if ds := evs[5].Data.(*eventlog.DispatchStarted); ds.Owner != "B" {
		t.Errorf("dispatch 2 by %q, want B", ds.Owner)
	}
	if bodies.Load() != 2 || asked.Load() != 2 {
		t.Fatalf("bodies ran %d times, gate asked %d times; want 2 and 2", bodies.Load(), asked.Load())
	}
}
