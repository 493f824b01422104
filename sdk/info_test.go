package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Info inside a handler and a tool body names the execution, the agent,
// the dispatch and, in the body, the step, its attempt and its key; outside
// a handler it says so (issue 38 item 10).
func TestInfo(t *testing.T) {
	ctx := context.Background()
	if _, ok := sdk.Info(ctx); ok {
		t.Fatal("Info outside a handler says it is inside one")
	}
	var inHandler, inTool sdk.ExecutionInfo
	tool := sdk.DefineTool("look", func(ctx context.Context, _ int) (string, error) {
		inTool, _ = sdk.Info(ctx)
		return "ok", nil
	})
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		if _, err := sdk.Register(k, "a", func(ctx context.Context, _ struct{}) (string, error) {
			var ok bool
			if inHandler, ok = sdk.Info(ctx); !ok {
				return "", errors.New("Info in a handler: not ok")
			}
			return tool.Call(ctx, 1)
		}); err != nil {
			t.Fatal(err)
		}
	})
	id, err := k.Start(ctx, "a", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	if got, want := kinds(evs), []eventlog.Kind{eventlog.KindExecutionCreated, eventlog.KindDispatchStarted,
		eventlog.KindStepStarted, eventlog.KindStepSucceeded, eventlog.KindExecutionCompleted}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	started := evs[2].Data.(*eventlog.StepStarted)
	if want := (sdk.ExecutionInfo{ID: id, Agent: "a", Dispatch: 1}); inHandler != want {
		t.Errorf("Info in the handler = %+v, want %+v", inHandler, want)
	}
	want := sdk.ExecutionInfo{ID: id, Agent: "a", Dispatch: 1, StepID: started.StepID, Attempt: 1,
		IdempotencyKey: sdk.StepIdempotencyKey(id, started.StepID)}
	if inTool != want {
		t.Errorf("Info in the tool = %+v, want %+v", inTool, want)
	}
}

func kinds(evs []eventlog.Event) []eventlog.Kind {
	out := make([]eventlog.Kind, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind()
	}
	return out
}

// StartByName starts a registered agent with its input checked, and an
// agent this kernel does not register as a pending execution for another
// process; bad names and inputs are refused with nothing written (issue
// 38 item 10).
func TestStartByName(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	type in struct {
		Env string `json:"env"`
	}
	k := newKernel(t, store, func(k *sdk.Kernel) {
		if _, err := sdk.Register(k, "deploy", func(ctx context.Context, v in) (string, error) { return "deployed " + v.Env, nil }); err != nil {
			t.Fatal(err)
		}
	})
	count := func() int {
		n := 0
		for _, err := range store.List(ctx, eventlog.Filter{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	for name, c := range map[string]struct {
		agent string
		input any
	}{
		"empty name":           {"", json.RawMessage(`{}`)},
		"NUL in name":          {"a\x00b", json.RawMessage(`{}`)},
		"not JSON":             {"deploy", json.RawMessage(`{env:`)},
		"not JSON, bytes":      {"elsewhere", []byte(`nope`)},
		"wrong type":           {"deploy", json.RawMessage(`{"env": 3}`)},
		"unknown field":        {"deploy", map[string]any{"environment": "prod"}},
		"unencodable, foreign": {"elsewhere", func() {}},
	} {
		if _, err := k.StartByName(ctx, c.agent, c.input); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("%s: StartByName = %v, want ErrInvalid", name, err)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("refused starts wrote %d executions", n)
	}
	id, err := k.StartByName(ctx, "deploy", []byte(`{"env":"prod"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, id)
	if err != nil || string(res.Output) != `"deployed prod"` {
		t.Fatalf("run = %s, %v", res.Output, err)
	}
	other, err := k.StartByName(ctx, "elsewhere", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, other)
	if len(evs) != 1 {
		t.Fatalf("the foreign agent's execution holds %d events, want execution.created only", len(evs))
	}
	if c := evs[0].Data.(*eventlog.ExecutionCreated); c.Agent != "elsewhere" || string(c.Input) != `{"n":1}` {
		t.Errorf("execution.created = %+v", c)
	}
	info, err := store.Info(ctx, other)
	if err != nil || info.Status != eventlog.StatusPending {
		t.Errorf("the foreign agent's execution: %+v, %v; want pending", info, err)
	}
}
