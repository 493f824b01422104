package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// Executions you can manage (DESIGN §9): idempotent start, deadlines,
// listing, Wait, Serve, children.

func TestStartWithKey(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(*sdk.Kernel) {})
	a, _ := sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) { return n, nil })
	b, _ := sdk.Register(k, "b", func(ctx context.Context, n int) (int, error) { return n, nil })
	id, err := a.Start(ctx, 1, sdk.WithKey("order-7"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Start(ctx, 1, sdk.WithKey("order-7"))
	if err != nil || again != id {
		t.Fatalf("second Start with the key = %s, %v; want %s", again, err, id)
	}
	if _, err := a.Start(ctx, 2, sdk.WithKey("order-7")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("same key, other input = %v, want ErrConflict", err)
	}
	if _, err := b.Start(ctx, 1, sdk.WithKey("order-7")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("same key, other agent = %v, want ErrConflict", err)
	}
	if n := len(listAll(t, store)); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	// The key is recorded in execution.created.
	if c, ok := events(t, k, id)[0].Data.(*eventlog.ExecutionCreated); !ok || c.Key != "order-7" {
		t.Fatalf("execution.created = %+v", events(t, k, id)[0].Data)
	}
	for _, key := range []string{"", string(make([]byte, sdk.MaxKeyLen+1))} {
		if _, err := a.Start(ctx, 1, sdk.WithKey(key)); !errors.Is(err, sdk.ErrInvalid) {
			t.Fatalf("WithKey(%d bytes) = %v, want ErrInvalid", len(key), err)
		}
	}
	if n := len(listAll(t, store)); n != 1 {
		t.Fatalf("%d executions after refused starts, want 1", n)
	}
	// A key of MaxKeyLen bytes is allowed.
	long := strings.Repeat("k", sdk.MaxKeyLen)
	if lid, err := a.Start(ctx, 1, sdk.WithKey(long)); err != nil {
		t.Fatalf("WithKey(%d bytes) = %v", len(long), err)
	} else if c := events(t, k, lid)[0].Data.(*eventlog.ExecutionCreated); c.Key != long {
		t.Fatalf("execution.created keeps a key of %d bytes, want %d", len(c.Key), len(long))
	}

	// Racing starts with one key start one execution.
	var wg sync.WaitGroup
	ids := make(chan eventlog.ID, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := a.Start(ctx, 5, sdk.WithKey("race"))
			if err != nil {
				t.Error(err)
				return
			}
			ids <- id
		}()
	}
	wg.Wait()
	close(ids)
	distinct := map[eventlog.ID]bool{}
	for id := range ids {
		distinct[id] = true
	}
	if len(distinct) != 1 || len(listAll(t, store)) != 3 {
		t.Fatalf("racing starts made %d IDs, %d executions in all; want 1 and 3", len(distinct), len(listAll(t, store)))
	}
}

// TestDeadline: past its deadline the handler's context is cancelled and
// the execution fails with Code deadline; a deadline in the past is
// refused at Start.
func TestDeadline(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	slow, _ := sdk.Register(k, "slow", func(ctx context.Context, _ none) (none, error) {
		_, err := sdk.Step(ctx, "wait", func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		return none{}, err
	})
	if _, err := slow.Start(ctx, none{}, sdk.Deadline(time.Now().Add(-time.Second))); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("a deadline in the past = %v, want ErrInvalid", err)
	}
	id, err := slow.Start(ctx, none{}, sdk.Deadline(time.Now().Add(150*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = slow.Run(ctx, id)
	var ee *sdk.ExecutionError
	if !errors.As(err, &ee) || ee.Code != eventlog.FailDeadline || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want a deadline failure", err)
	}
	want := []string{"created slow", "dispatch 1", "started local wait", "cancelled", "execution_failed deadline"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if _, err := slow.Run(ctx, id); !errors.As(err, &ee) || ee.Code != eventlog.FailDeadline || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Run = %v, want the recorded deadline failure", err)
	}

	// A deadline that passes while nobody runs the execution fails it at
	// the next dispatch, before the handler starts.
	id, _ = slow.Start(ctx, none{}, sdk.Deadline(time.Now().Add(20*time.Millisecond)))
	time.Sleep(40 * time.Millisecond)
	if _, err := slow.Run(ctx, id); !errors.As(err, &ee) || ee.Code != eventlog.FailDeadline {
		t.Fatalf("Run after the deadline = %v", err)
	}
	if diff := cmp.Diff([]string{"created slow", "execution_failed deadline"}, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestForkDeadline: a fork never inherits its parent's deadline (DESIGN
// §8½); sdk.Deadline given to Fork is the fork's own, recorded in
// fork.created, and ends the fork when it passes; a past one is refused with
// nothing written.
func TestForkDeadline(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(*sdk.Kernel) {})
	release := make(chan struct{})
	a, _ := sdk.Register(k, "gated", func(ctx context.Context, _ none) (none, error) {
		if _, err := sdk.Step(ctx, "one", func(ctx context.Context) (int, error) { return 1, nil }); err != nil {
			return none{}, err
		}
		_, err := sdk.Step(ctx, "two", func(ctx context.Context) (int, error) {
			select {
			case <-release:
				return 2, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		return none{}, err
	})
	parentDeadline := time.Now().Add(time.Hour)
	id, err := a.Start(ctx, none{}, sdk.Deadline(parentDeadline))
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if _, err := a.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	release = make(chan struct{})
	forkCreated := func(f eventlog.ID) *eventlog.ForkCreated {
		t.Helper()
		for _, ev := range events(t, k, f) {
			if fc, ok := ev.Data.(*eventlog.ForkCreated); ok && ev.Seq > 4 {
				return fc
			}
		}
		t.Fatalf("fork %s has no fork.created", f)
		return nil
	}

	// Without the option: no deadline, not even the parent's.
	plain, err := k.Fork(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	if fc := forkCreated(plain); !fc.Deadline.IsZero() {
		t.Fatalf("a fork without Deadline records %v, want none (the parent's is never inherited)", fc.Deadline)
	}
	if info, err := k.Info(ctx, plain); err != nil || !info.Deadline.IsZero() {
		t.Fatalf("Info of the plain fork: deadline %v, %v; want none", info.Deadline, err)
	}

	// A past deadline is refused and writes nothing.
	before := len(listAll(t, store))
	if _, err := k.Fork(ctx, id, 4, sdk.Deadline(time.Now().Add(-time.Second))); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("Fork with a past deadline = %v, want ErrInvalid", err)
	}
	if after := len(listAll(t, store)); after != before {
		t.Fatalf("a refused fork wrote an execution: %d before, %d after", before, after)
	}

	// With its own deadline: recorded, and it ends the fork's live step.
	own := time.Now().Add(150 * time.Millisecond)
	f, err := k.Fork(ctx, id, 4, sdk.Deadline(own))
	if err != nil {
		t.Fatal(err)
	}
	if fc := forkCreated(f); !fc.Deadline.Equal(own.UTC()) && !fc.Deadline.Equal(own) {
		t.Fatalf("fork.created.Deadline = %v, want %v", fc.Deadline, own)
	}
	_, err = k.Run(ctx, f)
	var ee *sdk.ExecutionError
	if !errors.As(err, &ee) || ee.Code != eventlog.FailDeadline || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run of the fork = %v, want a deadline failure", err)
	}
	var got []string
	for _, ev := range events(t, k, f) {
		if ev.Seq > 4 { // the fork's own run, after the prefix
			got = append(got, describe(ev))
		}
	}
	want := []string{"fork at=4", "dispatch 2", "started local two", "cancelled", "execution_failed deadline"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the fork's own events (-want +got):\n%s", diff)
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	ok, _ := sdk.Register(k, "ok", func(ctx context.Context, n int) (int, error) { return n, nil })
	bad, _ := sdk.Register(k, "bad", func(ctx context.Context, n int) (int, error) { return 0, errors.New("no") })
	var all []eventlog.ID
	for i := range 6 {
		a := ok
		if i%2 == 1 {
			a = bad
		}
		id, _ := a.Start(ctx, i)
		all = append(all, id)
		if i < 4 {
			_, _ = k.Run(ctx, id)
		}
	}
	ids := func(infos []eventlog.Info) []eventlog.ID {
		var out []eventlog.ID
		for _, i := range infos {
			out = append(out, i.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    sdk.Filter
		want []eventlog.ID
	}{
		{"all", sdk.Filter{}, all},
		{"agent", sdk.Filter{Agent: "bad"}, []eventlog.ID{all[1], all[3], all[5]}},
		{"status", sdk.Filter{Status: []eventlog.Status{eventlog.StatusPending}}, all[4:]},
		{"statuses", sdk.Filter{Status: []eventlog.Status{eventlog.StatusCompleted, eventlog.StatusFailed}}, all[:4]},
		{"agent and status", sdk.Filter{Agent: "ok", Status: []eventlog.Status{eventlog.StatusCompleted}}, []eventlog.ID{all[0], all[2]}},
		{"page 1", sdk.Filter{Limit: 4}, all[:4]},
		{"page 2", sdk.Filter{Limit: 4, After: all[3]}, all[4:]},
		{"parent", sdk.Filter{Parent: all[0]}, nil},
	} {
		got, err := k.List(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if diff := cmp.Diff(c.want, ids(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	for _, f := range []sdk.Filter{{Status: []eventlog.Status{99}}, {Limit: -1}} {
		if _, err := k.List(ctx, f); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("List(%+v) = %v, want ErrInvalid", f, err)
		}
	}
}

// infoReads is a store that counts Info calls.
type infoReads struct {
	*pebblestore.Store
	n atomic.Int64
}

func (s *infoReads) Info(ctx context.Context, id eventlog.ID) (eventlog.Info, error) {
	s.n.Add(1)
	return s.Store.Info(ctx, id)
}

// TestWait: Wait returns the outcome once the execution has ended, the
// context's error before, and polls with a growing delay (5 ms doubling
// to 100 ms) rather than spinning.
func TestWait(t *testing.T) {
	ctx := context.Background()
	store := &infoReads{Store: newStore(t)}
	k := newKernel(t, store, func(*sdk.Kernel) {})
	release := make(chan struct{})
	a, _ := sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) {
		<-release
		if n < 0 {
			return 0, errors.New("negative")
		}
		return 2 * n, nil
	})
	id, _ := a.Start(ctx, 21)
	go func() { _, _ = a.Run(ctx, id) }()
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	before := store.n.Load()
	if _, err := a.Wait(short, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait before the end = %v, want the context's error", err)
	}
	if n := store.n.Load() - before; n > 10 {
		t.Fatalf("Wait looked %d times in 30 ms, want a few (5, 10, 20 ms apart)", n)
	}
	close(release)
	if out, err := a.Wait(ctx, id); err != nil || out != 42 {
		t.Fatalf("Wait = %v, %v", out, err)
	}
	id, _ = a.Start(ctx, -1)
	go func() { _, _ = a.Run(ctx, id) }()
	var ee *sdk.ExecutionError
	if _, err := a.Wait(ctx, id); !errors.As(err, &ee) || ee.Message != "negative" {
		t.Fatalf("Wait of a failing execution = %v", err)
	}
	if _, err := k.Wait(ctx, eventlog.ID{9}); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Wait of an unknown execution = %v", err)
	}
}

// TestServe: Serve runs pending executions, picks up new ones as they are
// started, and finishes an interrupted one (a dispatch that died).
func TestServe(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	var runs atomic.Int64
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, n int) (string, error) {
			runs.Add(1)
			first, err := sdk.Step(ctx, "one", func(context.Context) (int, error) { return n, nil })
			if err != nil {
				return "", err
			}
			second, err := sdk.Step(ctx, "two", func(context.Context) (int, error) { return n * 10, nil })
			return fmt.Sprint(first, "/", second), err
		})
	}
	// An interrupted execution: its first dispatch died after two events.
	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(2)
	dying := newKernel(t, crash, register)
	interrupted, _ := dying.Start(ctx, "a", 7)
	if _, err := dying.Run(ctx, interrupted); !errors.Is(err, errCrash) {
		t.Fatalf("dying Run = %v", err)
	}

	k := newKernel(t, store, register)
	var pending []eventlog.ID
	for i := range 5 {
		id, _ := k.Start(ctx, "a", i)
		pending = append(pending, id)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.Concurrency(2), sdk.PollEvery(20*time.Millisecond)) }()
	late, _ := k.Start(ctx, "a", 9)
	for i, id := range append(append(pending, late), interrupted) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := k.Wait(wctx, id)
		cancel()
		n := []int{0, 1, 2, 3, 4, 9, 7}[i]
		if err != nil || string(res.Output) != fmt.Sprintf(`"%d/%d"`, n, n*10) {
			t.Fatalf("execution %d: %v, %v", i, res, err)
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	// The interrupted one resumed: its second dispatch replayed.
	want := []string{"created a", "dispatch 1", "started local one", "dispatch 2", "started local one attempt=2",
		"succeeded", "started local two", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, interrupted))); diff != "" {
		t.Fatalf("interrupted execution (-want +got):\n%s", diff)
	}
	for _, opt := range []struct {
		name string
		opt  sdk.ServeOption
	}{{"Concurrency(0)", sdk.Concurrency(0)}, {"PollEvery(0)", sdk.PollEvery(0)}, {"PollEvery(-1s)", sdk.PollEvery(-time.Second)}} {
		if err := k.Serve(ctx, opt.opt); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Serve with %s = %v, want ErrInvalid", opt.name, err)
		}
	}
	// The smallest allowed values serve: Concurrency(1), a 1 ns poll.
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := k.Serve(sctx, sdk.Concurrency(1), sdk.PollEvery(time.Nanosecond)); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Serve with Concurrency(1), PollEvery(1ns) = %v, want it to serve until its context ends", err)
	}
}

// TestChild: a.Call runs a child execution as a step; the child's Info
// names its caller; running the parent again starts no second child; a
// failing child is the step's error.
func TestChild(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(*sdk.Kernel) {})
	var childRuns atomic.Int64
	child, _ := sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) {
		childRuns.Add(1)
		if n < 0 {
			return 0, errors.New("negative child")
		}
		return n + 1, nil
	})
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
		r, err := child.Call(ctx, n)
		if err != nil {
			return 0, err
		}
		return r * 100, nil
	})
	id, _ := parent.Start(ctx, 4)
	out, err := parent.Run(ctx, id)
	if err != nil || out != 500 {
		t.Fatalf("parent = %v, %v", out, err)
	}
	want := []string{"created parent", "dispatch 1", "started child child", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("parent events (-want +got):\n%s", diff)
	}
	kids, err := k.List(ctx, sdk.Filter{Caller: id})
	if err != nil || len(kids) != 1 || kids[0].Agent != "child" || kids[0].Caller != id || kids[0].Status != eventlog.StatusCompleted {
		t.Fatalf("children = %+v, %v", kids, err)
	}
	// A fork of the parent at its start runs the step live: its own child.
	fork, err := k.Fork(ctx, id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := parent.Run(ctx, fork); err != nil || out != 500 {
		t.Fatalf("fork = %v, %v", out, err)
	}
	if kids, _ := k.List(ctx, sdk.Filter{Caller: fork}); len(kids) != 1 || kids[0].ID == id {
		t.Fatalf("the fork's children: %+v", kids)
	}
	if childRuns.Load() != 2 {
		t.Fatalf("child handler ran %d times, want 2 (the parent's and the fork's)", childRuns.Load())
	}

	id, _ = parent.Start(ctx, -1)
	_, err = parent.Run(ctx, id)
	var ee *sdk.ExecutionError
	if !errors.As(err, &ee) || !strings.HasSuffix(ee.Message, "failed (handler): negative child") {
		t.Fatalf("parent of a failing child = %v", err)
	}
}

// TestChildSurvivesParentCrash: the parent's dispatch dies while its child
// runs; the child finishes on its own, and the resumed parent finds the
// same child (its key) instead of starting a second one.
func TestChildSurvivesParentCrash(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(*sdk.Kernel) {})
	entered, release := make(chan struct{}), make(chan struct{})
	var childRuns atomic.Int64
	child, _ := sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) {
		if childRuns.Add(1) == 1 {
			close(entered)
			<-release
		}
		return n + 1, nil
	})
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
		return child.Call(ctx, n)
	})
	id, _ := parent.Start(ctx, 1)
	pctx, kill := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := parent.Run(pctx, id); done <- err }()
	<-entered
	kill() // the parent's dispatch stops while the child runs
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("killed parent = %v", err)
	}
	close(release)
	out, err := parent.Run(ctx, id)
	if err != nil || out != 2 {
		t.Fatalf("resumed parent = %v, %v", out, err)
	}
	if kids, _ := k.List(ctx, sdk.Filter{Caller: id}); len(kids) != 1 {
		t.Fatalf("%d children, want 1", len(kids))
	}
	if childRuns.Load() != 1 {
		t.Fatalf("child handler ran %d times", childRuns.Load())
	}
}

// TestChildParksParent: a wait for a child longer than ParkAfter parks the
// parent's dispatch — dispatch.parked, status waiting, Run returns
// ErrWaiting and every later call of that dispatch does too — and Serve
// dispatches the parent again once the child has ended: the replayed call
// finds the same child, and the parent completes with its output.
func TestChildParksParent(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(*sdk.Kernel) {}, sdk.ParkAfter(30*time.Millisecond))
	release := make(chan struct{})
	var childRuns, after atomic.Int64
	child, _ := sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) {
		childRuns.Add(1)
		<-release
		return n * 2, nil
	})
	var lateErr error
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
		r, err := child.Call(ctx, n)
		if err != nil {
			_, lateErr = sdk.Step(ctx, "after", func(context.Context) (int, error) { after.Add(1); return 0, nil })
			return 0, err
		}
		return r + 1, nil
	})
	id, _ := parent.Start(ctx, 20)
	if _, err := parent.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if !errors.Is(lateErr, sdk.ErrWaiting) || after.Load() != 0 {
		t.Fatalf("a call after the dispatch parked = %v (ran %d), want ErrWaiting", lateErr, after.Load())
	}
	want := []string{"created parent", "dispatch 1", "started child child", "dispatch.parked"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if info, _ := store.Info(ctx, id); info.Status != eventlog.StatusWaiting {
		t.Fatalf("status %s, want waiting", info.Status)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(10*time.Millisecond)) }()
	time.Sleep(60 * time.Millisecond) // Serve leaves the parent waiting while its child runs
	if info, _ := store.Info(ctx, id); info.Status != eventlog.StatusWaiting || info.Head != 4 {
		t.Fatalf("parent while its child runs: %s at head %d", info.Status, info.Head)
	}
	close(release)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := parent.Wait(wctx, id)
	stop()
	<-served
	if err != nil || out != 41 {
		t.Fatalf("parent = %v, %v", out, err)
	}
	if kids, _ := k.List(ctx, sdk.Filter{Caller: id}); len(kids) != 1 || childRuns.Load() != 1 {
		t.Fatalf("%d children, child ran %d times; want 1 and 1", len(kids), childRuns.Load())
	}
	got := describeAll(events(t, k, id))
	want = append(want, "dispatch 2", "started child child attempt=2", "succeeded", "completed")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}
