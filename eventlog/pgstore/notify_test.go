package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// listening returns a's Changes channel once its listener is live (it
// sends the zero ID when it starts listening).
func listening(t *testing.T, ctx context.Context, a *pgstore.Store) <-chan eventlog.ID {
	t.Helper()
	ch, err := a.Changes(ctx)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	select {
	case id := <-ch:
		if !id.IsZero() {
			t.Fatalf("first change %s, want the zero ID (listening)", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the listener did not start")
	}
	return ch
}

// expectChange waits up to a second for want on ch.
func expectChange(t *testing.T, ch <-chan eventlog.ID, want eventlog.ID, what string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("%s: change of %s, want %s", what, got, want)
		}
	case <-time.After(time.Second):
		t.Fatalf("%s: no change of %s within 1 s", what, want)
	}
}

// expectQuiet checks that ch stays empty for a while.
func expectQuiet(t *testing.T, ch <-chan eventlog.ID, what string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("%s: change of %s, want none", what, got)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestChangesAcrossStores: a store's Changes hears, through LISTEN/NOTIFY,
// every write another store on the same schema (another process) with
// NotifyEveryAppend commits to an execution — appends on the
// one-statement path and the locking path, AppendUnsynced, Take, Request and Release — and nothing for an
// append that wrote nothing, nor for a Claim; its channels close when
// their ctx ends and at Close.
func TestChangesAcrossStores(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	open := func() *pgstore.Store {
		s, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema), pgstore.NotifyEveryAppend())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b, c := open(), open(), open()
	ch := listening(t, ctx, a)

	t0 := time.Now()
	id, err := b.Create(ctx, &eventlog.ExecutionCreated{Agent: "x"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	started := eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: 1}}
	head, err := b.Append(ctx, id, 1, started) // b made the last write: one statement
	if err != nil {
		t.Fatal(err)
	}
	expectChange(t, ch, id, "append on the one-statement path")

	if _, err := b.Append(ctx, id, 1, started); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("append at a stale head: %v, want ErrConflict", err)
	}
	expectQuiet(t, ch, "append that wrote nothing")

	step := eventlog.Event{Time: t0, Data: &eventlog.MarkerRecorded{Name: "m"}}
	if head, err = c.Append(ctx, id, head, step); err != nil { // c has no fold: the locking path
		t.Fatal(err)
	}
	expectChange(t, ch, id, "append on the locking path")
	if head, err = b.AppendUnsynced(ctx, id, head, step); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ch, id, "AppendUnsynced")
	n, err := b.Request(ctx, id, &eventlog.CancelRequested{Reason: "r"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	expectChange(t, ch, id, "Request")
	if _, err = c.Take(ctx, id, head, []uint64{n}, eventlog.Event{Time: t0, Data: &eventlog.CancelRequested{Reason: "r"}}); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ch, id, "Take")
	l, err := b.Claim(ctx, id, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, ch, "Claim")
	if err := b.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ch, id, "Release")

	// A Changes channel closes when its ctx ends, the others stay.
	sub, cancel := context.WithCancel(ctx)
	short, err := a.Changes(sub)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range short { //nolint:revive // drain until closed
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-ch:
		for open {
			_, open = <-ch
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changes channel still open after Close")
	}
	if _, err := a.Changes(ctx); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("Changes after Close: %v, want ErrClosed", err)
	}
}

// TestChangesLongSchema: a schema name of 63 bytes makes a channel name
// longer than Postgres takes; the store cuts it for NOTIFY and LISTEN
// alike, so appends still work and are still heard.
func TestChangesLongSchema(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	long := (schema + "_" + "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklm")[:63]
	s, err := pgstore.Open(ctx, url, pgstore.WithSchema(long), pgstore.NotifyEveryAppend())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		conn, err := pgx.Connect(context.Background(), pgtest.URL(t))
		if err == nil {
			_, _ = conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+long+`" CASCADE`)
			_ = conn.Close(context.Background())
		}
	})
	ch := listening(t, ctx, s)
	id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "x"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, id, 1, eventlog.Event{Time: time.Now(), Data: &eventlog.DispatchStarted{Dispatch: 1}}); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ch, id, "append")
}

// TestChangesDefaultTerminalOnly: without NotifyEveryAppend a store
// NOTIFYs the appends that end an execution (DESIGN §15½.6) — on the
// one-statement path and the locking path — and requests, not the other
// appends, whose NOTIFY would serialize concurrent commits.
func TestChangesDefaultTerminalOnly(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	open := func() *pgstore.Store {
		s, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b, c := open(), open(), open()
	ch := listening(t, ctx, a)
	t0 := time.Now()
	ids := make([]eventlog.ID, 2)
	for i := range ids {
		id, err := b.Create(ctx, &eventlog.ExecutionCreated{Agent: "x"}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Append(ctx, id, 1, eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: 1}}); err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	expectQuiet(t, ch, "appends that end nothing")
	if _, err := b.Request(ctx, ids[0], &eventlog.CancelRequested{Reason: "r"}, t0); err != nil {
		t.Fatal(err)
	}
	expectChange(t, ch, ids[0], "Request")
	done := eventlog.Event{Time: t0, Data: &eventlog.ExecutionCompleted{}}
	if _, err := b.Append(ctx, ids[0], 2, done); err != nil { // b's fold: one statement
		t.Fatal(err)
	}
	expectChange(t, ch, ids[0], "terminal append on the one-statement path")
	if _, err := c.Append(ctx, ids[1], 2, done); err != nil { // c has no fold: the locking path
		t.Fatal(err)
	}
	expectChange(t, ch, ids[1], "terminal append on the locking path")
}
