package tsagent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/scriptedmodel"
	"github.com/forkline/forkline/kernelapi"
	"github.com/forkline/forkline/sdk"
)

const (
	token  = "ts-agent-token"
	secret = "ts-agent-secret-0123456789"
)

func script() *scriptedmodel.Model {
	return &scriptedmodel.Model{Name: "scripted", Turns: []scriptedmodel.Turn{
		{Calls: []scriptedmodel.ToolCall{{Name: "add", Args: map[string]int{"a": 2, "b": 3}}, {Name: "upper", Args: map[string]string{"text": "hi"}}}},
		{Calls: []scriptedmodel.ToolCall{{Name: "add", Args: map[string]int{"a": 5, "b": 1}}}},
		{Say: "done"},
	}}
}

func nodePath(t *testing.T) string {
	p, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("FORKLINE_REQUIRE_NODE") == "1" {
			t.Fatal("node is not installed and FORKLINE_REQUIRE_NODE=1")
		}
		t.Skip("node is not installed")
	}
	return p
}

// startAgent runs agent.mjs and returns its webhook URL; env adds variables.
func startAgent(t *testing.T, node, kernelURL, modelURL string, env ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(node, "agent.mjs")
	cmd.Env = append(os.Environ(), "KERNEL_URL="+kernelURL, "AGENT_ID=notes", "AGENT_SECRET="+secret,
		"MODEL_URL="+modelURL, "PORT=0")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("agent did not start: %v", err)
	}
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		t.Fatalf("agent said %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return "http://127.0.0.1:" + port + "/", cmd
}

type kernelRig struct {
	t   *testing.T
	k   *sdk.Kernel
	url string
}

func newKernel(t *testing.T) *kernelRig {
	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	srv, err := kernelapi.Handler(k, kernelapi.Options{Token: token, StallAfter: 500 * time.Millisecond, RetryBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, sdk.PollEvery(10*time.Millisecond)) }()
	t.Cleanup(func() { cancel(); <-done })
	return &kernelRig{t: t, k: k, url: hs.URL}
}

func (r *kernelRig) call(method, path string, body any, out any) int {
	r.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, r.url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			r.t.Fatalf("%s: %v", rb, err)
		}
	}
	return resp.StatusCode
}

func (r *kernelRig) register(hook string) {
	if code := r.call("POST", "/v0/agents", map[string]string{"id": "notes", "webhook_url": hook, "secret": secret}, nil); code != 201 {
		r.t.Fatalf("register: %d", code)
	}
}

func (r *kernelRig) create() eventlog.ID {
	var out struct{ ID string }
	if code := r.call("POST", "/v0/executions", map[string]any{"agent_id": "notes", "input": map[string]string{"task": "add and shout"}}, &out); code != 201 {
		r.t.Fatalf("create: %d", code)
	}
	id, err := eventlog.ParseID(out.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

func awaitDone(t *testing.T, k *sdk.Kernel, id eventlog.ID) *sdk.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := k.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait %s: %v\n%s", id, err, text(events(t, k, id)))
	}
	return res
}

func events(t *testing.T, k *sdk.Kernel, id eventlog.ID) []eventlog.Event {
	var out []eventlog.Event
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func text(evs []eventlog.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		j, _ := json.Marshal(ev)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// effect is what the equality test compares of a step event.
type effect struct {
	Kind, Step, Target, Args, Result string
}

func effects(evs []eventlog.Event) []effect {
	var out []effect
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			out = append(out, effect{Kind: ev.Kind().String(), Step: p.StepID, Target: string(p.StepKind) + ":" + p.Target, Args: string(p.Args)})
		case *eventlog.StepSucceeded:
			out = append(out, effect{Kind: ev.Kind().String(), Step: p.StepID, Result: string(p.Result)})
		case *eventlog.ExecutionCompleted:
			out = append(out, effect{Kind: ev.Kind().String(), Result: string(p.Output)})
		}
	}
	return out
}

// goAgent is the same agent written in Go, in process: each effect through
// sdk.RemoteCall with the same kinds, targets and args.
func goAgent(modelURL string) func(context.Context, json.RawMessage) (json.RawMessage, error) {
	call := func(ctx context.Context, kind eventlog.StepKind, target string, args any, run func() (any, error)) (json.RawMessage, error) {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		res, _, _, err := sdk.RemoteCall(ctx, kind, target, b, eventlog.SafeToRetry, func(context.Context) ([]byte, error) {
			v, err := run()
			if err != nil {
				return nil, err
			}
			return json.Marshal(v)
		})
		return res, err
	}
	return func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		var input struct{ Task string }
		if err := json.Unmarshal(in, &input); err != nil {
			return nil, err
		}
		messages := []any{map[string]any{"role": "user", "content": input.Task}}
		for turn := range 20 {
			req := map[string]any{"model": "scripted", "messages": messages}
			raw, err := call(ctx, eventlog.StepLLM, "scripted", req, func() (any, error) {
				b, _ := json.Marshal(req)
				resp, err := http.Post(modelURL+"/chat/completions", "application/json", bytes.NewReader(b))
				if err != nil {
					return nil, err
				}
				defer resp.Body.Close()
				var v any
				return v, json.NewDecoder(resp.Body).Decode(&v)
			})
			if err != nil {
				return nil, err
			}
			var reply struct {
				Choices []struct {
					Message map[string]any `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(raw, &reply); err != nil {
				return nil, err
			}
			msg := reply.Choices[0].Message
			messages = append(messages, msg)
			calls, _ := msg["tool_calls"].([]any)
			if len(calls) == 0 {
				return json.Marshal(map[string]any{"answer": msg["content"], "turns": turn + 1})
			}
			for _, c := range calls {
				c := c.(map[string]any)
				fn := c["function"].(map[string]any)
				var args map[string]any
				if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil {
					return nil, err
				}
				name := fn["name"].(string)
				res, err := call(ctx, eventlog.StepTool, name, args, func() (any, error) {
					switch name {
					case "add":
						return map[string]any{"sum": args["a"].(float64) + args["b"].(float64)}, nil
					case "upper":
						return map[string]any{"text": strings.ToUpper(fmt.Sprint(args["text"]))}, nil
					}
					return nil, fmt.Errorf("no tool %s", name)
				})
				if err != nil {
					return nil, err
				}
				messages = append(messages, map[string]any{"role": "tool", "tool_call_id": c["id"], "content": string(res)})
			}
		}
		return nil, fmt.Errorf("too many turns")
	}
}

// TestNodeAgent runs examples/ts-agent/agent.mjs against the kernel over
// HTTP: a clean run whose events equal the same agent's in Go; a run whose
// agent is SIGKILLed with a step in flight and resumes on a new agent
// process; and a fork of the clean run, which replays its prefix to the
// agent and runs the rest live.
func TestNodeAgent(t *testing.T) {
	node := nodePath(t)
	m := script()
	modelURL, stop, err := scriptedmodel.Serve(m)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	r := newKernel(t)

	hook, _ := startAgent(t, node, r.url, modelURL)
	r.register(hook)
	clean := r.create()
	res := awaitDone(t, r.k, clean)
	if string(res.Output) != `{"answer":"done","turns":3}` {
		t.Fatalf("output %s", res.Output)
	}

	// The same agent in Go, in process, against the same model.
	kg, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer kg.Close()
	if _, err := sdk.Register(kg, "notes", goAgent(modelURL)); err != nil {
		t.Fatal(err)
	}
	gid, err := kg.Start(context.Background(), "notes", map[string]string{"task": "add and shout"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kg.Run(context.Background(), gid); err != nil {
		t.Fatal(err)
	}
	httpEvs, goEvs := events(t, r.k, clean), events(t, kg, gid)
	if diff := cmp.Diff(effects(goEvs), effects(httpEvs)); diff != "" {
		t.Fatalf("the HTTP agent's events differ from the Go agent's (-go +http):\n%s", diff)
	}
	wantKinds := func(evs []eventlog.Event) string {
		var ks []string
		for _, ev := range evs {
			ks = append(ks, ev.Kind().String())
		}
		return strings.Join(ks, ",")
	}
	if a, b := wantKinds(goEvs), wantKinds(httpEvs); a != b {
		t.Fatalf("kinds differ:\ngo   %s\nhttp %s", a, b)
	}

	// Killed mid-run: the third proceed (the upper tool call) kills the agent.
	crashHook, crashed := startAgent(t, node, r.url, modelURL, "CRASH_AT=3")
	r.register(crashHook)
	killed := r.create()
	_ = crashed.Wait() // SIGKILLed by itself at the third proceed
	hook2, _ := startAgent(t, node, r.url, modelURL)
	r.register(hook2)
	res = awaitDone(t, r.k, killed)
	if string(res.Output) != `{"answer":"done","turns":3}` {
		t.Fatalf("resumed output %s", res.Output)
	}
	kevs := events(t, r.k, killed)
	var cancelled, parked, dispatches int
	for _, ev := range kevs {
		switch p := ev.Data.(type) {
		case *eventlog.StepCancelled:
			cancelled++
		case *eventlog.DispatchParked:
			if p.Reason == eventlog.ParkRetry {
				parked++
			}
		case *eventlog.DispatchStarted:
			dispatches++
		}
	}
	if cancelled != 1 || parked < 1 || dispatches != parked+1 {
		t.Fatalf("crash and resume: %d cancelled, %d parked, %d dispatches\n%s", cancelled, parked, dispatches, text(kevs))
	}
	// The resumed run's effects, less the cancelled attempt, are the clean run's.
	var resumed []effect
	seen := map[string]bool{}
	for _, e := range effects(kevs) {
		if e.Kind == "step.started" && seen[e.Step] {
			continue // the orphan's second attempt
		}
		seen[e.Step] = true
		resumed = append(resumed, e)
	}
	if diff := cmp.Diff(effects(httpEvs), resumed); diff != "" {
		t.Fatalf("resumed run differs from the clean one (-clean +resumed):\n%s", diff)
	}

	// A fork of the clean run after its first tool call succeeded.
	var at uint64
	for _, ev := range httpEvs {
		if p, ok := ev.Data.(*eventlog.StepSucceeded); ok && at == 0 && strings.Contains(string(p.Result), "sum") {
			at = ev.Seq
		}
	}
	fid, err := r.k.Fork(context.Background(), clean, at)
	if err != nil {
		t.Fatal(err)
	}
	res = awaitDone(t, r.k, fid)
	if string(res.Output) != `{"answer":"done","turns":3}` {
		t.Fatalf("fork output %s", res.Output)
	}
	var own []eventlog.Event
	for _, ev := range events(t, r.k, fid) {
		if ev.Seq > at {
			own = append(own, ev)
		}
	}
	// Two model calls' worth of work were recorded before at: the llm call
	// and add. The fork replays them; it runs upper, the second llm call,
	// add and the third llm call live.
	var live []string
	for _, ev := range own {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok {
			live = append(live, string(p.StepKind)+":"+p.Target)
		}
	}
	if want := []string{"tool:upper", "llm:scripted", "tool:add", "llm:scripted"}; !cmp.Equal(want, live) {
		t.Fatalf("fork ran live %v, want %v\n%s", live, want, text(own))
	}
}
