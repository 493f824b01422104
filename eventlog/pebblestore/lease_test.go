package pebblestore_test

import (
	"errors"
	"testing"

	"github.com/forkline/forkline/eventlog"

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
