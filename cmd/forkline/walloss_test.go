package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// TestWALLossCLI (issue 30 item 8): after a crash whose write-ahead log
// lost synced appends (here: deleted), ls fails with exit 1, naming the
// log and --accept-wal-loss, instead of listing fewer executions; with
// --accept-wal-loss it lists what the log still holds.
func TestWALLossCLI(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		if _, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`{}`)}, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(110 * time.Millisecond) // past the side record's interval: it records each
	}
	crash := filepath.Join(t.TempDir(), "crash")
	if err := os.MkdirAll(logDir(crash), 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(logDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			continue // the crash lost the write-ahead log
		}
		b, err := os.ReadFile(filepath.Join(logDir(dir), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logDir(crash), e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, code := runCLI(t, "--dir", crash, "ls")
	if code != 1 || !strings.Contains(stderr, "write-ahead log") || !strings.Contains(stderr, "--accept-wal-loss") {
		t.Fatalf("ls after the write-ahead log was lost: exit %d: %s; want exit 1 naming the log and --accept-wal-loss", code, stderr)
	}
	stdout, stderr, code := runCLI(t, "--dir", crash, "--accept-wal-loss", "ls")
	if code != 0 {
		t.Fatalf("ls --accept-wal-loss: exit %d: %s", code, stderr)
	}
	if n := strings.Count(stdout, "\n"); n > 4 {
		t.Fatalf("ls --accept-wal-loss lists more than the log can hold:\n%s", stdout)
	}
}
