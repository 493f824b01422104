package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// checkTampered runs the read commands and a fork over the demo's first
// execution, whose records 3 and 4 were swapped: each exits 1 naming the
// execution and seq 3 (issue 30 item 3), and the fork writes nothing.
func checkTampered(t *testing.T, db []string, parent, other string) {
	t.Helper()
	before := len(lsJSON(t, db...))
	for _, args := range [][]string{
		{"events", parent}, {"show", parent, "5"}, {"coverage", parent}, {"diff", parent, other}, {"diff", other, parent},
		{"fork", parent, "5"},
	} {
		stdout, stderr, code := runCLI(t, append(db, args...)...)
		if code != 1 || !strings.Contains(stderr, parent) || !strings.Contains(stderr, "seq 3") || !strings.Contains(stderr, "corrupt") {
			t.Errorf("%v over a swapped record: exit %d\nstdout %.300s\nstderr %s\nwant exit 1 naming %s seq 3 as corrupt", args, code, stdout, stderr, parent)
		}
	}
	if after := len(lsJSON(t, db...)); after != before {
		t.Errorf("%d executions after the refused fork, want %d", after, before)
	}
}

// TestTamperedPostgres: records of seq 3 and 4 swapped with SQL.
func TestTamperedPostgres(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	url, schema := pgtest.Schema(t)
	url += map[bool]string{true: "&", false: "?"}[strings.Contains(url, "?")] + pgstore.SchemaParam + "=" + schema
	db := []string{"--dir", t.TempDir(), "--db", url}
	if _, stderr, code := runCLI(t, append(db, "--json", "demo")...); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	ids := lsJSON(t, db...)
	parent, other := ids[0].ID, ids[1].ID
	id, err := eventlog.ParseID(parent)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `UPDATE `+schema+`.events e SET record = o.record FROM `+schema+`.events o
		WHERE e.execution = $1 AND o.execution = $1 AND e.seq IN (3, 4) AND o.seq = 7 - e.seq`, id[:]); err != nil {
		t.Fatal(err)
	}
	checkTampered(t, db, parent, other)
}

// TestTamperedPebble: the keys of seq 3 and 4 swapped in the log's files.
func TestTamperedPebble(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	dir := t.TempDir()
	db := []string{"--dir", dir}
	if _, stderr, code := runCLI(t, append(db, "--json", "demo")...); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	ids := lsJSON(t, db...)
	parent, other := ids[0].ID, ids[1].ID
	id, err := eventlog.ParseID(parent)
	if err != nil {
		t.Fatal(err)
	}
	// Pebble itself changes the tables behind pebblestore's back: drop
	// pebblestore's clean-close record, as its own Open for writing does,
	// or the next Open reports the MANIFEST as damaged.
	if err := os.Remove(filepath.Join(logDir(dir), "FORKLINE-CLOSED")); err != nil {
		t.Fatal(err)
	}
	raw, err := pebble.Open(logDir(dir), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(seq uint64) []byte { return binary.BigEndian.AppendUint64(append([]byte{'e'}, id[:]...), seq) }
	get := func(seq uint64) []byte {
		v, closer, err := raw.Get(key(seq))
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		return append([]byte(nil), v...)
	}
	r3, r4 := get(3), get(4)
	b := raw.NewBatch()
	_ = b.Set(key(3), r4, nil)
	_ = b.Set(key(4), r3, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	checkTampered(t, db, parent, other)
}

// quietPebble keeps pebble's informational lines out of the test output.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestExitStatusCorruptWins: an error that is both ErrCorrupt and
// ErrInvalid (a replay that met a damaged record and calls the history
// invalid) exits 1, not 2: the input was fine, the log is not.
func TestExitStatusCorruptWins(t *testing.T) {
	err := fmt.Errorf("%w: replay: %w", eventlog.ErrInvalid, &eventlog.CorruptionError{Execution: eventlog.NewID(), Seq: 3, What: "event", Err: eventlog.ErrCorrupt})
	if got := exitStatus(err); got != exitFailure {
		t.Fatalf("exitStatus(%v) = %d, want %d", err, got, exitFailure)
	}
	if got := exitStatus(fmt.Errorf("x: %w", eventlog.ErrInvalid)); got != exitInput {
		t.Fatalf("exitStatus(ErrInvalid) = %d, want %d", got, exitInput)
	}
}

// TestQuarantineCommands: ls shows a quarantined execution (its status
// and a line with the error and the ways out; --json its error), and
// unquarantine lifts it once (issue 30 item 6).
func TestQuarantineCommands(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	dir := t.TempDir()
	db := []string{"--dir", dir}
	if _, stderr, code := runCLI(t, append(db, "--json", "demo")...); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	ids := lsJSON(t, db...)
	target := ids[1].ID
	id, err := eventlog.ParseID(target)
	if err != nil {
		t.Fatal(err)
	}
	s, err := pebblestore.Open(logDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Quarantine(t.Context(), id, "eventlog: execution X: seq 3: corrupt event"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	quarantined := func() []string {
		var out []string
		for _, l := range lsJSON(t, db...) {
			if l.Quarantined != "" {
				out = append(out, l.ID+" "+l.Quarantined)
			}
		}
		return out
	}
	if got := quarantined(); fmt.Sprint(got) != "["+target+" eventlog: execution X: seq 3: corrupt event]" {
		t.Fatalf("ls --json quarantined: %v", got)
	}
	stdout, stderr, code := runCLI(t, append(db, "ls")...)
	if code != 0 || strings.Count(stdout, ", quarantined") != 1 ||
		!strings.Contains(stdout, "("+target+" is quarantined: eventlog: execution X: seq 3: corrupt event; Serve does not run it: forkline unquarantine ID") {
		t.Fatalf("ls: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, append(db, "unquarantine", target[:13])...)
	if code != 0 || stdout != "lifted the quarantine of "+target+" (eventlog: execution X: seq 3: corrupt event); Serve runs it again\n" {
		t.Fatalf("unquarantine: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := quarantined(); len(got) != 0 {
		t.Fatalf("still quarantined after unquarantine: %v", got)
	}
	stdout, _, code = runCLI(t, append(db, "unquarantine", target)...)
	if code != 0 || stdout != target+" is not quarantined; nothing changed\n" {
		t.Fatalf("second unquarantine: exit %d: %s", code, stdout)
	}
}
