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
}
