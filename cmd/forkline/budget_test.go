package main

import (
	"context"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// toolCaller is a data folder's log with a kernel on it running agent
// "a", which calls tool "t" n times for input n.
func toolCaller(t *testing.T) (string, *pebblestore.Store, *sdk.Kernel) {
	t.Helper()
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s)
	if err != nil {
		t.Fatal(err)
	}
	tool := sdk.DefineTool("t", func(_ context.Context, i int) (int, error) { return i, nil })
	if _, err := sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) {
		for i := range n {
			_, _ = tool.Call(ctx, i)
		}
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	return dir, s, k
}

// TestBudgetShown: forkline show prints a lineage's budget with the spend
// up to the event shown (DESIGN §17), and --json as "budget"; an event
// before any call shows no spend, a lineage without a budget no line.
func TestBudgetShown(t *testing.T) {
	dir, s, k := toolCaller(t)
	id, _ := k.Start(t.Context(), "a", 2, sdk.Budget(sdk.Limits{MaxTokens: 100, MaxToolCalls: 1}))
	plain, _ := k.Start(t.Context(), "a", 1)
	for _, x := range []eventlog.ID{id, plain} {
		if _, err := k.Run(t.Context(), x); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	for _, c := range []struct {
		args []string
		want string
		not  bool
	}{
		{[]string{"show", id.String(), "2"}, "budget     100 tokens, 1 tool calls (spent to seq 2: 0 tokens, 0 llm calls, 0 tool calls)\n", false},
		{[]string{"show", id.String(), "5"}, "budget     100 tokens, 1 tool calls (spent to seq 5: 0 tokens, 0 llm calls, 1 tool calls)\n", false},
		{[]string{"--json", "show", id.String(), "5"}, `"budget": {
    "limits": {
      "max_tokens": 100,
      "max_llm_calls": 0,
      "max_tool_calls": 1
    },
    "tokens": 0,
    "llm_calls": 0,
    "tool_calls": 1
  }`, false},
		{[]string{"show", plain.String(), "3"}, "budget", true},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"--dir", dir}, c.args...)...)
		if code != 0 || strings.Contains(stdout, c.want) == c.not {
			t.Errorf("%v: exit %d, want %q (absent: %t) in:\n%s%s", c.args, code, c.want, c.not, stdout, stderr)
		}
	}
}

// TestLsBudget: ls --budget adds a BUDGET column with each lineage's spend
// against its limits (issue 33: ls shows spend against budget), a fork
// showing the budget it inherits and the spend of its prefix, and --json a
// "budget" object; without the flag ls reads no lineage and shows no
// column.
func TestLsBudget(t *testing.T) {
	dir, s, k := toolCaller(t)
	id, _ := k.Start(t.Context(), "a", 3, sdk.Budget(sdk.Limits{MaxTokens: 100, MaxToolCalls: 2}))
	plain, _ := k.Start(t.Context(), "a", 1)
	for _, x := range []eventlog.ID{id, plain} {
		if _, err := k.Run(t.Context(), x); err != nil {
			t.Fatal(err)
		}
	}
	// Seq 4 is the first tool call's step.succeeded.
	fid, err := k.Fork(t.Context(), id, 4)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	stdout, stderr, code := runCLI(t, "--dir", dir, "ls", "--budget")
	if code != 0 {
		t.Fatalf("ls --budget: exit %d: %s", code, stderr)
	}
	row := func(x eventlog.ID) string {
		for line := range strings.SplitSeq(stdout, "\n") {
			if strings.HasPrefix(line, x.String()) {
				return line
			}
		}
		t.Fatalf("ls --budget shows no row of %s:\n%s", x, stdout)
		return ""
	}
	if !strings.Contains(stdout, "TOKENS  BUDGET") {
		t.Errorf("ls --budget has no BUDGET column:\n%s", stdout)
	}
	for _, c := range []struct {
		id   eventlog.ID
		want string
	}{
		{id, "tokens 0/100, tool calls 2/2"},
		{fid, "tokens 0/100, tool calls 1/2"},
	} {
		if r := row(c.id); !strings.Contains(r, c.want) {
			t.Errorf("row of %s: %q, want %q", c.id, r, c.want)
		}
	}
	if r := row(plain); strings.Contains(r, "tool calls") {
		t.Errorf("row of the execution without a budget: %q", r)
	}
	stdout, _, _ = runCLI(t, "--dir", dir, "ls")
	if strings.Contains(stdout, "BUDGET") {
		t.Errorf("ls without --budget shows BUDGET:\n%s", stdout)
	}
	stdout, _, _ = runCLI(t, "--dir", dir, "--json", "ls", "--budget")
	if !strings.Contains(stdout, `"budget": {
        "limits": {
          "max_tokens": 100,
          "max_llm_calls": 0,
          "max_tool_calls": 2
        },
        "tokens": 0,
        "llm_calls": 0,
        "tool_calls": 2
      }`) {
		t.Errorf("ls --json --budget:\n%s", stdout)
	}
}
