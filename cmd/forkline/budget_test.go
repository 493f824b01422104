package main

import (
	"context"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// TestBudgetShown: forkline show prints a lineage's budget with the spend
// up to the event shown (DESIGN §17), and --json as "budget"; an event
// before any call shows no spend, a lineage without a budget no line.
func TestBudgetShown(t *testing.T) {
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
