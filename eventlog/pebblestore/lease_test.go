package pebblestore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/storetest"
)

func TestLeaser(t *testing.T) {
	storetest.TestLeaser(t, func(t *testing.T) storetest.LeaseStore { return openMem(t) })
}

// TestNoAppendAfterEnd: once an execution's terminal event is written,
// every append to it is refused with ErrInvalid and writes nothing, and an
// append that puts an event after a terminal one is refused whole; a fork
// at the terminal event continues it.
func TestNoAppendAfterEnd(t *testing.T) {
	ctx := t.Context()
	s := openMem(t)
	for _, end := range []eventlog.Payload{
		&eventlog.ExecutionCompleted{Output: []byte(`1`)},
		&eventlog.ExecutionFailed{Error: "no", Code: eventlog.FailHandler},
		&eventlog.ExecutionCancelled{Reason: "stop"},
	} {
		id := create(t, s, "a")
		// In one append: refused whole.
		_, err := s.Append(ctx, id, 1, dispatch(1), eventlog.Event{Data: end}, started("late", eventlog.StepTool))
		if !errors.Is(err, eventlog.ErrInvalid) {
			t.Fatalf("%s then step.started in one append = %v, want ErrInvalid", end.Kind(), err)
		}
		if h, _ := s.Head(ctx, id); h != 1 {
			t.Fatalf("refused append wrote: head %d", h)
		}
		head := appendAll(t, s, id, dispatch(1), eventlog.Event{Data: end})
		for _, late := range []eventlog.Event{started("late", eventlog.StepTool), succeeded("x"), dispatch(2)} {
			if _, err := s.Append(ctx, id, head, late); !errors.Is(err, eventlog.ErrInvalid) {
				t.Fatalf("%s after %s = %v, want ErrInvalid", late.Kind(), end.Kind(), err)
			}
			if _, err := s.AppendUnsynced(ctx, id, head, late); !errors.Is(err, eventlog.ErrInvalid) {
				t.Fatalf("unsynced %s after %s = %v, want ErrInvalid", late.Kind(), end.Kind(), err)
			}
		}
		if h, _ := s.Head(ctx, id); h != head {
			t.Fatalf("head %d after refused appends, want %d", h, head)
		}
		f, err := s.Fork(ctx, id, head, nil, t0)
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, s, f, dispatch(2))
	}
}

// TestEpochsRiseAcrossReopen: DESIGN §15½.5 — a claim after the folder was
// closed and reopened gets an epoch greater than every claim before, both
// when an append under the last claim rewrote the execution's record and
// when no append followed the last claim; and an append fenced with an
// epoch of before the reopen is refused once a new claim was made.
func TestEpochsRiseAcrossReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	reopen := func(s *pebblestore.Store) *pebblestore.Store {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := pebblestore.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	id := create(t, s, "a")
	var last eventlog.Lease
	claim := func(step string) eventlog.Lease {
		t.Helper()
		l, err := s.Claim(ctx, id, "A", time.Minute)
		if err != nil {
			t.Fatalf("%s: Claim: %v", step, err)
		}
		if l.Epoch <= last.Epoch {
			t.Fatalf("%s: Claim gave epoch %d after epoch %d; epochs must rise across reopens", step, l.Epoch, last.Epoch)
		}
		last = l
		return l
	}

	// The last write before the reopen is an append under the claim.
	l := claim("first claim")
	if _, err := s.Append(eventlog.WithEpoch(ctx, l.Epoch), id, 1, dispatch(1)); err != nil {
		t.Fatal(err)
	}
	s = reopen(s)
	stale := l
	l = claim("claim after a reopen that followed an append")
	if _, err := s.Append(eventlog.WithEpoch(ctx, stale.Epoch), id, 2, dispatch(2)); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("append under the epoch of before the reopen = %v, want ErrLeaseLost", err)
	}
	if _, err := s.Append(eventlog.WithEpoch(ctx, l.Epoch), id, 2, dispatch(2)); err != nil {
		t.Fatalf("append under the new epoch: %v", err)
	}

	// The last write before the reopen is the claim itself.
	if err := s.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	claim("claim after a release")
	s = reopen(s)
	claim("claim after a reopen that followed a claim")
}
