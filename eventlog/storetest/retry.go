package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestRetryKeeper checks the eventlog.RetryKeeper contract (DESIGN
// §15½.11) of a store that implements it: Info shows the noted LastError
// and RetryAt, an empty error clears both, an unknown execution is
// ErrNotFound, and — on a Claimer — ClaimRunnable skips the execution
// until its RetryAt.
func TestRetryKeeper(t *testing.T, open func(t *testing.T) Store) {
	ctx := t.Context()
	s := open(t)
	keeper, ok := s.(eventlog.RetryKeeper)
	if !ok {
		t.Skip("the store keeps no retry notes")
	}
	id := newExecution(t, s)
	info := func() eventlog.Info {
		t.Helper()
		in, err := s.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	if in := info(); in.LastError != "" || !in.RetryAt.IsZero() {
		t.Fatalf("a new execution: LastError %q, RetryAt %v; want none", in.LastError, in.RetryAt)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
	if err := keeper.SetRetry(ctx, id, "boom", at); err != nil {
		t.Fatal(err)
	}
	if in := info(); in.LastError != "boom" || !in.RetryAt.Equal(at) {
		t.Fatalf("after SetRetry: LastError %q, RetryAt %v; want boom, %v", in.LastError, in.RetryAt, at)
	}
	if c, ok := s.(eventlog.Claimer); ok {
		ls, err := c.ClaimRunnable(ctx, "w", time.Minute, []string{"a"}, 10, time.Now())
		if err != nil || len(ls) != 0 {
			t.Fatalf("ClaimRunnable before RetryAt = %+v, %v; want nothing", ls, err)
		}
		ls, err = c.ClaimRunnable(ctx, "w", time.Minute, []string{"a"}, 10, at)
		if err != nil || len(ls) != 1 || ls[0].ID != id {
			t.Fatalf("ClaimRunnable at RetryAt = %+v, %v; want %s", ls, err, id)
		}
		if err := c.Release(ctx, ls[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := keeper.SetRetry(ctx, id, "", at); err != nil {
		t.Fatal(err)
	}
	if in := info(); in.LastError != "" || !in.RetryAt.IsZero() {
		t.Fatalf("after clearing: LastError %q, RetryAt %v; want none", in.LastError, in.RetryAt)
	}
	if err := keeper.SetRetry(ctx, eventlog.NewID(), "boom", at); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("SetRetry of an unknown execution = %v, want ErrNotFound", err)
	}
	if ak, ok := s.(eventlog.AwaitKeeper); ok {
		t.Run("AwaitKeeper", func(t *testing.T) { testAwaitKeeper(t, s, ak) })
	}
}

// testAwaitKeeper checks eventlog.AwaitKeeper (DESIGN §15½.4): Info shows
// the awaited owner beside LastError and RetryAt; bad input notes
// nothing; SetRetry clears the owner; ClaimRunnable skips the execution
// for every other owner until RetryAt and claims it at once for the
// awaited one, and a claim by that owner (ClaimRunnable, or Claim)
// clears the note.
func testAwaitKeeper(t *testing.T, s Store, ak eventlog.AwaitKeeper) {
	ctx := t.Context()
	id := newExecution(t, s)
	info := func() eventlog.Info {
		t.Helper()
		in, err := s.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
	for _, c := range [][2]string{{"", "awaiting"}, {"X", ""}} {
		if err := ak.SetAwaiting(ctx, id, c[0], c[1], at); !errors.Is(err, eventlog.ErrInvalid) {
			t.Fatalf("SetAwaiting(owner %q, error %q) = %v, want ErrInvalid", c[0], c[1], err)
		}
	}
	if in := info(); in.LastError != "" || in.AwaitedOwner != "" || !in.RetryAt.IsZero() {
		t.Fatalf("after refused notes: %+v, want none", in)
	}
	if err := ak.SetAwaiting(ctx, eventlog.NewID(), "X", "awaiting X", at); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("SetAwaiting of an unknown execution = %v, want ErrNotFound", err)
	}
	note := func() {
		t.Helper()
		if err := ak.SetAwaiting(ctx, id, "X", "awaiting X", at); err != nil {
			t.Fatal(err)
		}
		if in := info(); in.LastError != "awaiting X" || in.AwaitedOwner != "X" || !in.RetryAt.Equal(at) {
			t.Fatalf("after SetAwaiting: LastError %q, AwaitedOwner %q, RetryAt %v; want awaiting X, X, %v",
				in.LastError, in.AwaitedOwner, in.RetryAt, at)
		}
	}
	note()
	if err := ak.SetRetry(ctx, id, "boom", at); err != nil {
		t.Fatal(err)
	}
	if in := info(); in.LastError != "boom" || in.AwaitedOwner != "" {
		t.Fatalf("SetRetry after SetAwaiting: LastError %q, AwaitedOwner %q; want boom and no owner", in.LastError, in.AwaitedOwner)
	}
	note()
	var c eventlog.Claimer
	if eventlog.As(s, &c) {
		// claim claims for owner and releases what it claimed; it
		// returns the lease of id, if it was claimed (the store may hold
		// other runnable executions).
		claim := func(owner string) (eventlog.Lease, bool) {
			t.Helper()
			ls, err := c.ClaimRunnable(ctx, owner, time.Minute, []string{"a"}, 100, time.Now())
			if err != nil {
				t.Fatalf("ClaimRunnable by %s: %v", owner, err)
			}
			var got eventlog.Lease
			found := false
			for _, l := range ls {
				if l.ID == id {
					got, found = l, true
				}
				if err := c.Release(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			return got, found
		}
		if l, ok := claim("Y"); ok {
			t.Fatalf("ClaimRunnable by another owner before RetryAt claimed %+v, want it skipped", l)
		}
		if _, ok := claim("X"); !ok {
			t.Fatalf("ClaimRunnable by the awaited owner did not claim %s, want it at once", id)
		}
		if in := info(); in.LastError != "" || in.AwaitedOwner != "" || !in.RetryAt.IsZero() {
			t.Fatalf("after the awaited owner's claim: %+v, want no note", in)
		}
		note()
	}
	l, err := s.Claim(ctx, id, "Y", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if in := info(); in.AwaitedOwner != "X" {
		t.Fatalf("after another owner's claim: AwaitedOwner %q, want X kept", in.AwaitedOwner)
	}
	if err := s.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, id, "X", time.Minute); err != nil {
		t.Fatal(err)
	}
	if in := info(); in.LastError != "" || in.AwaitedOwner != "" || !in.RetryAt.IsZero() {
		t.Fatalf("after the awaited owner's Claim: %+v, want no note", in)
	}
}

// TestQuarantiner checks the eventlog.Quarantiner contract of a store that
// implements it: Info shows a quarantine and its error, a second
// Quarantine keeps the first error and is not newly, Unquarantine lifts it
// once, an unknown execution is ErrNotFound and an empty error
// ErrInvalid, events are untouched, and — on a Claimer — ClaimRunnable
// never claims a quarantined execution, and claims it again once lifted.
func TestQuarantiner(t *testing.T, open func(t *testing.T) Store) {
	ctx := t.Context()
	s := open(t)
	q, ok := s.(eventlog.Quarantiner)
	if !ok {
		t.Skip("the store keeps no quarantine")
	}
	id, other := newExecution(t, s), newExecution(t, s)
	info := func(id eventlog.ID) eventlog.Info {
		t.Helper()
		in, err := s.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	if in := info(id); in.Quarantined || in.QuarantineError != "" {
		t.Fatalf("a new execution: Quarantined %v %q; want none", in.Quarantined, in.QuarantineError)
	}
	before := readEvents(t, s, id)
	if newly, err := q.Quarantine(ctx, id, "corrupt: seq 3"); err != nil || !newly {
		t.Fatalf("Quarantine = %v, %v; want newly", newly, err)
	}
	if newly, err := q.Quarantine(ctx, id, "again"); err != nil || newly {
		t.Fatalf("second Quarantine = %v, %v; want not newly", newly, err)
	}
	if in := info(id); !in.Quarantined || in.QuarantineError != "corrupt: seq 3" {
		t.Fatalf("after Quarantine: %v %q; want quarantined by the first error", in.Quarantined, in.QuarantineError)
	}
	if in := info(other); in.Quarantined {
		t.Fatalf("another execution shows quarantined")
	}
	if got := readEvents(t, s, id); !sameEvents(got, before) {
		t.Fatalf("Quarantine changed the events: %v, want %v", kinds(got), kinds(before))
	}
	if infos := listAll(t, s, eventlog.Filter{}); len(infos) != 2 || !infos[0].Quarantined && !infos[1].Quarantined {
		t.Fatalf("List shows no quarantine: %+v", infos)
	}
	c, claimer := s.(eventlog.Claimer)
	if claimer {
		ls, err := c.ClaimRunnable(ctx, "w", time.Minute, []string{"a"}, 10, time.Now())
		if err != nil || len(ls) != 1 || ls[0].ID != other {
			t.Fatalf("ClaimRunnable with one quarantined = %+v, %v; want only %s", ls, err, other)
		}
		if err := c.Release(ctx, ls[0]); err != nil {
			t.Fatal(err)
		}
	}
	if was, err := q.Unquarantine(ctx, id); err != nil || !was {
		t.Fatalf("Unquarantine = %v, %v; want it was", was, err)
	}
	if was, err := q.Unquarantine(ctx, id); err != nil || was {
		t.Fatalf("second Unquarantine = %v, %v; want it was not", was, err)
	}
	if in := info(id); in.Quarantined || in.QuarantineError != "" {
		t.Fatalf("after Unquarantine: %v %q; want none", in.Quarantined, in.QuarantineError)
	}
	if claimer {
		ls, err := c.ClaimRunnable(ctx, "w2", time.Minute, []string{"a"}, 10, time.Now().Add(time.Hour))
		if err != nil || len(ls) != 2 {
			t.Fatalf("ClaimRunnable after Unquarantine = %+v, %v; want both", ls, err)
		}
	}
	if _, err := q.Quarantine(ctx, eventlog.NewID(), "x"); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Quarantine of an unknown execution = %v, want ErrNotFound", err)
	}
	if _, err := q.Unquarantine(ctx, eventlog.NewID()); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Unquarantine of an unknown execution = %v, want ErrNotFound", err)
	}
	if _, err := q.Quarantine(ctx, id, ""); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Quarantine without an error = %v, want ErrInvalid", err)
	}
	if in := info(id); in.Quarantined {
		t.Fatalf("a refused Quarantine quarantined")
	}
}
