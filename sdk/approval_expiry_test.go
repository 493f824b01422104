package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Approvals that expire and name who decides (DESIGN §17, §21½.10).

// expiryBundle asks approval of payments of 7 from alice or bob, for an
// hour.
const expiryBundle = `default: allow
rules:
  - id: big-pay
    priority: 1
    when: {kind: tool, target: pay, args: {Amount: {equals: 7}}}
    then:
      decision: approve
      reason: "seven is a lot"
      approval: {approvers: [alice, bob], timeout: 1h, message: "pay 7?"}
`

// expiryAgent registers agent "a": it pays amount (at_most_once) and
// returns "paid N", or for a denied call "denied CODE RULE expired=BOOL",
// where BOOL says whether the error is ErrApprovalExpired.
func expiryAgent(bodies *atomic.Int64) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		pay := sdk.DefineTool("pay", func(_ context.Context, a payArgs) (int, error) {
			bodies.Add(1)
			return a.Amount, nil
		}, sdk.AtMostOnce())
		_, _ = sdk.Register(k, "a", func(ctx context.Context, amount int) (string, error) {
			n, err := pay.Call(ctx, payArgs{Amount: amount})
			var de *sdk.DeniedError
			if errors.As(err, &de) {
				return fmt.Sprintf("denied %s %s expired=%t", de.Code, de.RuleID, errors.Is(err, sdk.ErrApprovalExpired)), nil
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("paid %d", n), nil
		})
	}
}

// awaitAfters waits until the clock's After was called at least n times.
func awaitAfters(t *testing.T, c *fakeClock, n int) {
	t.Helper()
	for range 4000 {
		if c.Afters() >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the clock was asked %d times, want %d", c.Afters(), n)
}

// decode returns res's output as a string.
func decodeOut(t *testing.T, res *sdk.Result) string {
	t.Helper()
	var out string
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// tail describes evs from index i, with the policy fields of denials and
// approval requests.
func policyTail(evs []eventlog.Event, i int) []string {
	var out []string
	for _, ev := range evs[i:] {
		switch p := ev.Data.(type) {
		case *eventlog.StepDenied:
			out = append(out, fmt.Sprintf("denied %s %s", p.Code, p.RuleID))
		case *eventlog.ApprovalRequested:
			out = append(out, fmt.Sprintf("approval %s expires %s", p.RuleID, p.ExpiresAt.Format(time.RFC3339)))
		case *eventlog.ApprovalGranted:
			out = append(out, fmt.Sprintf("granted by %s: %s", p.By, p.Note))
		case *eventlog.ApprovalRejected:
			out = append(out, fmt.Sprintf("rejected by %s: %s", p.By, p.Note))
		case *eventlog.DispatchParked:
			out = append(out, fmt.Sprintf("parked %s until %s", p.Reason, p.WakeAt.Format(time.RFC3339)))
		default:
			out = append(out, describe(ev))
		}
	}
	return out
}

// TestApprovalExpiresInProcess: approval.requested records the rule's
// approvers, message and ExpiresAt (the kernel's clock plus the timeout);
// the owner waiting in process appends step.denied{Code:
// approval_expired, RuleID} when the clock passes it, the call returns
// ErrApprovalExpired and the body never runs. A fork past the denial
// replays it as ErrApprovalExpired without asking.
func TestApprovalExpiresInProcess(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	clock := newFakeClock()
	start := clock.Now()
	var bodies atomic.Int64
	k := newKernel(t, store, expiryAgent(&bodies), sdk.WithBundle(mustBundle(t, expiryBundle)),
		sdk.WithClock(clock), sdk.ParkAfter(2*time.Hour))
	id, err := k.Start(ctx, "a", 7)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res *sdk.Result
	go func() {
		var err error
		res, err = k.Run(ctx, id)
		done <- err
	}()
	awaitStatus(t, store, id, eventlog.StatusWaiting)
	awaitAfters(t, clock, 2) // ParkAfter's and the expiry's
	p := pendingStep(t, k, id)
	if !p.ExpiresAt.Equal(start.Add(time.Hour)) || !slices.Equal(p.Approvers, []string{"alice", "bob"}) ||
		p.Message != "pay 7?" || p.RuleID != "big-pay" {
		t.Fatalf("pending approval %+v", p)
	}
	clock.Advance(time.Hour)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out := decodeOut(t, res); out != "denied approval_expired big-pay expired=true" || bodies.Load() != 0 {
		t.Fatalf("output %q, body ran %d times", out, bodies.Load())
	}
	evs := events(t, k, id)
	wantReq := &eventlog.ApprovalRequested{StepID: p.StepID, StepKind: eventlog.StepTool, Target: "pay",
		Args: []byte(`{"Amount":7}`), Reason: "seven is a lot", RuleID: "big-pay", ExpiresAt: start.Add(time.Hour),
		Approvers: []string{"alice", "bob"}, Message: "pay 7?"}
	if diff := cmp.Diff(wantReq, evs[2].Data); diff != "" {
		t.Fatalf("approval.requested (-want +got):\n%s", diff)
	}
	want := []string{"created a", "dispatch 1", "approval big-pay expires 2026-01-02T04:04:05Z", "denied approval_expired big-pay", "completed"}
	if diff := cmp.Diff(want, policyTail(evs, 0)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	// A decision after the expiry awaits nothing.
	if err := k.Approve(ctx, id, p.StepID, sdk.By("alice")); !errors.Is(err, sdk.ErrNoPendingApproval) {
		t.Fatalf("Approve after expiry = %v, want ErrNoPendingApproval", err)
	}

	// Replay: a fork at the denial returns it again, asking nothing.
	f, err := k.Fork(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	res, err = k.Run(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if out := decodeOut(t, res); out != "denied approval_expired big-pay expired=true" || bodies.Load() != 0 {
		t.Fatalf("fork: output %q, body ran %d times", out, bodies.Load())
	}
	if diff := cmp.Diff([]string{"fork at=4", "dispatch 2", "completed"}, policyTail(events(t, k, f), 4)); diff != "" {
		t.Fatalf("fork's events (-want +got):\n%s", diff)
	}
}

// parkForExpiry starts agent "a" with 7 on k and runs it until it parks
// (ParkAfter is a minute on clock): dispatch.parked's wake time is the
// request's ExpiresAt. It returns the execution and its pending approval.
func parkForExpiry(t *testing.T, k *sdk.Kernel, clock *fakeClock) (eventlog.ID, sdk.PendingApproval) {
	t.Helper()
	id, err := k.Start(t.Context(), "a", 7)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	before := clock.Afters()
	go func() {
		_, err := k.Run(t.Context(), id)
		done <- err
	}()
	awaitAfters(t, clock, before+2)
	clock.Advance(time.Minute)
	if err := <-done; !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	evs := events(t, k, id)
	last := evs[len(evs)-1].Data.(*eventlog.DispatchParked)
	req := evs[2].Data.(*eventlog.ApprovalRequested)
	if last.Reason != eventlog.ParkApproval || !last.WakeAt.Equal(req.ExpiresAt) || req.ExpiresAt.IsZero() {
		t.Fatalf("dispatch.parked %+v, want reason approval until the request's ExpiresAt %s", last, req.ExpiresAt)
	}
	return id, pendingStep(t, k, id)
}

// TestApprovalExpiresByServe: a parked execution's wake time is the
// request's ExpiresAt; Serve leaves it while the kernel's clock is before
// it, and at it runs the execution, whose dispatch appends
// step.denied{approval_expired}.
func TestApprovalExpiresByServe(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	clock := newFakeClock()
	var bodies atomic.Int64
	k := newKernel(t, store, expiryAgent(&bodies), sdk.WithBundle(mustBundle(t, expiryBundle)),
		sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	id, _ := parkForExpiry(t, k, clock)

	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(5*time.Millisecond)) }()
	defer func() {
		stop()
		<-served
	}()
	time.Sleep(50 * time.Millisecond) // some polls, none due
	if info, _ := store.Info(ctx, id); info.Status != eventlog.StatusWaiting || info.Head != 4 {
		t.Fatalf("before the expiry: %s at head %d, want waiting at 4", info.Status, info.Head)
	}
	clock.Advance(time.Hour)
	wctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard
	defer cancel()
	res, err := k.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if out := decodeOut(t, res); out != "denied approval_expired big-pay expired=true" || bodies.Load() != 0 {
		t.Fatalf("output %q, body ran %d times", out, bodies.Load())
	}
	want := []string{"created a", "dispatch 1", "approval big-pay expires 2026-01-02T04:04:05Z",
		"parked approval until 2026-01-02T04:04:05Z", "dispatch 2", "denied approval_expired big-pay", "completed"}
	if diff := cmp.Diff(want, policyTail(events(t, k, id), 0)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestApprovalDecisionBeatsExpiry: a decision already in the inbox when
// the request expires wins: the owner takes it first, and the call runs.
func TestApprovalDecisionBeatsExpiry(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	clock := newFakeClock()
	var bodies atomic.Int64
	k := newKernel(t, store, expiryAgent(&bodies), sdk.WithBundle(mustBundle(t, expiryBundle)),
		sdk.WithClock(clock), sdk.ParkAfter(2*time.Hour))
	id, err := k.Start(ctx, "a", 7)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var res *sdk.Result
	go func() {
		var err error
		res, err = k.Run(ctx, id)
		done <- err
	}()
	awaitStatus(t, store, id, eventlog.StatusWaiting)
	awaitAfters(t, clock, 2)
	p := pendingStep(t, k, id)
	// Straight into the inbox, as another process's Approve writes it,
	// then the expiry at once: the owner's 100 ms poll has not taken it.
	if _, err := store.Request(ctx, id, &eventlog.ApprovalGranted{StepID: p.StepID, By: "bob", Note: "just in time"}, clock.Now()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out := decodeOut(t, res); out != "paid 7" || bodies.Load() != 1 {
		t.Fatalf("output %q, body ran %d times", out, bodies.Load())
	}
	want := []string{"created a", "dispatch 1", "approval big-pay expires 2026-01-02T04:04:05Z",
		"granted by bob: just in time", "started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, policyTail(events(t, k, id), 0)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestApprovalForkAsksAgain: a request pending in a fork's prefix does not
// apply past fork.created: the fork asks again with a fresh ExpiresAt, and
// the prefix's expiry passing does not deny the fork's call.
func TestApprovalForkAsksAgain(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	clock := newFakeClock()
	var bodies atomic.Int64
	k := newKernel(t, store, expiryAgent(&bodies), sdk.WithBundle(mustBundle(t, expiryBundle)),
		sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	id, _ := parkForExpiry(t, k, clock) // expires at 04:04:05
	clock.Advance(30 * time.Minute)     // 03:35:05
	f, err := k.Fork(ctx, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	fid, fp := parkForExpiryOf(t, k, clock, f)
	if fid != f || !fp.ExpiresAt.Equal(clock.Now().Add(time.Hour-time.Minute)) {
		t.Fatalf("fork's request expires %s, want an hour after it asked", fp.ExpiresAt)
	}
	// Past the prefix's expiry, before the fork's: the fork waits on.
	clock.Advance(40 * time.Minute)
	done := make(chan error, 1)
	before := clock.Afters()
	go func() {
		_, err := k.Run(ctx, f)
		done <- err
	}()
	awaitAfters(t, clock, before+2)
	clock.Advance(time.Minute)
	if err := <-done; !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("fork's second Run = %v, want ErrWaiting", err)
	}
	want := []string{"fork at=3", "dispatch 2", "approval big-pay expires 2026-01-02T04:35:05Z",
		"parked approval until 2026-01-02T04:35:05Z", "dispatch 3", "parked approval until 2026-01-02T04:35:05Z"}
	if diff := cmp.Diff(want, policyTail(events(t, k, f), 3)); diff != "" {
		t.Fatalf("fork's events (-want +got):\n%s", diff)
	}
	if bodies.Load() != 0 {
		t.Fatalf("body ran %d times", bodies.Load())
	}
}

// parkForExpiryOf runs the created execution id until it parks waiting for
// an approval (ParkAfter a minute on clock) and returns its pending
// approval.
func parkForExpiryOf(t *testing.T, k *sdk.Kernel, clock *fakeClock, id eventlog.ID) (eventlog.ID, sdk.PendingApproval) {
	t.Helper()
	done := make(chan error, 1)
	before := clock.Afters()
	go func() {
		_, err := k.Run(t.Context(), id)
		done <- err
	}()
	awaitAfters(t, clock, before+2)
	clock.Advance(time.Minute)
	if err := <-done; !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	return id, pendingStep(t, k, id)
}

// TestApproveForbidden: a decider not among the request's Approvers gets
// ErrForbidden from Approve and Reject, and nothing is appended or
// requested; a listed one decides, and approval.granted records By and
// Note.
func TestApproveForbidden(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	clock := newFakeClock()
	var bodies atomic.Int64
	k := newKernel(t, store, expiryAgent(&bodies), sdk.WithBundle(mustBundle(t, expiryBundle)),
		sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	id, p := parkForExpiry(t, k, clock)
	before := len(events(t, k, id))
	if err := k.Approve(ctx, id, p.StepID, sdk.By("mallory"), sdk.Note("me")); !errors.Is(err, sdk.ErrForbidden) {
		t.Fatalf("Approve by mallory = %v, want ErrForbidden", err)
	}
	if err := k.Reject(ctx, id, p.StepID, sdk.By("mallory")); !errors.Is(err, sdk.ErrForbidden) {
		t.Fatalf("Reject by mallory = %v, want ErrForbidden", err)
	}
	if err := k.Approve(ctx, id, p.StepID); !errors.Is(err, sdk.ErrForbidden) {
		t.Fatalf("Approve by the default decider = %v, want ErrForbidden", err)
	}
	if n := len(events(t, k, id)); n != before {
		t.Fatalf("%d events after the refusals, want %d", n, before)
	}
	if reqs, err := store.Requests(ctx, id); err != nil || len(reqs) != 0 {
		t.Fatalf("inbox after the refusals: %v, %v; want empty", reqs, err)
	}
	if err := k.Approve(ctx, id, p.StepID, sdk.By("bob"), sdk.Note("fine")); err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if out := decodeOut(t, res); out != "paid 7" || bodies.Load() != 1 {
		t.Fatalf("output %q, body ran %d times", out, bodies.Load())
	}
	want := []string{"granted by bob: fine", "dispatch 2", "started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, policyTail(events(t, k, id), before)); diff != "" {
		t.Fatalf("events after the refusals (-want +got):\n%s", diff)
	}
}
