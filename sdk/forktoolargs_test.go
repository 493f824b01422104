package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/sdk"
)

// toolReply is an OpenAI chat completion that calls deploy.
const toolReply = `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",` +
	`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"deploy","arguments":"{\"env\":\"staging\",\"replicas\":2}"}}]}}]}`

// TestForkWithToolArgs: WithToolArgs records, in fork.created's Overrides,
// the recorded response (status, headers) with the tool call's arguments
// edited in its body, and the fork's handler gets that body (issue 38
// item 5); refused edits write nothing.
func TestForkWithToolArgs(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, toolReply)
	}))
	t.Cleanup(srv.Close)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return askLLM(ctx, srv)
		})
		_, _ = sdk.Register(k, "b", func(ctx context.Context, _ none) (string, error) {
			return sdk.Step(ctx, "plain", func(context.Context) (string, error) { return "x", nil })
		})
	})
	id, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	var stepID string
	var at uint64
	var recorded []byte
	for _, ev := range events(t, k, id) {
		if p, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			stepID, at, recorded = p.StepID, ev.Seq, p.Result
		}
	}
	fid, err := k.Fork(ctx, id, at, sdk.WithToolArgs(stepID, "deploy",
		fork.ToolArg{Key: "env", Value: json.RawMessage(`"prod"`)}, fork.ToolArg{Key: "replicas", Value: json.RawMessage(`5`)}))
	if err != nil {
		t.Fatal(err)
	}
	fc, ok := events(t, k, fid)[at].Data.(*eventlog.ForkCreated)
	if !ok || len(fc.Overrides) != 1 || fc.Overrides[0].StepID != stepID {
		t.Fatalf("fork.created %+v; want one override of %s", fc, stepID)
	}
	var rec, got struct {
		Status int
		Header http.Header
		Body   []byte
	}
	if err := json.Unmarshal(recorded, &rec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(fc.Overrides[0].Result, &got); err != nil {
		t.Fatal(err)
	}
	wantBody := strings.Replace(toolReply, `{\"env\":\"staging\",\"replicas\":2}`, `{\"env\":\"prod\",\"replicas\":5}`, 1)
	if got.Status != rec.Status || got.Header.Get("Content-Type") != "application/json" || string(got.Body) != wantBody {
		t.Fatalf("override %d %v %s; want %d %v %s", got.Status, got.Header, got.Body, rec.Status, rec.Header, wantBody)
	}
	res, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	_ = json.Unmarshal(res.Output, &out)
	if out != "200 application/json "+wantBody {
		t.Fatalf("fork output %q", out)
	}

	bid, err := k.Start(ctx, "b", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, bid); err != nil {
		t.Fatal(err)
	}
	var plain string
	var plainAt uint64
	for _, ev := range events(t, k, bid) {
		if p, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			plain, plainAt = p.StepID, ev.Seq
		}
	}
	before, _ := k.List(ctx, sdk.Filter{})
	env := fork.ToolArg{Key: "env", Value: json.RawMessage(`"x"`)}
	for _, c := range []struct {
		id   eventlog.ID
		at   uint64
		opts []sdk.ForkOption
		msg  string
	}{
		{id, at, []sdk.ForkOption{sdk.WithToolArgs(stepID, "rollback", env)}, `tool "rollback": the reply calls none such; it calls deploy (call_1)`},
		{id, at, []sdk.ForkOption{sdk.WithToolArgs(stepID, "deploy", fork.ToolArg{Key: "region", Value: json.RawMessage(`"eu"`)})}, `no argument "region"`},
		{id, at, []sdk.ForkOption{sdk.WithToolArgs("nosuchstep", "deploy", env)}, "never ran"},
		{id, at, []sdk.ForkOption{sdk.WithResult(stepID, "x"), sdk.WithToolArgs(stepID, "deploy", env)}, "WithToolArgs and WithResult"},
		{bid, plainAt, []sdk.ForkOption{sdk.WithToolArgs(plain, "deploy", env)}, "not an LLM call"},
	} {
		if _, err := k.Fork(ctx, c.id, c.at, c.opts...); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Fork = %v; want ErrInvalid saying %q", err, c.msg)
		}
	}
	if after, _ := k.List(ctx, sdk.Filter{}); len(after) != len(before) {
		t.Fatalf("%d executions after refused forks, want %d", len(after), len(before))
	}
}
