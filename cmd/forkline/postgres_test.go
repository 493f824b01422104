package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
)

// lsJSON runs ls --json with args and returns what it lists.
func lsJSON(t *testing.T, args ...string) []listing {
	t.Helper()
	stdout, stderr, code := runCLI(t, append(args, "--json", "ls")...)
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	var out struct{ Executions []listing }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, stdout)
	}
	return out.Executions
}

// TestCommandsOnPostgres: with --db (or FORKLINE_DB) every command works
// on the Postgres log: the demo writes its executions there, the
// inspection commands read them, fork writes one execution, run completes
// it, cancel ends a pending one; the data folder gets no event log.
func TestCommandsOnPostgres(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	url := pgtest.SchemaURL(t)
	dir := t.TempDir()
	db := []string{"--dir", dir, "--db", url}
	if _, stderr, code := runCLI(t, append(db, "--json", "demo")...); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(logDir(dir)); !os.IsNotExist(err) {
		t.Fatalf("the demo on Postgres made %s (%v)", logDir(dir), err)
	}
	s, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var stored []string
	for info, err := range s.List(t.Context(), eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, info.ID.String())
	}
	listed := lsJSON(t, db...)
	var ids []string
	for _, l := range listed {
		ids = append(ids, l.ID)
	}
	if len(stored) < 3 || !slices.Equal(ids, stored) {
		t.Fatalf("ls lists %v, the store holds %v (the demo makes a run and two forks)", ids, stored)
	}
	parent := ids[0]
	for _, args := range [][]string{
		{"tree"}, {"events", parent}, {"coverage", parent}, {"coverage", parent, "45"}, {"show", parent, "5"},
		{"timeline", parent, "--html", filepath.Join(dir, "t.html")},
	} {
		if stdout, stderr, code := runCLI(t, append(db, args...)...); code != 0 || stdout == "" {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	stdout, stderr, code := runCLI(t, append(db, "--json", "fork", parent, "45")...)
	if code != 0 {
		t.Fatalf("fork: exit %d: %s", code, stderr)
	}
	var fk struct{ ID string }
	if err := json.Unmarshal([]byte(stdout), &fk); err != nil {
		t.Fatal(err)
	}
	if n := len(lsJSON(t, db...)); n != len(stored)+1 {
		t.Fatalf("after fork ls lists %d executions, want %d", n, len(stored)+1)
	}
	// FORKLINE_DB stands for --db.
	t.Setenv("FORKLINE_DB", url)
	if stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "run", fk.ID); code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, stderr, stdout)
	}
	id, err := eventlog.ParseID(fk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(t.Context(), id); err != nil || info.Status != eventlog.StatusCompleted {
		t.Fatalf("the fork after run: %+v, %v; want completed", info, err)
	}
	// A pending fork is cancelled at once.
	stdout, _, _ = runCLI(t, "--dir", dir, "--json", "fork", parent, "10")
	if err := json.Unmarshal([]byte(stdout), &fk); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code = runCLI(t, "--dir", dir, "cancel", fk.ID); code != 0 {
		t.Fatalf("cancel: exit %d: %s", code, stderr)
	}
	id, _ = eventlog.ParseID(fk.ID)
	evs, err := collectEvents(s, id)
	if err != nil || evs[len(evs)-1].Kind() != eventlog.KindExecutionCancelled {
		t.Fatalf("the cancelled fork ends with %v, %v; want execution.cancelled", evs[len(evs)-1].Kind(), err)
	}
}

func collectEvents(s eventlog.Log, id eventlog.ID) ([]eventlog.Event, error) {
	var out []eventlog.Event
	for ev, err := range s.Events(context.Background(), id, 1) {
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// TestLsWhileWorkerRuns: on Postgres, forkline ls reads the log while a
// worker (a kernel of this process, on its own connection) runs an
// execution, and sees it running.
func TestLsWhileWorkerRuns(t *testing.T) {
	url := pgtest.SchemaURL(t)
	k, err := sdk.Open(url, sdk.WithOwner("worker"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	a, _ := sdk.Register(k, "slow", func(ctx context.Context, n int) (int, error) {
		return sdk.Step(ctx, "wait", func(context.Context) (int, error) {
			close(entered)
			<-release
			return n, nil
		})
	})
	id, err := a.Start(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Run(context.Background(), id); done <- err }()
	<-entered
	listed := lsJSON(t, "--db", url)
	if len(listed) != 1 || listed[0].ID != id.String() || listed[0].Status != "running" {
		t.Fatalf("ls while the worker runs = %+v, want %s running", listed, id)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the run did not end")
	}
	if listed = lsJSON(t, "--db", url); listed[0].Status != "completed" {
		t.Fatalf("ls after the run = %+v, want completed", listed)
	}
}

// A --db that is not a Postgres URL is bad input.
func TestBadDB(t *testing.T) {
	_, stderr, code := runCLI(t, "--db", "mysql://x", "ls")
	if code != exitInput || stderr == "" {
		t.Fatalf("--db mysql://x: exit %d: %s", code, stderr)
	}
}

// TestForkRunsOnAnotherHost: DESIGN §11 (shared checkpoints), the README's
// two-host walk-through. Host A (data folder A) runs the demo on a shared
// Postgres log with --blob; host B (data folder B) forks the parent and
// runs the fork: its workspace is restored from A's checkpoint through the
// shared blob store. Without --blob, B has no copy of the checkpoint and
// the run fails with checkpoint_unavailable.
func TestForkRunsOnAnotherHost(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	url := pgtest.SchemaURL(t)
	hostA, hostB := t.TempDir(), t.TempDir()
	a := []string{"--dir", hostA, "--db", url, "--blob", url}
	if _, stderr, code := runCLI(t, append(a, "--json", "demo")...); code != 0 {
		t.Fatalf("host A demo: exit %d: %s", code, stderr)
	}
	parent := lsJSON(t, a...)[0].ID
	fork := func(args ...string) string {
		stdout, stderr, code := runCLI(t, append(args, "--json", "fork", parent, "45")...)
		if code != 0 {
			t.Fatalf("fork: exit %d: %s", code, stderr)
		}
		var fk struct{ ID string }
		if err := json.Unmarshal([]byte(stdout), &fk); err != nil {
			t.Fatal(err)
		}
		return fk.ID
	}
	// Without the shared store host B cannot restore A's checkpoint.
	bare := []string{"--dir", hostB, "--db", url}
	id := fork(bare...)
	if _, stderr, code := runCLI(t, append(bare, "run", id)...); code == 0 || !strings.Contains(stderr, "checkpoint_unavailable") {
		t.Fatalf("run on host B without --blob: exit %d: %s; want checkpoint_unavailable", code, stderr)
	}
	b := []string{"--dir", hostB, "--db", url, "--blob", url}
	id = fork(b...)
	stdout, stderr, code := runCLI(t, append(b, "--json", "run", id)...)
	if code != 0 {
		t.Fatalf("run on host B: exit %d: %s\n%s", code, stderr, stdout)
	}
	var res struct{ Status string }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Status != eventlog.StatusCompleted.String() {
		t.Fatalf("run on host B: %s (%v); want completed", stdout, err)
	}
	// Host B's workspace lives in B's data folder.
	des, err := os.ReadDir(filepath.Join(storeDir(hostB), "workspaces"))
	if err != nil || len(des) == 0 {
		t.Fatalf("host B's workspaces: %v, %v", des, err)
	}
}
