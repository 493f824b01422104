package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/google/go-cmp/cmp"
)

// firstSucceeded returns the StepID and seq of the first step.succeeded of
// a non-LLM step in id's lineage, reading the fixture's log.
func firstSucceeded(t *testing.T, dir string, id eventlog.ID) (string, uint64) {
	t.Helper()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kinds := map[string]eventlog.StepKind{}
	for ev, err := range s.Events(context.Background(), id, 1) {
		if err != nil {
			t.Fatal(err)
		}
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			kinds[p.StepID] = p.StepKind
		case *eventlog.StepSucceeded:
			if kinds[p.StepID] != eventlog.StepLLM {
				return p.StepID, ev.Seq
			}
		}
	}
	t.Fatal("no succeeded step")
	return "", 0
}

// forkCreated reads the fork.created of fork id at seq.
func forkCreated(t *testing.T, dir string, id eventlog.ID, seq uint64) *eventlog.ForkCreated {
	t.Helper()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for ev, err := range s.Events(context.Background(), id, seq) {
		if err != nil {
			t.Fatal(err)
		}
		if fc, ok := ev.Data.(*eventlog.ForkCreated); ok {
			return fc
		}
	}
	t.Fatal("no fork.created")
	return nil
}

// TestForkEditFlags: --input and --result are recorded in fork.created;
// bad edits are input errors that write nothing (DESIGN §12), an --input
// the coder agent cannot decode into its input type among them.
func TestForkEditFlags(t *testing.T) {
	f := newFixture(t)
	a := f.ids["A"]
	step, seq := firstSucceeded(t, f.dir, a)
	stdout, stderr, code := runCLI(t, "--dir", f.dir, "--json", "fork", a.String(), fmt.Sprint(seq),
		"--input", `{"task": "other"}`, "--result", step+`={"edited": true}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	fid, err := eventlog.ParseID(out.ID)
	if err != nil {
		t.Fatal(err)
	}
	fc := forkCreated(t, f.dir, fid, seq+1)
	want := &eventlog.ForkCreated{Parent: a, At: seq, Selections: fc.Selections, Input: []byte(`{"task":"other"}`),
		Overrides: []eventlog.StepOverride{{StepID: step, Result: []byte(`{"edited":true}`)}}}
	if diff := cmp.Diff(want, fc); diff != "" {
		t.Fatalf("fork.created (-want +got):\n%s", diff)
	}

	before := fingerprint(t, f.dir)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"fork", a.String(), fmt.Sprint(seq + 1), "--result", step + "=1"}, "terminal event"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--result", "nosuchstep=1"}, "never ran"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--result", step}, "STEPID=JSON"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--result", step + "={"}, "not JSON"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--input", "nope"}, "not JSON"},
		// JSON that the coder agent's input type does not take (issue 30).
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--input", `"x"`}, "agent coder takes a coder.Input"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--input", `null`}, "has no null"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--input", `[]`}, "agent coder takes a coder.Input"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--input", `{"Task":123}`}, "agent coder takes a coder.Input"},
		{[]string{"fork", a.String(), fmt.Sprint(seq), "--input", `{"task":"t","model":"m"}`}, "unknown field"},
		{[]string{"fork", a.String(), "20", "--require-covered"}, "not covered"},
	} {
		_, stderr, code := runCLI(t, append([]string{"--dir", f.dir}, c.args...)...)
		if code != exitInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want an input error saying %q", c.args, code, stderr, c.msg)
		}
	}
	if after := fingerprint(t, f.dir); after != before {
		t.Fatalf("refused forks changed the log:\n%s", cmp.Diff(before, after))
	}
	// The covered point is accepted under --require-covered.
	if _, stderr, code := runCLI(t, "--dir", f.dir, "fork", a.String(), "13", "--require-covered"); code != 0 {
		t.Fatalf("--require-covered at covered seq 13: exit %d: %s", code, stderr)
	}
	// --latest-covered walks back from uncovered seq 20 to the newest
	// covered point (DESIGN §15½.4's way out), and without a seq starts
	// from the head; without either, the command refuses.
	for _, args := range [][]string{{"20"}, {}} {
		full := append(append([]string{"--dir", f.dir, "fork", a.String()}, args...), "--latest-covered", "--require-covered")
		stdout, stderr, code := runCLI(t, full...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", full, code, stderr)
		}
		var at uint64
		if _, err := fmt.Sscanf(stdout[strings.Index(stdout, " at seq ")+1:], "at seq %d", &at); err != nil || at == 0 || at >= 20 && len(args) > 0 {
			t.Fatalf("%v: fork at seq %d (%v), want a covered seq before 20: %s", full, at, err, stdout)
		}
	}
	if _, stderr, code := runCLI(t, "--dir", f.dir, "fork", a.String()); code != exitInput || !strings.Contains(stderr, "--latest-covered") {
		t.Errorf("fork without a seq: exit %d, stderr %q; want an input error naming --latest-covered", code, stderr)
	}
}

// TestDiffShowsChangedFields: diff of a fork with an edited result shows
// the result's changed fields (fork.JSONDiff) in the table and in --json
// (issue 38 item 6).
func TestDiffShowsChangedFields(t *testing.T) {
	f := newFixture(t)
	a := f.ids["A"]
	step, seq := firstSucceeded(t, f.dir, a)
	stdout, stderr, code := runCLI(t, "--dir", f.dir, "--json", "fork", a.String(), fmt.Sprint(seq), "--result", step+`={"edited": true}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	table, stderr, code := runCLI(t, "--dir", f.dir, "diff", a.String(), out.ID)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	field := ""
	for line := range strings.Lines(table) {
		if strings.HasPrefix(line, "  field (whole)") {
			field = line
		}
	}
	if !strings.Contains(field, `{"edited":true}`) {
		t.Errorf("the diff table shows no changed field with B's value:\n%s", table)
	}
	js, stderr, code := runCLI(t, "--dir", f.dir, "--json", "diff", a.String(), out.ID)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var c struct {
		Steps []struct {
			StepID string `json:"step_id"`
			Fields []struct {
				Path string
				B    json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Steps {
		if s.StepID != step {
			continue
		}
		for _, fc := range s.Fields {
			if strings.Join(strings.Fields(string(fc.B)), "") == `{"edited":true}` {
				return
			}
		}
		t.Fatalf("diff --json: step %s has fields %+v, none with B true", step, s.Fields)
	}
	t.Fatalf("diff --json holds no step %s:\n%s", step, js)
}
