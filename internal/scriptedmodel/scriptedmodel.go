// Package scriptedmodel is a deterministic stand-in for an LLM: an HTTP
// server that speaks the OpenAI chat-completions wire format and answers
// from a script, whole or — for a request with "stream": true — streamed
// as OpenAI streams, in server-sent events of small chunks. The demo uses it when no real model is configured, and
// tests use it to drive real client libraries through forkline's transport,
// so the recording path is the one a real model takes.
//
// The turn it plays is the number of assistant messages in the request's
// conversation: the same conversation always gets the same answer, whatever
// happened to earlier requests, which is what replay and forks need.
package scriptedmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ToolCall is one function call the model asks for.
type ToolCall struct {
	Name string
	Args any // encoded as the call's JSON arguments
}

// Turn is one model answer: tool calls, or (with none) a final message.
type Turn struct {
	Calls []ToolCall
	Say   string
}

// Model answers chat-completion requests from Turns.
type Model struct {
	Name  string
	Turns []Turn
	// ChunkDelay, when set, is slept before each streamed chunk after
	// the first, as a model's tokens take time to come.
	ChunkDelay time.Duration

	requests atomic.Int64
}

// Requests returns how many requests the model has answered.
func (m *Model) Requests() int64 { return m.requests.Load() }

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// usage is what every scripted answer reports it used.
var usage = map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}

// ServeHTTP answers POST …/chat/completions.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"scripted model serves POST /chat/completions only"}}`, http.StatusNotFound)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf(`{"error":{"message":%q}}`, "bad request: "+err.Error()), http.StatusBadRequest)
		return
	}
	m.requests.Add(1)
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			turn++
		}
	}
	t := Turn{Say: "done"}
	if turn < len(m.Turns) {
		t = m.Turns[turn]
	}
	id := fmt.Sprintf("chatcmpl-scripted-%d", turn)
	if req.Stream {
		m.stream(r.Context(), w, req, id, turn, t)
		return
	}
	message := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	if len(t.Calls) == 0 {
		message["content"] = t.Say
	} else {
		finish = "tool_calls"
		calls := make([]map[string]any, 0, len(t.Calls))
		for i, c := range t.Calls {
			args, err := json.Marshal(c.Args)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			calls = append(calls, map[string]any{
				"id":   fmt.Sprintf("call_%d_%d", turn, i),
				"type": "function",
				"function": map[string]any{
					"name":      c.Name,
					"arguments": string(args),
				},
			})
		}
		message["tool_calls"] = calls
	}
	resp := map[string]any{
		"id":      id,
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   req.Model,
		"choices": []map[string]any{{"index": 0, "message": message, "finish_reason": finish}},
		"usage":   usage,
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// ChunkSize is how many bytes of text or of a tool call's arguments one
// streamed chunk carries at most.
const ChunkSize = 16

// stream answers a request with "stream": true as OpenAI does: server-sent
// events of chat.completion.chunk objects — the role, then the text or
// each tool call (its ID and name, then its arguments) in pieces of at
// most ChunkSize bytes, then the finish reason, then (with
// stream_options.include_usage) a chunk with the usage and no choices —
// ending with "data: [DONE]"; each event is flushed as it is written.
func (m *Model) stream(ctx context.Context, w http.ResponseWriter, req chatRequest, id string, turn int, t Turn) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	first := true
	chunk := func(choices []map[string]any, extra map[string]any) {
		if !first && m.ChunkDelay > 0 {
			select {
			case <-time.After(m.ChunkDelay):
			case <-ctx.Done():
			}
		}
		first = false
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": req.Model, "choices": choices}
		for k, v := range extra {
			c[k] = v
		}
		b, _ := json.Marshal(c) // maps of strings and numbers always encode
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	delta := func(d map[string]any) { chunk([]map[string]any{{"index": 0, "delta": d}}, nil) }
	delta(map[string]any{"role": "assistant", "content": ""})
	finish := "stop"
	if len(t.Calls) == 0 {
		for _, piece := range pieces(t.Say) {
			delta(map[string]any{"content": piece})
		}
	} else {
		finish = "tool_calls"
		for i, c := range t.Calls {
			args, err := json.Marshal(c.Args)
			if err != nil {
				// The headers are sent: end the stream without [DONE], as a
				// provider whose answer broke does.
				return
			}
			delta(map[string]any{"tool_calls": []map[string]any{{"index": i, "id": fmt.Sprintf("call_%d_%d", turn, i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": ""}}}})
			for _, piece := range pieces(string(args)) {
				delta(map[string]any{"tool_calls": []map[string]any{{"index": i, "function": map[string]any{"arguments": piece}}}})
			}
		}
	}
	chunk([]map[string]any{{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
	if req.StreamOptions.IncludeUsage {
		chunk([]map[string]any{}, map[string]any{"usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// pieces cuts s into pieces of at most ChunkSize bytes, never inside a
// UTF-8 sequence.
func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(ChunkSize, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// Serve serves m on a loopback port and returns its base URL (ending in
// /v1) and a function that stops the server.
func Serve(m *Model) (baseURL string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("scriptedmodel: listen: %w", err)
	}
	srv := &http.Server{Handler: m}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/v1", srv.Close, nil
}
