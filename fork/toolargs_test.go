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
		{"data: {}\n\n", "deploy", []string{"a=b"}, "calls no tool"},
		{"plain text\n", "deploy", []string{"a=b"}, "neither a JSON object nor a stream of JSON server-sent events"},
		{"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"w\",\"arguments\":\"[1\"}}]}}]}\n\n",
			"w", []string{"a=b"}, "its streamed arguments are not a JSON object"},
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

// openAIStream is a streamed chat completion as OpenAI sends it: the
// write_file call's arguments in three fragments, a read_file call in one.
const openAIStream = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":""}}]}}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.go\",\"content\""}}]}}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"package a\"}"}}]}}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"b.go\"}"}}]}}]}

data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`

// anthropicStream is a streamed Anthropic message with a tool_use block
// whose input arrives in two fragments.
const anthropicStream = "event: message_start\r\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[]}}` + "\r\n\r\n" +
	"event: content_block_start\r\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"deploy","input":{}}}` + "\r\n\r\n" +
	"event: content_block_delta\r\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"env\":\"sta"}}` + "\r\n\r\n" +
	"event: content_block_delta\r\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ging\",\"replicas\":2}"}}` + "\r\n\r\n" +
	"event: message_stop\r\n" +
	`data: {"type":"message_stop"}` + "\r\n\r\n"

// TestEditToolArgsStreamed: in a streamed reply the edited call's whole
// arguments go in its first fragment's event, its later fragments become
// empty, and every other event keeps its bytes; ToolCalls reads the calls
// back whole, edited (DESIGN §16: an edit of a streamed reply).
func TestEditToolArgsStreamed(t *testing.T) {
	calls, err := fork.ToolCalls([]byte(openAIStream))
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[0].Name != "write_file" || string(calls[0].Args) != `{"path":"a.go","content":"package a"}` ||
		calls[1].ID != "call_2" || calls[1].Name != "read_file" || string(calls[1].Args) != `{"path":"b.go"}` {
		t.Fatalf("ToolCalls = %+v", calls)
	}
	got, err := fork.EditToolArgs([]byte(openAIStream), "write_file", args(t, "path=z.go")...)
	if err != nil {
		t.Fatal(err)
	}
	in, out := strings.Split(openAIStream, "\n"), strings.Split(string(got), "\n")
	if len(in) != len(out) {
		t.Fatalf("edited stream has %d lines, want %d:\n%s", len(out), len(in), got)
	}
	changed := map[int]string{
		2: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"z.go\",\"content\":\"package a\"}"}}]}}]}`,
		4: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}`,
		6: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}`,
		8: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}`,
	}
	for i := range in {
		want, ok := changed[i]
		if !ok {
			want = in[i]
		}
		if out[i] != want {
			t.Errorf("line %d:\n got %s\nwant %s", i, out[i], want)
		}
	}
	calls, err = fork.ToolCalls(got)
	if err != nil || string(calls[0].Args) != `{"path":"z.go","content":"package a"}` || string(calls[1].Args) != `{"path":"b.go"}` {
		t.Fatalf("ToolCalls of the edit = %+v, %v", calls, err)
	}

	got, err = fork.EditToolArgs([]byte(anthropicStream), "toolu_1", args(t, "replicas:=5")...)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(anthropicStream, `"partial_json":"{\"env\":\"sta"`, `"partial_json":"{\"env\":\"staging\",\"replicas\":5}"`, 1),
		`"partial_json":"ging\",\"replicas\":2}"`, `"partial_json":""`, 1)
	if string(got) != want {
		t.Fatalf("edited stream:\n got %q\nwant %q", got, want)
	}
	calls, err = fork.ToolCalls(got)
	if err != nil || len(calls) != 1 || calls[0].Name != "deploy" || string(calls[0].Args) != `{"env":"staging","replicas":5}` {
		t.Fatalf("ToolCalls of the edited Anthropic stream = %+v, %v", calls, err)
	}
}
