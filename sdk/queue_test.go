package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// slowAgent registers agent "slow": one step that sleeps d, so that
// dispatches overlap unless something keeps them apart.
func slowAgent(d time.Duration) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "slow", func(ctx context.Context, n int) (int, error) {
			return sdk.Step(ctx, "work", func(context.Context) (int, error) {
				time.Sleep(d)
				return n, nil
			})
		})
	}
}

// DESIGN §19: a declaration with a concurrency below 1, a bad rate or a
// bad name is refused and writes no record; a Start into an undeclared
// queue, a priority without a queue or into a queue declared without
// QueuePriority is ErrInvalid and writes nothing; a Start into a declared
// queue records Queue and Priority in execution.created.
func TestQueueBadInputWritesNothing(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	k := newKernel(t, store, slowAgent(0))
	for i, opts := range [][]sdk.QueueOption{
		{sdk.QueueConcurrency(0)}, {sdk.QueueConcurrency(-1)}, {sdk.QueueRate(0, time.Second)},
		{sdk.QueueRate(1, 0)}, {sdk.QueueRate(-1, time.Second)}, {nil},
	} {
		if err := k.Queue("q", opts...); !errors.Is(err, sdk.ErrInvalid) {
			t.Fatalf("declaration %d: Queue = %v, want ErrInvalid", i, err)
		}
	}
	if err := k.Queue("", sdk.QueueConcurrency(1)); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("Queue(\"\") = %v, want ErrInvalid", err)
	}
	if qs, err := k.Queues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("after refused declarations Queues = %+v, %v; want none", qs, err)
	}
	if err := k.Queue("plain", sdk.QueueConcurrency(2)); err != nil {
		t.Fatal(err)
	}
	if err := k.Queue("ranked", sdk.QueueConcurrency(1), sdk.QueuePriority()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []sdk.StartOption
	}{
		{"undeclared queue", []sdk.StartOption{sdk.OnQueue("nope")}},
		{"priority without a queue", []sdk.StartOption{sdk.Priority(2)}},
		{"priority on a queue without QueuePriority", []sdk.StartOption{sdk.OnQueue("plain"), sdk.Priority(2)}},
		{"empty queue name", []sdk.StartOption{sdk.OnQueue("")}},
		{"priority past 32 bits", []sdk.StartOption{sdk.OnQueue("ranked"), sdk.Priority(1 << 40)}},
	} {
		if _, err := k.Start(ctx, "slow", 1, c.opts...); !errors.Is(err, sdk.ErrInvalid) {
			t.Fatalf("%s: Start = %v, want ErrInvalid", c.name, err)
		}
	}
	if infos, err := k.List(ctx, sdk.Filter{}); err != nil || len(infos) != 0 {
		t.Fatalf("refused Starts wrote %d executions (%v), want none", len(infos), err)
	}
	id, err := k.Start(ctx, "slow", 1, sdk.OnQueue("ranked"), sdk.Priority(-4))
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	if len(evs) != 1 {
		t.Fatalf("Start appended %d events, want 1", len(evs))
	}
	if p, ok := evs[0].Data.(*eventlog.ExecutionCreated); !ok || p.Queue != "ranked" || p.Priority != -4 {
		t.Fatalf("execution.created = %+v, want Queue ranked, Priority -4", evs[0].Data)
	}
	qs, err := k.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []sdk.QueueInfo{
		{Queue: eventlog.Queue{Name: "plain", Concurrency: 2}, Declared: true},
		{Queue: eventlog.Queue{Name: "ranked", Concurrency: 1, Priority: true}, Declared: true, Waiting: 1},
	}
	if !slices.Equal(qs, want) {
		t.Fatalf("Queues = %+v, want %+v", qs, want)
	}
}

// dispatch is one dispatch of an execution as its events show it: from
// its dispatch.started to the last event it appended.
type dispatch struct {
	id         eventlog.ID
	start, end time.Time
}

// dispatchesOf returns the dispatches of id's lineage.
func dispatchesOf(t *testing.T, k *sdk.Kernel, id eventlog.ID) []dispatch {
	t.Helper()
	var out []dispatch
	for _, ev := range events(t, k, id) {
		if _, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			out = append(out, dispatch{id: id, start: ev.Time, end: ev.Time})
		} else if len(out) > 0 {
			out[len(out)-1].end = ev.Time
		}
	}
	return out
}

// maxOverlap returns the most dispatches running at one instant; one that
// ends at the instant another starts does not overlap it.
func maxOverlap(ds []dispatch) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, d := range ds {
		edges = append(edges, edge{d.start, 1}, edge{d.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends first
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// DESIGN §19: three kernels serve one Pebble store (eight slots each), 30
// executions in a queue of concurrency 2 beside 6 in no queue: every one
// completes, the queue's dispatches (from their events) never overlap
// more than 2 at any instant, while the unqueued ones are not held back by
// the queue.
func TestQueueConcurrencyPebble(t *testing.T) {
	store := newStore(t)
	var ks []*sdk.Kernel
	for i := range 3 {
		ks = append(ks, newKernel(t, store, slowAgent(20*time.Millisecond), sdk.WithOwner(fmt.Sprintf("w%d", i))))
	}
	testQueueConcurrency(t, ks)
}

// TestQueueConcurrencyPostgres is TestQueueConcurrencyPebble with three
// kernels, each on its own connection to one Postgres database (three
// hosts), whose claims go through the bulk SKIP LOCKED claim.
func TestQueueConcurrencyPostgres(t *testing.T) {
	stores := openPG(t, 3)
	var ks []*sdk.Kernel
	for i, s := range stores {
		ks = append(ks, newKernel(t, s, slowAgent(20*time.Millisecond), sdk.WithOwner(fmt.Sprintf("w%d", i))))
	}
	testQueueConcurrency(t, ks)
}

func testQueueConcurrency(t *testing.T, ks []*sdk.Kernel) {
	ctx := t.Context()
	if err := ks[0].Queue("two", sdk.QueueConcurrency(2)); err != nil {
		t.Fatal(err)
	}
	var queued, free []eventlog.ID
	for i := range 30 {
		id, err := ks[i%3].Start(ctx, "slow", i, sdk.OnQueue("two"))
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, id)
	}
	for i := range 6 {
		id, err := ks[i%3].Start(ctx, "slow", 100+i)
		if err != nil {
			t.Fatal(err)
		}
		free = append(free, id)
	}
	sctx, stop := context.WithCancel(ctx)
	var served sync.WaitGroup
	for _, k := range ks {
		served.Go(func() {
			if err := k.Serve(sctx, sdk.Concurrency(8), sdk.PollEvery(20*time.Millisecond)); err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
	defer func() {
		stop()
		served.Wait()
	}()
	var ds, fds []dispatch
	for _, id := range append(slices.Clone(queued), free...) {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := ks[0].Wait(wctx, id)
		cancel()
		if err != nil {
			t.Fatalf("Wait(%s): %v; want it completed", id, err)
		}
		if slices.Contains(free, id) {
			fds = append(fds, dispatchesOf(t, ks[0], id)...)
		} else {
			ds = append(ds, dispatchesOf(t, ks[0], id)...)
		}
	}
	if len(ds) < 30 {
		t.Fatalf("%d dispatches of 30 queued executions", len(ds))
	}
	if n := maxOverlap(ds); n > 2 {
		t.Fatalf("%d dispatches of the queue of concurrency 2 ran at one instant", n)
	}
	t.Logf("queue: at most %d running at once; unqueued: at most %d", maxOverlap(ds), maxOverlap(fds))
}

// DESIGN §19: within a queue lower priority numbers run first, then
// creation order. A queue of concurrency 1 holds six executions started
// before any Serve runs; one Serve runs them one at a time, and the order
// of their dispatch.started events is that order.
func TestQueuePriorityOrder(t *testing.T) {
	t.Run("pebble", func(t *testing.T) {
		testQueuePriorityOrder(t, newKernel(t, newStore(t), slowAgent(0)))
	})
	t.Run("postgres", func(t *testing.T) {
		testQueuePriorityOrder(t, newKernel(t, openPG(t, 1)[0], slowAgent(0)))
	})
}

func testQueuePriorityOrder(t *testing.T, k *sdk.Kernel) {
	ctx := t.Context()
	if err := k.Queue("one", sdk.QueueConcurrency(1), sdk.QueuePriority()); err != nil {
		t.Fatal(err)
	}
	prios := []int{5, 1, 3, 1, 0, 3}
	ids := make([]eventlog.ID, len(prios))
	for i, p := range prios {
		id, err := k.Start(ctx, "slow", i, sdk.OnQueue("one"), sdk.Priority(p))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	// By priority, then creation: 0 (4), 1 (1, 3), 3 (2, 5), 5 (0).
	want := []eventlog.ID{ids[4], ids[1], ids[3], ids[2], ids[5], ids[0]}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Serve(sctx, sdk.Concurrency(4), sdk.PollEvery(20*time.Millisecond)) }()
	var ds []dispatch
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := k.Wait(wctx, id)
		cancel()
		if err != nil {
			t.Fatalf("Wait(%s): %v", id, err)
		}
		ds = append(ds, dispatchesOf(t, k, id)...)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	slices.SortFunc(ds, func(a, b dispatch) int { return a.start.Compare(b.start) })
	var got []eventlog.ID
	for _, d := range ds {
		got = append(got, d.id)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dispatched in the order %v, want %v (priority, then creation)", got, want)
	}
	if n := maxOverlap(ds); n != 1 {
		t.Fatalf("%d dispatches of a queue of concurrency 1 at once", n)
	}
}

// DESIGN §19: Run of an execution whose queue has no free slot — another
// worker holds it — is ErrBusy wrapping eventlog.ErrQueueFull, and
// appends nothing; once the slot is released, Run runs it.
func TestRunOnFullQueueAppendsNothing(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	k := newKernel(t, store, slowAgent(0))
	if err := k.Queue("one", sdk.QueueConcurrency(1)); err != nil {
		t.Fatal(err)
	}
	first, err := k.Start(ctx, "slow", 1, sdk.OnQueue("one"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := k.Start(ctx, "slow", 2, sdk.OnQueue("one"))
	if err != nil {
		t.Fatal(err)
	}
	held, err := store.ClaimToRun(ctx, first, "another-worker", time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	before := describeAll(events(t, k, second))
	_, err = k.Run(ctx, second)
	if !errors.Is(err, sdk.ErrBusy) || !errors.Is(err, eventlog.ErrQueueFull) {
		t.Fatalf("Run on a full queue = %v, want ErrBusy wrapping ErrQueueFull", err)
	}
	if after := describeAll(events(t, k, second)); !slices.Equal(before, after) {
		t.Fatalf("a refused Run appended: %v, then %v", before, after)
	}
	if err := store.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, second); err != nil {
		t.Fatalf("Run after the slot was released: %v", err)
	}
}
