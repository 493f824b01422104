package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// TestQueuesCLI (DESIGN §19): forkline queues lists the store's queues —
// concurrency, rate, priority, waiting (depth) and running — in text and
// --json, and prints the same through forkline serve as reading the log
// directly.
func TestQueuesCLI(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Register(k, "report", func(ctx context.Context, to string) (string, error) { return to, nil }); err != nil {
		t.Fatal(err)
	}
	if err := k.Queue("ingest", sdk.QueueConcurrency(2), sdk.QueueRate(10, time.Minute), sdk.QueuePriority()); err != nil {
		t.Fatal(err)
	}
	if err := k.Queue("bulk"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := k.Start(t.Context(), "report", "x", sdk.OnQueue("ingest"), sdk.Priority(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.Start(t.Context(), "report", "y"); err != nil { // in no queue
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, append([]string{"--dir", dir}, args...)...)
	}
	out, stderr, code := cli("queues")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "QUEUE CONCURRENCY RATE PRIORITY WAITING RUNNING" ||
		strings.Join(strings.Fields(lines[1]), " ") != "bulk - - no 0 0" ||
		strings.Join(strings.Fields(lines[2]), " ") != "ingest 2 10/1m0s yes 3 0" {
		t.Fatalf("queues: exit %d:\n%s%s\nwant bulk (no limits, empty) and ingest (2, 10/1m0s, priority, 3 waiting)", code, out, stderr)
	}
	jout, stderr, code := cli("--json", "queues")
	var got struct{ Queues []queueRow }
	if err := json.Unmarshal([]byte(jout), &got); code != 0 || err != nil {
		t.Fatalf("--json queues: exit %d, %v:\n%s%s", code, err, jout, stderr)
	}
	want := []queueRow{{Name: "bulk", Declared: true}, {Name: "ingest", Declared: true, Concurrency: 2, Rate: 10, Per: "1m0s", Priority: true, Waiting: 3}}
	if len(got.Queues) != 2 || got.Queues[0] != want[0] || got.Queues[1] != want[1] {
		t.Fatalf("--json queues = %+v, want %+v", got.Queues, want)
	}
	startServe(t, dir)
	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"queues"}, out}, {[]string{"--json", "queues"}, jout}} {
		stdout, stderr, code := cli(c.args...)
		if code != 0 || stdout != c.want {
			t.Errorf("%v through serve: exit %d:\n%s%s\nwant what it printed directly:\n%s", c.args, code, stdout, stderr, c.want)
		}
	}
}
