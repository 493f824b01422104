package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestQueues checks queues (DESIGN §19, §21½.13) on a store that
// implements eventlog.Queuer (required): records that break CheckQueue
// are refused and write nothing; the newest PutQueue of a name wins; the
// store keeps execution.created's Queue and Priority as Info's; ClaimToRun
// refuses a claim while the queue's slots are all held (a
// *QueueFullError, no lease, no epoch spent), and a slot is freed by a
// release or by its lease's expiry; a settle's plain Claim is not
// limited; a rate admits no more starts than it says; QueueCounts counts
// waiting and running; and on an eventlog.VersionedClaimer,
// ClaimRunnableVersion claims no more than the free slots, lower
// priorities first, then creation order. open returns a fresh, empty
// store.
func TestQueues(t *testing.T, open func(t *testing.T) eventlog.Log) {
	s := open(t)
	ctx := t.Context()
	var qr eventlog.Queuer
	if !eventlog.As(s, &qr) {
		t.Fatalf("%T does not implement eventlog.Queuer", s)
	}
	var leaser eventlog.Leaser
	if !eventlog.As(s, &leaser) {
		t.Fatalf("%T does not implement eventlog.Leaser", s)
	}
	for _, bad := range []eventlog.Queue{
		{}, {Name: "q", Concurrency: -1}, {Name: "q", Rate: 1}, {Name: "q", Per: time.Second},
		{Name: "q", Rate: -1, Per: time.Second}, {Name: "q\x00"}, {Name: "q", Rate: eventlog.MaxLimiterCalls + 1, Per: time.Second},
	} {
		if err := qr.PutQueue(ctx, bad); !errors.Is(err, eventlog.ErrInvalid) {
			t.Fatalf("PutQueue(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if qs, err := qr.Queues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("after refused PutQueues, Queues = %+v, %v; want none", qs, err)
	}
	put := func(q eventlog.Queue) {
		t.Helper()
		if err := qr.PutQueue(ctx, q); err != nil {
			t.Fatalf("PutQueue(%+v): %v", q, err)
		}
	}
	put(eventlog.Queue{Name: "q", Concurrency: 5})
	put(eventlog.Queue{Name: "q", Concurrency: 2, Priority: true})
	put(eventlog.Queue{Name: "rated", Rate: 1, Per: time.Hour})
	qs, err := qr.Queues(ctx)
	if err != nil {
		t.Fatalf("Queues: %v", err)
	}
	if want := []eventlog.Queue{{Name: "q", Concurrency: 2, Priority: true}, {Name: "rated", Rate: 1, Per: time.Hour}}; !slices.Equal(qs, want) {
		t.Fatalf("Queues = %+v, want %+v (the newest record of q)", qs, want)
	}

	create := func(agent, queue string, priority int) eventlog.ID {
		t.Helper()
		id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: agent, Input: []byte(`1`), Queue: queue, Priority: priority}, time.Now())
		if err != nil {
			t.Fatalf("Create(queue %q): %v", queue, err)
		}
		return id
	}
	e := []eventlog.ID{create("a", "q", 3), create("a", "q", 0), create("a", "q", 0), create("a", "q", 0)}
	info, err := s.Info(ctx, e[0])
	if err != nil || info.Queue != "q" || info.Priority != 3 {
		t.Fatalf("Info = %+v, %v; want Queue q, Priority 3", info, err)
	}
	if p := readEvents(t, s, e[0])[0].Data.(*eventlog.ExecutionCreated); p.Queue != "q" || p.Priority != 3 {
		t.Fatalf("execution.created = %+v, want Queue q, Priority 3", p)
	}
	claim := func(id eventlog.ID, ttl time.Duration) (eventlog.Lease, error) {
		return qr.ClaimToRun(ctx, id, "w", ttl, "")
	}
	mustClaim := func(id eventlog.ID, ttl time.Duration) eventlog.Lease {
		t.Helper()
		l, err := claim(id, ttl)
		if err != nil {
			t.Fatalf("ClaimToRun(%s): %v", id, err)
		}
		return l
	}
	refused := func(id eventlog.ID) {
		t.Helper()
		_, err := claim(id, time.Minute)
		var qe *eventlog.QueueFullError
		if !errors.Is(err, eventlog.ErrQueueFull) || !errors.As(err, &qe) || qe.Queue != "q" || qe.Running != 2 || qe.Concurrency != 2 || qe.ID != id {
			t.Fatalf("ClaimToRun(%s) on a full queue = %v, want a *QueueFullError (2 of 2)", id, err)
		}
		if l, held, err := leaser.Holder(ctx, id); err != nil || held {
			t.Fatalf("after a refused claim Holder = %+v, %v, %v; want no lease", l, held, err)
		}
	}
	counts := func(name string, want eventlog.QueueCount) {
		t.Helper()
		c, err := qr.QueueCounts(ctx)
		if err != nil || c[name] != want {
			t.Fatalf("QueueCounts()[%q] = %+v (%v), want %+v", name, c[name], err, want)
		}
	}
	counts("q", eventlog.QueueCount{Waiting: 4})
	l0, l1 := mustClaim(e[0], time.Minute), mustClaim(e[1], time.Minute)
	counts("q", eventlog.QueueCount{Waiting: 2, Running: 2})
	refused(e[2])
	// A settle's plain claim runs no body: the queue does not limit it.
	if l, err := leaser.Claim(ctx, e[3], "w+settle", time.Minute); err != nil {
		t.Fatalf("a plain Claim on a full queue: %v; it is not limited", err)
	} else if err := leaser.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// A release frees a slot.
	if err := leaser.Release(ctx, l0); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l2 := mustClaim(e[2], time.Minute)
	if l2.Epoch != 1 {
		t.Fatalf("the claim after a refused one has epoch %d, want 1: the refusal spent one", l2.Epoch)
	}
	refused(e[3])
	// An expired lease frees its slot: the worker that held it died.
	if err := leaser.Release(ctx, l1); err != nil {
		t.Fatalf("Release: %v", err)
	}
	short := mustClaim(e[1], 200*time.Millisecond)
	refused(e[3])
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, held, err := leaser.Holder(ctx, short.ID); err != nil {
			t.Fatalf("Holder: %v", err)
		} else if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lease of 200ms still live after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	counts("q", eventlog.QueueCount{Waiting: 3, Running: 1}) // e[0] released, e[1] expired, e[3]
	mustClaim(e[3], time.Minute)
	counts("q", eventlog.QueueCount{Waiting: 2, Running: 2})

	// The rate admits one start an hour: the second is refused until then.
	r1, r2 := create("a", "rated", 0), create("a", "rated", 0)
	mustClaim(r1, time.Minute)
	_, err = claim(r2, time.Minute)
	var qe *eventlog.QueueFullError
	if !errors.Is(err, eventlog.ErrQueueFull) || !errors.As(err, &qe) || qe.RetryAt.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("a second start within the rate's hour = %v, want a *QueueFullError with RetryAt about an hour away", err)
	}

	var bc eventlog.VersionedClaimer
	if !eventlog.As(s, &bc) {
		return
	}
	// The bulk claim: queue b has one slot; of its three executions the
	// one of the lowest priority is claimed, beside an unqueued one.
	put(eventlog.Queue{Name: "b", Concurrency: 1, Priority: true})
	b3, b1, b2 := create("bulk", "b", 3), create("bulk", "b", 1), create("bulk", "b", 2)
	free := create("bulk", "", 0)
	ls, err := bc.ClaimRunnableVersion(ctx, "w", time.Minute, []string{"bulk"}, "", 10, time.Now())
	if err != nil {
		t.Fatalf("ClaimRunnableVersion: %v", err)
	}
	var got []eventlog.ID
	for _, l := range ls {
		got = append(got, l.ID)
	}
	want := []eventlog.ID{b1, free}
	slices.SortFunc(want, func(a, b eventlog.ID) int { return slices.Compare(a[:], b[:]) })
	if !slices.Equal(got, want) {
		t.Fatalf("ClaimRunnableVersion claimed %v, want %v (priority 1 of b, and the unqueued one)", got, want)
	}
	if ls, err := bc.ClaimRunnableVersion(ctx, "w", time.Minute, []string{"bulk"}, "", 10, time.Now()); err != nil || len(ls) != 0 {
		t.Fatalf("ClaimRunnableVersion on a full queue = %+v, %v; want nothing", ls, err)
	}
	// b1 ends under its lease, not yet released: an ended execution
	// holds no slot, and of the others the lower priority goes first.
	for _, l := range ls {
		if l.ID != b1 {
			continue
		}
		if _, err := s.Append(eventlog.WithEpoch(ctx, l.Epoch), b1, 1,
			eventlog.Event{Time: time.Now(), Data: &eventlog.DispatchStarted{Dispatch: 1, Owner: "w", Epoch: l.Epoch}},
			eventlog.Event{Time: time.Now(), Data: &eventlog.ExecutionCompleted{}}); err != nil {
			t.Fatalf("Append to %s: %v", b1, err)
		}
	}
	ls, err = bc.ClaimRunnableVersion(ctx, "w", time.Minute, []string{"bulk"}, "", 10, time.Now())
	if err != nil || len(ls) != 1 || ls[0].ID != b2 {
		t.Fatalf("ClaimRunnableVersion after b1 ended = %+v, %v; want only %s (priority 2, before priority 3's %s)", ls, err, b2, b3)
	}
	// The bulk claim takes a start of a rated queue for each pending
	// execution it claims: of two, one an hour.
	put(eventlog.Queue{Name: "rb", Rate: 1, Per: time.Hour})
	create("rbulk", "rb", 0)
	create("rbulk", "rb", 0)
	if ls, err := bc.ClaimRunnableVersion(ctx, "w", time.Minute, []string{"rbulk"}, "", 10, time.Now()); err != nil || len(ls) != 1 {
		t.Fatalf("ClaimRunnableVersion of two executions of a queue rated 1 an hour = %+v, %v; want one", ls, err)
	}
	if ls, err := bc.ClaimRunnableVersion(ctx, "w", time.Minute, []string{"rbulk"}, "", 10, time.Now()); err != nil || len(ls) != 0 {
		t.Fatalf("a second ClaimRunnableVersion within the rate's hour = %+v, %v; want none", ls, err)
	}

	// Released without a dispatch, b2 is runnable again, and first again.
	if err := bc.Release(ctx, ls[0]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	ls, err = bc.ClaimRunnableVersion(ctx, "w", time.Minute, []string{"bulk"}, "", 10, time.Now())
	if err != nil || len(ls) != 1 || ls[0].ID != b2 {
		t.Fatalf("ClaimRunnableVersion after b2's release = %+v, %v; want only %s", ls, err, b2)
	}
}
