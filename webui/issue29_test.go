package webui_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/replay"
	"github.com/forkline/forkline/webui"
)

// TestDiffPageSummarisesSteps: the diff page shows an LLM step as forkline
// diff does — the tool calls the model asked for, "call write_file(greet.go)"
// — and never the raw request or response JSON; a tool's args show as
// key=value pairs.
func TestDiffPageSummarisesSteps(t *testing.T) {
	reply := func(path string) json.RawMessage {
		args, _ := json.Marshal(map[string]string{"path": path, "content": "package main"})
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"tool_calls": []any{map[string]any{"function": map[string]any{"name": "write_file", "arguments": string(args)}}},
		}}}})
		return b
	}
	request := json.RawMessage(`{"body":{"messages":[{"content":"write a greeting","role":"user"}],"model":"m1"},"method":"POST","url":"/v1/chat/completions"}`)
	c := &fork.Comparison{
		A: eventlog.ID{1}, B: eventlog.ID{2},
		Prefix: []fork.PrefixStep{{StepID: "p1", Kind: eventlog.StepLLM, Target: "m1",
			StepOutcome: fork.StepOutcome{Seq: 3, Status: replay.StepSucceeded, Result: reply("plan.md")}}},
		Steps: []fork.StepDiff{
			{StepID: "s1", Kind: eventlog.StepLLM, Target: "m1", Args: request, Change: fork.Changed,
				A: &fork.StepOutcome{Seq: 5, Status: replay.StepSucceeded, Result: reply("greet.go")},
				B: &fork.StepOutcome{Seq: 5, Status: replay.StepSucceeded, Result: reply("hello.go")}},
			{StepID: "s2", Kind: eventlog.StepTool, Target: "write_file", Args: json.RawMessage(`{"content":"package main","path":"greet.go"}`),
				Change: fork.OnlyA, A: &fork.StepOutcome{Seq: 7, Status: replay.StepSucceeded, Result: json.RawMessage(`"wrote greet.go"`)}},
		},
	}
	var buf bytes.Buffer
	if err := webui.WriteDiff(&buf, c, nil); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"call write_file(plan.md)", "call write_file(greet.go)", "call write_file(hello.go)",
		`content=&#34;package main&#34; path=&#34;greet.go&#34;`, "&#34;wrote greet.go&#34;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the diff page lacks %q", want)
		}
	}
	for _, raw := range []string{"write a greeting", "/v1/chat/completions", "choices", "tool_calls"} {
		if strings.Contains(page, raw) {
			t.Errorf("the diff page shows raw JSON (%q)", raw)
		}
	}
}
