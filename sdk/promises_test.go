package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// Promises of issue 31 that no test protected: each test here fails when
// the code breaks the promise its comment states.

// leaseCall is one Claim or Renew that reached the store: when it was
// made, and until when the lease it returned lasts.
type leaseCall struct {
	at, expires time.Time
}

// timedLeases records every successful Claim and Renew of its store.
type timedLeases struct {
	*pebblestore.Store
	mu    *sync.Mutex
	calls *[]leaseCall
}

func (s timedLeases) record(at time.Time, l eventlog.Lease, err error) {
	if err != nil {
		return
	}
	s.mu.Lock()
	*s.calls = append(*s.calls, leaseCall{at: at, expires: l.Expires})
	s.mu.Unlock()
}

func (s timedLeases) Claim(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration) (eventlog.Lease, error) {
	at := time.Now()
	l, err := s.Store.Claim(ctx, id, owner, ttl)
	s.record(at, l, err)
	return l, err
}

// ClaimVersion records too: the kernel claims through it (DESIGN §19).
func (s timedLeases) ClaimVersion(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	at := time.Now()
	l, err := s.Store.ClaimVersion(ctx, id, owner, ttl, worker)
	s.record(at, l, err)
	return l, err
}

// ClaimToRun records too: the kernel claims to run through it (DESIGN
// §19 queues).
func (s timedLeases) ClaimToRun(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	at := time.Now()
	l, err := s.Store.ClaimToRun(ctx, id, owner, ttl, worker)
	s.record(at, l, err)
	return l, err
}

func (s timedLeases) Renew(ctx context.Context, l eventlog.Lease, ttl time.Duration) (eventlog.Lease, error) {
	at := time.Now()
	r, err := s.Store.Renew(ctx, l, ttl)
	s.record(at, r, err)
	return r, err
}

// TestLeaseNeverLapsesWhileRunning: a dispatch's lease never lapses, not
// even for a moment around a renewal, while its body runs for several
// TTLs: a second kernel's Run and a third owner's Claim, tried over and
// over, never get it; every renewal reaches the store with a third of the
// TTL or more to spare (it is made every third of the TTL and extends
// from now), so the chain of expiries covers the whole dispatch; only the
// first kernel's dispatch is in the lineage.
func TestLeaseNeverLapsesWhileRunning(t *testing.T) {
	ctx := context.Background()
	const ttl = 450 * time.Millisecond
	store := newStore(t)
	var (
		mu    sync.Mutex
		calls []leaseCall
	)
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return sdk.Step(ctx, "long", func(context.Context) (string, error) {
				time.Sleep(4 * ttl)
				return "done", nil
			})
		})
	}
	kA := newKernel(t, timedLeases{store, &mu, &calls}, register, sdk.WithOwner("A"), sdk.WithLeaseTTL(ttl))
	kB := newKernel(t, store, register, sdk.WithOwner("B"), sdk.WithLeaseTTL(ttl))
	id, err := kA.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := kA.Run(ctx, id); done <- err }()
	awaitStatus(t, store, id, eventlog.StatusRunning)

	var stolen atomic.Value // the first claim or Run that got the execution, as text
	var tries atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // another owner claims in a tight loop
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tries.Add(1)
			l, err := store.Claim(ctx, id, "C", time.Minute)
			if err == nil {
				// Once A's dispatch ended and released the lease, C may
				// claim it; before, never.
				if !ended(t, store, id) {
					stolen.CompareAndSwap(nil, fmt.Sprintf("C claimed epoch %d while A's dispatch ran", l.Epoch))
				}
				return
			}
			if !errors.Is(err, eventlog.ErrLeaseHeld) {
				stolen.CompareAndSwap(nil, fmt.Sprintf("C's Claim = %v, want ErrLeaseHeld", err))
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	go func() { // a second kernel tries to run it
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := kB.Run(ctx, id)
			if err == nil && ended(t, store, id) {
				return // after A's dispatch completed it
			}
			if !errors.Is(err, sdk.ErrBusy) {
				stolen.CompareAndSwap(nil, fmt.Sprintf("B's Run = %v, want ErrBusy", err))
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	err = <-done
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("A's Run = %v", err)
	}
	if s := stolen.Load(); s != nil {
		t.Fatalf("the lease lapsed while A's dispatch ran: %s", s)
	}
	wantEvents(t, kA, id, []string{"created a", "dispatch 1", "started local long", "succeeded", "completed"})

	mu.Lock()
	defer mu.Unlock()
	if len(calls) < 6 {
		t.Fatalf("%d claims and renewals in a body of four TTLs, want about twelve (every third of the TTL)", len(calls))
	}
	for i, c := range calls {
		// The store reads its clock after the call began: the lease
		// lasts the TTL from then, give or take a slow call.
		if d := c.expires.Sub(c.at); d < ttl || d > ttl+250*time.Millisecond {
			t.Errorf("call %d at %v returned a lease expiring %v later, want the TTL %v from now", i, c.at.Format("15:04:05.000"), d, ttl)
		}
		if i == 0 {
			continue
		}
		if spare := calls[i-1].expires.Sub(c.at); spare < ttl/3 {
			t.Errorf("renewal %d came %v before the lease it renewed expired, want a third of the TTL (%v) or more", i, spare, ttl/3)
		}
	}
	t.Logf("%d claims tried by C, %d claims and renewals by A", tries.Load(), len(calls))
}

// ended reports whether id's status is terminal.
func ended(t *testing.T, log eventlog.Log, id eventlog.ID) bool {
	info, err := log.Info(context.Background(), id)
	if err != nil {
		t.Errorf("Info: %v", err)
		return false
	}
	return info.Status.Terminal()
}

// TestCancelEndedWritesNothing: cancelling an execution that ended —
// completed, failed, or cancelled already — returns nil and writes
// nothing anywhere: no event in its lineage and no request left in its
// inbox (read from the store itself).
func TestCancelEndedWritesNothing(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "ok", func(ctx context.Context, _ none) (int, error) {
			return sdk.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil })
		})
		_, _ = sdk.Register(k, "bad", func(ctx context.Context, _ none) (int, error) {
			return 0, errors.New("no luck")
		})
	})
	completed, _ := k.Start(ctx, "ok", none{})
	if _, err := k.Run(ctx, completed); err != nil {
		t.Fatal(err)
	}
	failed, _ := k.Start(ctx, "bad", none{})
	if _, err := k.Run(ctx, failed); err == nil {
		t.Fatal("Run of bad succeeded")
	}
	cancelled, _ := k.Start(ctx, "ok", none{})
	if err := k.Cancel(ctx, cancelled, "first"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		id   eventlog.ID
		want []string
	}{
		{"completed", completed, []string{"created ok", "dispatch 1", "started local one", "succeeded", "completed"}},
		{"failed", failed, []string{"created bad", "dispatch 1", "execution_failed handler"}},
		{"cancelled", cancelled, []string{"created ok", "execution.cancel_requested", "execution.cancelled"}},
	} {
		wantEvents(t, k, c.id, c.want)
		if err := k.Cancel(ctx, c.id, "too late"); err != nil {
			t.Errorf("%s: Cancel = %v, want nil", c.name, err)
		}
		if diff := cmp.Diff(c.want, describeAll(events(t, k, c.id))); diff != "" {
			t.Errorf("%s: events after Cancel (-want +got):\n%s", c.name, diff)
		}
		reqs, err := store.Requests(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) != 0 {
			t.Errorf("%s: Cancel left %d request(s) in the inbox of the ended execution: %+v", c.name, len(reqs), reqs[0].Data)
		}
		if _, ok, _ := store.Holder(ctx, c.id); ok {
			t.Errorf("%s: Cancel left a live lease on the ended execution", c.name)
		}
	}
}

// TestSecondDecisionWhileFirstInInbox: while a decision on a step waits in
// the inbox for its live owner to take it, a second decision on that step
// — the other verb or the same — is refused with ErrNoPendingApproval: it
// is neither written beside the first nor accepted and dropped. The inbox
// holds the first decision alone, and once the owner goes, the execution
// runs with that decision.
func TestSecondDecisionWhileFirstInInbox(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var bodies, asked atomic.Int64
	k := newKernel(t, store, approvalAgent(&bodies), sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(20*time.Millisecond))
	id, _ := k.Start(ctx, "a", 2)
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	p := pendingStep(t, k, id)
	// A live owner that does not take its requests yet.
	l, err := store.Claim(ctx, id, "elsewhere", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	head := len(events(t, k, id))
	if err := k.Approve(ctx, id, p.StepID, sdk.Note("first")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"reject", k.Reject(ctx, id, p.StepID, sdk.Note("second"))},
		{"approve again", k.Approve(ctx, id, p.StepID, sdk.Note("third"))},
	} {
		if !errors.Is(c.err, sdk.ErrNoPendingApproval) {
			t.Errorf("%s while the first decision awaits its owner = %v, want ErrNoPendingApproval", c.name, c.err)
		}
	}
	reqs, err := store.Requests(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 {
		t.Fatalf("inbox holds %d requests, want the first decision alone", len(reqs))
	}
	if g, ok := reqs[0].Data.(*eventlog.ApprovalGranted); !ok || g.StepID != p.StepID || g.Note != "first" {
		t.Fatalf("inbox holds %s %+v, want the first approval", reqs[0].Data.Kind(), reqs[0].Data)
	}
	if n := len(events(t, k, id)); n != head {
		t.Fatalf("%d events after the decisions, want %d: the inbox's owner takes them", n, head)
	}
	if err := store.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil || out != "paid $$" {
		t.Fatalf("output %q, %v; want the first decision's", out, err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "approval.requested", "dispatch.parked",
		"approval.granted", "dispatch 2", "started tool pay at_most_once", "succeeded", "completed"})
	if bodies.Load() != 1 {
		t.Fatalf("pay ran %d times, want once", bodies.Load())
	}
}
