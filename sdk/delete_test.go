package sdk_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestDeleteParentForksRun (DESIGN §14): after the parent is deleted, a
// fork of it still runs to the same output, replaying the prefix it
// inherited (the tool is not called again for the steps before the fork
// point), and can itself be forked; the parent is gone from every
// operation.
func TestDeleteParentForksRun(t *testing.T) {
	ctx := context.Background()
	calls := 0
	var a *sdk.Agent[int, int]
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		add := sdk.DefineTool("add", func(_ context.Context, n int) (int, error) { calls++; return n + 1, nil })
		a, _ = sdk.Register(k, "counter", func(ctx context.Context, n int) (int, error) {
			for range 3 {
				var err error
				if n, err = add.Call(ctx, n); err != nil {
					return 0, err
				}
			}
			return n, nil
		})
	})
	id, err := a.Start(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run(ctx, id); err != nil || out != 13 {
		t.Fatalf("Run = %d, %v", out, err)
	}
	parent := events(t, k, id)
	// Fork after the first tool call's step.succeeded.
	var at uint64
	for _, ev := range parent {
		if _, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			at = ev.Seq
			break
		}
	}
	f, err := k.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	calls = 0
	if out, err := a.Run(ctx, f); err != nil || out != 13 {
		t.Fatalf("Run of the fork after its parent was deleted = %d, %v", out, err)
	}
	if calls != 2 {
		t.Errorf("the fork called the tool %d times, want 2 (the first call replays)", calls)
	}
	fe := events(t, k, f)
	if got, want := describeAll(fe[:at]), describeAll(parent[:at]); !slices.Equal(got, want) {
		t.Errorf("the fork's prefix after Delete = %v, want %v", got, want)
	}
	if _, err := k.Fork(ctx, f, at); err != nil {
		t.Errorf("Fork of the fork inside the deleted parent's part: %v", err)
	}
	for name, err := range map[string]error{
		"Run":    func() error { _, err := a.Run(ctx, id); return err }(),
		"Wait":   func() error { _, err := a.Wait(ctx, id); return err }(),
		"Fork":   func() error { _, err := k.Fork(ctx, id, 1); return err }(),
		"Cancel": k.Cancel(ctx, id, "late"),
		"Delete": k.Delete(ctx, id),
	} {
		if !errors.Is(err, eventlog.ErrNotFound) {
			t.Errorf("%s of the deleted execution = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := k.Coverage(ctx, id, 1); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("Coverage of the deleted execution = %v, want ErrNotFound", err)
	}
	infos, err := k.List(ctx, sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.ID == id {
			t.Errorf("List shows the deleted execution")
		}
	}
}

// TestDeleteRunningRefused: a handler in flight holds its execution; Delete
// is refused with ErrRunning and appends and removes nothing.
func TestDeleteRunningRefused(t *testing.T) {
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	var a *sdk.Agent[none, none]
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		a, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			_, err := sdk.Step(ctx, "wait", func(context.Context) (int, error) {
				close(entered)
				<-release
				return 1, nil
			})
			return none{}, err
		})
	})
	id, _ := a.Start(ctx, none{})
	done := make(chan error, 1)
	go func() { _, err := a.Run(ctx, id); done <- err }()
	<-entered
	before := describeAll(events(t, k, id))
	err := k.Delete(ctx, id)
	if !errors.Is(err, sdk.ErrRunning) {
		t.Errorf("Delete of a running execution = %v, want ErrRunning", err)
	}
	if got := describeAll(events(t, k, id)); !slices.Equal(got, before) {
		t.Errorf("a refused Delete changed the events: %v, were %v", got, before)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, id); err != nil {
		t.Errorf("Delete after the run completed: %v", err)
	}
}
