package pgstore_test

import (
	"context"
	"testing"

	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// openStore opens a store in a fresh schema, dropped at cleanup.
func openStore(t testing.TB, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	url, schema := pgtest.Schema(t)
	s, err := pgstore.Open(t.Context(), url, append([]pgstore.Option{pgstore.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// exec runs sql on the test database.
func exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
