package pgstore_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// openShared opens n stores on one fresh schema, as n processes sharing a
// database would; extra is added to the URL's query.
func openShared(t *testing.T, n int, extra string) ([]*pgstore.Store, string) {
	t.Helper()
	url, schema := pgtest.Schema(t)
	if extra != "" {
		if strings.Contains(url, "?") {
			url += "&" + extra
		} else {
			url += "?" + extra
		}
	}
	out := make([]*pgstore.Store, n)
	for i := range out {
		s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out[i] = s
	}
	return out, pgx.Identifier{schema}.Sanitize()
}

// kinds returns the seq:kind of every event of id.
func kinds(t *testing.T, s *pgstore.Store, id eventlog.ID) []string {
	t.Helper()
	var out []string
	for ev, err := range s.Events(t.Context(), id, 1) {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		out = append(out, fmt.Sprintf("%d:%s", ev.Seq, ev.Kind()))
	}
	return out
}

func fastCount(t *testing.T, s *pgstore.Store, tried, wrote uint64) {
	t.Helper()
	if gt, gw := pgstore.FastAppends(s); gt != tried || gw != wrote {
		t.Fatalf("one-round-trip appends: tried %d, wrote %d; want %d, %d", gt, gw, tried, wrote)
	}
}

// The store's own consecutive appends take one round trip each, and write
// what the locking path writes: events, status, head.
func TestAppendOneRoundTrip(t *testing.T) {
	ss, _ := openShared(t, 1, "")
	s := ss[0]
	id := create(t, s, "a")
	h := appendEvs(t, s, id, 1, &eventlog.DispatchStarted{Dispatch: 1})
	h = appendEvs(t, s, id, h, &eventlog.StepStarted{StepID: "s1", StepKind: "tool", Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s1", Result: []byte(`1`)})
	h, err := s.AppendUnsynced(t.Context(), id, h, eventlog.Event{Time: t0, Data: &eventlog.DispatchParked{WakeAt: t0.Add(time.Hour), Reason: eventlog.ParkTimer}})
	if err != nil || h != 5 {
		t.Fatalf("AppendUnsynced: head %d, %v", h, err)
	}
	fastCount(t, s, 3, 3)
	want := []string{"1:execution.created", "2:dispatch.started", "3:step.started", "4:step.succeeded", "5:dispatch.parked"}
	if got := kinds(t, s, id); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	info, err := s.Info(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Head != 5 || info.Status != eventlog.StatusWaiting || !info.WakeAt.Equal(t0.Add(time.Hour)) || !info.Updated.Equal(t0) {
		t.Fatalf("info %+v", info)
	}
}

// Another process's writes make the cached fold stale: the one-statement
// append then writes nothing and the locking path classifies the refusal
// (ErrConflict, ErrLeaseLost, ErrLeaseHeld, ErrNotFound) exactly as before.
func TestAppendOneRoundTripFenced(t *testing.T) {
	ss, _ := openShared(t, 2, "")
	a, b := ss[0], ss[1]
	ctx := t.Context()
	ev := func(p eventlog.Payload) eventlog.Event { return eventlog.Event{Time: t0, Data: p} }
	id := create(t, a, "a")
	appendEvs(t, a, id, 1, &eventlog.DispatchStarted{Dispatch: 1}) // head 2, cached by a
	appendEvs(t, b, id, 2, &eventlog.DispatchStarted{Dispatch: 2}) // head 3, by b
	fastCount(t, a, 1, 1)
	fastCount(t, b, 0, 0) // b had no fold of id: the locking path

	// a's fold is at head 2, the row's head is 3.
	if _, err := a.Append(ctx, id, 2, ev(&eventlog.DispatchStarted{Dispatch: 3})); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("append at a stale head: %v, want ErrConflict", err)
	}
	fastCount(t, a, 2, 1)

	// b's fold is at head 3; a claims the lease and b appends without one.
	la, err := a.Claim(ctx, id, "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, id, 3, ev(&eventlog.DispatchStarted{Dispatch: 3})); !errors.Is(err, eventlog.ErrLeaseHeld) {
		t.Fatalf("unleased append while a lease is live: %v, want ErrLeaseHeld", err)
	}
	fastCount(t, b, 1, 0)
	// a appends under its epoch (the locking path: a's fold is stale),
	// then again in one round trip.
	h, err := a.Append(eventlog.WithEpoch(ctx, la.Epoch), id, 3, ev(&eventlog.DispatchStarted{Dispatch: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if h, err = a.AppendUnsynced(eventlog.WithEpoch(ctx, la.Epoch), id, h, ev(&eventlog.DispatchStarted{Dispatch: 4})); err != nil {
		t.Fatal(err)
	}
	fastCount(t, a, 3, 2)
	// b takes over; a's fold is current, its epoch is not.
	if err := b.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Claim(ctx, id, "b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(eventlog.WithEpoch(ctx, la.Epoch), id, h, ev(&eventlog.DispatchStarted{Dispatch: 5})); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("append under a superseded epoch: %v, want ErrLeaseLost", err)
	}
	fastCount(t, a, 4, 2)
	if h, err = b.Append(eventlog.WithEpoch(ctx, lb.Epoch), id, h, ev(&eventlog.DispatchStarted{Dispatch: 5})); err != nil || h != 6 {
		t.Fatalf("append under the new epoch: head %d, %v", h, err)
	}
	want := []string{"1:execution.created", "2:dispatch.started", "3:dispatch.started", "4:dispatch.started", "5:dispatch.started", "6:dispatch.started"}
	if got := kinds(t, a, id); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var dispatches []uint64
	for e, err := range a.Events(ctx, id, 2) {
		if err != nil {
			t.Fatal(err)
		}
		dispatches = append(dispatches, e.Data.(*eventlog.DispatchStarted).Dispatch)
	}
	if !slices.Equal(dispatches, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("dispatches %v: a refused append wrote", dispatches)
	}

	// b deletes an execution a created: a keeps its fold (at head 1), the
	// row no longer matches.
	id2 := create(t, a, "a") // pending: it may be deleted
	if err := b.Delete(ctx, id2); err != nil {
		t.Fatal(err)
	}
	tried, _ := pgstore.FastAppends(a)
	if _, err := a.Append(ctx, id2, 1, ev(&eventlog.DispatchStarted{Dispatch: 1})); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("append to a deleted execution: %v, want ErrNotFound", err)
	}
	if got, _ := pgstore.FastAppends(a); got != tried+1 {
		t.Fatalf("the append to the deleted execution was not tried in one round trip")
	}
}

// AppendUnsynced's transaction, and only it, commits with
// synchronous_commit off, on either path: a trigger on the events table
// records the setting in force when each event was inserted.
func TestAppendUnsyncedSetting(t *testing.T) {
	ss, sc := openShared(t, 2, "pool_max_conns=1") // one connection each: a leaked setting would show
	a, b := ss[0], ss[1]
	exec(t, `CREATE TABLE `+sc+`.seen (seq bigint, setting text)`)
	exec(t, `CREATE FUNCTION `+sc+`.see() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO `+sc+`.seen VALUES (NEW.seq, current_setting('synchronous_commit')); RETURN NEW; END $$`)
	exec(t, `CREATE TRIGGER see AFTER INSERT ON `+sc+`.events FOR EACH ROW EXECUTE FUNCTION `+sc+`.see()`)
	ctx := t.Context()
	ev := func(n uint64) eventlog.Event {
		return eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: n}}
	}
	id, err := a.Create(ctx, &eventlog.ExecutionCreated{Agent: "a"}, t0) // seq 1
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		s        *pgstore.Store
		unsynced bool
	}{{a, true}, {a, false}, {a, true}, {b, true}, {b, false}, {a, false}} // seqs 2..7; seqs 5 and 7 by the locking path
	for i, st := range steps {
		f := st.s.Append
		if st.unsynced {
			f = st.s.AppendUnsynced
		}
		if _, err := f(ctx, id, uint64(i+1), ev(uint64(i+1))); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	fastCount(t, a, 3, 3)
	fastCount(t, b, 1, 1)
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT seq || ':' || setting FROM `+sc+`.seen ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1:on", "2:off", "3:on", "4:off", "5:off", "6:on", "7:on"}
	if !slices.Equal(got, want) {
		t.Fatalf("synchronous_commit at each insert %v, want %v", got, want)
	}
}
