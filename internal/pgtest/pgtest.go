// Package pgtest finds the PostgreSQL server that tests of the Postgres
// store run against: FORKLINE_TEST_POSTGRES, or
// postgres://postgres@127.0.0.1:5432/test. Without a reachable server the
// tests skip, saying so in one line; with FORKLINE_REQUIRE_POSTGRES=1 (as
// .ci/run sets) they fail instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	neturl "net/url"
	"os"
	"strings"
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

// Schema returns the test server's URL and a new schema name, which is
// dropped (with everything in it) at cleanup.
func Schema(t testing.TB) (url, schema string) {
	t.Helper()
	url = URL(t)
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema = "forkline_test_" + hex.EncodeToString(r[:])
	t.Cleanup(func() {
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
	})
	return url, schema
}

// SchemaURL returns the test server's URL naming a new schema (the
// forkline_schema parameter pgstore.Open reads), dropped at cleanup.
func SchemaURL(t testing.TB) string {
	t.Helper()
	url, schema := Schema(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "forkline_schema=" + schema
}

// ReadOnlyRole creates a login role that may only read schema: USAGE on
// it and SELECT on the tables it holds now, nothing else (it may not
// create, alter or write anything). It returns url with the role as its
// user; the server must let the role in without a password (trust auth,
// as the test server does). The role is dropped at cleanup, its grants
// first.
func ReadOnlyRole(t testing.TB, url, schema string) string {
	t.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	role := "forkline_reader_" + hex.EncodeToString(r[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("create role %s: %v", role, err)
	}
	defer conn.Close(ctx)
	ri, sc := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		`CREATE ROLE ` + ri + ` LOGIN`,
		`GRANT USAGE ON SCHEMA ` + sc + ` TO ` + ri,
		`GRANT SELECT ON ALL TABLES IN SCHEMA ` + sc + ` TO ` + ri,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer conn.Close(ctx)
		for _, stmt := range []string{`DROP OWNED BY ` + ri, `DROP ROLE ` + ri} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatalf("test server URL %q: %v", url, err)
	}
	u.User = neturl.User(role)
	return u.String()
}
