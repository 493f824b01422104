package eventlog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
)

// TestLeaseState runs the lease rules every store shares (DESIGN §11)
// through one execution's life: claims fenced by epochs, a live lease that
// refuses other claims until the instant it expires, renewals and releases
// of a stale lease refused as lost, and the check of an append with and
// without an epoch.
func TestLeaseState(t *testing.T) {
	id := eventlog.NewID()
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var s eventlog.LeaseState
	bg := context.Background()

	if _, ok := s.Holder(id, t0); ok {
		t.Fatal("never claimed: Holder reports a lease")
	}
	if err := s.Admit(bg, id, t0); err != nil {
		t.Fatalf("never claimed: unleased append refused: %v", err)
	}
	if err := s.Admit(eventlog.WithEpoch(bg, 0), id, t0); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("never claimed: append under epoch 0: err = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(eventlog.Lease{ID: id}); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("never claimed: release of epoch 0: err = %v, want ErrLeaseLost", err)
	}

	a, err := s.Claim(id, "a", time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := eventlog.Lease{ID: id, Owner: "a", Epoch: 1, Expires: t0.Add(time.Minute)}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Fatalf("first claim (-want +got):\n%s", diff)
	}
	if h, ok := s.Holder(id, t0.Add(time.Minute-time.Nanosecond)); !ok || h != a {
		t.Fatalf("just before expiry: Holder = %+v, %t; want %+v", h, ok, a)
	}
	for _, owner := range []string{"b", "a"} {
		_, err := s.Claim(id, owner, time.Minute, t0.Add(time.Minute-time.Nanosecond))
		var held *eventlog.HeldError
		if !errors.As(err, &held) || !errors.Is(err, eventlog.ErrLeaseHeld) || held.Lease != a {
			t.Fatalf("claim by %q of a live lease: err = %v, want a HeldError of %+v", owner, err, a)
		}
		if errors.Is(err, eventlog.ErrLeaseLost) || !strings.Contains(err.Error(), `"a" (epoch 1)`) {
			t.Fatalf("claim by %q of a live lease: err = %v", owner, err)
		}
	}
	if err := s.Admit(bg, id, t0); !errors.Is(err, eventlog.ErrLeaseHeld) {
		t.Fatalf("unleased append while a is live: err = %v, want ErrLeaseHeld", err)
	}
	if err := s.Admit(eventlog.WithEpoch(bg, 1), id, t0); err != nil {
		t.Fatalf("append under the live epoch: %v", err)
	}
	if s.Epoch != 1 || s.Owner != "a" {
		t.Fatalf("refused claims changed the state: %+v", s)
	}

	// Renewal moves the expiry; a bad ttl changes nothing.
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := s.Renew(a, ttl, t0); !errors.Is(err, eventlog.ErrInvalid) {
			t.Fatalf("renew with ttl %v: err = %v, want ErrInvalid", ttl, err)
		}
	}
	a, err = s.Renew(a, 2*time.Minute, t0.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(150 * time.Second); !a.Expires.Equal(want) || !s.Expires.Equal(want) || a.Epoch != 1 {
		t.Fatalf("renewed: %+v, state %+v; want expiry %v, epoch 1", a, s, want)
	}

	// At the instant it expires the lease is no longer live: an unleased
	// append is admitted (nobody claimed since), and b may claim.
	exp := a.Expires
	if _, ok := s.Holder(id, exp); ok {
		t.Fatal("at its expiry the lease is still reported live")
	}
	if err := s.Admit(bg, id, exp); err != nil {
		t.Fatalf("unleased append after expiry: %v", err)
	}
	if err := s.Admit(eventlog.WithEpoch(bg, 1), id, exp); err != nil {
		t.Fatalf("expired but unclaimed epoch 1: append refused: %v", err)
	}
	b, err := s.Claim(id, "b", time.Minute, exp)
	if err != nil {
		t.Fatal(err)
	}
	if b.Epoch != 2 || b.Owner != "b" || !b.Expires.Equal(exp.Add(time.Minute)) {
		t.Fatalf("claim after expiry: %+v, want epoch 2 by b", b)
	}

	// a's epoch is fenced now.
	if _, err := s.Renew(a, time.Minute, exp); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("renew of a stale lease: err = %v, want ErrLeaseLost", err)
	}
	if err := s.Release(a); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("release of a stale lease: err = %v, want ErrLeaseLost", err)
	}
	if err := s.Admit(eventlog.WithEpoch(bg, 1), id, exp); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("append under a stale epoch: err = %v, want ErrLeaseLost", err)
	}
	if s.Epoch != 2 || s.Owner != "b" || s.Released {
		t.Fatalf("refused calls changed the state: %+v", s)
	}

	// Release ends b at once; releasing twice is no error; the released
	// epoch can neither renew nor append, and anyone may claim.
	if err := s.Release(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(b); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if _, ok := s.Holder(id, exp); ok {
		t.Fatal("released lease still reported live")
	}
	if _, err := s.Renew(b, time.Minute, exp); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("renew of a released lease: err = %v, want ErrLeaseLost", err)
	}
	if err := s.Admit(eventlog.WithEpoch(bg, 2), id, exp); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("append under a released epoch: err = %v, want ErrLeaseLost", err)
	}
	if err := s.Admit(bg, id, exp); err != nil {
		t.Fatalf("unleased append after release: %v", err)
	}
	c, err := s.Claim(id, "b", time.Minute, exp)
	if err != nil {
		t.Fatal(err)
	}
	if c.Epoch != 3 || s.Released {
		t.Fatalf("claim after release: %+v, state %+v; want epoch 3, not released", c, s)
	}
}

// TestCheckClaim checks the arguments of a claim: an owner, and a positive
// ttl; a refused claim changes nothing.
func TestCheckClaim(t *testing.T) {
	id := eventlog.NewID()
	now := time.Now()
	for _, c := range []struct {
		owner string
		ttl   time.Duration
	}{{"", time.Minute}, {"a", 0}, {"a", -time.Nanosecond}} {
		if err := eventlog.CheckClaim(c.owner, c.ttl); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("CheckClaim(%q, %v) = %v, want ErrInvalid", c.owner, c.ttl, err)
		}
		var s eventlog.LeaseState
		if _, err := s.Claim(id, c.owner, c.ttl, now); !errors.Is(err, eventlog.ErrInvalid) || s != (eventlog.LeaseState{}) {
			t.Errorf("Claim(%q, %v) = %v, state %+v; want ErrInvalid and no change", c.owner, c.ttl, err, s)
		}
	}
	if err := eventlog.CheckClaim("a", time.Nanosecond); err != nil {
		t.Errorf("CheckClaim(a, 1ns) = %v", err)
	}
}

// TestEpochFrom checks that WithEpoch's epoch reads back, and that a context
// without one (or none at all) carries no epoch.
func TestEpochFrom(t *testing.T) {
	if e, ok := eventlog.EpochFrom(eventlog.WithEpoch(context.Background(), 7)); !ok || e != 7 {
		t.Errorf("EpochFrom(WithEpoch(7)) = %d, %t", e, ok)
	}
	if _, ok := eventlog.EpochFrom(context.Background()); ok {
		t.Error("EpochFrom(Background) reports an epoch")
	}
	//lint:ignore SA1012 a nil context is what is tested
	if _, ok := eventlog.EpochFrom(nil); ok {
		t.Error("EpochFrom(nil) reports an epoch")
	}
}
