package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// openStore opens a store in a fresh schema, dropped at cleanup.
func openStore(t testing.TB, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	url := pgtest.URL(t)
	schema := freshSchema(t, url)
	s, err := pgstore.Open(t.Context(), url, append([]pgstore.Option{pgstore.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// freshSchema returns a new schema name that is dropped at cleanup.
func freshSchema(t testing.TB, url string) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "forkline_test_" + hex.EncodeToString(r[:])
	t.Cleanup(func() { dropSchema(t, url, schema) })
	return schema
}

func dropSchema(t testing.TB, url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
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
