package sdk_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// Durable cancel (DESIGN §9, §8½): a request through the store's inbox.

// TestCancelRunning: a running handler sees its context cancelled within
// 100 ms of the request; the execution ends execution.cancelled (terminal:
// Run and Wait return ErrCancelled, and nothing more is appended).
func TestCancelRunning(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	entered := make(chan struct{})
	seen := make(chan time.Time, 1)
	a, _ := sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
		_, err := sdk.Step(ctx, "wait", func(ctx context.Context) (int, error) {
			close(entered)
			<-ctx.Done()
			seen <- time.Now()
			return 0, ctx.Err()
		})
		return none{}, err
	})
	id, _ := a.Start(ctx, none{})
	done := make(chan error, 1)
	go func() { _, err := a.Run(ctx, id); done <- err }()
	<-entered
	asked := time.Now()
	if err := k.Cancel(ctx, id, "user pressed stop"); err != nil {
		t.Fatal(err)
	}
	if d := (<-seen).Sub(asked); d > 100*time.Millisecond {
		t.Errorf("the handler saw the cancel after %v, want within 100ms", d)
	}
	err := <-done
	var ce *sdk.CancelledError
	if !errors.Is(err, sdk.ErrCancelled) || !errors.As(err, &ce) || ce.Reason != "user pressed stop" {
		t.Fatalf("Run = %v, want ErrCancelled with the reason", err)
	}
	want := []string{"created a", "dispatch 1", "started local wait", "execution.cancel_requested", "cancelled", "execution.cancelled"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	head := len(events(t, k, id))
	if _, err := a.Run(ctx, id); !errors.Is(err, sdk.ErrCancelled) {
		t.Fatalf("Run of a cancelled execution = %v", err)
	}
	if _, err := a.Wait(ctx, id); !errors.Is(err, sdk.ErrCancelled) {
		t.Fatalf("Wait of a cancelled execution = %v", err)
	}
	if err := k.Cancel(ctx, id, "again"); err != nil {
		t.Fatalf("cancelling an ended execution = %v, want nil", err)
	}
	if n := len(events(t, k, id)); n != head {
		t.Fatalf("%d events after Run and Cancel of the ended execution, want %d", n, head)
	}
}

// TestCancelWithoutOwner: a pending execution, and an interrupted one (its
// dispatch died), are cancelled at once by Cancel itself.
func TestCancelWithoutOwner(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	var ran int
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			ran++
			return sdk.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil })
		})
	}
	k := newKernel(t, store, register)
	pending, _ := k.Start(ctx, "a", none{})
	if err := k.Cancel(ctx, pending, "not needed"); err != nil {
		t.Fatal(err)
	}
	want := []string{"created a", "execution.cancel_requested", "execution.cancelled"}
	if diff := cmp.Diff(want, describeAll(events(t, k, pending))); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	if info, _ := store.Info(ctx, pending); info.Status != eventlog.StatusCancelled {
		t.Fatalf("status %s", info.Status)
	}

	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(2) // dispatch.started and step.started, then the "process" dies
	dying := newKernel(t, crash, register)
	interrupted, _ := dying.Start(ctx, "a", none{})
	if _, err := dying.Run(ctx, interrupted); !errors.Is(err, errCrash) {
		t.Fatalf("dying Run = %v", err)
	}
	if err := k.Cancel(ctx, interrupted, "gave up"); err != nil {
		t.Fatal(err)
	}
	want = []string{"created a", "dispatch 1", "started local one", "execution.cancel_requested", "execution.cancelled"}
	if diff := cmp.Diff(want, describeAll(events(t, k, interrupted))); diff != "" {
		t.Fatalf("interrupted (-want +got):\n%s", diff)
	}
	if _, err := k.Run(ctx, interrupted); !errors.Is(err, sdk.ErrCancelled) {
		t.Fatalf("Run after cancel = %v", err)
	}
	if ran != 1 {
		t.Fatalf("the handler ran %d times, want 1 (before the crash)", ran)
	}
	if err := k.Cancel(ctx, eventlog.ID{7}, "x"); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Cancel of an unknown execution = %v, want ErrNotFound", err)
	}
}

// TestCancelParentCancelsChild: cancelling a parent cancels its running
// child; the parent's child step then fails and the parent ends cancelled.
func TestCancelParentCancelsChild(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	entered := make(chan struct{})
	child, _ := sdk.Register(k, "child", func(ctx context.Context, _ none) (none, error) {
		_, err := sdk.Step(ctx, "long", func(ctx context.Context) (int, error) {
			close(entered)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		return none{}, err
	})
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, _ none) (none, error) {
		return child.Call(ctx, none{})
	})
	id, _ := parent.Start(ctx, none{})
	done := make(chan error, 1)
	go func() { _, err := parent.Run(ctx, id); done <- err }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the parent ended (%v) before its child started", err)
	}
	if err := k.Cancel(ctx, id, "stop all"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, sdk.ErrCancelled) {
		t.Fatalf("parent Run = %v", err)
	}
	kids, _ := k.List(ctx, sdk.Filter{Caller: id})
	if len(kids) != 1 {
		t.Fatalf("%d children", len(kids))
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := k.Wait(wctx, kids[0].ID); !errors.Is(err, sdk.ErrCancelled) {
		t.Fatalf("child = %v, want cancelled", err)
	}
}

// refusedRequests is a store whose inbox refuses requests for the
// executions in refuse.
type refusedRequests struct {
	*pebblestore.Store
	mu     sync.Mutex
	refuse map[eventlog.ID]bool
}

var errRequestRefused = errors.New("test: request refused")

func (s *refusedRequests) Request(ctx context.Context, id eventlog.ID, p eventlog.Payload, at time.Time) (uint64, error) {
	s.mu.Lock()
	refused := s.refuse[id]
	s.mu.Unlock()
	if refused {
		return 0, errRequestRefused
	}
	return s.Store.Request(ctx, id, p, at)
}

// TestCancelReportsAChildItCouldNotCancel: when the cancel of a child
// fails, Cancel of the parent says so (the parent itself is cancelled);
// the child, untouched, goes on and ends as it would have.
func TestCancelReportsAChildItCouldNotCancel(t *testing.T) {
	ctx := context.Background()
	store := &refusedRequests{Store: newStore(t), refuse: map[eventlog.ID]bool{}}
	k := newKernel(t, store, func(*sdk.Kernel) {}, sdk.ParkAfter(20*time.Millisecond))
	release := make(chan struct{})
	child, _ := sdk.Register(k, "child", func(ctx context.Context, _ none) (int, error) {
		<-release
		return 7, nil
	})
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, _ none) (int, error) {
		return child.Call(ctx, none{})
	})
	id, _ := parent.Start(ctx, none{})
	if _, err := parent.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("parent Run = %v, want ErrWaiting", err)
	}
	kids, _ := k.List(ctx, sdk.Filter{Caller: id})
	if len(kids) != 1 {
		t.Fatalf("%d children, want 1", len(kids))
	}
	store.mu.Lock()
	store.refuse[kids[0].ID] = true
	store.mu.Unlock()
	if err := k.Cancel(ctx, id, "stop"); !errors.Is(err, errRequestRefused) {
		t.Fatalf("Cancel = %v, want the child's refused request", err)
	}
	if info, _ := store.Info(ctx, id); info.Status != eventlog.StatusCancelled {
		t.Fatalf("parent %s, want cancelled", info.Status)
	}
	close(release)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := child.Wait(wctx, kids[0].ID); err != nil || out != 7 {
		t.Fatalf("child = %d, %v; want 7", out, err)
	}
}
