package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/eventlog/storetest"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// sqlTamperer tampers with a store's events table with SQL, as an operator
// with a psql prompt would.
type sqlTamperer struct{ schema string }

// query runs sql and scans its one row into dst (none when dst is nil).
func (p sqlTamperer) query(t testing.TB, sql string, dst []any, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if dst == nil {
		tag, err := conn.Exec(t.Context(), sql, args...)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("%s: %v, %d rows", sql, err, tag.RowsAffected())
		}
		return
	}
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(dst...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (p sqlTamperer) Record(t testing.TB, id eventlog.ID, seq uint64) []byte {
	var rec []byte
	p.query(t, `SELECT record FROM `+p.schema+`.events WHERE execution = $1 AND seq = $2`, []any{&rec}, id[:], int64(seq))
	return rec
}

func (p sqlTamperer) SetRecord(t testing.TB, id eventlog.ID, seq uint64, rec []byte) {
	p.query(t, `UPDATE `+p.schema+`.events SET record = $3 WHERE execution = $1 AND seq = $2`, nil, id[:], int64(seq), rec)
}

func (p sqlTamperer) DeleteRecord(t testing.TB, id eventlog.ID, seq uint64) {
	p.query(t, `DELETE FROM `+p.schema+`.events WHERE execution = $1 AND seq = $2`, nil, id[:], int64(seq))
}

// TestTamper: rows swapped, copied from another execution, deleted or
// flipped with SQL read as corruption, and Fork refuses them (issue 30
// item 3).
func TestTamper(t *testing.T) {
	storetest.TestTamper(t, func(t *testing.T) (eventlog.Log, storetest.Tamperer) {
		url, schema := pgtest.Schema(t)
		s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema), pgstore.WithoutSync())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, sqlTamperer{schema: schema}
	})
}

// TestTamperedRequest: an inbox row whose record is that of another
// request — the same execution's request 1, or another execution's
// request 2 — over request 2 is corruption naming the execution and the
// request, not a request read as another (a request binds its execution
// and number).
func TestTamperedRequest(t *testing.T) {
	url, schema := pgtest.Schema(t)
	s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema), pgstore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	a, b := create(t, s, "a"), create(t, s, "a")
	for _, id := range []eventlog.ID{a, a, b, b} {
		if _, err := s.Request(ctx, id, &eventlog.CancelRequested{Reason: "stop " + id.String()}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	p := sqlTamperer{schema: schema}
	record := func(id eventlog.ID, n int64) []byte {
		var rec []byte
		p.query(t, `SELECT record FROM `+schema+`.requests WHERE execution = $1 AND n = $2`, []any{&rec}, id[:], n)
		return rec
	}
	good := record(a, 2)
	for name, rec := range map[string][]byte{"request 1": record(a, 1), "another execution's request 2": record(b, 2)} {
		p.query(t, `UPDATE `+schema+`.requests SET record = $3 WHERE execution = $1 AND n = $2`, nil, a[:], int64(2), rec)
		_, err := s.Requests(ctx, a)
		var ce *eventlog.CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, eventlog.ErrCorrupt) || ce.Execution != a || ce.What != "request 2" {
			t.Errorf("Requests with %s over request 2 = %v, want a *CorruptionError naming %s request 2", name, err, a)
		}
	}
	p.query(t, `UPDATE `+schema+`.requests SET record = $3 WHERE execution = $1 AND n = $2`, nil, a[:], int64(2), good)
	if rs, err := s.Requests(ctx, a); err != nil || len(rs) != 2 {
		t.Fatalf("Requests with the record restored = %v, %v", rs, err)
	}
}
