package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
)

// TestForkResultFileAndToolArgs: --result-file STEP=FILE records the
// file's bytes as the step's result (a response body for an LLM call, JSON
// or not), and --edit-tool-args STEP TOOL key=value… records the recorded
// reply with one tool call's arguments changed, both as ordinary overrides
// in fork.created (issue 38 item 5); bad uses are input errors on one line
// that write nothing.
func TestForkResultFileAndToolArgs(t *testing.T) {
	f := newFixture(t)
	a := f.ids["A"]
	fork := func(args ...string) *eventlog.ForkCreated {
		t.Helper()
		stdout, stderr, code := runCLI(t, append([]string{"--dir", f.dir, "--json", "fork", a.String(), "6"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var out struct{ ID string }
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatal(err)
		}
		fid, err := eventlog.ParseID(out.ID)
		if err != nil {
			t.Fatal(err)
		}
		return forkCreated(t, f.dir, fid, 7)
	}
	body := func(fc *eventlog.ForkCreated) string {
		t.Helper()
		if len(fc.Overrides) != 1 || fc.Overrides[0].StepID != "llm1" {
			t.Fatalf("overrides %+v, want one of llm1", fc.Overrides)
		}
		var r struct {
			Status int
			Body   string
		}
		if err := json.Unmarshal(fc.Overrides[0].Result, &r); err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 200 {
			t.Fatalf("override status %d, want the recorded 200", r.Status)
		}
		return string(b)
	}

	dir := t.TempDir()
	plain := filepath.Join(dir, "reply.txt")
	if err := os.WriteFile(plain, []byte("not JSON: a model's raw text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := body(fork("--result-file", "llm1="+plain)); got != "not JSON: a model's raw text\n" {
		t.Fatalf("--result-file body %q", got)
	}

	got := body(fork("--edit-tool-args", "llm1", "write_file", `path:="z.txt"`))
	var reply struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal([]byte(got), &reply); err != nil || len(reply.Choices) != 1 || len(reply.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("edited reply %s (%v)", got, err)
	}
	tc := reply.Choices[0].Message.ToolCalls[0]
	var args map[string]any
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"path": "z.txt"}, args); diff != "" || tc.ID != "call_1" || tc.Function.Name != "write_file" {
		t.Fatalf("edited call %+v (args -want +got):\n%s", tc, diff)
	}

	step, seq := firstSucceeded(t, f.dir, a) // a tool step: its result is JSON
	before := fingerprint(t, f.dir)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--result-file", "llm1"}, "STEPID=FILE"},
		{[]string{"--result-file", "llm1=" + filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--edit-tool-args", "llm1", "write_file"}, "at least one key=value"},
		{[]string{"--edit-tool-args", "llm1"}, "STEPID TOOL"},
		{[]string{"--edit-tool-args", "llm1", "read_file", "path=x"}, `tool "read_file"`},
		{[]string{"--edit-tool-args", "llm1", "write_file", "path:={"}, "path"},
		{[]string{"--edit-tool-args", "llm1", "write_file", "mode=420"}, `no argument "mode"`},
		{[]string{"--edit-tool-args", "nosuchstep", "write_file", "path=x"}, "never ran"},
		{[]string{"--edit-tool-args", "llm1", "write_file", "path=x", "--result", `llm1={}`}, "WithToolArgs and WithResult"},
	} {
		_, stderr, code := runCLI(t, append([]string{"--dir", f.dir, "fork", a.String(), "6"}, c.args...)...)
		if code != exitInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want an input error saying %q", c.args, code, stderr, c.msg)
		}
	}
	_, stderr, code := runCLI(t, "--dir", f.dir, "fork", a.String(), fmt.Sprint(seq), "--result-file", step+"="+plain)
	if code != exitInput || !strings.Contains(stderr, "not JSON") {
		t.Errorf("--result-file of non-JSON for tool step %s (seq %d): exit %d, stderr %q", step, seq, code, stderr)
	}
	if after := fingerprint(t, f.dir); after != before {
		t.Fatalf("refused forks changed the log:\n%s", cmp.Diff(before, after))
	}
}
