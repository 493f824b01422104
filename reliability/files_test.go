package reliability

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog/pebblestore"
)

// These tests damage the files of a data folder's log — not its values
// through Pebble — and run the forkline command on it: it exits 1 with one
// line naming what is damaged (no stack trace: Pebble's corruption report
// no longer exits the process), and leaves the files as they were.

// logFiles is the name and content of every file of a log folder, but the
// ballast.
func logFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.Name() == "FORKLINE-BALLAST" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// largestFile returns the largest file of files with the suffix.
func largestFile(t *testing.T, files map[string][]byte, suffix string) string {
	t.Helper()
	name := ""
	for n, b := range files {
		if strings.HasSuffix(n, suffix) && (name == "" || len(b) > len(files[name])) {
			name = n
		}
	}
	if name == "" {
		t.Fatalf("no %s file", suffix)
	}
	return name
}

// damagedRun runs the forkline command on data folder dir and checks: exit
// 1, one line on stderr holding every want, and (keep) the files whose
// names keep accepts unchanged.
func (f *dataFolder) damagedRun(t *testing.T, dir string, keep func(string) bool, want []string, args ...string) {
	t.Helper()
	ld := filepath.Join(dir, "log")
	before := logFiles(t, ld)
	r := f.cliRun(t, dir, args...)
	ok := r.code == 1 && strings.Count(strings.TrimSpace(r.stderr), "\n") == 0 && !strings.Contains(r.stderr, "goroutine")
	for _, w := range want {
		ok = ok && strings.Contains(r.stderr, w)
	}
	if !ok {
		t.Errorf("forkline %s: exit %d, stderr %q; want exit 1 and one line naming %q", strings.Join(args, " "), r.code, r.stderr, want)
	}
	after := logFiles(t, ld)
	for name, b := range before {
		if keep(name) && !bytes.Equal(after[name], b) {
			t.Errorf("forkline %s changed or deleted %s", strings.Join(args, " "), name)
		}
	}
}

func all(string) bool { return true }

// A bit flipped in the table holding the log: every command exits 1 naming
// the table (before, Pebble's Fatalf printed a stack trace and exited).
func TestDamagedTableCLI(t *testing.T) {
	f := newDataFolder(t)
	files := logFiles(t, f.logDir())
	sst := largestFile(t, files, ".sst")
	for _, frac := range []int{2, 3, 5} {
		dir := filepath.Join(t.TempDir(), "data")
		copyTree(t, f.dir, dir)
		path := filepath.Join(dir, "log", sst)
		b := files[sst]
		off := len(b) / frac
		b = bytes.Clone(b)
		b[off] ^= 0x10
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want := []string{"damaged", sst}
		// (ls reads the newest event of each execution: it may not meet
		// the damaged block.)
		f.damagedRun(t, dir, all, want, "events", f.exec.String())
		// run may not need the damaged block (nor a compaction meet it
		// before it ends): then it succeeds; either way no stack trace, and
		// the damaged table is neither rewritten nor deleted.
		r := f.cliRun(t, dir, "run", f.fork.String())
		if strings.Contains(r.stderr, "goroutine") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 ||
			(r.code != 0 && (r.code != 1 || !strings.Contains(r.stderr, sst))) {
			t.Errorf("forkline run: exit %d, stderr %q; want success, or exit 1 and one line naming %s", r.code, r.stderr, sst)
		}
		if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, b) {
			t.Errorf("forkline run changed or deleted %s (%v)", sst, err)
		}
	}
}

// A log without its MANIFEST is not a new, empty log: every command exits
// 1 saying so, and no file is deleted (before, ls printed "no executions"
// and the table holding everything was deleted).
func TestMissingManifestCLI(t *testing.T) {
	f := newDataFolder(t)
	dir := filepath.Join(t.TempDir(), "data")
	copyTree(t, f.dir, dir)
	entries, err := os.ReadDir(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "MANIFEST-") || strings.HasPrefix(e.Name(), "marker.manifest.") {
			if err := os.Remove(filepath.Join(dir, "log", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{"damaged", "MANIFEST is missing"}
	f.damagedRun(t, dir, all, want, "ls")
	f.damagedRun(t, dir, all, want, "run", f.fork.String())
}

// After a crash, a bit flipped in a synced record of the write-ahead log
// that later records prove synced: every command exits 1 naming the log
// and nothing is written (before, ls showed a shorter log and rewrote the
// write-ahead log into a table, losing the rest for good).
func TestDamagedWALCLI(t *testing.T) {
	f := newDataFolder(t)
	store, err := pebblestore.Open(f.logDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := f.kernel(t, store)
	for i := range 8 {
		if _, err := k.Fork(ctx, f.exec, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	copyTree(t, f.dir, dir) // the image of a crash: the store is open
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	files := logFiles(t, filepath.Join(dir, "log"))
	wal := largestFile(t, files, ".log")
	b := bytes.Clone(files[wal])
	b[len(b)/4] ^= 0x04
	if err := os.WriteFile(filepath.Join(dir, "log", wal), b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"damaged", "write-ahead log " + wal}
	f.damagedRun(t, dir, all, want, "ls")
	f.damagedRun(t, dir, all, want, "run", f.fork.String())
}
