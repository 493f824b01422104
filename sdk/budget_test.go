package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Token budgets (DESIGN §17, §21½.9).

// budgetDescribe is describe, with a denial's Code and RuleID and a
// budget recorded in execution.created or fork.created.
func budgetDescribe(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.StepDenied:
			out[i] = fmt.Sprintf("denied %s %s code=%s rule=%q: %s", p.StepKind, p.Target, p.Code, p.RuleID, p.Reason)
		case *eventlog.ExecutionCreated:
			out[i] = fmt.Sprintf("created %s budget=%+v", p.Agent, p.Budget)
		case *eventlog.ForkCreated:
			out[i] = fmt.Sprintf("fork at=%d budget=%+v", p.At, p.Budget)
		case *eventlog.ApprovalRequested:
			out[i] = fmt.Sprintf("approval.requested %s %s rule=%q: %s", p.StepKind, p.Target, p.RuleID, p.Reason)
		default:
			out[i] = describe(ev)
		}
	}
	return out
}

// chatServer answers every request with an OpenAI reply that reports 12
// input and 5 output tokens, counting the requests.
func chatServer(t *testing.T, requests *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":5}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// chatAgent registers agent "chat": it makes up to n llm calls through
// sdk.Transport and stops at the first error; then it calls the tool
// "note" once and returns the llm call's error, if any.
func chatAgent(url string, tools *atomic.Int64) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		note := sdk.DefineTool("note", func(context.Context, struct{}) (int, error) {
			tools.Add(1)
			return 1, nil
		})
		client := &http.Client{Transport: sdk.Transport(nil)}
		_, _ = sdk.Register(k, "chat", func(ctx context.Context, n int) (int, error) {
			var callErr error
			made := 0
			for i := range n {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
					strings.NewReader(fmt.Sprintf(`{"model":"m","q":%d}`, i)))
				resp, err := client.Do(req)
				if err != nil {
					callErr = err
					break
				}
				_ = resp.Body.Close()
				made++
			}
			if _, err := note.Call(ctx, struct{}{}); err != nil {
				return 0, err
			}
			return made, callErr
		})
	}
}

// TestBudgetTokensDenyLLMCall: with a budget of 20 tokens, the first two
// llm calls run (0 and 17 spent before them) and the third, with 34 spent,
// is step.denied{Code: budget} naming the limit and never reaches the
// server; a tool call is not limited by tokens and runs; the execution
// fails with an error that is ErrBudget and ErrDenied. A budget of 2 llm
// calls denies the third call the same way, and execution.created records
// each budget.
func TestBudgetTokensDenyLLMCall(t *testing.T) {
	for _, c := range []struct {
		limits sdk.Limits
		reason string
	}{
		{sdk.Limits{MaxTokens: 20}, "budget of 20 tokens reached: 34 spent"},
		{sdk.Limits{MaxLLMCalls: 2, MaxTokens: 1000}, "budget of 2 llm calls reached: 2 made"},
	} {
		var requests, tools atomic.Int64
		srv := chatServer(t, &requests)
		k := newKernel(t, newStore(t), chatAgent(srv.URL, &tools))
		id, err := k.Start(t.Context(), "chat", 5, sdk.Budget(c.limits))
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.Run(t.Context(), id)
		if !errors.Is(err, sdk.ErrBudget) || !errors.Is(err, sdk.ErrDenied) {
			t.Fatalf("%+v: Run = %v, want ErrBudget", c.limits, err)
		}
		var de *sdk.DeniedError
		if !errors.As(err, &de) || de.Code != eventlog.DenyBudget || de.Reason != c.reason {
			t.Fatalf("%+v: Run = %v, want a *DeniedError of Code budget, reason %q", c.limits, err, c.reason)
		}
		evs := events(t, k, id)
		target := evs[2].Data.(*eventlog.StepStarted).Target
		want := []string{
			fmt.Sprintf("created chat budget={MaxTokens:%d MaxLLMCalls:%d MaxToolCalls:0}", c.limits.MaxTokens, c.limits.MaxLLMCalls),
			"dispatch 1",
			"started llm " + target, "succeeded",
			"started llm " + target, "succeeded",
			"denied llm " + target + " code=budget rule=\"\": " + c.reason,
			"started tool note", "succeeded",
			"execution_failed handler",
		}
		if diff := cmp.Diff(want, budgetDescribe(evs)); diff != "" {
			t.Fatalf("%+v: events (-want +got):\n%s", c.limits, diff)
		}
		if requests.Load() != 2 || tools.Load() != 1 {
			t.Fatalf("%+v: %d requests reached the server, the tool ran %d times; want 2 and 1", c.limits, requests.Load(), tools.Load())
		}
		d, err := k.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		wantSpend := sdk.Spend{Tokens: eventlog.Tokens{Input: 24, Output: 10}, LLMCalls: 2, ToolCalls: 1}
		if d.Budget != c.limits || d.Spend != wantSpend {
			t.Fatalf("%+v: Info says budget %+v, spend %+v; want %+v", c.limits, d.Budget, d.Spend, wantSpend)
		}
	}
}

// toolsAgent registers agent "tools": it calls the tool "t" with 1..n,
// noting for each call "ok" or, for a denial, its Code, and returns the
// notes.
func toolsAgent(bodies *atomic.Int64) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		tool := sdk.DefineTool("t", func(_ context.Context, i int) (int, error) {
			bodies.Add(1)
			return i, nil
		})
		_, _ = sdk.Register(k, "tools", func(ctx context.Context, n int) (string, error) {
			var notes []string
			for i := 1; i <= n; i++ {
				_, err := tool.Call(ctx, i)
				var de *sdk.DeniedError
				switch {
				case err == nil:
					notes = append(notes, "ok")
				case errors.As(err, &de) && (de.Code != eventlog.DenyBudget || errors.Is(err, sdk.ErrBudget)):
					// A denial (a budget's is ErrBudget; a rejected
					// approval's is approval_rejected): noted, not fatal.
					notes = append(notes, string(de.Code))
				default:
					return "", err
				}
			}
			return strings.Join(notes, " "), nil
		})
	}
}

// runTools runs execution id to its end and returns its output.
func runTools(t *testing.T, k *sdk.Kernel, id eventlog.ID) string {
	t.Helper()
	res, err := k.Run(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBudgetToolCalls: a budget of 2 tool calls lets two run and denies
// the third and fourth (step.denied{Code: budget}); their bodies never
// run.
func TestBudgetToolCalls(t *testing.T) {
	var bodies atomic.Int64
	k := newKernel(t, newStore(t), toolsAgent(&bodies))
	id, err := k.Start(t.Context(), "tools", 4, sdk.Budget(sdk.Limits{MaxToolCalls: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if out := runTools(t, k, id); out != "ok ok budget budget" || bodies.Load() != 2 {
		t.Fatalf("output %q, bodies ran %d times", out, bodies.Load())
	}
	want := []string{
		"created tools budget={MaxTokens:0 MaxLLMCalls:0 MaxToolCalls:2}", "dispatch 1",
		"started tool t", "succeeded", "started tool t", "succeeded",
		`denied tool t code=budget rule="": budget of 2 tool calls reached: 2 made`,
		`denied tool t code=budget rule="": budget of 2 tool calls reached: 2 made`,
		"completed",
	}
	if diff := cmp.Diff(want, budgetDescribe(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestBudgetFork: a fork inherits its parent's budget and its spend
// counts the prefix's calls (DESIGN §21½.9): forked after one tool call
// of a budget of 2 and given input 3, it replays the first, runs the
// second live and is denied the third. sdk.Budget on the fork replaces
// the budget, recorded in fork.created: all three run. A denial recorded
// in a prefix replays as the same denial (ErrBudget) even when the fork's
// own budget would let the call run, and later calls are judged by the
// fork's budget.
func TestBudgetFork(t *testing.T) {
	var bodies atomic.Int64
	k := newKernel(t, newStore(t), toolsAgent(&bodies))
	id, err := k.Start(t.Context(), "tools", 1, sdk.Budget(sdk.Limits{MaxToolCalls: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if out := runTools(t, k, id); out != "ok" {
		t.Fatalf("root's output %q", out)
	}
	// created, dispatch, started, succeeded: fork at 4.
	f, err := k.Fork(t.Context(), id, 4, sdk.WithInput(3))
	if err != nil {
		t.Fatal(err)
	}
	if out := runTools(t, k, f); out != "ok ok budget" {
		t.Fatalf("inheriting fork's output %q", out)
	}
	want := []string{
		"created tools budget={MaxTokens:0 MaxLLMCalls:0 MaxToolCalls:2}", "dispatch 1", "started tool t", "succeeded",
		"fork at=4 budget={MaxTokens:0 MaxLLMCalls:0 MaxToolCalls:0}", "dispatch 2",
		"started tool t", "succeeded",
		`denied tool t code=budget rule="": budget of 2 tool calls reached: 2 made`,
		"completed",
	}
	if diff := cmp.Diff(want, budgetDescribe(events(t, k, f))); diff != "" {
		t.Fatalf("inheriting fork's events (-want +got):\n%s", diff)
	}

	g, err := k.Fork(t.Context(), id, 4, sdk.WithInput(3), sdk.Budget(sdk.Limits{MaxToolCalls: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if out := runTools(t, k, g); out != "ok ok ok" {
		t.Fatalf("overriding fork's output %q", out)
	}
	evs := events(t, k, g)
	if got := budgetDescribe(evs)[4]; got != "fork at=4 budget={MaxTokens:0 MaxLLMCalls:0 MaxToolCalls:5}" {
		t.Fatalf("overriding fork's fork.created: %s", got)
	}
	d, err := k.Info(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	if d.Budget != (sdk.Limits{MaxToolCalls: 5}) || d.Spend.ToolCalls != 3 {
		t.Fatalf("overriding fork's Info: budget %+v, spend %+v", d.Budget, d.Spend)
	}

	// The inheriting fork's denial, replayed in a fork of it whose budget
	// would allow the call: still a denial; its fourth call runs.
	h, err := k.Fork(t.Context(), f, uint64(len(events(t, k, f))-1), sdk.WithInput(4), sdk.Budget(sdk.Limits{MaxToolCalls: 9}))
	if err != nil {
		t.Fatal(err)
	}
	if out := runTools(t, k, h); out != "ok ok budget ok" {
		t.Fatalf("fork of the denial: output %q", out)
	}
	if got := budgetDescribe(events(t, k, h)); got[len(got)-3] != "started tool t" || strings.Count(strings.Join(got, "\n"), "code=budget") != 1 {
		t.Fatalf("fork of the denial: events %q", got)
	}
}

// TestBudgetOnBudgetApprove: with a bundle that says on_budget: approve,
// a call past its budget asks an approval whose reason names the budget
// (no rule id) and waits; granted, it runs once. Rejected, it is
// step.denied{Code: approval_rejected}.
func TestBudgetOnBudgetApprove(t *testing.T) {
	ctx := t.Context()
	for _, grant := range []bool{true, false} {
		store := newStore(t)
		var bodies atomic.Int64
		k := newKernel(t, store, toolsAgent(&bodies), sdk.WithBundle(mustBundle(t, "default: allow\non_budget: approve\n")))
		id, err := k.Start(ctx, "tools", 2, sdk.Budget(sdk.Limits{MaxToolCalls: 1}))
		if err != nil {
			t.Fatal(err)
		}
		// The run's goroutine reports, never t.Fatal (which would leave
		// the test waiting on done forever).
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := k.Run(ctx, id)
			var out string
			if err == nil {
				err = res.Decode(&out)
			}
			done <- result{out, err}
		}()
		awaitStatus(t, store, id, eventlog.StatusWaiting)
		p := pendingStep(t, k, id)
		if p.Reason != "budget of 1 tool calls reached: 1 made" {
			t.Fatalf("pending approval's reason %q", p.Reason)
		}
		if grant {
			err = k.Approve(ctx, id, p.StepID)
		} else {
			err = k.Reject(ctx, id, p.StepID, sdk.Note("too much"))
		}
		if err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			t.Fatalf("grant %t: Run = %v", grant, r.err)
		}
		out := r.out
		want := []string{
			"created tools budget={MaxTokens:0 MaxLLMCalls:0 MaxToolCalls:1}", "dispatch 1", "started tool t", "succeeded",
			`approval.requested tool t rule="": budget of 1 tool calls reached: 1 made`,
		}
		wantOut, wantBodies := "ok ok", int64(2)
		if grant {
			want = append(want, "approval.granted", "started tool t", "succeeded", "completed")
		} else {
			want = append(want, "approval.rejected", `denied tool t code=approval_rejected rule="": approval rejected: too much`, "completed")
			wantOut, wantBodies = "ok approval_rejected", 1
		}
		if diff := cmp.Diff(want, budgetDescribe(events(t, k, id))); diff != "" {
			t.Fatalf("grant %t: events (-want +got):\n%s", grant, diff)
		}
		if out != wantOut || bodies.Load() != wantBodies {
			t.Fatalf("grant %t: output %q, bodies ran %d times", grant, out, bodies.Load())
		}
	}
}

// TestBudgetRefused: a negative limit is ErrInvalid on Start and on Fork,
// and a budget without a limit on a fork too; nothing is written.
func TestBudgetRefused(t *testing.T) {
	var bodies atomic.Int64
	store := newStore(t)
	k := newKernel(t, store, toolsAgent(&bodies))
	for _, l := range []sdk.Limits{{MaxTokens: -1}, {MaxLLMCalls: -5}, {MaxToolCalls: -1, MaxTokens: 3}} {
		if _, err := k.Start(t.Context(), "tools", 1, sdk.Budget(l)); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "negative") {
			t.Errorf("Start with %+v = %v, want ErrInvalid", l, err)
		}
	}
	id, err := k.Start(t.Context(), "tools", 1, sdk.Budget(sdk.Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	runTools(t, k, id)
	for _, l := range []sdk.Limits{{MaxToolCalls: -1}, {}} {
		if _, err := k.Fork(t.Context(), id, 2, sdk.Budget(l)); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Fork with %+v = %v, want ErrInvalid", l, err)
		}
	}
	list, err := k.List(t.Context(), sdk.Filter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %d executions, %v; want the one started", len(list), err)
	}
}
