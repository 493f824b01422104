package pebblestore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// A clone holds the same executions under the same IDs, and the two logs
// go apart from then on: an append to one is not seen in the other.
func TestClone(t *testing.T) {
	ctx := context.Background()
	s := openMem(t)
	id := create(t, s, "a")
	c, err := s.Clone(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, c, id, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1, Owner: "clone"}})
	appendAll(t, s, id, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1, Owner: "source"}})
	for name, st := range map[string]*pebblestore.Store{"clone": c, "source": s} {
		evs := events(t, st, id, 1)
		if len(evs) != 2 {
			t.Fatalf("%s holds %d events, want 2", name, len(evs))
		}
		if _, ok := evs[0].Data.(*eventlog.ExecutionCreated); !ok {
			t.Errorf("%s: first event %T", name, evs[0].Data)
		}
		if got := evs[1].Data.(*eventlog.DispatchStarted).Owner; got != name {
			t.Errorf("%s: dispatch owner %q", name, got)
		}
	}
	// A clone of a clone, and the clone still open after its source closed.
	cc, err := c.Clone(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if evs := events(t, cc, id, 1); len(evs) != 2 || evs[1].Data.(*eventlog.DispatchStarted).Owner != "clone" {
		t.Errorf("the clone of the clone holds %v", evs)
	}
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clone(ctx); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("Clone of a closed store: %v, want ErrClosed", err)
	}
}

// A store on disk is not cloned: ErrInvalid.
func TestCloneOnDisk(t *testing.T) {
	s := openDir(t, t.TempDir())
	if _, err := s.Clone(context.Background()); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("Clone of a store on disk: %v, want ErrInvalid", err)
	}
}
