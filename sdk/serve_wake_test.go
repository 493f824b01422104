package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
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
// ended) and then parked for an approval, each with a child.ended request
// in its inbox, are runnable only by their decision (DESIGN §15½.6): with Concurrency(4) a fifth, pending execution
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
		// A child.ended left in the inbox (DESIGN §15½.6: a child that
		// ended after the dispatch that parked had dropped its step's
		// requests) does not wake an execution that awaits a decision.
		var inbox eventlog.Inbox
		if !eventlog.As(logA, &inbox) {
			t.Fatal("the log keeps no inbox")
		}
		if _, err := inbox.Request(ctx, id, &eventlog.ChildEnded{StepID: "late"}, time.Now()); err != nil {
			t.Fatal(err)
		}
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

	if err := kServe.Approve(ctx, waiting[0], pendingStep(t, kServe, waiting[0]).StepID, sdk.Note("ok")); err != nil {
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

// TestServeLeavesAParentWhoseChildWaits: a parent parked on a child that
// itself waits — asleep, or awaiting an approval — is not dispatched again
// while the child waits (issue 31): Serve polling every 2 ms for 200 ms
// leaves the parent with exactly one dispatch.started, its lineage ending
// in dispatch.parked{child}.
func TestServeLeavesAParentWhoseChildWaits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child func(ctx context.Context) error
	}{
		{"child asleep", func(ctx context.Context) error { return sdk.Sleep(ctx, time.Hour) }},
		{"child awaiting approval", func(ctx context.Context) error {
			_, err := sdk.DefineTool("pay", func(context.Context, payArgs) (int, error) { return 0, nil }).Call(ctx, payArgs{Amount: 1})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var asked atomic.Int64
			k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
				child, _ := sdk.Register(k, "c", func(ctx context.Context, _ int) (int, error) { return 0, tc.child(ctx) })
				_, _ = sdk.Register(k, "p", func(ctx context.Context, n int) (int, error) { return child.Call(ctx, n) })
			}, sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(20*time.Millisecond))
			parent, err := k.Start(ctx, "p", 1)
			if err != nil {
				t.Fatal(err)
			}
			sctx, stop := context.WithCancel(ctx)
			served := make(chan error, 1)
			go func() { served <- k.Serve(sctx, sdk.PollEvery(2*time.Millisecond)) }()
			awaitStatus(t, k.Log(), parent, eventlog.StatusWaiting)
			time.Sleep(200 * time.Millisecond)
			stop()
			<-served
			evs := events(t, k, parent)
			want := []string{"created p", "dispatch 1", "started child c", "dispatch.parked"}
			if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
				t.Fatalf("parent (-want +got):\n%s", diff)
			}
			if p := evs[3].Data.(*eventlog.DispatchParked); p.Reason != eventlog.ParkChild {
				t.Fatalf("parked for %q, want child", p.Reason)
			}
			kids, err := k.List(ctx, sdk.Filter{Caller: parent})
			if err != nil || len(kids) != 1 || kids[0].Status != eventlog.StatusWaiting {
				t.Fatalf("children %+v (%v), want one waiting", kids, err)
			}
		})
	}
}

// brokenStore is a Pebble store whose appends to the executions in broken
// fail with a transient error: a store error that only those executions
// meet (a row the database refuses, a full partition).
type brokenStore struct {
	*pebblestore.Store
	mu       sync.Mutex
	broken   map[eventlog.ID]bool
	attempts map[eventlog.ID]int
}

func (s *brokenStore) fails(id eventlog.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken[id] {
		s.attempts[id]++
		return true
	}
	return false
}

func (s *brokenStore) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if s.fails(id) {
		return 0, errReset
	}
	return s.Store.Append(ctx, id, head, evs...)
}

func (s *brokenStore) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if s.fails(id) {
		return 0, errReset
	}
	return s.Store.AppendUnsynced(ctx, id, head, evs...)
}

// TestServeBacksOffFailingExecutions: DESIGN §15½.11. Two executions
// whose appends always fail take Serve's two slots only for a few
// attempts: Serve backs each off with a doubling delay, so that a healthy
// execution started after them runs at once. Info shows each one's
// LastError and RetryAt; the Warn line is logged once per execution, not
// per attempt; nothing is appended to them. Once their store heals they
// run to completion and their backoff is cleared.
func TestServeBacksOffFailingExecutions(t *testing.T) {
	ctx := t.Context()
	store := &brokenStore{Store: newStore(t), broken: map[eventlog.ID]bool{}, attempts: map[eventlog.ID]int{}}
	var logs syncBuffer
	k := newKernel(t, store, registerDouble, sdk.WithLogger(textLogger(&logs)))
	var broken []eventlog.ID
	for i := range 2 {
		id, err := k.Start(ctx, "double", i)
		if err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		store.broken[id] = true
		store.mu.Unlock()
		broken = append(broken, id)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.Concurrency(2), sdk.PollEvery(5*time.Millisecond)) }()
	defer func() { stop(); <-served }()
	time.Sleep(150 * time.Millisecond)

	healthy, err := k.Start(ctx, "double", 21)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	res, err := k.Wait(wctx, healthy)
	cancel()
	if err != nil || string(res.Output) != "42" {
		t.Fatalf("the healthy execution beside two failing ones: %+v, %v", res, err)
	}
	now := time.Now()
	for _, id := range broken {
		info, err := k.Log().Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info.LastError, errReset.Error()) || !info.RetryAt.After(now.Add(-time.Minute)) {
			t.Fatalf("Info of a failing execution: LastError %q, RetryAt %v", info.LastError, info.RetryAt)
		}
		if diff := cmp.Diff([]string{"created double"}, describeAll(events(t, k, id))); diff != "" {
			t.Fatalf("failing execution (-want +got):\n%s", diff)
		}
		store.mu.Lock()
		attempts := store.attempts[id]
		store.mu.Unlock()
		if attempts < 2 {
			t.Fatalf("%d attempts, want several", attempts)
		}
		if n := strings.Count(logs.String(), "backing off\" execution="+id.String()); n != 1 {
			t.Fatalf("logged the backoff of %s %d times after %d attempts, want once:\n%s", id, n, attempts, logs.String())
		}
	}

	store.mu.Lock()
	clear(store.broken)
	store.mu.Unlock()
	for _, id := range broken {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := k.Wait(wctx, id)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// Serve clears the note once the run that got past it returned.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			info, err := k.Log().Info(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.LastError == "" && info.RetryAt.IsZero() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Info after recovery: %q %v", info.LastError, info.RetryAt)
			}
		}
	}
	if n := strings.Count(logs.String(), "got past the error"); n != 2 {
		t.Fatalf("logged %d recoveries, want 2:\n%s", n, logs.String())
	}
}
