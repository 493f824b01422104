package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestReadCommandsAsReadOnlyRole (issue 30 item 7): a role with only USAGE
// on the log's schema and SELECT on its tables runs every read command on
// the Postgres log — ls, tree, events, coverage, show, approvals, du,
// diff, timeline — while a command that writes (fork) is refused.
func TestReadCommandsAsReadOnlyRole(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	url, schema := pgtest.Schema(t)
	dir := t.TempDir()
	writer := []string{"--dir", dir, "--db", url + "?forkline_schema=" + schema}
	if _, stderr, code := runCLI(t, append(writer, "--json", "demo")...); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	ids := lsJSON(t, writer...)
	if len(ids) < 3 {
		t.Fatalf("the demo made %d executions, want a run and two forks", len(ids))
	}
	a, b := ids[0].ID, ids[1].ID
	reader := []string{"--dir", dir, "--db", pgtest.ReadOnlyRole(t, url, schema) + "?forkline_schema=" + schema}
	if n := len(lsJSON(t, reader...)); n != len(ids) {
		t.Fatalf("ls as the read-only role lists %d executions, want %d", n, len(ids))
	}
	for _, args := range [][]string{
		{"tree"}, {"events", a}, {"coverage", a}, {"coverage", a, "45"}, {"show", a, "5"},
		{"approvals"}, {"du"}, {"diff", a, b}, {"timeline", a, "--html", filepath.Join(dir, "t.html")},
	} {
		if _, stderr, code := runCLI(t, append(reader, args...)...); code != 0 {
			t.Errorf("%v as the read-only role: exit %d: %s", args, code, stderr)
		}
	}
	if _, stderr, code := runCLI(t, append(reader, "fork", a, "45")...); code == 0 {
		t.Fatalf("fork as the read-only role succeeded: %s", stderr)
	}
	if n := len(lsJSON(t, writer...)); n != len(ids) {
		t.Fatalf("after the refused fork the log lists %d executions, want %d", n, len(ids))
	}
}

// TestReadCommandOnEmptyDatabase (issue 30 item 7): ls on a database with
// no forkline schema says there is no forkline log there (exit 2) and
// creates nothing.
func TestReadCommandOnEmptyDatabase(t *testing.T) {
	url, schema := pgtest.Schema(t)
	db := []string{"--dir", t.TempDir(), "--db", url + "?forkline_schema=" + schema}
	for _, cmd := range []string{"ls", "approvals", "du"} {
		_, stderr, code := runCLI(t, append(db, cmd)...)
		if code != 2 || !strings.Contains(stderr, "no forkline log here") {
			t.Fatalf("%s on an empty database: exit %d: %s; want exit 2, no forkline log here", cmd, code, stderr)
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("read commands on an empty database created schema %s", schema)
	}
}
