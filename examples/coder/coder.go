// Package coder is the coder agent of forkline's reference page, in Go: a
// model drives write_file and read_file tools over a workspace resource that
// is checkpointed every five writes. The demo runs it, and the SDK's tests
// run it end to end.
package coder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/internal/scriptedmodel"
	"github.com/forkline/forkline/sdk"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// Files is what the agent needs of a workspace handle.
type Files interface {
	ReadFile(name string) ([]byte, error)
	WriteFile(name string, data []byte) error
}

// Input is the agent's task.
type Input struct {
	Task string `json:"task"`
}

// Output is the model's final answer.
type Output struct {
	Answer string `json:"answer"`
}

// WriteArgs are write_file's arguments.
type WriteArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// ReadArgs are read_file's arguments.
type ReadArgs struct {
	Path string `json:"path"`
}

// Model says which model to call and where.
type Model struct {
	Name    string // e.g. "gpt-4o-mini", or scripted.Name
	BaseURL string // OpenAI-compatible endpoint, e.g. "https://api.openai.com/v1"
	APIKey  string
	// Stream makes every model call stream (openai-go's NewStreaming,
	// with the usage chunk asked for), as a chat agent streams a reply to
	// a person: the recorded call is a stream, replayed as one (DESIGN
	// §16). A lineage recorded one way replays only the same way: the
	// request, and so the call's identity, differs.
	Stream bool
	// OnReply, with Stream, is called as each piece of a live reply
	// arrives — text, or a tool call's name and then fragments of its
	// arguments — with turn counting the model calls from 1, and once
	// more with done at the reply's end. A call answered from the record
	// (sdk.IsReplaying before it) calls none, so a person sees each reply
	// once, as the model sent it.
	OnReply func(turn int, piece string, done bool)
}

// MaxSteps bounds the model turns of one task, as the reference's stopWhen.
const MaxSteps = 12

// ModelRetry is how the coder retries a model call that got a 429, a 5xx
// or a connection error (sdk.TransportRetry): five attempts, backing off
// from 1 s to 30 s, or longer when the server's Retry-After says so.
var ModelRetry = sdk.RetryPolicy{MaxAttempts: 5, Initial: time.Second, Max: 30 * time.Second, Multiplier: 2}

// Handler returns the coder agent for a workspace made by newDriver (a new
// driver value per dispatch: drivers are cheap descriptions, not resources).
// The workspace is captured after every fifth write_file (sdk.EverySteps(5))
// unless opts say otherwise: they follow that default, so a worker that may
// be taken over by another owner passes sdk.EverySteps(1) to keep the head
// covered after every write (DESIGN §11, where a resource may be opened).
func Handler[H Files, B any](newDriver func() driver.Driver[H, B], m Model, opts ...sdk.ResourceOption) func(context.Context, Input) (Output, error) {
	ropts := append([]sdk.ResourceOption{sdk.EverySteps(5)}, opts...)
	return func(ctx context.Context, in Input) (Output, error) {
		ws, err := sdk.Resource(ctx, "workspace", newDriver(), ropts...)
		if err != nil {
			return Output{}, err
		}
		write := sdk.DefineTool("write_file", func(ctx context.Context, a WriteArgs) (string, error) {
			return "wrote " + a.Path, ws.WriteFile(a.Path, []byte(a.Content))
		}, sdk.Affects("workspace"))
		read := sdk.DefineTool("read_file", func(ctx context.Context, a ReadArgs) (string, error) {
			b, err := ws.ReadFile(a.Path)
			return string(b), err
		})
		client := openai.NewClient(
			option.WithBaseURL(m.BaseURL),
			option.WithAPIKey(m.APIKey),
			// The client's own retries stay off: its backoff is a sleep
			// that is not recorded, so a replay that reached a recorded 429
			// or 5xx would sleep it again. sdk.TransportRetry retries 429s,
			// 5xx and connection errors durably instead: each failed
			// attempt is recorded with its backoff, only the final response
			// is the step's result, and replay neither requests nor waits.
			option.WithMaxRetries(0),
			option.WithHTTPClient(&http.Client{Transport: sdk.Transport(nil, sdk.TransportRetry(ModelRetry))}),
		)
		messages := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(in.Task)}
		last := ""
		for turn := 1; turn <= MaxSteps; turn++ {
			params := openai.ChatCompletionNewParams{
				Model:    shared.ChatModel(m.Name),
				Messages: messages,
				Tools:    tools,
			}
			var resp *openai.ChatCompletion
			if m.Stream {
				resp, err = m.streamed(ctx, &client, params, turn)
			} else {
				resp, err = client.Chat.Completions.New(ctx, params)
			}
			if err != nil {
				return Output{}, fmt.Errorf("coder: model: %w", err)
			}
			if len(resp.Choices) == 0 {
				return Output{}, errors.New("coder: model returned no choices")
			}
			msg := resp.Choices[0].Message
			last = msg.Content
			if len(msg.ToolCalls) == 0 {
				return Output{Answer: msg.Content}, nil
			}
			messages = append(messages, msg.ToParam())
			for _, tc := range msg.ToolCalls {
				result, err := runTool(ctx, write, read, tc.Function.Name, tc.Function.Arguments)
				if err != nil {
					if ctx.Err() != nil {
						return Output{}, err
					}
					result = "error: " + err.Error()
				}
				messages = append(messages, openai.ToolMessage(result, tc.ID))
			}
		}
		return Output{Answer: last}, nil
	}
}

// streamed makes one streamed model call and puts its reply together
// (openai.ChatCompletionAccumulator), passing each live piece to OnReply.
func (m Model) streamed(ctx context.Context, client *openai.Client, params openai.ChatCompletionNewParams, turn int) (*openai.ChatCompletion, error) {
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	show := m.OnReply
	if sdk.IsReplaying(ctx) {
		show = nil // answered from the record: the person saw it when it ran
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if show == nil || len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		if d.Content != "" {
			show(turn, d.Content, false)
		}
		for _, tc := range d.ToolCalls {
			if tc.Function.Name != "" {
				show(turn, "→ "+tc.Function.Name+" ", false)
			}
			if tc.Function.Arguments != "" {
				show(turn, tc.Function.Arguments, false)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if show != nil {
		show(turn, "", true)
	}
	return &acc.ChatCompletion, nil
}

func runTool(ctx context.Context, write *sdk.Tool[WriteArgs, string], read *sdk.Tool[ReadArgs, string], name, args string) (string, error) {
	switch name {
	case "write_file":
		var a WriteArgs
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			return "", fmt.Errorf("bad arguments for write_file: %w", err)
		}
		return write.Call(ctx, a)
	case "read_file":
		var a ReadArgs
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			return "", fmt.Errorf("bad arguments for read_file: %w", err)
		}
		return read.Call(ctx, a)
	}
	return "", fmt.Errorf("no tool named %q", name)
}

var tools = []openai.ChatCompletionToolUnionParam{
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "write_file",
		Description: openai.String("Write a file in the workspace."),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"path":    map[string]any{"type": "string"},
				"content": map[string]any{"type": "string"},
			},
			"required": []string{"path", "content"},
		},
	}),
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "read_file",
		Description: openai.String("Read a file from the workspace."),
		Parameters: shared.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}},
			"required":   []string{"path"},
		},
	}),
}

// ScriptedName is the model name the scripted model answers to.
const ScriptedName = "forkline-scripted-coder"

// Script is the scripted model's part in the demo: a dozen tool calls that
// build a small Go project in the workspace, reading back between writes.
func Script() *scriptedmodel.Model {
	w := func(path, content string) scriptedmodel.ToolCall {
		return scriptedmodel.ToolCall{Name: "write_file", Args: WriteArgs{Path: path, Content: content}}
	}
	r := func(path string) scriptedmodel.ToolCall {
		return scriptedmodel.ToolCall{Name: "read_file", Args: ReadArgs{Path: path}}
	}
	turn := func(calls ...scriptedmodel.ToolCall) scriptedmodel.Turn { return scriptedmodel.Turn{Calls: calls} }
	return &scriptedmodel.Model{Name: ScriptedName, Turns: []scriptedmodel.Turn{
		turn(w("go.mod", "module example.com/greet\n\ngo 1.26\n")),
		turn(w("greet.go", "package greet\n\n// Hello greets name.\nfunc Hello(name string) string { return \"Hello, \" + name }\n")),
		turn(r("greet.go")),
		turn(w("greet_test.go", "package greet\n\nimport \"testing\"\n\nfunc TestHello(t *testing.T) {\n\tif Hello(\"Go\") != \"Hello, Go\" {\n\t\tt.Fatal(Hello(\"Go\"))\n\t}\n}\n")),
		turn(w("README.md", "# greet\n\nSays hello.\n")),
		turn(r("README.md")),
		turn(w("cmd/greet/main.go", "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello(\"world\")) }\n")),
		turn(w("greet.go", "package greet\n\n// Hello greets name, or the world.\nfunc Hello(name string) string {\n\tif name == \"\" {\n\t\tname = \"world\"\n\t}\n\treturn \"Hello, \" + name\n}\n")),
		turn(r("cmd/greet/main.go")),
		turn(w("CHANGELOG.md", "## v0.1.0\n\n- Hello greets the world by default.\n")),
		turn(w("LICENSE", "MIT\n")),
		{Say: "Built the greet module: a library, its test, a command, a README, a changelog and a license."},
	}}
}
