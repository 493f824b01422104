package sdk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// watchAll runs Watch in a goroutine and sends what it yields on evs, the
// error (or nil) on done when the watch ends.
func watchAll(ctx context.Context, k *sdk.Kernel, id eventlog.ID) (<-chan eventlog.Event, <-chan error) {
	evs := make(chan eventlog.Event, 64)
	done := make(chan error, 1)
	go func() {
		defer close(evs)
		for ev, err := range k.Watch(ctx, id) {
			if err != nil {
				done <- err
				return
			}
			evs <- ev
		}
		done <- nil
	}()
	return evs, done
}

// next reads n events from evs and describes them.
func next(t *testing.T, evs <-chan eventlog.Event, n int) []string {
	t.Helper()
	var got []eventlog.Event
	for range n {
		ev, ok := <-evs
		if !ok {
			t.Fatalf("watch ended after %v, want %d events", describeAll(got), n)
		}
		got = append(got, ev)
	}
	return describeAll(got)
}

// DESIGN §13: Watch yields the lineage from the first event, then each
// event as it is appended, and ends after the execution's own terminal
// event; a fork's Watch ends at the fork's own terminal event (§8½).
func TestWatch(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	gate := make(chan struct{})
	a, _ := sdk.Register(k, "w", func(ctx context.Context, n int) (int, error) {
		x, err := sdk.Step(ctx, "one", func(context.Context) (int, error) { return n + 1, nil })
		if err != nil {
			return 0, err
		}
		<-gate
		return sdk.Step(ctx, "two", func(context.Context) (int, error) { return x * 2, nil })
	})
	id, err := a.Start(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	evs, done := watchAll(ctx, k, id)
	if d := cmp.Diff([]string{"created w"}, next(t, evs, 1)); d != "" {
		t.Fatalf("before Run (-want +got):\n%s", d)
	}
	ran := make(chan error, 1)
	go func() { _, err := a.Run(ctx, id); ran <- err }()
	// The events appended while the handler runs arrive while it waits.
	if d := cmp.Diff([]string{"dispatch 1", "started local one", "succeeded"}, next(t, evs, 3)); d != "" {
		t.Fatalf("while running (-want +got):\n%s", d)
	}
	close(gate)
	if d := cmp.Diff([]string{"started local two", "succeeded", "completed"}, next(t, evs, 3)); d != "" {
		t.Fatalf("after the gate (-want +got):\n%s", d)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("watch ended with %v, want nil after the terminal event", err)
	}
	if _, ok := <-evs; ok {
		t.Fatal("watch yielded an event after the terminal event")
	}

	// A fork at the parent's terminal event: its Watch goes past the
	// prefix's execution.completed and ends at the fork's own.
	head := uint64(len(events(t, k, id)))
	fid, err := k.Fork(ctx, id, head)
	if err != nil {
		t.Fatal(err)
	}
	fevs, fdone := watchAll(ctx, k, fid)
	want := []string{"created w", "dispatch 1", "started local one", "succeeded", "started local two", "succeeded", "completed", "fork at=7"}
	if d := cmp.Diff(want, next(t, fevs, len(want))); d != "" {
		t.Fatalf("fork prefix (-want +got):\n%s", d)
	}
	if _, err := a.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"dispatch 2", "completed"}, next(t, fevs, 2)); d != "" {
		t.Fatalf("fork run (-want +got):\n%s", d)
	}
	if err := <-fdone; err != nil {
		t.Fatalf("fork watch ended with %v", err)
	}

	// An ended execution's Watch yields its lineage and ends.
	var n int
	for _, err := range k.Watch(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 7 {
		t.Fatalf("Watch of an ended execution yielded %d events, want 7", n)
	}
}

func TestWatchEnds(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	a, _ := sdk.Register(k, "w", func(ctx context.Context, n int) (int, error) { return n, nil })
	id, err := a.Start(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// ctx ends before the execution does: the error is ctx's, yielded last.
	cctx, cancel := context.WithCancel(ctx)
	evs, done := watchAll(cctx, k, id)
	next(t, evs, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v, want context.Canceled", err)
	}

	// Breaking out of the loop stops the watch.
	for range k.Watch(ctx, id) {
		break
	}

	// An unknown execution.
	var unknown eventlog.ID
	unknown[0] = 1
	for ev, err := range k.Watch(ctx, unknown) {
		if !errors.Is(err, eventlog.ErrNotFound) {
			t.Fatalf("Watch(unknown) = %v, %v; want ErrNotFound", ev, err)
		}
	}
}
