package pebblestore_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// TestCloseDuringIteration: while Close waits for a loop over Events, a
// store call made inside the loop fails with ErrClosed instead of blocking,
// the loop finishes, and Close returns.
func TestCloseDuringIteration(t *testing.T) {
	ctx := context.Background()
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "a"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, id, 1, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1}}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	n := 0
	for _, err := range s.Events(ctx, id, 1) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 1 {
			go func() { closed <- s.Close() }()
			for {
				_, err := s.Head(ctx, id)
				if errors.Is(err, eventlog.ErrClosed) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				runtime.Gosched()
			}
		}
	}
	if n != 2 {
		t.Fatalf("the loop saw %d events, want 2", n)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
