package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// openPG opens n connections (as n hosts would) to one fresh schema of
// the test server, closed and dropped at cleanup.
func openPG(t *testing.T, n int) []*pgstore.Store {
	t.Helper()
	url, schema := pgtest.Schema(t)
	var out []*pgstore.Store
	for range n {
		s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

// TestServeOnPostgres: two kernels, each on its own connection to one
// database (two hosts), Serve it together; 20 executions all complete,
// each body ran once, and each execution has one dispatch, by one of the
// two owners, under the epoch its claim got.
func TestServeOnPostgres(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	var mu sync.Mutex
	bodies := map[int]int{}
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) {
			return sdk.Step(ctx, "double", func(context.Context) (int, error) {
				mu.Lock()
				bodies[n]++
				mu.Unlock()
				return 2 * n, nil
			}, sdk.AtMostOnce())
		})
	}
	kA := newKernel(t, stores[0], register, sdk.WithOwner("A"))
	kB := newKernel(t, stores[1], register, sdk.WithOwner("B"))
	const n = 20
	ids := make([]eventlog.ID, n)
	for i := range n {
		k := []*sdk.Kernel{kA, kB}[i%2]
		id, err := k.Start(ctx, "a", i)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	sctx, stop := context.WithCancel(ctx)
	var served sync.WaitGroup
	for _, k := range []*sdk.Kernel{kA, kB} {
		served.Go(func() {
			if err := k.Serve(sctx, sdk.Concurrency(3), sdk.PollEvery(20*time.Millisecond)); err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
	for i, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		res, err := kA.Wait(wctx, id)
		cancel()
		if err != nil || string(res.Output) != fmt.Sprint(2*i) {
			t.Fatalf("execution %d: %v, %v", i, res, err)
		}
	}
	stop()
	served.Wait()
	for i, id := range ids {
		if bodies[i] != 1 {
			t.Errorf("execution %d: its body ran %d times, want once", i, bodies[i])
		}
		evs := events(t, kB, id)
		want := []string{"created a", "dispatch 1", "started local double at_most_once", "succeeded", "completed"}
		if d := cmp.Diff(want, describeAll(evs)); d != "" {
			t.Fatalf("execution %d (-want +got):\n%s", i, d)
		}
		ds := evs[1].Data.(*eventlog.DispatchStarted)
		if (ds.Owner != "A" && ds.Owner != "B") || ds.Epoch != 1 {
			t.Errorf("execution %d: dispatch.started by %q at epoch %d, want A or B at epoch 1", i, ds.Owner, ds.Epoch)
		}
	}
}

// stalledPG is a Postgres store whose renewals fail as if its host were
// paused or partitioned: the lease lapses while the body runs.
type stalledPG struct{ *pgstore.Store }

func (s stalledPG) Renew(context.Context, eventlog.Lease, time.Duration) (eventlog.Lease, error) {
	return eventlog.Lease{}, errors.New("test: store unreachable")
}

// TestServeTakesOverOnPostgres: a kernel on one host stops renewing while
// its at_most_once body runs; the other host's Serve claims the execution
// once the lease expired (by the database's clock), finds the step in
// flight and fails it as indeterminate; the first kernel's next append is
// refused with ErrLeaseLost, and the body ran once.
func TestServeTakesOverOnPostgres(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	entered, release, runs, register := heldCharge()
	kA := newKernel(t, stalledPG{stores[0]}, register, sdk.WithOwner("A"), sdk.WithLeaseTTL(300*time.Millisecond))
	kB := newKernel(t, stores[1], register, sdk.WithOwner("B"))
	id, err := kA.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := kA.Run(ctx, id); done <- err }()
	<-entered
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- kB.Serve(sctx, sdk.PollEvery(20*time.Millisecond)) }()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	_, err = kB.Wait(wctx, id)
	cancel()
	var ee *sdk.ExecutionError
	if !errors.As(err, &ee) || ee.Code != "handler" {
		t.Fatalf("the execution after B took over = %v, want the indeterminate failure", err)
	}
	close(release)
	if err := <-done; !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("the stalled kernel's Run = %v, want ErrLeaseLost", err)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if runs.Load() != 1 {
		t.Fatalf("the at_most_once body ran %d times, want once", runs.Load())
	}
	evs := events(t, kB, id)
	want := []string{"created a", "dispatch 1", "started tool charge at_most_once",
		"dispatch 2", "failed indeterminate", "execution_failed handler"}
	if d := cmp.Diff(want, describeAll(evs)); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	a, b := evs[1].Data.(*eventlog.DispatchStarted), evs[3].Data.(*eventlog.DispatchStarted)
	if a.Owner != "A" || b.Owner != "B" || b.Epoch <= a.Epoch {
		t.Fatalf("dispatches by %q@%d then %q@%d, want A then B at a greater epoch", a.Owner, a.Epoch, b.Owner, b.Epoch)
	}
}

// sdk.Open of a Postgres URL opens the Postgres store.
func TestOpenPostgresURL(t *testing.T) {
	url := pgtest.SchemaURL(t)
	if !sdk.IsPostgresURL(url) {
		t.Skipf("FORKLINE_TEST_POSTGRES %q is not a postgres:// URL", url)
	}
	k, err := sdk.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, ok := k.Log().(*pgstore.Store); !ok {
		t.Fatalf("sdk.Open(%q) opened a %T", url, k.Log())
	}
	var calls atomic.Int64
	a, _ := sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) {
		calls.Add(1)
		return n + 1, nil
	})
	id, err := a.Start(t.Context(), 41)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := a.Run(t.Context(), id); err != nil || out != 42 || calls.Load() != 1 {
		t.Fatalf("Run = %v, %v (%d calls)", out, err, calls.Load())
	}
	if want := []string{"created a", "dispatch 1", "completed"}; !slices.Equal(describeAll(events(t, k, id)), want) {
		t.Fatalf("events %v, want %v", describeAll(events(t, k, id)), want)
	}
}

// TestServeClaimsOnlyFreeSlots: Serve on a store that claims (Postgres)
// claims no more executions than it has free slots. With Concurrency(1)
// and one execution running, a second runnable one stays unclaimed — free
// for another kernel — however many polls go by; it runs once the first
// ends.
func TestServeClaimsOnlyFreeSlots(t *testing.T) {
	ctx := t.Context()
	store := openPG(t, 1)[0]
	entered := make(chan int, 2)
	release := make(chan struct{})
	k := newKernel(t, store, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) {
			entered <- n
			<-release
			return n, nil
		})
	}, sdk.WithOwner("A"))
	a, _ := k.Start(ctx, "a", 1)
	b, _ := k.Start(ctx, "a", 2)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.Concurrency(1), sdk.PollEvery(5*time.Millisecond)) }()
	first := <-entered
	waiting := map[int]eventlog.ID{1: b, 2: a}[first]
	time.Sleep(100 * time.Millisecond) // about twenty polls
	if l, held, err := store.Holder(ctx, waiting); err != nil || held {
		t.Fatalf("with its one slot busy, Serve holds the other execution too: %+v, %v, %v", l, held, err)
	}
	close(release)
	if second := <-entered; second == first {
		t.Fatalf("execution %d ran twice", first)
	}
	for _, id := range []eventlog.ID{a, b} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := k.Wait(wctx, id); err != nil {
			t.Fatalf("Wait(%s) = %v", id, err)
		}
		cancel()
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
}
