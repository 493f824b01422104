package replay

import (
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestBudgetFold (DESIGN §17, §21½.9): Budget is execution.created's,
// kept by a fork.created without one and replaced by one with one;
// LLMCalls and ToolCalls count every step.started of the kind — a retried
// attempt again, a fork's prefix included, local steps and denials not;
// BudgetReached says which limit a call of each kind has reached.
func TestBudgetFold(t *testing.T) {
	at := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	budget := eventlog.Limits{MaxTokens: 40, MaxLLMCalls: 3, MaxToolCalls: 2}
	pay := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a", Budget: budget},
		&eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepLLM, Target: "m", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepFailed{StepID: "s1", Error: "503", RetryAt: at},
		&eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepLLM, Target: "m", Idempotency: eventlog.SafeToRetry, Attempt: 2},
		&eventlog.StepSucceeded{StepID: "s1", Result: []byte(`{}`), Tokens: eventlog.Tokens{Input: 30, Output: 5}},
		&eventlog.StepStarted{StepID: "s2", StepKind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s2", Result: []byte(`1`)},
		&eventlog.StepStarted{StepID: "s3", StepKind: eventlog.StepLocal, Target: "l", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s3", Result: []byte(`1`)},
		&eventlog.StepDenied{StepID: "s4", StepKind: eventlog.StepTool, Target: "t", Reason: "no", Code: eventlog.DenyPolicy},
		&eventlog.ForkCreated{Parent: eventlog.ID{1}, At: 11},
		&eventlog.DispatchStarted{Dispatch: 2},
		&eventlog.StepStarted{StepID: "s5", StepKind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s5", Result: []byte(`1`)},
		&eventlog.ForkCreated{Parent: eventlog.ID{2}, At: 15, Budget: eventlog.Limits{MaxToolCalls: 3}},
	}
	type point struct {
		budget    eventlog.Limits
		llm, tool uint64
		llmOver   string
		toolOver  string
	}
	want := map[uint64]point{
		1:  {budget, 0, 0, "", ""},
		3:  {budget, 1, 0, "", ""},
		5:  {budget, 2, 0, "", ""},
		6:  {budget, 2, 0, "", ""},
		8:  {budget, 2, 1, "", ""},
		11: {budget, 2, 1, "", ""},
		12: {budget, 2, 1, "", ""},
		15: {budget, 2, 2, "", "budget of 2 tool calls reached: 2 made"},
		16: {eventlog.Limits{MaxToolCalls: 3}, 2, 2, "", ""},
	}
	s := New()
	for i, p := range pay {
		seq := uint64(i + 1)
		if err := s.Apply(eventlog.Event{Seq: seq, Time: at, Data: p}); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		w, ok := want[seq]
		if !ok {
			continue
		}
		llmOver, _ := s.BudgetReached(eventlog.StepLLM)
		toolOver, _ := s.BudgetReached(eventlog.StepTool)
		got := point{s.Budget, s.LLMCalls, s.ToolCalls, llmOver, toolOver}
		if got != w {
			t.Fatalf("seq %d: %+v, want %+v", seq, got, w)
		}
		if local, ok := s.BudgetReached(eventlog.StepLocal); ok {
			t.Fatalf("seq %d: a local step is limited: %s", seq, local)
		}
	}
	// Tokens reach their limit at 40 (input and output added), then llm
	// calls theirs.
	s.Budget = eventlog.Limits{MaxTokens: 35, MaxLLMCalls: 2}
	if got, ok := s.BudgetReached(eventlog.StepLLM); !ok || got != "budget of 35 tokens reached: 35 spent" {
		t.Fatalf("tokens: %q, %t", got, ok)
	}
	s.Budget.MaxTokens = 36
	if got, ok := s.BudgetReached(eventlog.StepLLM); !ok || got != "budget of 2 llm calls reached: 2 made" {
		t.Fatalf("llm calls: %q, %t", got, ok)
	}
	s.Budget.MaxLLMCalls = 3
	if got, ok := s.BudgetReached(eventlog.StepLLM); ok {
		t.Fatalf("under every limit: %q", got)
	}
}
