package pebblestore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// Appends to different executions proceed concurrently, forks and creates
// among them; afterwards every event is present. On disk with synced
// appends, so that Pebble's commit pipeline groups them.
func TestConcurrentExecutions(t *testing.T) {
	s := openDir(t, t.TempDir())
	ctx := t.Context()
	const execs, each = 16, 25
	ids := make([]eventlog.ID, execs)
	forks := make([]eventlog.ID, execs)
	var wg sync.WaitGroup
	for e := range execs {
		wg.Go(func() {
			id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: fmt.Sprint(e)}, t0)
			if err != nil {
				t.Error(err)
				return
			}
			ids[e] = id
			for i := range each {
				if _, err := s.Append(ctx, id, uint64(i+1), dispatch(uint64(i+1))); err != nil {
					t.Error(err)
					return
				}
				if i == each/2 {
					if forks[e], err = s.Fork(ctx, id, uint64(i+2), nil, t0); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for e, id := range ids {
		evs := events(t, s, id, 1)
		if len(evs) != each+1 {
			t.Errorf("execution %d has %d events, want %d", e, len(evs), each+1)
		}
		for i, ev := range evs[1:] {
			if ev.Data.(*eventlog.DispatchStarted).Dispatch != uint64(i+1) {
				t.Errorf("execution %d event %d is %+v", e, ev.Seq, ev.Data)
			}
		}
		fevs := events(t, s, forks[e], 1)
		if len(fevs) != each/2+3 || diff(evs[:each/2+2], fevs[:each/2+2]) != "" {
			t.Errorf("fork of execution %d reads %d events, not its parent's prefix", e, len(fevs))
		}
	}
	if n := countList(t, s); n != 2*execs {
		t.Errorf("List has %d executions, want %d", n, 2*execs)
	}
}

// Close waits for operations in progress and then refuses new ones; none
// of them fails with anything but ErrClosed.
func TestCloseDuringAppends(t *testing.T) {
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id := create(t, s, "coder")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				head, err := s.Head(ctx, id)
				if err == nil {
					_, err = s.Append(ctx, id, head, dispatch(uint64(w*1000+i+1)))
				}
				if errors.Is(err, eventlog.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, eventlog.ErrConflict) {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	for head := uint64(0); head < 50; {
		if head, err = s.Head(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
}
