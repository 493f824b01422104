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

// TestReadOnlyRole (issue 30 item 7): a role with only USAGE on the schema
// and SELECT on its tables cannot open the store for writing (Open's DDL
// is refused), but opens it ReadOnly and reads everything — List, Info,
// Events, Requests — while every write is refused with ErrReadOnly and
// writes nothing.
func TestReadOnlyRole(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	w, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	id, err := w.Create(ctx, &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`{}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Request(ctx, id, &eventlog.CancelRequested{Reason: "r", By: "t"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	want, err := collectEvents(w.Events(ctx, id, 1))
	if err != nil {
		t.Fatal(err)
	}
	reader := pgtest.ReadOnlyRole(t, url, schema)

	if s, err := pgstore.Open(ctx, reader, pgstore.WithSchema(schema)); err == nil {
		_ = s.Close()
		t.Fatal("a writer's Open as the read-only role succeeded: the role is not read-only")
	}
	r, err := pgstore.Open(ctx, reader, pgstore.WithSchema(schema), pgstore.ReadOnly())
	if err != nil {
		t.Fatalf("ReadOnly Open as a role with USAGE and SELECT: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	var listed []eventlog.ID
	for info, err := range r.List(ctx, eventlog.Filter{}) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		listed = append(listed, info.ID)
	}
	if len(listed) != 1 || listed[0] != id {
		t.Fatalf("List = %v, want [%s]", listed, id)
	}
	if info, err := r.Info(ctx, id); err != nil || info.Head != 1 {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	got, err := collectEvents(r.Events(ctx, id, 1))
	if err != nil || len(got) != len(want) || got[0].Kind() != want[0].Kind() {
		t.Fatalf("Events = %v, %v; want %v", got, err, want)
	}
	if reqs, err := r.Requests(ctx, id); err != nil || len(reqs) != 1 {
		t.Fatalf("Requests = %v, %v; want the one cancel", reqs, err)
	}

	writes := map[string]func() error{
		"Create": func() error {
			_, err := r.Create(ctx, &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`{}`)}, time.Now())
			return err
		},
		"Append": func() error {
			_, err := r.Append(ctx, id, 1, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1}})
			return err
		},
		"Request": func() error {
			_, err := r.Request(ctx, id, &eventlog.CancelRequested{Reason: "x", By: "t"}, time.Now())
			return err
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, pgstore.ErrReadOnly) {
			t.Errorf("%s on a ReadOnly store = %v, want ErrReadOnly", name, err)
		}
	}
	if got, err := collectEvents(w.Events(ctx, id, 1)); err != nil || len(got) != len(want) {
		t.Fatalf("after the refused writes the lineage is %v, %v; want %d events", got, err, len(want))
	}
	if reqs, err := w.Requests(ctx, id); err != nil || len(reqs) != 1 {
		t.Fatalf("after the refused writes the inbox is %v, %v; want the one cancel", reqs, err)
	}
	n := 0
	for _, err := range w.List(ctx, eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("after the refused writes the store lists %d executions, want 1", n)
	}
}

// TestReadOnlyOpenNoDDL (issue 30 item 7): a ReadOnly Open of a schema that
// does not exist fails with ErrNoSchema and creates nothing; one of a
// schema left at an older version fails with ErrSchemaTooOld and does not
// migrate it.
func TestReadOnlyOpenNoDDL(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	if s, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema), pgstore.ReadOnly()); !errors.Is(err, pgstore.ErrNoSchema) {
		if err == nil {
			_ = s.Close()
		}
		t.Fatalf("ReadOnly Open of a missing schema = %v, want ErrNoSchema", err)
	}
	if schemaExists(t, url, schema) {
		t.Fatalf("a ReadOnly Open created schema %s", schema)
	}
	w, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	sc := pgx.Identifier{schema}.Sanitize()
	exec(t, `UPDATE `+sc+`.schema_version SET version = $1`, pgstore.SchemaVersion-1)
	if s, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema), pgstore.ReadOnly()); !errors.Is(err, pgstore.ErrSchemaTooOld) {
		if err == nil {
			_ = s.Close()
		}
		t.Fatalf("ReadOnly Open of an older schema = %v, want ErrSchemaTooOld", err)
	}
	if v := schemaVersion(t, url, schema); v != pgstore.SchemaVersion-1 {
		t.Fatalf("after a ReadOnly Open the schema is at version %d, want %d (not migrated)", v, pgstore.SchemaVersion-1)
	}
	exec(t, `UPDATE `+sc+`.schema_version SET version = $1`, pgstore.SchemaVersion+1)
	if s, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema), pgstore.ReadOnly()); !errors.Is(err, pgstore.ErrSchemaTooNew) {
		if err == nil {
			_ = s.Close()
		}
		t.Fatalf("ReadOnly Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
}

// collectEvents gathers an Events sequence.
func collectEvents(seq func(func(eventlog.Event, error) bool)) ([]eventlog.Event, error) {
	var out []eventlog.Event
	for ev, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// schemaExists reports whether the test database has schema.
func schemaExists(t *testing.T, url, schema string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// schemaVersion reads schema's schema_version.
func schemaVersion(t *testing.T, url, schema string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v int
	if err := conn.QueryRow(t.Context(), `SELECT version FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
