package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// `forkline coverage ID N` says when an at_most_once call is in flight at
// N — a fork there sees it as indeterminate — in text and in --json, and
// says nothing once the call has its outcome (issue 38 item 3).
func TestCoverageSaysAtMostOnceInFlight(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := pebblestore.Open(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "deployer", Input: []byte(`{}`)}, baseTime)
	if err != nil {
		t.Fatal(err)
	}
	at := baseTime.Add(time.Second)
	if _, err := s.Append(ctx, id, 1,
		eventlog.Event{Time: at, Data: &eventlog.DispatchStarted{Dispatch: 1}},
		eventlog.Event{Time: at, Data: &eventlog.StepStarted{StepID: "deploy#1", StepKind: eventlog.StepTool, Target: "deploy",
			Args: []byte(`"prod"`), Idempotency: eventlog.AtMostOnce, Attempt: 1}},
		eventlog.Event{Time: at, Data: &eventlog.StepSucceeded{StepID: "deploy#1", Result: []byte(`"ok"`)}},
	); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const line = `in flight: at_most_once tool "deploy" (started at seq 3) has no outcome at seq 3: a fork there sees the call as indeterminate`
	stdout, stderr, code := runCLI(t, "--dir", dir, "coverage", id.String(), "3")
	if code != 0 || !strings.Contains(stdout, line) {
		t.Errorf("coverage at 3: exit %d, stdout:\n%s\nstderr: %s\nwant the line %q", code, stdout, stderr, line)
	}
	stdout, _, _ = runCLI(t, "--dir", dir, "show", id.String(), "3")
	if !strings.Contains(stdout, line) {
		t.Errorf("show at 3 does not say the call is in flight:\n%s", stdout)
	}
	for _, seq := range []string{"2", "4"} {
		stdout, _, code := runCLI(t, "--dir", dir, "coverage", id.String(), seq)
		if code != 0 || strings.Contains(stdout, "in flight") {
			t.Errorf("coverage at %s: exit %d, says something is in flight:\n%s", seq, code, stdout)
		}
	}
	stdout, _, _ = runCLI(t, "--dir", dir, "--json", "coverage", id.String(), "3")
	var got struct{ Point pointJSON }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	want := []inFlightJSON{{StepID: "deploy#1", Kind: "tool", Target: "deploy", StartedAt: 3}}
	if len(got.Point.InFlight) != 1 || got.Point.InFlight[0] != want[0] {
		t.Errorf("--json in_flight = %+v, want %+v", got.Point.InFlight, want)
	}
}
