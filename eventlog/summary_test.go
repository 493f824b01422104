package eventlog_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
)

// TestSummary pins the one-line text of every kind, as the CLI prints it:
// with Steps, terminal events name their step by kind and target.
func TestSummary(t *testing.T) {
	want := []string{
		`coder task="fix the bug" key "order-42" deadline 2025-03-14T15:00:00.123Z version "v7" queue "default" priority -2 budget 100000 tokens, 50 llm calls, 200 tool calls trace 4bf92f3577b34da6a3ce929d0e0e4736`,
		`dispatch 3`,
		`recv chat 7 bytes attempt 2 until 2025-03-14T15:00:00.123Z`,
		`recv chat → "wrote a.go" (1200+345 tokens) (truncated)`,
		`step st-2: rate limited (retry at 2025-03-14T15:00:00.123Z) (80+3 tokens)`,
		`step st-3 cancelled`,
		`llm gpt denied (budget) by rule "llm-budget": budget`,
		`workspace dirfs.v1 from snap-7, every 5 steps, coverage reuse, portable`,
		`workspace snap-8 gen 4 (steps)`,
		`workspace (completion): quota`,
		`answer=42`,
		`checkpoint_unavailable: boom`,
		`fork of 0192f0c4-7b1a-7c3d-8e4f-0123456789ab at 17; input task="fix it differently"; recv chat ← "edited"; step st-9 ← 1; db ← db-3@12 (covered); workspace ← snap-8@9 (uncovered); version "v8"; 1 message; budget 5000 tokens, 3 llm calls, 9 tool calls; trace 0af7651916cd43dd8448eb211c80319c`,
		`user asked by alice`,
		`user asked`,
		`waiting for timer until 2025-03-14T15:00:00.123Z`,
		`timer tm-1 until 2025-03-14T15:00:00.123Z`,
		`timer tm-1 fired`,
		`child reviewer 4 bytes: at_most_once in a fork (approvers bob,carol) expires 2025-03-14T15:00:00.123Z`,
		`step st-5 approved by bob: looks fine`,
		`step st-6 rejected by carol: too risky`,
		`"use-v2-prompt"`,
		`step st-7 abandoned`,
		`unconsumed: step st-8, step st-9`,
		`chat text="hello" from bob`,
		`progress = 0.5`,
		`step st-9 ended`,
	}
	steps := eventlog.Steps{}
	var got, bare []string
	for _, ev := range fullEvents() {
		steps.Add(ev)
		got = append(got, steps.Summary(ev))
		bare = append(bare, eventlog.Summary(ev))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Steps.Summary (-want +got):\n%s", d)
	}
	// Without the step.started seen, a step is named by its StepID.
	if bare[3] != `step st-1 → "wrote a.go" (1200+345 tokens) (truncated)` {
		t.Errorf("Summary(step.succeeded) = %q", bare[3])
	}
	for i := range got {
		if i != 3 && i != 12 && bare[i] != got[i] {
			t.Errorf("event %d: Summary %q, Steps.Summary %q", i+1, bare[i], got[i])
		}
		if strings.Contains(got[i], "\n") {
			t.Errorf("event %d: summary has a newline: %q", i+1, got[i])
		}
	}
}

func TestSummaryValues(t *testing.T) {
	llmResult, _ := json.Marshal(map[string]any{"status": 200, "body": []byte(
		`{"choices":[{"message":{"content":"","tool_calls":[{"function":{"name":"write_file","arguments":"{\"path\":\"a.go\"}"}}]}}]}`)})
	steps := eventlog.Steps{}
	steps.Add(eventlog.Event{Data: &eventlog.StepStarted{StepID: "l1", StepKind: eventlog.StepLLM, Target: "POST /v1/chat/completions",
		Args: []byte(`{"body":{"messages":[{},{}]}}`), Idempotency: eventlog.SafeToRetry, Attempt: 1}})
	for _, c := range []struct {
		name string
		ev   eventlog.Payload
		want string
	}{
		{"long text is clipped, newlines escaped", &eventlog.ExecutionFailed{Code: eventlog.FailHandler, Error: "line one\nline two " + strings.Repeat("x", 80)},
			`handler: line one\nline two xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…`},
		{"empty value", &eventlog.ExecutionCompleted{}, "-"},
		{"JSON array", &eventlog.ExecutionCompleted{Output: []byte("[1, 2,\n 3]")}, "[1,2,3]"},
		{"not JSON, text", &eventlog.ExecutionCompleted{Output: []byte("plain words")}, `"plain words"`},
		{"LLM call with messages", &eventlog.StepStarted{StepID: "l1", StepKind: eventlog.StepLLM, Target: "POST /v1/chat/completions",
			Args: []byte(`{"body":{"messages":[{},{}]}}`), Idempotency: eventlog.SafeToRetry, Attempt: 1}, "llm POST /v1/chat/completions (2 messages)"},
		{"LLM reply with a tool call", &eventlog.StepSucceeded{StepID: "l1", Result: llmResult},
			"llm POST /v1/chat/completions → 200: call write_file(a.go)"},
		{"an edited LLM reply in a fork", &eventlog.ForkCreated{At: 7, Overrides: []eventlog.StepOverride{{StepID: "l1", Result: llmResult}, {StepID: "t9", Result: []byte(`"edited"`)}}},
			`fork of 00000000-0000-0000-0000-000000000000 at 7; llm POST /v1/chat/completions ← 200: call write_file(a.go); step t9 ← "edited"`},
		{"cancel without a reason", &eventlog.CancelRequested{}, "no reason"},
	} {
		if got := steps.Summary(eventlog.Event{Data: c.ev}); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestPayloadJSONTags checks that every payload field has a json tag with
// the name of its msgpack tag, so the two spellings of an event agree.
// TestLLMReplyText: a chat completion's tool calls or text, anything else
// as a value.
func TestLLMReplyText(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"choices":[{"message":{"tool_calls":[{"function":{"name":"write_file","arguments":"{\"path\":\"a.go\"}"}},{"function":{"name":"done","arguments":"{}"}}]}}]}`, "call write_file(a.go), done"},
		{`{"choices":[{"message":{"content":"all done"}}]}`, `"all done"`},
		{`{"choices":[]}`, "choices=[]"},
		{`plain`, `"plain"`},
		{"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\ndata: [DONE]\n\n", `"Hello" (streamed)`},
		{"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"write_file\",\"arguments\":\"\"}}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n", "call write_file (streamed)"},
		{"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n", `"Hi" (streamed)`},
		{"data: one\n\n", `"data: one\n\n"`},
	} {
		if got := eventlog.LLMReplyText([]byte(c.body)); got != c.want {
			t.Errorf("LLMReplyText(%s) = %q, want %q", c.body, got, c.want)
		}
	}
}

func TestPayloadJSONTags(t *testing.T) {
	types := []reflect.Type{reflect.TypeFor[eventlog.ForkSelection](), reflect.TypeFor[eventlog.StepOverride]()}
	for _, ev := range fullEvents() {
		types = append(types, reflect.TypeOf(ev.Data).Elem())
	}
	for _, typ := range types {
		for f := range typ.Fields() {
			mp, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
			if js := f.Tag.Get("json"); js != mp {
				t.Errorf("%s.%s: json tag %q, msgpack name %q", typ.Name(), f.Name, js, mp)
			}
		}
	}
}

// TestEventJSON checks that values that are JSON print as JSON, other
// bytes as base64, times and IDs as text, and that V2 and V3 fields of
// older kinds are left out while zero.
func TestEventJSON(t *testing.T) {
	evs := fullEventsV2()
	v3 := fullEvents()
	for _, c := range []struct {
		ev   eventlog.Event
		want string
	}{
		{evs[12], `{"seq":13,"time":"2025-03-14T15:09:26.547897932Z","kind":"fork.created","data":{"parent":"0192f0c4-7b1a-7c3d-8e4f-0123456789ab","at":17,` +
			`"selections":[{"key":"db","ref":"db-3","captured_at":12,"generation":2,"covered":true},{"key":"workspace","ref":"snap-8","captured_at":9,"generation":4,"covered":false}],` +
			`"input":{"task":"fix it differently"},"overrides":[{"step_id":"st-1","result":"edited"},{"step_id":"st-9","result":1}],"deadline":"2025-03-14T15:00:00.123456789Z"}}`},
		{evs[2], `{"seq":3,"time":"2025-03-14T15:09:26.537897932Z","kind":"step.started","data":{"step_id":"st-1","step_kind":"tool","target":"write_file",` +
			`"args":{"base64":"gaRwYXRo"},"resources":["db","workspace"],"idempotency":"at_most_once","attempt":2}}`},
		{eventlog.Event{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`"hi"`)}},
			`{"seq":1,"kind":"execution.created","data":{"agent":"a","input":"hi"}}`},
		{eventlog.Event{Seq: 2, Data: &eventlog.ExecutionCompleted{}}, `{"seq":2,"kind":"execution.completed","data":{"output":null}}`},
		{eventlog.Event{Seq: 13, Data: &eventlog.ForkCreated{Parent: sampleParent, At: 12, Version: "v8",
			Budget:   eventlog.Limits{MaxTokens: 5},
			Messages: []eventlog.Message{{MessageID: "m-1", Topic: "chat", Value: []byte(`"q"`)}}}},
			`{"seq":13,"kind":"fork.created","data":{"parent":"0192f0c4-7b1a-7c3d-8e4f-0123456789ab","at":12,"selections":[],` +
				`"version":"v8","budget":{"max_tokens":5,"max_llm_calls":0,"max_tool_calls":0},"messages":[{"message_id":"m-1","topic":"chat","value":"q","from":""}]}}`},
		{v3[3], `{"seq":4,"time":"2025-03-14T15:09:26.538897932Z","kind":"step.succeeded","data":{"step_id":"st-1","result":"wrote a.go","tokens":{"input":1200,"output":345},"truncated":true}}`},
		{v3[25], `{"seq":26,"time":"2025-03-14T15:09:26.560897932Z","kind":"event.set","data":{"key":"progress","value":0.5}}`},
	} {
		b, err := json.Marshal(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.ev.Kind(), b, c.want)
		}
	}
	// The payload alone marshals the same way.
	b, err := json.Marshal(evs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"agent":"coder","input":{"task":"fix the bug"},"deadline":"2025-03-14T15:00:00.123456789Z","key":"order-42"}`; string(b) != want {
		t.Errorf("payload JSON %s, want %s", b, want)
	}
	for _, ev := range v3 {
		if _, err := json.Marshal(ev); err != nil {
			t.Errorf("%s: %v", ev.Kind(), err)
		}
	}
}

func ExampleSummary() {
	ev := eventlog.Event{Seq: 4, Data: &eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepTool, Target: "write_file",
		Args: []byte(`{"path":"a.go","content":"package a"}`), Resources: []string{"workspace"},
		Idempotency: eventlog.SafeToRetry, Attempt: 1}}
	fmt.Println(eventlog.Summary(ev))
	// Output: tool write_file content="package a" path="a.go" affects workspace
}

// TestSummaryEdges pins the summaries at the edges of their conditions: an
// LLM call whose request has no messages, a tool call and an approval
// without arguments, a value exactly as wide as its room (not clipped)
// and one rune wider (clipped), a ref of exactly 12 characters.
func TestSummaryEdges(t *testing.T) {
	width50 := strings.Repeat("x", 48) // quoted: 50 runes, ValueText's room for a result
	for _, c := range []struct {
		name string
		ev   eventlog.Payload
		want string
	}{
		{"LLM call without messages", &eventlog.StepStarted{StepID: "l1", StepKind: eventlog.StepLLM, Target: "POST /v1/chat/completions",
			Args: []byte(`{"body":{"messages":[]}}`), Idempotency: eventlog.SafeToRetry, Attempt: 1}, "llm POST /v1/chat/completions"},
		{"LLM call with one message", &eventlog.StepStarted{StepID: "l1", StepKind: eventlog.StepLLM, Target: "POST /v1/chat/completions",
			Args: []byte(`{"body":{"messages":[{}]}}`), Idempotency: eventlog.SafeToRetry, Attempt: 1}, "llm POST /v1/chat/completions (1 message)"},
		{"tool call without arguments", &eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepTool, Target: "list",
			Idempotency: eventlog.SafeToRetry, Attempt: 1}, "tool list"},
		{"approval without arguments", &eventlog.ApprovalRequested{StepID: "s1", StepKind: eventlog.StepTool, Target: "deploy"}, "tool deploy"},
		{"a value exactly as wide as its room", &eventlog.StepSucceeded{StepID: "s1", Result: []byte(`"` + width50 + `"`)},
			`step s1 → "` + width50 + `"`},
		{"a value one rune wider", &eventlog.StepSucceeded{StepID: "s1", Result: []byte(`"` + width50 + `y"`)},
			`step s1 → "` + width50 + `…`},
		{"a ref of 12 characters", &eventlog.ResourceCaptured{Key: "w", Ref: "abcdefghijkl", Generation: 2, Reason: eventlog.CaptureSteps},
			"w abcdefghijkl gen 2 (steps)"},
		{"a ref of 13 characters", &eventlog.ResourceCaptured{Key: "w", Ref: "abcdefghijklm", Generation: 2, Reason: eventlog.CaptureSteps},
			"w abcdefghijkl gen 2 (steps)"},
	} {
		if got := eventlog.Summary(eventlog.Event{Data: c.ev}); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// TestLLMResponseBody: the HTTP body of a recorded LLM result, as JSON; no
// body for what is not a recorded result, a result without a status, or
// one without a body.
func TestLLMResponseBody(t *testing.T) {
	result := func(status int, body string) []byte {
		b, err := json.Marshal(map[string]any{"status": status, "body": []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	body, ok := eventlog.LLMResponseBody(result(200, `{"choices": [ ]}`))
	if !ok || string(body) != `{"choices":[]}` {
		t.Errorf("LLMResponseBody(recorded result) = %s, %v; want the body compacted, true", body, ok)
	}
	for _, c := range []struct {
		name   string
		result []byte
	}{
		{"not JSON", []byte("plain")},
		{"JSON of another shape", []byte(`[1,2]`)},
		{"no status", result(0, `{}`)},
		{"no body", result(200, ``)},
	} {
		if body, ok := eventlog.LLMResponseBody(c.result); ok || body != nil {
			t.Errorf("LLMResponseBody(%s) = %s, %v; want nil, false", c.name, body, ok)
		}
	}
}
