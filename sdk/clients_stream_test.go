package sdk_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// The events a provider streams for the reply "Hello", split where the
// fake server waits for the client to have seen the first piece.
var (
	openaiStream = [2]string{
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n" +
			"data: [DONE]\n\n",
	}
	anthropicStream = [2]string{
		"event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: ping\n" + `data: {"type": "ping"}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\n",
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}` + "\n\n" +
			"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
			"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n",
	}
)

// providerServer streams parts as the provider does, holding the second
// part back until the client has seen the first (seen).
func providerServer(t *testing.T, parts [2]string, seen <-chan struct{}) (*httptest.Server, *atomic.Int64) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Request-Id", "req_1")
		w.WriteHeader(http.StatusOK)
		send(w, parts[0])
		select {
		case <-seen:
		case <-r.Context().Done():
			return
		}
		send(w, parts[1])
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// streamingClient is a provider's streaming call made with a client
// whose HTTP transport is forkline's: it returns the text and the usage
// the client's own parser read, and says (seen) when the first piece of
// text arrived.
type streamingClient func(ctx context.Context, url string, rt http.RoundTripper, seen chan<- struct{}) (string, error)

func openaiChat(ctx context.Context, url string, rt http.RoundTripper, seen chan<- struct{}) (string, error) {
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: rt}), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "gpt-4o-mini",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	defer stream.Close()
	var text strings.Builder
	var usage string
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			text.WriteString(chunk.Choices[0].Delta.Content)
			signal(seen)
		}
		if chunk.Usage.TotalTokens > 0 {
			usage = fmt.Sprintf("%d+%d", chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens)
		}
	}
	return text.String() + " " + usage, stream.Err()
}

func anthropicChat(ctx context.Context, url string, rt http.RoundTripper, seen chan<- struct{}) (string, error) {
	client := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("k"),
		aoption.WithHTTPClient(&http.Client{Transport: rt}), aoption.WithMaxRetries(0))
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	defer stream.Close()
	var text strings.Builder
	var msg anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return "", err
		}
		if ev.Type == "content_block_delta" && ev.Delta.Text != "" {
			text.WriteString(ev.Delta.Text)
			signal(seen)
		}
	}
	return fmt.Sprintf("%s %d+%d", text.String(), msg.Usage.InputTokens, msg.Usage.OutputTokens), stream.Err()
}

// signal tells the server, once, that the client saw a piece of text.
func signal(seen chan<- struct{}) {
	select {
	case seen <- struct{}{}:
	default:
	}
}

// TestRealClientsStream: openai-go's Chat.Completions.NewStreaming and
// anthropic-sdk-go's Messages.NewStreaming, through sdk.Transport, read
// the reply as the fake provider streams it (the server sends the rest
// only once the client parsed the first piece); the step records the
// whole stream and the usage. A fork replays it to the same clients
// without a request, and a fork at an edited streamed reply (WithResult:
// served as one chunk) gives the clients the edited text.
func TestRealClientsStream(t *testing.T) {
	for _, c := range []struct {
		name    string
		parts   [2]string
		call    streamingClient
		target  string
		want    string
		tokens  eventlog.Tokens
		edited  string
		editOut string
	}{
		{"openai", openaiStream, openaiChat, "gpt-4o-mini", "Hello 9+2", eventlog.Tokens{Input: 9, Output: 2},
			`data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Bye"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", "Bye "},
		{"anthropic", anthropicStream, anthropicChat, "claude-test", "Hello 25+15", eventlog.Tokens{Input: 25, Output: 15},
			strings.Replace(anthropicStream[0], `"text":"Hel"`, `"text":"Bye"`, 1) + "event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n", "Bye 25+1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			seen := make(chan struct{}, 1)
			srv, requests := providerServer(t, c.parts, seen)
			rt := sdk.Transport(nil)
			k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "chat", func(ctx context.Context, _ none) (string, error) {
					return c.call(ctx, srv.URL, rt, seen)
				})
			})
			id, _ := k.Start(ctx, "chat", none{})
			res, err := k.Run(ctx, id)
			if err != nil || string(res.Output) != `"`+c.want+`"` {
				t.Fatalf("Run = %v, %v; want %q", res, err, c.want)
			}
			whole := c.parts[0] + c.parts[1]
			evs := swant(t, k, id, []string{"created chat", "dispatch 1", "started llm " + c.target,
				fmt.Sprintf("succeeded 200 %q tokens=%d+%d", whole, c.tokens.Input, c.tokens.Output), "completed"})
			stepID := evs[2].Data.(*eventlog.StepStarted).StepID

			fid, err := k.Fork(ctx, id, 4)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := k.Run(ctx, fid); err != nil || string(res.Output) != `"`+c.want+`"` || requests.Load() != 1 {
				t.Fatalf("replay = %v, %v after %d requests; want %q from the record", res, err, requests.Load(), c.want)
			}
			swant(t, k, fid, []string{"created chat", "dispatch 1", "started llm " + c.target,
				fmt.Sprintf("succeeded 200 %q tokens=%d+%d", whole, c.tokens.Input, c.tokens.Output),
				"fork at=4", "dispatch 2", "completed"})

			eid, err := k.Fork(ctx, id, 4, sdk.WithResult(stepID, c.edited))
			if err != nil {
				t.Fatal(err)
			}
			if res, err := k.Run(ctx, eid); err != nil || string(res.Output) != `"`+c.editOut+`"` || requests.Load() != 1 {
				t.Fatalf("edited fork = %v, %v after %d requests; want %q", res, err, requests.Load(), c.editOut)
			}
		})
	}
}
