package chat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/forkline/forkline/sdk"
)

// HTTPModel is a model served over HTTP in OpenAI's chat completions
// format, asked for a streamed reply (server-sent events).
type HTTPModel struct {
	// Endpoint is the chat completions URL (…/v1/chat/completions).
	Endpoint string
	// Name is the model's name, sent as the request's "model" (the llm
	// step's target).
	Name string
	// Client sends the request; nil: a client whose Transport is
	// sdk.Transport(nil), so that each request from the handler is a
	// recorded llm step. A given client must record its requests too
	// (sdk.Transport), or a resumed conversation asks the model again.
	Client *http.Client
}

// RegisterHTTP registers the chat agent with k, asking m for each reply:
// a request from the handler itself, so an llm step (sdk.Transport) whose
// streamed body the agent reads as it arrives and whose record a resumed
// run replays instead of asking again.
func RegisterHTTP(k *sdk.Kernel, m HTTPModel) (*sdk.Agent[Input, Output], error) {
	if m.Endpoint == "" || m.Name == "" {
		return nil, fmt.Errorf("%w: chat: model endpoint %q, name %q: both are needed", sdk.ErrInvalid, m.Endpoint, m.Name)
	}
	if m.Client == nil {
		m.Client = &http.Client{Transport: sdk.Transport(nil)}
	}
	return register(k, m.ask)
}

// chatMessage is one message of a chat completions request.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chunk is the part of a streamed chat completions chunk the agent reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
}

// ask sends the conversation so far and the new line to the model and
// returns its reply, read from the stream to its end.
func (m HTTPModel) ask(ctx context.Context, p Prompt) (string, error) {
	msgs := make([]chatMessage, 0, 2*len(p.History)+1)
	for _, t := range p.History {
		msgs = append(msgs, chatMessage{Role: "user", Content: t.User}, chatMessage{Role: "assistant", Content: t.Reply})
	}
	msgs = append(msgs, chatMessage{Role: "user", Content: p.Line})
	body, err := json.Marshal(struct {
		Model    string        `json:"model"`
		Stream   bool          `json:"stream"`
		Messages []chatMessage `json:"messages"`
	}{m.Name, true, msgs})
	if err != nil {
		return "", fmt.Errorf("chat: model request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.Endpoint, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("chat: model request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := m.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("chat: model: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("chat: model answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	// Read to EOF, past "[DONE]": the llm step is recorded whole when the
	// body ends (a body closed early would be recorded Truncated).
	var reply strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok || done {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return "", fmt.Errorf("chat: model stream: chunk %q: %w", data, err)
		}
		for _, ch := range c.Choices {
			reply.WriteString(ch.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("chat: model stream: %w", err)
	}
	if !done {
		return "", fmt.Errorf("chat: model stream ended without [DONE] after %q", reply.String())
	}
	return reply.String(), nil
}
