package sdk_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
)

// slowPoll is the poll of the Serve whose wakeups these tests time: far
// longer than the tests wait, so only a notification can wake it.
const slowPoll = 30 * time.Second

// serveIn runs k.Serve with opts until the test ends.
func serveIn(t *testing.T, k *sdk.Kernel, opts ...sdk.ServeOption) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- k.Serve(ctx, opts...) }()
	t.Cleanup(func() { stop(); <-served })
}

// awaitTerminal waits up to limit for id to end.
func awaitTerminal(t *testing.T, log eventlog.Log, id eventlog.ID, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		info, err := log.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status.Terminal() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s after %v, want ended", id, info.Status, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kindAt returns the index of the first event of kind k at or after from.
func kindAt(t *testing.T, evs []eventlog.Event, k eventlog.Kind, from int) int {
	t.Helper()
	for i := from; i < len(evs); i++ {
		if evs[i].Kind() == k {
			return i
		}
	}
	t.Fatalf("no %s from event %d in %v", k, from, describeAll(evs))
	return -1
}

// TestServeWakesOnChildEndAcrossProcesses (DESIGN §15½.6): a parent parked
// for its child, in kernel A whose Serve polls every 30 s; the child
// sleeps past ParkAfter and kernel B — another store on the schema,
// another process — runs it to its end. The child's terminal append
// writes child.ended into the parent's inbox and NOTIFYs, and A's Serve
// resumes the parent within a second of it: dispatch 2, the child's
// result, completed. Nothing in A dispatches the parked child again
// before its wake time, so its second dispatch is B's.
func TestServeWakesOnChildEndAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	// The child sleeps 2 s: long enough that B's Run claims it before its
	// wake time even on a loaded machine (at 300 ms, A's Serve sometimes
	// found it due first and held it).
	child := func(ctx context.Context, n int) (int, error) {
		if err := sdk.Sleep(ctx, 2*time.Second); err != nil {
			return 0, err
		}
		return 2 * n, nil
	}
	kA := newKernel(t, stores[0], func(k *sdk.Kernel) {
		c, _ := sdk.Register(k, "c", child)
		_, _ = sdk.Register(k, "p", func(ctx context.Context, n int) (int, error) { return c.Call(ctx, n) })
	}, sdk.WithOwner("A"), sdk.ParkAfter(20*time.Millisecond))
	kB := newKernel(t, stores[1], func(k *sdk.Kernel) { _, _ = sdk.Register(k, "c", child) },
		sdk.WithOwner("B"), sdk.ParkAfter(time.Minute))

	parent, err := kA.Start(ctx, "p", 21)
	if err != nil {
		t.Fatal(err)
	}
	serveIn(t, kA, sdk.PollEvery(slowPoll))
	awaitStatus(t, stores[0], parent, eventlog.StatusWaiting)
	kids, err := kA.List(ctx, sdk.Filter{Caller: parent})
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %+v (%v), want one", kids, err)
	}
	awaitStatus(t, stores[1], kids[0].ID, eventlog.StatusWaiting)
	// B takes the child's lease long before its wake time, so A's kernel
	// never runs it, and sleeps out the rest of it. The run of A that
	// parked the child may hold its lease a moment longer (it releases
	// after the park's commit): B tries again until it is free.
	var res *sdk.Result
	for {
		res, err = kB.Run(ctx, kids[0].ID)
		if !errors.Is(err, sdk.ErrBusy) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("B's run of the child: %v", err)
	}
	var out int
	if res.Decode(&out) != nil || out != 42 {
		t.Fatalf("B's run of the child = %s, want 42", res.Output)
	}
	awaitTerminal(t, stores[0], parent, 5*time.Second)

	cev := events(t, kB, kids[0].ID)
	if last := cev[len(cev)-1]; last.Kind() != eventlog.KindExecutionCompleted {
		t.Fatalf("child ended with %s, want completed: %v", last.Kind(), describeAll(cev))
	}
	ds := cev[kindAt(t, cev, eventlog.KindDispatchStarted, 2)].Data.(*eventlog.DispatchStarted)
	if ds.Dispatch != 2 || ds.Owner != "B" {
		t.Fatalf("child's second dispatch %+v, want dispatch 2 by B (A dispatched it before its wake time): %v", ds, describeAll(cev))
	}
	pev := events(t, kA, parent)
	want := []string{"created p", "dispatch 1", "started child c", "dispatch.parked", "dispatch 2", "started child c attempt=2", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(pev)); diff != "" {
		t.Fatalf("parent (-want +got):\n%s", diff)
	}
	if p := pev[3].Data.(*eventlog.DispatchParked); p.Reason != eventlog.ParkChild {
		t.Fatalf("parked for %q, want child", p.Reason)
	}
	woke := pev[4].Time.Sub(cev[len(cev)-1].Time)
	t.Logf("parent resumed %v after the child's end in another process", woke)
	if woke > time.Second {
		t.Fatalf("parent resumed %v after the child ended, want < 1 s (Serve polls every %v)", woke, slowPoll)
	}
}

// TestServeWakesOnApproveAcrossProcesses (DESIGN §15½.6): an execution
// parked for an approval in kernel A, whose Serve polls every 30 s; kernel
// B approves it. B's request and append NOTIFY, and A's Serve runs it
// within a second: dispatch 2 by A, the call, completed.
func TestServeWakesOnApproveAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	var bodies, asked atomic.Int64
	register := approvalAgent(&bodies)
	kA := newKernel(t, stores[0], register, sdk.WithOwner("A"), sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(10*time.Millisecond))
	kB := newKernel(t, stores[1], register, sdk.WithOwner("B"), sdk.WithGate(countingGate(&asked)))
	id, err := kA.Start(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kA.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	serveIn(t, kA, sdk.PollEvery(slowPoll))
	time.Sleep(100 * time.Millisecond) // Serve has made its first pass
	if err := kB.Approve(ctx, id, pendingStep(t, kB, id).StepID, sdk.Note("from B")); err != nil {
		t.Fatal(err)
	}
	awaitTerminal(t, stores[1], id, 5*time.Second)
	evs := events(t, kB, id)
	want := []string{"created a", "dispatch 1", "approval.requested", "dispatch.parked", "approval.granted",
		"dispatch 2", "started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if ds := evs[5].Data.(*eventlog.DispatchStarted); ds.Owner != "A" {
		t.Errorf("dispatch 2 by %q, want A", ds.Owner)
	}
	woke := evs[5].Time.Sub(evs[4].Time)
	t.Logf("resumed %v after the approval in another process", woke)
	if woke > time.Second {
		t.Fatalf("resumed %v after the approval, want < 1 s (Serve polls every %v)", woke, slowPoll)
	}
}

// TestWatchSeesOtherProcessAppends (DESIGN §15½.14): Watch in kernel A
// yields what another store on the schema (another process, opened with
// pgstore.NotifyEveryAppend) appends as soon as Postgres delivers the
// NOTIFY, not at Watch's one-second poll:
// each append comes just after Watch's previous read (a poll would take
// about 900 ms), and the median of seven delays is under 500 ms; it ends
// at the terminal event.
func TestWatchSeesOtherProcessAppends(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	var stores []*pgstore.Store
	for _, opts := range [][]pgstore.Option{nil, {pgstore.NotifyEveryAppend()}} {
		s, err := pgstore.Open(ctx, url, append(opts, pgstore.WithSchema(schema))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	kA := newKernel(t, stores[0], func(*sdk.Kernel) {})
	b := stores[1]
	id, err := b.Create(ctx, &eventlog.ExecutionCreated{Agent: "x"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan eventlog.Event, 16)
	watched := make(chan error, 1)
	go func() {
		for ev, err := range kA.Watch(ctx, id) {
			if err != nil {
				watched <- err
				return
			}
			seen <- ev
		}
		watched <- nil
	}()
	if ev := <-seen; ev.Kind() != eventlog.KindExecutionCreated {
		t.Fatalf("first event %s", ev.Kind())
	}
	time.Sleep(1100 * time.Millisecond) // past the first poll; the listener is live
	const n = 7
	var delays []time.Duration
	head := uint64(1)
	for i := range n {
		var p eventlog.Payload = &eventlog.MarkerRecorded{Name: "m"}
		if i == 0 {
			p = &eventlog.DispatchStarted{Dispatch: 1}
		}
		// Appended soon after Watch's last read, so that its poll alone
		// would take most of a second.
		time.Sleep(time.Duration(20+10*i) * time.Millisecond)
		at := time.Now()
		if head, err = b.Append(ctx, id, head, eventlog.Event{Time: at, Data: p}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-seen:
			if ev.Seq != head || ev.Kind() != p.Kind() {
				t.Fatalf("Watch yielded %s at seq %d, want %s at %d", ev.Kind(), ev.Seq, p.Kind(), head)
			}
			delays = append(delays, time.Since(at))
		case <-time.After(3 * time.Second):
			t.Fatalf("Watch did not yield seq %d", head)
		}
	}
	if _, err := b.Append(ctx, id, head, eventlog.Event{Time: time.Now(), Data: &eventlog.ExecutionCompleted{}}); err != nil {
		t.Fatal(err)
	}
	if ev := <-seen; ev.Kind() != eventlog.KindExecutionCompleted {
		t.Fatalf("last event %s", ev.Kind())
	}
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	slices.Sort(delays)
	t.Logf("delays %v", delays)
	if med := delays[n/2]; med >= 500*time.Millisecond {
		t.Fatalf("median delay %v, want < 500 ms (Watch polls every second): %v", med, delays)
	}
}
