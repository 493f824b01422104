package pgstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

var t0 = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

func create(t *testing.T, s *pgstore.Store, agent string) eventlog.ID {
	t.Helper()
	id, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: agent, Input: []byte(`{}`)}, t0)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return id
}

func appendEvs(t *testing.T, s *pgstore.Store, id eventlog.ID, head uint64, ps ...eventlog.Payload) uint64 {
	t.Helper()
	evs := make([]eventlog.Event, len(ps))
	for i, p := range ps {
		evs[i] = eventlog.Event{Time: t0.Add(time.Duration(head+uint64(i)) * time.Second), Data: p}
	}
	h, err := s.Append(t.Context(), id, head, evs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return h
}

// queryInt runs a query that returns one integer.
func queryInt(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int64
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// A row that does not decode is reported as corruption naming the
// execution and the seq, and reading stops there.
func TestCorruptEvent(t *testing.T) {
	s := openStore(t)
	id := create(t, s, "a")
	appendEvs(t, s, id, 1, &eventlog.DispatchStarted{Dispatch: 1}, &eventlog.DispatchStarted{Dispatch: 2})
	exec(t, `UPDATE `+s.Schema()+`.events SET record = '\x0102'::bytea WHERE execution = $1 AND seq = 2`, id[:])
	var got []uint64
	var err error
	for ev, e := range s.Events(t.Context(), id, 1) {
		if e != nil {
			err = e
			break
		}
		got = append(got, ev.Seq)
	}
	var ce *eventlog.CorruptionError
	if !errors.Is(err, eventlog.ErrCorrupt) || !errors.As(err, &ce) || ce.Execution != id || ce.Seq != 2 {
		t.Fatalf("Events over a damaged row = %v, want a CorruptionError of %s seq 2", err, id)
	}
	if len(got) != 0 { // the damaged row is in the first page
		t.Fatalf("events %v were yielded before the damage", got)
	}
	// A missing event is corruption too.
	exec(t, `DELETE FROM `+s.Schema()+`.events WHERE execution = $1 AND seq = 2`, id[:])
	for _, e := range s.Events(t.Context(), id, 1) {
		err = e
	}
	if !errors.As(err, &ce) || ce.Seq != 2 || !strings.Contains(ce.Error(), "missing") {
		t.Fatalf("Events over a missing row = %v, want a CorruptionError of seq 2", err)
	}
}

// The schema is created once, versioned, and a newer one is refused.
func TestSchemaVersion(t *testing.T) {
	url, schema := pgtest.Schema(t)
	s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	id := create(t, s, "a")
	_ = s.Close()
	if v := queryInt(t, `SELECT version FROM `+schema+`.schema_version`); v != pgstore.SchemaVersion {
		t.Fatalf("schema_version %d, want %d", v, pgstore.SchemaVersion)
	}
	// Reopened: the tables are there, with their rows.
	s, err = pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if h, err := s.Head(t.Context(), id); err != nil || h != 1 {
		t.Fatalf("Head after reopen = %d, %v", h, err)
	}
	_ = s.Close()
	if n := queryInt(t, `SELECT count(*) FROM `+schema+`.schema_version`); n != 1 {
		t.Fatalf("%d schema_version rows, want 1", n)
	}
	exec(t, `UPDATE `+schema+`.schema_version SET version = $1`, pgstore.SchemaVersion+1)
	if _, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema)); !errors.Is(err, pgstore.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
}

func TestBadOpen(t *testing.T) {
	url := pgtest.URL(t)
	for _, name := range []string{"", "Forkline", "1x", "a-b", "a;drop", strings.Repeat("a", 64)} {
		if _, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(name)); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("WithSchema(%q) = %v, want ErrInvalid", name, err)
		}
	}
	for _, bad := range []string{"postgres://%zz", url + "?forkline_schema=", url + "?forkline_schema=No"} {
		if _, err := pgstore.Open(t.Context(), bad); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// The URL may name the schema; WithSchema wins over it.
func TestSchemaInURL(t *testing.T) {
	url := pgtest.SchemaURL(t)
	s, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(url, "forkline_schema="+s.Schema()) || !strings.HasPrefix(s.Schema(), "forkline_test_") {
		t.Fatalf("Open(%q) is in schema %q", url, s.Schema())
	}
	_, other := pgtest.Schema(t)
	s2, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(other))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Schema() != other {
		t.Fatalf("WithSchema(%q) over the URL's schema: in %q", other, s2.Schema())
	}
}

// A fork is a row naming its parent and fork point: its own events start
// after the fork point, and no event of the parent is copied.
func TestForkCopiesNothing(t *testing.T) {
	s := openStore(t)
	id := create(t, s, "a")
	ps := make([]eventlog.Payload, 50)
	for i := range ps {
		ps[i] = &eventlog.DispatchStarted{Dispatch: uint64(i + 1)}
	}
	appendEvs(t, s, id, 1, ps...)
	f, err := s.Fork(t.Context(), id, 40, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	ff, err := s.Fork(t.Context(), f, 20, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id       eventlog.ID
		own, all int
	}{{id, 51, 51}, {f, 1, 41}, {ff, 1, 21}} {
		if n := queryInt(t, `SELECT count(*) FROM `+s.Schema()+`.events WHERE execution = $1`, c.id[:]); n != int64(c.own) {
			t.Errorf("execution %s has %d own event rows, want %d", c.id, n, c.own)
		}
		var seqs []uint64
		for ev, err := range s.Events(t.Context(), c.id, 1) {
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, ev.Seq)
		}
		if len(seqs) != c.all || seqs[len(seqs)-1] != uint64(c.all) {
			t.Errorf("lineage of %s has %d events, want %d", c.id, len(seqs), c.all)
		}
	}
}

// ClaimRunnable claims what Serve may run — pending, interrupted,
// waiting and due — and skips what another claim holds.
func TestClaimRunnable(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	pending := create(t, s, "a")
	other := create(t, s, "other")
	running := create(t, s, "a")
	appendEvs(t, s, running, 1, &eventlog.DispatchStarted{Dispatch: 1})
	done := create(t, s, "a")
	appendEvs(t, s, done, 1, &eventlog.ExecutionCompleted{Output: []byte(`1`)})
	due := create(t, s, "a")
	appendEvs(t, s, due, 1, &eventlog.DispatchStarted{Dispatch: 1}, &eventlog.DispatchParked{WakeAt: t0, Reason: eventlog.ParkTimer})
	later := create(t, s, "a")
	appendEvs(t, s, later, 1, &eventlog.DispatchStarted{Dispatch: 1}, &eventlog.DispatchParked{WakeAt: t0.Add(time.Hour), Reason: eventlog.ParkTimer})
	asked := create(t, s, "a")
	appendEvs(t, s, asked, 1, &eventlog.DispatchStarted{Dispatch: 1}, &eventlog.DispatchParked{Reason: eventlog.ParkApproval})
	if _, err := s.Request(ctx, asked, &eventlog.ApprovalGranted{StepID: "x", By: "me"}, t0); err != nil {
		t.Fatal(err)
	}
	held := create(t, s, "a")
	if _, err := s.Claim(ctx, held, "B", time.Minute); err != nil {
		t.Fatal(err)
	}

	if _, err := s.ClaimRunnable(ctx, "", time.Minute, []string{"a"}, 10, t0); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("ClaimRunnable with no owner = %v, want ErrInvalid", err)
	}
	first, err := s.ClaimRunnable(ctx, "A", time.Minute, []string{"a"}, 2, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	rest, err := s.ClaimRunnable(ctx, "A", time.Minute, []string{"a"}, 10, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var got []eventlog.ID
	for _, l := range append(first, rest...) {
		if l.Owner != "A" || l.Epoch != 1 {
			t.Errorf("lease %+v, want owner A, epoch 1", l)
		}
		if h, ok, err := s.Holder(ctx, l.ID); err != nil || !ok || h.Epoch != l.Epoch {
			t.Errorf("Holder(%s) = %+v, %v, %v; want the claimed lease", l.ID, h, ok, err)
		}
		got = append(got, l.ID)
	}
	want := []eventlog.ID{pending, running, due, asked}
	if len(first) != 2 || !slices.Equal(got, want) {
		t.Fatalf("claimed %v (first %d), want %v in two claims", got, len(first), want)
	}
	if again, err := s.ClaimRunnable(ctx, "C", time.Minute, []string{"a", "other"}, 10, t0.Add(time.Minute)); err != nil || len(again) != 1 || again[0].ID != other {
		t.Fatalf("a third claim = %v, %v; want only %s", again, err, other)
	}
}

// Expiry is judged by the database's clock, and a claim after it takes
// over with a greater epoch, which fences the old owner's appends.
func TestClaimRunnableTakesOver(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	id := create(t, s, "a")
	a, err := s.ClaimRunnable(ctx, "A", 50*time.Millisecond, []string{"a"}, 1, t0)
	if err != nil || len(a) != 1 {
		t.Fatalf("claim = %v, %v", a, err)
	}
	actx := eventlog.WithEpoch(ctx, a[0].Epoch)
	if _, err := s.Append(actx, id, 1, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1, Owner: "A", Epoch: a[0].Epoch}}); err != nil {
		t.Fatal(err)
	}
	var b []eventlog.Lease
	for len(b) == 0 {
		if b, err = s.ClaimRunnable(ctx, "B", time.Minute, []string{"a"}, 1, t0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b[0].ID != id || b[0].Epoch != a[0].Epoch+1 {
		t.Fatalf("takeover = %+v, want %s at epoch %d", b[0], id, a[0].Epoch+1)
	}
	if _, err := s.AppendUnsynced(actx, id, 2, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 2}}); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("the old owner's append = %v, want ErrLeaseLost", err)
	}
	if h, _ := s.Head(ctx, id); h != 2 {
		t.Fatalf("head %d after the refused append, want 2", h)
	}
}

// ResourceHistory reads across its growing pages (16, 32, … rows) without
// losing or repeating a state, and equals the fold's changes.
func TestResourceHistoryPages(t *testing.T) {
	s := openStore(t, pgstore.WithoutSync())
	id := create(t, s, "a")
	ps := []eventlog.Payload{&eventlog.ResourceBound{Key: "ws", DriverID: "d", Binding: []byte(`{}`), EverySteps: 1}}
	for i := range 150 {
		step := "s" + strings.Repeat("x", i%3) + time.Duration(i).String()
		ps = append(ps, &eventlog.StepStarted{StepID: step, StepKind: "tool", Target: "t", Resources: []string{"ws"},
			Idempotency: eventlog.SafeToRetry, Attempt: 1}, &eventlog.StepSucceeded{StepID: step, Result: []byte(`1`)})
	}
	appendEvs(t, s, id, 1, ps...)
	fold := eventlog.NewIndexState(nil)
	var want []eventlog.ResourceState
	var evs []eventlog.Event
	for ev, err := range s.Events(t.Context(), id, 1) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		changed, err := fold.Apply(ev)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq > 7 {
			want = append(want, changed...)
		}
	}
	var got []eventlog.ResourceState
	for st, err := range s.ResourceHistory(t.Context(), id, "ws", 7) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, st)
	}
	if len(got) != len(want) || len(want) < 290 {
		t.Fatalf("ResourceHistory has %d states, the fold %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Generation != want[i].Generation || len(got[i].InFlight) != len(want[i].InFlight) {
			t.Fatalf("state %d: %+v, the fold's %+v", i, got[i], want[i])
		}
	}
}
