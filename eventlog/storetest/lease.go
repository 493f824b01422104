package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// LeaseStore is what the lease checks need of a store.
type LeaseStore interface {
	eventlog.Log
	eventlog.Leaser
}

// TestLeaser checks the eventlog.Leaser contract of the stores open makes;
// open returns a fresh, empty store each call and closes it at cleanup.
func TestLeaser(t *testing.T, open func(t *testing.T) LeaseStore) {
	t.Run("ClaimRenewRelease", func(t *testing.T) { testClaimRenewRelease(t, open(t)) })
	t.Run("Takeover", func(t *testing.T) { testTakeover(t, open(t)) })
	t.Run("Fencing", func(t *testing.T) { testFencing(t, open(t)) })
	t.Run("BadInput", func(t *testing.T) { testLeaseBadInput(t, open(t)) })
	t.Run("RacingClaims", func(t *testing.T) { testRacingClaims(t, open(t)) })
	t.Run("EpochsRise", func(t *testing.T) { testEpochsRise(t, open(t)) })
	t.Run("RenewFromNow", func(t *testing.T) { testRenewFromNow(t, open(t)) })
}

// testEpochsRise: DESIGN §15½.5 — every claim of an execution gets an
// epoch greater than every earlier one's, after a release and after an
// expiry, and appends in between (which rewrite what the store keeps of
// the execution) do not bring an epoch back.
func testEpochsRise(t *testing.T, s LeaseStore) {
	ctx := t.Context()
	id := newExecution(t, s)
	var last uint64
	claim := func(step string, ttl time.Duration) eventlog.Lease {
		t.Helper()
		l, err := s.Claim(ctx, id, "A", ttl)
		if err != nil {
			t.Fatalf("%s: Claim: %v", step, err)
		}
		if l.Epoch <= last {
			t.Fatalf("%s: Claim gave epoch %d after epoch %d; epochs must rise", step, l.Epoch, last)
		}
		last = l.Epoch
		return l
	}
	head := uint64(1)
	l := claim("first claim", time.Minute)
	var err error
	if head, err = s.Append(eventlog.WithEpoch(ctx, l.Epoch), id, head, dispatchEvent(1)); err != nil {
		t.Fatalf("Append under epoch %d: %v", l.Epoch, err)
	}
	if err := s.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l = claim("claim after release", shortTTL)
	if head, err = s.Append(eventlog.WithEpoch(ctx, l.Epoch), id, head, dispatchEvent(2)); err != nil {
		t.Fatalf("Append under epoch %d: %v", l.Epoch, err)
	}
	waitExpired(t, s, id)
	l = claim("claim after expiry", time.Minute)
	if err := s.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// An append without a lease rewrites the execution's record too.
	if _, err = s.Append(ctx, id, head, dispatchEvent(3)); err != nil {
		t.Fatalf("Append without a lease: %v", err)
	}
	claim("claim after an unleased append", time.Minute)
}

func newExecution(t *testing.T, s eventlog.Log) eventlog.ID {
	t.Helper()
	id, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`{}`)}, time.Now())
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return id
}

func dispatchEvent(n uint64) eventlog.Event {
	return eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: n}}
}

func testClaimRenewRelease(t *testing.T, s LeaseStore) {
	ctx := t.Context()
	id := newExecution(t, s)
	if _, ok, err := s.Holder(ctx, id); err != nil || ok {
		t.Fatalf("Holder of a new execution = %v, %v; want none", ok, err)
	}
	l, err := s.Claim(ctx, id, "A", time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if l.ID != id || l.Owner != "A" || l.Epoch == 0 || !l.Expires.After(time.Now()) {
		t.Fatalf("Claim returned %+v", l)
	}
	if h, ok, err := s.Holder(ctx, id); err != nil || !ok || h.Epoch != l.Epoch || h.Owner != "A" {
		t.Fatalf("Holder = %+v, %v, %v; want A's lease", h, ok, err)
	}
	// A live lease is held against everyone, its own owner too.
	for _, owner := range []string{"B", "A"} {
		_, err := s.Claim(ctx, id, owner, time.Minute)
		var held *eventlog.HeldError
		if !errors.Is(err, eventlog.ErrLeaseHeld) || !errors.As(err, &held) || held.Lease.Owner != "A" {
			t.Fatalf("Claim by %s of a held execution = %v, want ErrLeaseHeld naming A", owner, err)
		}
	}
	r, err := s.Renew(ctx, l, 2*time.Minute)
	if err != nil || r.Epoch != l.Epoch || !r.Expires.After(l.Expires) {
		t.Fatalf("Renew = %+v, %v; want the same epoch, a later expiry", r, err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := s.Release(ctx, r); err != nil {
		t.Fatalf("second Release: %v, want no error", err)
	}
	if _, ok, _ := s.Holder(ctx, id); ok {
		t.Fatal("Holder after Release: a lease is still live")
	}
	if _, err := s.Renew(ctx, r, time.Minute); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("Renew after Release = %v, want ErrLeaseLost", err)
	}
	l2, err := s.Claim(ctx, id, "B", time.Minute)
	if err != nil || l2.Epoch <= l.Epoch {
		t.Fatalf("Claim after Release = %+v, %v; want a greater epoch than %d", l2, err, l.Epoch)
	}
}

func testTakeover(t *testing.T, s LeaseStore) {
	ctx := t.Context()
	id := newExecution(t, s)
	a, err := s.Claim(ctx, id, "A", shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	waitExpired(t, s, id)
	if _, ok, _ := s.Holder(ctx, id); ok {
		t.Fatal("an expired lease is still live")
	}
	b, err := s.Claim(ctx, id, "B", time.Minute)
	if err != nil || b.Epoch <= a.Epoch {
		t.Fatalf("Claim after expiry = %+v, %v", b, err)
	}
	if _, err := s.Renew(ctx, a, time.Minute); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("Renew of the taken-over lease = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(ctx, a); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("Release of the taken-over lease = %v, want ErrLeaseLost", err)
	}
	if h, ok, _ := s.Holder(ctx, id); !ok || h.Owner != "B" {
		t.Fatalf("Holder = %+v, %v; want B", h, ok)
	}
}

func testFencing(t *testing.T, s LeaseStore) {
	ctx := t.Context()
	id := newExecution(t, s)
	head := uint64(1)
	appendAt := func(ctx context.Context, n uint64, unsynced bool) error {
		var err error
		if unsynced {
			_, err = s.AppendUnsynced(ctx, id, head, dispatchEvent(n))
		} else {
			_, err = s.Append(ctx, id, head, dispatchEvent(n))
		}
		if err == nil {
			head++
		}
		return err
	}
	// Unleased appends are accepted while nobody holds the execution.
	if err := appendAt(ctx, 1, false); err != nil {
		t.Fatalf("unleased append of an unheld execution: %v", err)
	}
	a, err := s.Claim(ctx, id, "A", shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	actx := eventlog.WithEpoch(ctx, a.Epoch)
	if err := appendAt(actx, 2, false); err != nil {
		t.Fatalf("append under the live lease: %v", err)
	}
	if err := appendAt(ctx, 3, false); !errors.Is(err, eventlog.ErrLeaseHeld) {
		t.Fatalf("unleased append while A holds it = %v, want ErrLeaseHeld", err)
	}
	waitExpired(t, s, id)
	// Expired but not taken over: the owner's writes still land.
	if err := appendAt(actx, 3, true); err != nil {
		t.Fatalf("append under an expired lease nobody took over: %v", err)
	}
	b, err := s.Claim(ctx, id, "B", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, unsynced := range []bool{false, true} {
		if err := appendAt(actx, 4, unsynced); !errors.Is(err, eventlog.ErrLeaseLost) {
			t.Fatalf("append under the taken-over epoch (unsynced %v) = %v, want ErrLeaseLost", unsynced, err)
		}
	}
	if got, _ := s.Head(ctx, id); got != head {
		t.Fatalf("head %d after refused appends, want %d", got, head)
	}
	if err := appendAt(eventlog.WithEpoch(ctx, b.Epoch), 4, false); err != nil {
		t.Fatalf("append under the new epoch: %v", err)
	}
	if err := s.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := appendAt(eventlog.WithEpoch(ctx, b.Epoch), 5, false); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("append under a released lease = %v, want ErrLeaseLost", err)
	}
	if err := appendAt(ctx, 5, false); err != nil {
		t.Fatalf("unleased append after the release: %v", err)
	}
}

func testLeaseBadInput(t *testing.T, s LeaseStore) {
	ctx := t.Context()
	id := newExecution(t, s)
	if _, err := s.Claim(ctx, id, "", time.Minute); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Claim with no owner = %v, want ErrInvalid", err)
	}
	if _, err := s.Claim(ctx, id, "A", 0); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Claim with ttl 0 = %v, want ErrInvalid", err)
	}
	if _, err := s.Claim(ctx, eventlog.ID{1}, "A", time.Minute); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Claim of an unknown execution = %v, want ErrNotFound", err)
	}
	if _, ok, _ := s.Holder(ctx, id); ok {
		t.Fatal("a refused claim left a lease")
	}
	l, err := s.Claim(ctx, id, "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, l, -time.Second); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Renew with a negative ttl = %v, want ErrInvalid", err)
	}
	forged := l
	forged.Epoch += 7
	if _, err := s.Renew(ctx, forged, time.Minute); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("Renew of an epoch never claimed = %v, want ErrLeaseLost", err)
	}
}

func testRacingClaims(t *testing.T, s LeaseStore) {
	ctx := t.Context()
	id := newExecution(t, s)
	const n = 16
	var wg sync.WaitGroup
	wins := make(chan eventlog.Lease, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l, err := s.Claim(ctx, id, string(rune('a'+i)), time.Minute); err == nil {
				wins <- l
			} else if !errors.Is(err, eventlog.ErrLeaseHeld) {
				t.Errorf("Claim: %v", err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	if len(wins) != 1 {
		t.Fatalf("%d racing claims won, want exactly 1", len(wins))
	}
}

// shortTTL is the lease of checks that wait for one to expire: long enough
// that a store on a network database does the checks made under it before
// it expires.
const shortTTL = 400 * time.Millisecond

// waitExpired waits until id has no live lease.
func waitExpired(t *testing.T, s eventlog.Leaser, id eventlog.ID) {
	t.Helper()
	for start := time.Now(); ; {
		l, ok, err := s.Holder(t.Context(), id)
		if err != nil {
			t.Fatalf("Holder: %v", err)
		}
		if !ok {
			return
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the lease %+v of %s is live 30s after it was to expire", l, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testRenewFromNow: Renew sets the expiry to ttl from now (the store's
// clock), not from the previous expiry, whether that lengthens or shortens
// the lease, and Holder reports what Renew returned. A lease renewed with a
// short ttl lapses after it, and another owner may claim it.
func testRenewFromNow(t *testing.T, s LeaseStore) {
	ctx := t.Context()
	id := newExecution(t, s)
	l, err := s.Claim(ctx, id, "A", time.Minute)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	// The store's clock may be a database's: allow it to differ a little.
	const skew = 2 * time.Second
	within := func(what string, got time.Time, ttl time.Duration, before, after time.Time) {
		t.Helper()
		if got.Before(before.Add(ttl-skew)) || got.After(after.Add(ttl+skew)) {
			t.Fatalf("%s: expires %v, want %v from now (between %v and %v)", what, got, ttl, before.Add(ttl), after.Add(ttl))
		}
	}
	for _, ttl := range []time.Duration{time.Minute, 10 * time.Minute, 20 * time.Second} {
		before := time.Now()
		r, err := s.Renew(ctx, l, ttl)
		after := time.Now()
		if err != nil || r.Epoch != l.Epoch || r.Owner != "A" {
			t.Fatalf("Renew(%v) = %+v, %v; want A's lease, same epoch", ttl, r, err)
		}
		within(fmt.Sprintf("Renew(%v)", ttl), r.Expires, ttl, before, after)
		h, ok, err := s.Holder(ctx, id)
		if err != nil || !ok || !h.Expires.Equal(r.Expires) {
			t.Fatalf("Holder after Renew(%v) = %+v, %v, %v; want the renewed lease %+v", ttl, h, ok, err, r)
		}
		l = r
	}
	// A renewal with a short ttl lapses after it: the minutes granted
	// before do not carry over.
	if _, err := s.Renew(ctx, l, shortTTL); err != nil {
		t.Fatalf("Renew(%v): %v", shortTTL, err)
	}
	waitExpired(t, s, id)
	if l2, err := s.Claim(ctx, id, "B", time.Minute); err != nil || l2.Epoch <= l.Epoch {
		t.Fatalf("Claim by B after the short renewal lapsed = %+v, %v", l2, err)
	}
}
