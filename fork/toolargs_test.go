package fork_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
)

const openAIReply = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
	`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a.go\",\"content\":\"package a\"}"}},` +
	`{"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"b.go\"}"}},` +
	`{"id":"call_3","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"c.go\"}"}}]},"finish_reason":"tool_calls"}],` +
	`"usage":{"prompt_tokens":10,"completion_tokens":5}}`

const anthropicReply = `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"deploying"},` +
	`{"type":"tool_use","id":"toolu_1","name":"deploy","input":{"env":"staging","replicas":2}}],"stop_reason":"tool_use"}`

func args(t *testing.T, ss ...string) []fork.ToolArg {
	t.Helper()
	var out []fork.ToolArg
	for _, s := range ss {
		a, err := fork.ParseToolArg(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// TestEditToolArgsOpenAI: the edited call's arguments string changes, and
// only it; keys keep their order (issue 38 item 5).
func TestEditToolArgsOpenAI(t *testing.T) {
	got, err := fork.EditToolArgs([]byte(openAIReply), "write_file", args(t, "path=z.go", `content:="package z"`)...)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(openAIReply, `{\"path\":\"a.go\",\"content\":\"package a\"}`, `{\"path\":\"z.go\",\"content\":\"package z\"}`, 1)
	if string(got) != want {
		t.Fatalf("edited reply:\n got %s\nwant %s", got, want)
	}
	// A tool called twice is named by its call ID.
	got, err = fork.EditToolArgs([]byte(openAIReply), "call_3", args(t, "path=d.go")...)
	if err != nil {
		t.Fatal(err)
	}
	want = strings.Replace(openAIReply, `{\"path\":\"c.go\"}`, `{\"path\":\"d.go\"}`, 1)
	if string(got) != want {
		t.Fatalf("edited reply:\n got %s\nwant %s", got, want)
	}
}

// TestEditToolArgsAnthropic: a tool_use block's input changes.
func TestEditToolArgsAnthropic(t *testing.T) {
	got, err := fork.EditToolArgs([]byte(anthropicReply), "deploy", args(t, "env=prod", "replicas:=5")...)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(anthropicReply, `{"env":"staging","replicas":2}`, `{"env":"prod","replicas":5}`, 1)
	if string(got) != want {
		t.Fatalf("edited reply:\n got %s\nwant %s", got, want)
	}
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatal(err)
	}
}

// TestEditToolArgsErrors: each bad edit is ErrInvalid naming what was
// wrong.
func TestEditToolArgsErrors(t *testing.T) {
	for _, c := range []struct {
		body, tool string
		args       []string
		msg        string
	}{
		{"data: {}\n\n", "deploy", []string{"a=b"}, "not a JSON object"},
		{`{"answer":42}`, "deploy", []string{"a=b"}, "neither an OpenAI chat completion"},
		{openAIReply, "deploy", []string{"a=b"}, `calls none such; it calls write_file (call_1), read_file (call_2), read_file (call_3)`},
		{openAIReply, "read_file", []string{"path=x"}, "2 times; name the call by its ID: call_2, call_3"},
		{openAIReply, "write_file", []string{"pth=x"}, `no argument "pth" (it has path, content)`},
		{openAIReply, "write_file", nil, "no key=value"},
		{anthropicReply, "deploy", []string{"region=eu"}, `no argument "region" (it has env, replicas)`},
		{`{"type":"message","content":[{"type":"text","text":"hi"}]}`, "deploy", []string{"a=b"}, "calls no tool"},
	} {
		_, err := fork.EditToolArgs([]byte(c.body), c.tool, args(t, c.args...)...)
		if !errors.Is(err, eventlog.ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %v on %.30s: %v; want ErrInvalid saying %q", c.tool, c.args, c.body, err, c.msg)
		}
	}
	for _, s := range []string{"novalue", "=x", "a:=nope"} {
		if _, err := fork.ParseToolArg(s); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("ParseToolArg(%q) = %v; want ErrInvalid", s, err)
		}
	}
}
