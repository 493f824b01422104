package sdk

import (
	"net/http"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// TestLLMTokens: usage read from each provider's format — OpenAI's chat
// completion and its streamed include_usage chunk, Anthropic's message
// and its message_start / message_delta events, OpenAI's Responses —
// and none from a body in another format.
func TestLLMTokens(t *testing.T) {
	sse := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
	jsonH := http.Header{"Content-Type": {"application/json"}}
	for _, c := range []struct {
		name string
		h    http.Header
		body string
		want eventlog.Tokens
	}{
		{"openai", jsonH, `{"id":"c","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`, eventlog.Tokens{Input: 12, Output: 5}},
		{"openai stream", sse, "data: {\"choices\":[{\"delta\":{\"content\":\"h\"}}],\"usage\":null}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"total_tokens\":13}}\n\ndata: [DONE]\n\n", eventlog.Tokens{Input: 9, Output: 4}},
		{"openai stream without usage", sse, "data: {\"choices\":[{\"delta\":{\"content\":\"h\"}}]}\n\ndata: [DONE]\n\n", eventlog.Tokens{}},
		{"anthropic", jsonH, `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":25,"output_tokens":8}}`, eventlog.Tokens{Input: 25, Output: 8}},
		{"anthropic stream", sse, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", eventlog.Tokens{Input: 25, Output: 15}},
		{"openai responses stream", sse, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":2}}}\n\n", eventlog.Tokens{Input: 7, Output: 2}},
		{"unknown json", jsonH, `{"reply":"hello","tokens":5}`, eventlog.Tokens{}},
		{"not json", http.Header{}, "hello", eventlog.Tokens{}},
		{"json under an sse header", sse, `{"usage":{"prompt_tokens":1,"completion_tokens":1}}`, eventlog.Tokens{}},
	} {
		if got := llmTokens(c.h, []byte(c.body)); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
