package sdk_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestFailedAttemptTokens (DESIGN §21½.9): the usage a failed llm attempt's
// response carried is spent, so it is recorded on that attempt's
// step.failed and counts in Info.Tokens, in the budget's spend and in a
// fork's prefix: a 503 answered with usage and retried, then a 200 with
// its own; a 5xx that no retry follows, recorded as the step's result,
// carries its usage on step.succeeded; a stream that broke after
// Anthropic's message_start (the input tokens) carries them on its final
// step.failed. A response without usage records none.
func TestFailedAttemptTokens(t *testing.T) {
	ctx := context.Background()
	t.Run("retried", func(t *testing.T) {
		var requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch requests.Add(1) {
			case 1:
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":"overloaded","usage":{"prompt_tokens":50,"completion_tokens":2}}`)
			case 2:
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, `{"error":"no usage here"}`)
			default:
				_, _ = io.WriteString(w, `{"reply":"hi","usage":{"prompt_tokens":10,"completion_tokens":5}}`)
			}
		}))
		defer srv.Close()
		rt := sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 3}))
		k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
				return askModel(ctx, rt, srv.URL)
			})
		}, sdk.WithClock(instantClock{newFakeClock()}))
		id, _ := k.Start(ctx, "a", none{}, sdk.Budget(sdk.Limits{MaxTokens: 1000}))
		if _, err := k.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		got := tokensByEvent(t, k, id)
		want := []string{"step.failed 50+2", "step.failed 0+0", "step.succeeded 10+5"}
		if !slices.Equal(got, want) {
			t.Fatalf("tokens by step outcome %q, want %q", got, want)
		}
		info, err := k.Info(ctx, id)
		if err != nil || info.Tokens != (eventlog.Tokens{Input: 60, Output: 7}) {
			t.Fatalf("Info.Tokens = %+v (%v), want 60+7 (the failed attempt's usage counts)", info.Tokens, err)
		}
		if info.Spend.Tokens != (eventlog.Tokens{Input: 60, Output: 7}) {
			t.Fatalf("budget spend = %+v, want 60+7", info.Spend.Tokens)
		}
		// A fork after the first failed attempt: its prefix's spend
		// includes that attempt's usage.
		fid, err := k.Fork(ctx, id, 4)
		if err != nil {
			t.Fatal(err)
		}
		finfo, err := k.Info(ctx, fid)
		if err != nil || finfo.Spend.Tokens != (eventlog.Tokens{Input: 50, Output: 2}) {
			t.Fatalf("the fork's spend = %+v (%v), want its prefix's 50+2", finfo.Spend.Tokens, err)
		}
	})
	t.Run("final 5xx", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"boom","usage":{"input_tokens":8,"output_tokens":0}}`)
		}))
		defer srv.Close()
		rt := sdk.Transport(nil)
		k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
				return askModel(ctx, rt, srv.URL)
			})
		})
		id, _ := k.Start(ctx, "a", none{})
		if _, err := k.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got, want := tokensByEvent(t, k, id), []string{"step.succeeded 8+0"}; !slices.Equal(got, want) {
			t.Fatalf("tokens by step outcome %q, want %q", got, want)
		}
	})
	t.Run("broken stream", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sseHeader(w)
			send(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
			panic(http.ErrAbortHandler)
		}))
		defer srv.Close()
		rt := sdk.Transport(nil, sdk.TransportRetry(sdk.RetryPolicy{MaxAttempts: 3}))
		k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
				resp, err := openStream(ctx, rt, srv.URL)
				if err != nil {
					return "", err
				}
				defer resp.Body.Close()
				_, _ = io.ReadAll(resp.Body) // the break's error; the step records it
				return "read", nil
			})
		}, sdk.WithClock(instantClock{newFakeClock()}))
		id, _ := k.Start(ctx, "a", none{})
		if _, err := k.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got, want := tokensByEvent(t, k, id), []string{"step.failed 25+1"}; !slices.Equal(got, want) {
			t.Fatalf("tokens by step outcome %q, want %q", got, want)
		}
		if info, err := k.Info(ctx, id); err != nil || info.Tokens != (eventlog.Tokens{Input: 25, Output: 1}) {
			t.Fatalf("Info.Tokens = %+v (%v), want 25+1", info.Tokens, err)
		}
	})
}

// tokensByEvent lists the step outcomes of id's lineage with the tokens
// each records, as "step.failed 50+2".
func tokensByEvent(t *testing.T, k *sdk.Kernel, id eventlog.ID) []string {
	t.Helper()
	var out []string
	for _, ev := range events(t, k, id) {
		switch ev.Data.(type) {
		case *eventlog.StepSucceeded, *eventlog.StepFailed:
			tk := eventlog.TokensOf(ev.Data)
			out = append(out, fmt.Sprintf("%s %d+%d", ev.Kind(), tk.Input, tk.Output))
		}
	}
	return out
}
