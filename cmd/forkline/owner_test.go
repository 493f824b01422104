package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
)

// stopMidRun starts an execution of agent "worker" on log as owner and
// stops its dispatch after its first step, so it stays running with
// owner's dispatch.started as its newest.
func stopMidRun(t *testing.T, log eventlog.IndexedLog, owner string) eventlog.ID {
	t.Helper()
	ctx := context.Background()
	k, err := sdk.New(log, sdk.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	_, _ = sdk.Register(k, "worker", func(ctx context.Context, _ int) (int, error) {
		if _, err := sdk.Step(ctx, "s", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return 0, err
		}
		cancel()
		<-ctx.Done()
		return 0, ctx.Err()
	})
	id, err := k.Start(ctx, "worker", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(rctx, id); err == nil {
		t.Fatal("the stopped dispatch completed")
	}
	return id
}

// lsOwner runs ls --json with base and returns id's owner and
// owner_alive (nil: absent), and ls's table.
func lsOwner(t *testing.T, base []string, id eventlog.ID) (string, *bool, string) {
	t.Helper()
	stdout, stderr, code := runCLI(t, append(base, "--json", "ls")...)
	if code != 0 {
		t.Fatalf("ls --json: exit %d: %s", code, stderr)
	}
	var out struct{ Executions []listing }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	table, stderr, code := runCLI(t, append(base, "ls")...)
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	for _, l := range out.Executions {
		if l.ID == id.String() {
			return l.Owner, l.OwnerAlive, table
		}
	}
	t.Fatalf("ls --json lacks %s: %s", id, stdout)
	return "", nil, ""
}

// TestLsOwnerGone: a running execution of a Pebble folder that no process
// holds shows its last owner, "owner gone" (no lease is live).
func TestLsOwnerGone(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	id := stopMidRun(t, s, "host-a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	owner, alive, table := lsOwner(t, []string{"--dir", dir}, id)
	if owner != "host-a" || alive == nil || *alive {
		t.Fatalf("owner %q alive %v, want host-a, false", owner, alive)
	}
	if !strings.Contains(table, "OWNER") || !strings.Contains(table, "running  host-a (owner gone)") {
		t.Fatalf("ls table lacks host-a (owner gone):\n%s", table)
	}
}

// TestLsOwnerLiveOnPostgres: on Postgres, a running execution whose owner's
// lease is live shows that owner without "owner gone"; once the lease is
// released, "owner gone"; another owner's live claim shows that owner.
func TestLsOwnerLiveOnPostgres(t *testing.T) {
	url := pgtest.SchemaURL(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := stopMidRun(t, s, "host-a")
	base := []string{"--dir", t.TempDir(), "--db", url}
	if owner, alive, _ := lsOwner(t, base, id); owner != "host-a" || alive == nil || *alive {
		t.Fatalf("released: owner %q alive %v, want host-a, false", owner, alive)
	}
	l, err := s.Claim(ctx, id, "host-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	owner, alive, table := lsOwner(t, base, id)
	if owner != "host-a" || alive == nil || !*alive || strings.Contains(table, "owner gone") {
		t.Fatalf("held: owner %q alive %v, want host-a, true:\n%s", owner, alive, table)
	}
	if err := s.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, id, "host-b", time.Hour); err != nil {
		t.Fatal(err)
	}
	if owner, alive, _ := lsOwner(t, base, id); owner != "host-b" || alive == nil || !*alive {
		t.Fatalf("claimed by host-b: owner %q alive %v, want host-b, true", owner, alive)
	}
}
