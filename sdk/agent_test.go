package sdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

type greetIn struct {
	Name  string `json:"name"`
	Times int    `json:"times"`
}

type greetOut struct {
	Text string `json:"text"`
}

// listAll returns every execution of the store.
func listAll(t *testing.T, log eventlog.Log) []eventlog.Info {
	t.Helper()
	var out []eventlog.Info
	for info, err := range log.List(t.Context(), eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info)
	}
	return out
}

// TestTypedAgent: Register returns the typed agent; its Start and Run take
// and return the handler's types; Kernel.Start refuses an input that does
// not decode into In with ErrInvalid and writes nothing.
func TestTypedAgent(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(*sdk.Kernel) {})
	greet, err := sdk.Register(k, "greet", func(ctx context.Context, in greetIn) (greetOut, error) {
		return greetOut{Text: strings.Repeat("hi "+in.Name+" ", in.Times)}, nil
	})
	if err != nil || greet.Name() != "greet" {
		t.Fatalf("Register = %v, %v", greet, err)
	}
	other, err := sdk.Register(k, "other", func(ctx context.Context, n int) (int, error) { return n, nil })
	if err != nil {
		t.Fatal(err)
	}
	id, err := greet.Start(ctx, greetIn{Name: "ada", Times: 2})
	if err != nil {
		t.Fatal(err)
	}
	out, err := greet.Run(ctx, id)
	if err != nil || out.Text != "hi ada hi ada " {
		t.Fatalf("Run = %+v, %v", out, err)
	}
	if _, err := other.Run(ctx, id); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), `"greet"`) {
		t.Fatalf("Run of another agent's execution = %v, want ErrInvalid", err)
	}

	before := listAll(t, store)
	for _, c := range []struct {
		name  string
		input any
	}{
		{"not a struct", "not-a-struct"},
		{"a number", 42},
		{"unknown field", map[string]any{"name": "x", "colour": "red"}},
		{"wrong field type", map[string]any{"name": 7}},
		{"does not encode", make(chan int)},
	} {
		if _, err := k.Start(ctx, "greet", c.input); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "greet") {
			t.Errorf("%s: Start = %v, want ErrInvalid naming the agent", c.name, err)
		}
	}
	if _, err := k.Start(ctx, "greet", greetIn{}, nil); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("Start with a nil option = %v, want ErrInvalid", err)
	}
	if after := listAll(t, store); len(after) != len(before) {
		t.Fatalf("refused starts created %d executions", len(after)-len(before))
	}
	// The dynamic form accepts what decodes.
	if _, err := k.Start(ctx, "greet", map[string]any{"name": "bo"}); err != nil {
		t.Fatalf("Start with a map that decodes: %v", err)
	}
}

// TestAgentMisuse: a nil agent (a failed Register) and a child agent of
// another kernel are refused with ErrInvalid; nothing is appended.
func TestAgentMisuse(t *testing.T) {
	ctx := context.Background()
	var nilAgent *sdk.Agent[int, int]
	if _, err := nilAgent.Start(ctx, 1); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("nil Start = %v", err)
	}
	if _, err := nilAgent.Run(ctx, eventlog.ID{}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("nil Run = %v", err)
	}
	if _, err := nilAgent.Wait(ctx, eventlog.ID{}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("nil Wait = %v", err)
	}
	other := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	foreign, _ := sdk.Register(other, "foreign", func(ctx context.Context, n int) (int, error) { return n, nil })
	var errs []error
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			_, e1 := nilAgent.Call(ctx, 1)
			_, e2 := foreign.Call(ctx, 1)
			errs = append(errs, e1, e2)
			return none{}, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		if !errors.Is(e, sdk.ErrInvalid) {
			t.Fatalf("Call = %v, want ErrInvalid", e)
		}
	}
	if got := describeAll(events(t, k, id)); len(got) != 3 {
		t.Fatalf("events %v: the refused calls appended", got)
	}
}
