package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGCOlderThanOverflow: an age past what a duration holds is reported
// as too long (not as a format error), exit 2, one line, nothing deleted;
// a malformed one is still a format error.
func TestGCOlderThanOverflow(t *testing.T) {
	f := newFixture(t)
	before, _, _ := runCLI(t, "--dir", f.dir, "ls")
	for _, c := range []struct{ age, want string }{
		{"99999999999h", "too long: a duration goes up to 2562047h"},
		{"9223372036854775808ns", "too long"},
		{"1.5h99999999999m", "too long"},
		{"12 parsecs", "want a Go duration"},
	} {
		stdout, stderr, code := runCLI(t, "--dir", f.dir, "gc", "--older-than", c.age)
		if code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("gc --older-than %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.age, code, stdout, stderr, c.want)
		}
	}
	if after, _, _ := runCLI(t, "--dir", f.dir, "ls"); after != before {
		t.Fatalf("a refused gc changed the log:\n%s\nwas\n%s", after, before)
	}
}

// TestLongIDClipped: a 100 KB id or seq is quoted by its first 64
// characters in the one-line error.
func TestLongIDClipped(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("z", 100<<10)
	for _, args := range [][]string{{"events", long}, {"show", long, "1"}, {"show", f.ids["A"].String(), long}} {
		_, stderr, code := runCLI(t, append([]string{"--dir", f.dir}, args...)...)
		if code != exitInput || len(stderr) > 400 || !strings.Contains(stderr, strings.Repeat("z", 60)+"…") {
			t.Errorf("%.20s…: exit %d, %d bytes: %.200s", strings.Join(args, " "), code, len(stderr), stderr)
		}
	}
}

// TestRecloseCommand: with a byte of FORKLINE-CLOSED flipped, ls fails
// (exit 1) with one line naming the record, the check it failed and
// forkline reclose; reclose re-verifies and rewrites it, and ls then
// prints what it printed before. On --db reclose is bad input.
func TestRecloseCommand(t *testing.T) {
	f := newFixture(t)
	want, _, _ := runCLI(t, "--dir", f.dir, "ls")
	rec := filepath.Join(logDir(f.dir), "FORKLINE-CLOSED")
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	b[3] ^= 0x20
	if err := os.WriteFile(rec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "--dir", f.dir, "ls")
	if code != exitFailure || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "FORKLINE-CLOSED") ||
		!strings.Contains(stderr, "parse check") || !strings.Contains(stderr, "forkline reclose") {
		t.Fatalf("ls with a flipped record: exit %d, %q", code, stderr)
	}
	stdout, stderr, code := runCLI(t, "--dir", f.dir, "reclose")
	if code != exitOK || !strings.Contains(stdout, "wrote a new one") || !strings.Contains(stdout, "FORKLINE-CLOSED.damaged") {
		t.Fatalf("reclose: exit %d, %q, %q", code, stdout, stderr)
	}
	if got, stderr, code := runCLI(t, "--dir", f.dir, "ls"); code != exitOK || got != want {
		t.Fatalf("ls after reclose: exit %d %s\n%s\nwant\n%s", code, stderr, got, want)
	}
	if _, stderr, code := runCLI(t, "--db", "postgres://nobody@127.0.0.1:1/none", "reclose"); code != exitInput {
		t.Fatalf("reclose --db: exit %d, %q", code, stderr)
	}
}
