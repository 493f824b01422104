// Package pgtest finds the PostgreSQL server that tests of the Postgres
// store run against: FORKLINE_TEST_POSTGRES, or
// postgres://postgres@127.0.0.1:5432/test. Without a reachable server the
// tests skip, saying so in one line; with FORKLINE_REQUIRE_POSTGRES=1 (as
// .ci/run sets) they fail instead.
package pgtest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server tests use unless FORKLINE_TEST_POSTGRES names
// another.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test"

var probe struct {
	once sync.Once
	url  string
	err  error
}

// URL returns the test server's URL, after checking once per process that
// it answers; when it does not, t is skipped (or failed, when
// FORKLINE_REQUIRE_POSTGRES=1).
func URL(t testing.TB) string {
	t.Helper()
	probe.once.Do(func() {
		probe.url = os.Getenv("FORKLINE_TEST_POSTGRES")
		if probe.url == "" {
			probe.url = DefaultURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, probe.url)
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		probe.err = err
	})
	if probe.err != nil {
		if os.Getenv("FORKLINE_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("no PostgreSQL at %s (FORKLINE_REQUIRE_POSTGRES=1): %v", probe.url, probe.err)
		}
		t.Skipf("no PostgreSQL at %s (set FORKLINE_TEST_POSTGRES): skipped", probe.url)
	}
	return probe.url
}
