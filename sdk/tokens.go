package sdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"mime"
	"net/http"

	"github.com/forkline/forkline/eventlog"
)

// llmUsage is a usage object as the model APIs report it: OpenAI's Chat
// Completions name its counts prompt_tokens and completion_tokens;
// Anthropic's Messages (and OpenAI's Responses) input_tokens and
// output_tokens. A count that is absent is nil.
type llmUsage struct {
	PromptTokens     *uint64 `json:"prompt_tokens"`
	CompletionTokens *uint64 `json:"completion_tokens"`
	InputTokens      *uint64 `json:"input_tokens"`
	OutputTokens     *uint64 `json:"output_tokens"`
}

// usageDoc is the part of a response body, or of one streamed event, that
// may carry a usage object: at the top (an OpenAI completion, its final
// streamed chunk; an Anthropic message, its message_delta event), in the
// message of Anthropic's message_start event, or in the response of
// OpenAI's response.completed event.
type usageDoc struct {
	Usage   *llmUsage `json:"usage"`
	Message *struct {
		Usage *llmUsage `json:"usage"`
	} `json:"message"`
	Response *struct {
		Usage *llmUsage `json:"usage"`
	} `json:"response"`
}

// fold adds what doc reports to t: a count it carries replaces the one
// before (Anthropic's message_delta carries the output so far, OpenAI's
// final chunk the whole call's).
func (doc *usageDoc) fold(t *eventlog.Tokens) {
	for _, u := range []*llmUsage{doc.Usage, msgUsage(doc), respUsage(doc)} {
		if u == nil {
			continue
		}
		if v := firstOf(u.PromptTokens, u.InputTokens); v != nil {
			t.Input = *v
		}
		if v := firstOf(u.CompletionTokens, u.OutputTokens); v != nil {
			t.Output = *v
		}
	}
}

func msgUsage(doc *usageDoc) *llmUsage {
	if doc.Message == nil {
		return nil
	}
	return doc.Message.Usage
}

func respUsage(doc *usageDoc) *llmUsage {
	if doc.Response == nil {
		return nil
	}
	return doc.Response.Usage
}

func firstOf(a, b *uint64) *uint64 {
	if a != nil {
		return a
	}
	return b
}

// llmTokens reads the token usage of an LLM response (DESIGN §16) from its
// body: the usage of a JSON body, or — for server-sent events — of its
// data lines, in order. A body in another format has none.
func llmTokens(h http.Header, body []byte) eventlog.Tokens {
	var t eventlog.Tokens
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		var doc usageDoc
		if json.Unmarshal(body, &doc) == nil {
			doc.fold(&t)
		}
		return t
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, len(body)+1)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
			continue
		}
		var doc usageDoc
		if json.Unmarshal(bytes.TrimSpace(data), &doc) == nil {
			doc.fold(&t)
		}
	}
	return t
}

// llmResultTokens is llmTokens of an encoded llmResult.
func llmResultTokens(result []byte) eventlog.Tokens {
	var r llmResult
	if json.Unmarshal(result, &r) != nil {
		return eventlog.Tokens{}
	}
	return llmTokens(r.Header, r.Body)
}
