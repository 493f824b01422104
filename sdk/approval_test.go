package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// Approvals (DESIGN §12, §8½, §10).

// payArgs are the args of the pay tool of these tests.
type payArgs struct{ Amount int }

// approvalAgent registers agent "a": it calls the pay tool (at_most_once)
// once and returns "paid N", or "refused: REASON" when the call is denied.
// bodies counts the runs of pay's body.
func approvalAgent(bodies *atomic.Int64) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		pay := sdk.DefineTool("pay", func(_ context.Context, a payArgs) (int, error) {
			bodies.Add(1)
			return a.Amount, nil
		}, sdk.AtMostOnce())
		_, _ = sdk.Register(k, "a", func(ctx context.Context, amount int) (string, error) {
			n, err := pay.Call(ctx, payArgs{Amount: amount})
			var de *sdk.DeniedError
			if errors.As(err, &de) {
				return "refused: " + de.Reason, nil
			}
			if err != nil {
				return "", err
			}
			return "paid " + strings.Repeat("$", n), nil
		})
	}
}

// countingGate asks for approval of every call to pay and counts how often
// it was asked.
func countingGate(asked *atomic.Int64) policy.Gate {
	return func(_ context.Context, c policy.Call) policy.Decision {
		asked.Add(1)
		if c.Target == "pay" {
			return policy.Decision{Approval: true, Allow: true, Reason: "payments need a person"}
		}
		return policy.Decision{Allow: true}
	}
}

// awaitStatus polls id's status until it is want.
func awaitStatus(t *testing.T, log eventlog.Log, id eventlog.ID, want eventlog.Status) {
	t.Helper()
	for {
		info, err := log.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == want {
			return
		}
		if info.Status.Terminal() {
			t.Fatalf("execution %s ended %s while waiting for %s", id, info.Status, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pendingStep returns the StepID of the one approval id awaits.
func pendingStep(t *testing.T, k *sdk.Kernel, id eventlog.ID) sdk.PendingApproval {
	t.Helper()
	list, err := k.Approvals(t.Context(), sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []sdk.PendingApproval
	for _, a := range list {
		if a.Execution == id {
			mine = append(mine, a)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("Approvals of %s = %+v, want one", id, mine)
	}
	return mine[0]
}

// TestApprovalGranted: the gate's Approval appends approval.requested, the
// execution is waiting and the call blocks; Approve, taken by the running
// owner, lets the body run live, once. Deciding again, or a step that
// waits for nothing, is an error and appends nothing.
func TestApprovalGranted(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var bodies, asked atomic.Int64
	k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(countingGate(&asked)))
	id, err := k.Start(ctx, "a", 3)
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
	p := pendingStep(t, k, id)
	want := sdk.PendingApproval{Execution: id, Agent: "a", StepID: p.StepID, StepKind: eventlog.StepTool, Target: "pay",
		Args: []byte(`{"Amount":3}`), Reason: "payments need a person", RequestedAt: 3, Time: p.Time}
	if diff := cmp.Diff(want, p); diff != "" || p.Time.IsZero() {
		t.Fatalf("pending approval (-want +got):\n%s", diff)
	}
	if bodies.Load() != 0 {
		t.Fatal("the body ran before the approval")
	}
	if err := k.Approve(ctx, id, p.StepID, sdk.Note("ok by me")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil || out != "paid $$$" {
		t.Fatalf("output %q, %v", out, err)
	}
	evs := events(t, k, id)
	wantEvents := []string{"created a", "dispatch 1", "approval.requested", "approval.granted",
		"started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(wantEvents, describeAll(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	wantReq := &eventlog.ApprovalRequested{StepID: p.StepID, StepKind: eventlog.StepTool, Target: "pay",
		Args: []byte(`{"Amount":3}`), Reason: "payments need a person"}
	if diff := cmp.Diff(wantReq, evs[2].Data); diff != "" {
		t.Errorf("approval.requested (-want +got):\n%s", diff)
	}
	if g := evs[3].Data.(*eventlog.ApprovalGranted); g.StepID != p.StepID || g.Note != "ok by me" || g.By == "" {
		t.Errorf("approval.granted = %+v", g)
	}
	if bodies.Load() != 1 || asked.Load() != 1 {
		t.Fatalf("body ran %d times, gate asked %d times; want 1 and 1", bodies.Load(), asked.Load())
	}

	// Bad input: nothing is appended; the error names the verb refused.
	head := len(evs)
	for _, c := range []struct {
		name string
		err  error
		want error
		verb string // "" for an error that names none
	}{
		{"approve twice", k.Approve(ctx, id, p.StepID, sdk.Note("again")), sdk.ErrNoPendingApproval, "approve step"},
		{"reject after approve", k.Reject(ctx, id, p.StepID, sdk.Note("no")), sdk.ErrNoPendingApproval, "reject step"},
		{"unknown step", k.Approve(ctx, id, "0123"), sdk.ErrNoPendingApproval, "approve step"},
		{"empty step", k.Approve(ctx, id, ""), sdk.ErrInvalid, "approve step"},
		{"empty step, reject", k.Reject(ctx, id, ""), sdk.ErrInvalid, "reject step"},
		{"unknown execution", k.Approve(ctx, eventlog.ID{9}, p.StepID), eventlog.ErrNotFound, ""},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		} else if !strings.Contains(c.err.Error(), c.verb) {
			t.Errorf("%s: %q does not say %q", c.name, c.err, c.verb)
		}
	}
	if n := len(events(t, k, id)); n != head {
		t.Fatalf("%d events after refused decisions, want %d", n, head)
	}
	if reqs, _ := store.Requests(ctx, id); len(reqs) != 0 {
		t.Fatalf("inbox holds %d requests after refused decisions", len(reqs))
	}
}

// TestApprovalRejected: Reject makes the call return ErrDenied with the
// note; the outcome is recorded as a denial (step.denied), which a fork
// past it replays without asking the gate again.
func TestApprovalRejected(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var bodies, asked atomic.Int64
	k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(countingGate(&asked)))
	id, _ := k.Start(ctx, "a", 5)
	done := make(chan error, 1)
	var res *sdk.Result
	go func() {
		var err error
		res, err = k.Run(ctx, id)
		done <- err
	}()
	awaitStatus(t, store, id, eventlog.StatusWaiting)
	p := pendingStep(t, k, id)
	if err := k.Reject(ctx, id, p.StepID, sdk.Note("too expensive")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil || out != "refused: approval rejected: too expensive" {
		t.Fatalf("output %q, %v", out, err)
	}
	wantEvents := []string{"created a", "dispatch 1", "approval.requested", "approval.rejected",
		"denied tool pay: approval rejected: too expensive", "completed"}
	if diff := cmp.Diff(wantEvents, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if err := k.Approve(ctx, id, p.StepID); !errors.Is(err, sdk.ErrNoPendingApproval) {
		t.Fatalf("Approve after Reject = %v", err)
	}

	// A fork after the denial replays it: no gate, no body, no approval.
	f, err := k.Fork(ctx, id, 5)
	if err != nil {
		t.Fatal(err)
	}
	res, err = k.Run(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Decode(&out); err != nil || out != "refused: approval rejected: too expensive" {
		t.Fatalf("fork output %q, %v", out, err)
	}
	if diff := cmp.Diff(append(wantEvents[:5:5], "fork at=5", "dispatch 2", "completed"), describeAll(events(t, k, f))); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}
	if bodies.Load() != 0 || asked.Load() != 1 {
		t.Fatalf("body ran %d times, gate asked %d times; want 0 and 1", bodies.Load(), asked.Load())
	}
}

// TestApprovalParksAndServeWakes: past ParkAfter the dispatch parks
// (dispatch.parked{approval}); Run returns ErrWaiting and nothing runs
// for it. Approve with no live owner appends the decision itself, which
// wakes the execution, and Serve runs it to completion without asking the
// gate again.
func TestApprovalParksAndServeWakes(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var bodies, asked atomic.Int64
	k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(20*time.Millisecond))
	id, _ := k.Start(ctx, "a", 1)
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	wantEvents := []string{"created a", "dispatch 1", "approval.requested", "dispatch.parked"}
	evs := events(t, k, id)
	if diff := cmp.Diff(wantEvents, describeAll(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if p := evs[3].Data.(*eventlog.DispatchParked); p.Reason != eventlog.ParkApproval || !p.WakeAt.IsZero() {
		t.Fatalf("dispatch.parked = %+v, want reason approval and no wake time", p)
	}
	info, _ := store.Info(ctx, id)
	if info.Status != eventlog.StatusWaiting || !info.WakeAt.IsZero() {
		t.Fatalf("info %+v, want waiting with no wake time", info)
	}

	// Serve leaves it alone while it waits.
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(5*time.Millisecond)) }()
	defer func() {
		stop()
		<-served
	}()
	p := pendingStep(t, k, id)
	if err := k.Approve(ctx, id, p.StepID, sdk.Note("go")); err != nil {
		t.Fatal(err)
	}
	// A hang guard, not a timing assertion: without the wake, Serve never
	// runs it again.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := k.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil || out != "paid $" {
		t.Fatalf("output %q, %v", out, err)
	}
	wantEvents = append(wantEvents, "approval.granted", "dispatch 2", "started tool pay at_most_once", "succeeded", "completed")
	if diff := cmp.Diff(wantEvents, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if bodies.Load() != 1 || asked.Load() != 1 {
		t.Fatalf("body ran %d times, gate asked %d times; want 1 and 1", bodies.Load(), asked.Load())
	}
}

// TestApprovalResumesAfterCrash: a dispatch that ends mid-wait (its
// process stopped) leaves the approval pending; a new kernel resumes the
// wait without asking the gate again, and takes the decision another
// kernel requested. And an interrupted wait decided with no owner running
// continues under Serve (the execution is running with no live owner).
func TestApprovalResumesAfterCrash(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var bodies, asked atomic.Int64
	register := approvalAgent(&bodies)
	gate := sdk.WithGate(countingGate(&asked))

	for _, decideWhileDown := range []bool{false, true} {
		bodies.Store(0)
		asked.Store(0)
		dying := newKernel(t, store, register, gate, sdk.WithOwner("dying"))
		id, _ := dying.Start(ctx, "a", 2)
		dctx, kill := context.WithCancel(ctx)
		died := make(chan error, 1)
		go func() { _, err := dying.Run(dctx, id); died <- err }()
		awaitStatus(t, store, id, eventlog.StatusWaiting)
		kill()
		if err := <-died; !errors.Is(err, context.Canceled) {
			t.Fatalf("killed Run = %v", err)
		}
		wantEvents := []string{"created a", "dispatch 1", "approval.requested"}
		if diff := cmp.Diff(wantEvents, describeAll(events(t, dying, id))); diff != "" {
			t.Fatalf("after the kill (-want +got):\n%s", diff)
		}
		p := pendingStep(t, dying, id)
		other := newKernel(t, store, register, gate, sdk.WithOwner("other"))
		resumed := newKernel(t, store, register, gate, sdk.WithOwner("resumed"))
		if decideWhileDown {
			// No live owner: Approve appends the decision itself; Serve
			// finds the execution interrupted and runs it.
			if err := other.Approve(ctx, id, p.StepID, sdk.Note("later")); err != nil {
				t.Fatal(err)
			}
			sctx, stop := context.WithCancel(ctx)
			served := make(chan error, 1)
			go func() { served <- resumed.Serve(sctx, sdk.PollEvery(5*time.Millisecond)) }()
			wctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard
			_, err := resumed.Wait(wctx, id)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			stop()
			<-served
			wantEvents = append(wantEvents, "approval.granted", "dispatch 2")
		} else {
			done := make(chan error, 1)
			go func() { _, err := resumed.Run(ctx, id); done <- err }()
			// The resumed dispatch waits again (dispatch 2, nothing asked).
			for len(events(t, resumed, id)) < 4 {
				time.Sleep(2 * time.Millisecond)
			}
			if err := other.Approve(ctx, id, p.StepID, sdk.Note("now")); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			wantEvents = append(wantEvents, "dispatch 2", "approval.granted")
		}
		wantEvents = append(wantEvents, "started tool pay at_most_once", "succeeded", "completed")
		if diff := cmp.Diff(wantEvents, describeAll(events(t, resumed, id))); diff != "" {
			t.Fatalf("decided while down %v: events (-want +got):\n%s", decideWhileDown, diff)
		}
		if bodies.Load() != 1 || asked.Load() != 1 {
			t.Fatalf("decided while down %v: body ran %d times, gate asked %d times; want 1 and 1",
				decideWhileDown, bodies.Load(), asked.Load())
		}
	}
}

// TestApproveForkEffects: with policy.ApproveForkEffects the root runs its
// at_most_once call freely; a fork that runs it live asks for approval.
// An approval recorded in the prefix never approves the fork's live run.
func TestApproveForkEffects(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var bodies atomic.Int64
	k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(policy.ApproveForkEffects()))
	id, _ := k.Start(ctx, "a", 1)
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	root := []string{"created a", "dispatch 1", "started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(root, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("root events (-want +got):\n%s", diff)
	}
	// A fork before the call runs it live: it must be approved.
	f, _ := k.Fork(ctx, id, 2)
	done := make(chan error, 1)
	go func() { _, err := k.Run(ctx, f); done <- err }()
	awaitStatus(t, store, f, eventlog.StatusWaiting)
	p := pendingStep(t, k, f)
	if p.Reason != "an at_most_once call in a fork needs approval" {
		t.Fatalf("reason %q", p.Reason)
	}
	if err := k.Approve(ctx, f, p.StepID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantFork := []string{"created a", "dispatch 1", "fork at=2", "dispatch 2", "approval.requested", "approval.granted",
		"started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(wantFork, describeAll(events(t, k, f))); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}

	// A fork of the fork after its approval (seq 6, before the call
	// started) asks again: the prefix's approval is not its own.
	ff, _ := k.Fork(ctx, f, 6)
	if err := k.Approve(ctx, ff, p.StepID); !errors.Is(err, sdk.ErrNoPendingApproval) {
		t.Fatalf("Approve of the prefix's approval in a fork = %v", err)
	}
	go func() { _, err := k.Run(ctx, ff); done <- err }()
	awaitStatus(t, store, ff, eventlog.StatusWaiting)
	if err := k.Reject(ctx, ff, pendingStep(t, k, ff).StepID, sdk.Note("not twice")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantFF := append(wantFork[:6:6], "fork at=6", "dispatch 3", "approval.requested", "approval.rejected",
		"denied tool pay: approval rejected: not twice", "completed")
	if diff := cmp.Diff(wantFF, describeAll(events(t, k, ff))); diff != "" {
		t.Fatalf("fork of fork events (-want +got):\n%s", diff)
	}
	if bodies.Load() != 2 {
		t.Fatalf("body ran %d times, want 2 (root, approved fork)", bodies.Load())
	}
}

// TestApprovalForkGatesOrphanRerun: every live attempt in a fork is gated
// (DESIGN §8½): a fork at an orphan's step.started re-runs it only once
// approved; a rejected re-run abandons the orphan and ends denied.
func TestApprovalForkGatesOrphanRerun(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var runs atomic.Int64
	rules, err := policy.ParseRules("approve tool:fetch in-fork re-runs in forks are approved")
	if err != nil {
		t.Fatal(err)
	}
	k := newKernel(t, store, func(k *sdk.Kernel) {
		fetch := sdk.DefineTool("fetch", func(context.Context, string) (string, error) {
			runs.Add(1)
			return "page", nil
		})
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			s, err := fetch.Call(ctx, "https://example.com")
			if errors.Is(err, sdk.ErrDenied) {
				return "denied", nil
			}
			return s, err
		})
	}, sdk.WithGate(rules.Gate()))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Seq 3 is fetch's step.started: in a fork at it, fetch is an orphan.
	for _, approve := range []bool{true, false} {
		f, err := k.Fork(ctx, id, 3)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := k.Run(ctx, f); done <- err }()
		awaitStatus(t, store, f, eventlog.StatusWaiting)
		p := pendingStep(t, k, f)
		want := []string{"created a", "dispatch 1", "started tool fetch", "fork at=3", "dispatch 2", "approval.requested"}
		if approve {
			err = k.Approve(ctx, f, p.StepID)
			want = append(want, "approval.granted", "started tool fetch attempt=2", "succeeded", "completed")
		} else {
			err = k.Reject(ctx, f, p.StepID, sdk.Note("no"))
			want = append(want, "approval.rejected", "step.abandoned", "denied tool fetch: approval rejected: no", "completed")
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, describeAll(events(t, k, f))); diff != "" {
			t.Fatalf("approve %v: fork events (-want +got):\n%s", approve, diff)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("fetch ran %d times, want 2 (root, approved re-run)", runs.Load())
	}
}

// awaitApproval polls until id awaits an approval requested after seq
// after, and returns it.
func awaitApproval(t *testing.T, k *sdk.Kernel, id eventlog.ID, after uint64) sdk.PendingApproval {
	t.Helper()
	for {
		list, err := k.AwaitedApprovals(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list {
			if a.RequestedAt > after {
				return a
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestApprovalForkGatesRetries: in a fork every attempt asks again (DESIGN
// §8½): the approval of the first attempt does not approve its retry.
func TestApprovalForkGatesRetries(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var attempts atomic.Int64
	rules, _ := policy.ParseRules("approve tool:flaky in-fork")
	k := newKernel(t, store, func(k *sdk.Kernel) {
		flaky := sdk.DefineTool("flaky", func(context.Context, none) (int, error) {
			if attempts.Add(1)%2 == 1 {
				return 0, errors.New("boom")
			}
			return 1, nil
		}, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2, Initial: time.Millisecond}))
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) { return flaky.Call(ctx, none{}) })
	}, sdk.WithGate(rules.Gate()))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	f, _ := k.Fork(ctx, id, 2)
	done := make(chan error, 1)
	go func() { _, err := k.Run(ctx, f); done <- err }()
	first := awaitApproval(t, k, f, 0)
	if err := k.Approve(ctx, f, first.StepID, sdk.Note("first")); err != nil {
		t.Fatal(err)
	}
	second := awaitApproval(t, k, f, first.RequestedAt)
	if second.StepID != first.StepID {
		t.Fatalf("the retry asks about step %s, the first attempt was %s", second.StepID, first.StepID)
	}
	if err := k.Approve(ctx, f, second.StepID, sdk.Note("second")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"created a", "dispatch 1", "fork at=2", "dispatch 2",
		"approval.requested", "approval.granted", "started tool flaky", "failed boom",
		"approval.requested", "approval.granted", "started tool flaky attempt=2", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, f))); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}
	if attempts.Load() != 4 {
		t.Fatalf("%d attempts ran, want 4 (two in the root, two in the fork)", attempts.Load())
	}
}

// TestApprovalCancelWhileParked: cancelling an execution parked on an
// approval ends it at once; it awaits nothing any more.
func TestApprovalCancelWhileParked(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var bodies, asked atomic.Int64
	k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(time.Millisecond))
	id, _ := k.Start(ctx, "a", 1)
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v", err)
	}
	p := pendingStep(t, k, id)
	if err := k.Cancel(ctx, id, "never mind"); err != nil {
		t.Fatal(err)
	}
	want := []string{"created a", "dispatch 1", "approval.requested", "dispatch.parked", "execution.cancel_requested", "execution.cancelled"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if list, err := k.Approvals(ctx, sdk.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("Approvals after cancel = %v, %v", list, err)
	}
	if err := k.Approve(ctx, id, p.StepID); !errors.Is(err, sdk.ErrNoPendingApproval) {
		t.Fatalf("Approve of a cancelled execution = %v", err)
	}
	if n := len(events(t, k, id)); n != len(want) {
		t.Fatalf("%d events after the refused Approve, want %d", n, len(want))
	}
}

// TestApprovalDecidedWhileParking: a decision the owner takes only after
// the waiting call gave up (it was in the inbox when the dispatch ended)
// lands before dispatch.parked; the park then wakes at once (WakeAt set),
// so the execution is not left waiting for a decision it has.
func TestApprovalDecidedWhileParking(t *testing.T) {
	ctx := t.Context()
	args, _ := json.Marshal(payArgs{Amount: 4})
	stepID := sdk.StepID(eventlog.StepTool, "pay", args, 0)
	for try := 0; ; try++ {
		store := &requestOnApproval{Store: newStore(t), requests: []eventlog.Payload{&eventlog.ApprovalGranted{StepID: stepID, By: "early"}}}
		var bodies atomic.Int64
		gate := func(context.Context, policy.Call) policy.Decision {
			return policy.Decision{Approval: true, Reason: "check"}
		}
		k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(gate), sdk.ParkAfter(time.Nanosecond))
		id, _ := k.Start(ctx, "a", 4)
		_, err := k.Run(ctx, id)
		got := describeAll(events(t, k, id))
		if err == nil && try < 5 {
			continue // the owner's poll took the decision before the call gave up: try again
		}
		if !errors.Is(err, sdk.ErrWaiting) {
			t.Fatalf("Run = %v (events %v)", err, got)
		}
		want := []string{"created a", "dispatch 1", "approval.requested", "approval.granted", "dispatch.parked"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("events (-want +got):\n%s", diff)
		}
		info, _ := store.Info(ctx, id)
		if info.Status != eventlog.StatusWaiting || info.WakeAt.IsZero() || info.WakeAt.After(time.Now()) {
			t.Fatalf("info %+v, want waiting with a wake time that has come", info)
		}
		res, err := k.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		if err := res.Decode(&out); err != nil || out != "paid $$$$" || bodies.Load() != 1 {
			t.Fatalf("output %q, %v, %d bodies", out, err, bodies.Load())
		}
		return
	}
}

// requestOnApproval is a store that, right after it appended an
// approval.requested, puts requests in that execution's inbox: decisions
// that arrive while the owner holds its lock, so that its next look in the
// inbox takes them.
type requestOnApproval struct {
	*pebblestore.Store
	requests []eventlog.Payload
}

func (s *requestOnApproval) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	n, err := s.Store.Append(ctx, id, head, evs...)
	if err != nil {
		return n, err
	}
	for _, ev := range evs {
		if ev.Kind() != eventlog.KindApprovalRequested {
			continue
		}
		for _, p := range s.requests {
			if _, err := s.Request(ctx, id, p, time.Now()); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// TestApprovalStaleDecisionsDropped: decisions that decide nothing — the
// second of two that raced past Approve's checks, one for a step that
// awaits none — leave the inbox with the owner's next write and add no
// event: the lineage stays well formed and Serve is not woken by them
// again.
func TestApprovalStaleDecisionsDropped(t *testing.T) {
	ctx := t.Context()
	args, _ := json.Marshal(payArgs{Amount: 2})
	stepID := sdk.StepID(eventlog.StepTool, "pay", args, 0)
	store := &requestOnApproval{Store: newStore(t), requests: []eventlog.Payload{
		&eventlog.ApprovalRejected{StepID: "no-such-step", By: "stale"},
		&eventlog.ApprovalGranted{StepID: stepID, By: "first"},
		&eventlog.ApprovalRejected{StepID: stepID, By: "second"},
	}}
	var bodies atomic.Int64
	gate := func(context.Context, policy.Call) policy.Decision {
		return policy.Decision{Approval: true, Reason: "check"}
	}
	k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(gate))
	id, _ := k.Start(ctx, "a", 2)
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	want := []string{"created a", "dispatch 1", "approval.requested", "approval.granted", "started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if g := evs[3].Data.(*eventlog.ApprovalGranted); g.By != "first" {
		t.Fatalf("the decision taken is %+v, want the first", g)
	}
	if reqs, err := store.Requests(ctx, id); err != nil || len(reqs) != 0 {
		t.Fatalf("inbox keeps %d requests (%v), want none", len(reqs), err)
	}
}
