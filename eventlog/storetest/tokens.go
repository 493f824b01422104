package storetest

import (
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestTokens checks Info.Tokens (DESIGN §16): the store sums the Tokens
// of the execution's own step.succeeded events as they are appended, a
// fork starts at zero whatever its prefix used, List says what Info says,
// and the sums survive a reopen of the store and keep growing after it.
// open returns a fresh store and a function that closes it and opens the
// same store again.
func TestTokens(t *testing.T, open func(t *testing.T) (eventlog.IndexedLog, func() eventlog.IndexedLog)) {
	s, reopen := open(t)
	ctx := t.Context()
	id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "tokens", Input: []byte(`"q"`)}, time.Now())
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	wantTokens(t, s, id, eventlog.Tokens{}, "after Create")
	appendAll(t, s, id, []eventlog.Event{{Data: &eventlog.DispatchStarted{Dispatch: 1}}})
	appendAll(t, s, id, llmStep("m1", eventlog.Tokens{Input: 10, Output: 5}))
	wantTokens(t, s, id, eventlog.Tokens{Input: 10, Output: 5}, "after one llm step")
	forkAt := appendAll(t, s, id, llmStep("m2", eventlog.Tokens{Input: 3, Output: 2}))
	// A step that reported no usage (a tool call, an unknown format) adds
	// nothing; one append of several steps adds them all.
	tool := []eventlog.Event{
		{Data: &eventlog.StepStarted{StepID: "t1", StepKind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		{Data: &eventlog.StepSucceeded{StepID: "t1", Result: []byte(`"ok"`)}},
	}
	appendAll(t, s, id, append(tool, append(llmStep("m3", eventlog.Tokens{Input: 7}), llmStep("m4", eventlog.Tokens{Output: 1})...)...))
	wantTokens(t, s, id, eventlog.Tokens{Input: 20, Output: 8}, "after four llm steps")

	f := fork(t, s, id, forkAt)
	wantTokens(t, s, f, eventlog.Tokens{}, "a fork (its own run only)")
	appendAll(t, s, f, []eventlog.Event{{Data: &eventlog.DispatchStarted{Dispatch: 1}}})
	appendAll(t, s, f, llmStep("m3", eventlog.Tokens{Input: 4, Output: 4}))
	wantTokens(t, s, f, eventlog.Tokens{Input: 4, Output: 4}, "a fork after its own llm step")
	wantTokens(t, s, id, eventlog.Tokens{Input: 20, Output: 8}, "the parent after its fork's step")

	s = reopen()
	wantTokens(t, s, id, eventlog.Tokens{Input: 20, Output: 8}, "after reopen")
	wantTokens(t, s, f, eventlog.Tokens{Input: 4, Output: 4}, "the fork after reopen")
	appendAll(t, s, id, llmStep("m5", eventlog.Tokens{Input: 1, Output: 100}))
	wantTokens(t, s, id, eventlog.Tokens{Input: 21, Output: 108}, "after reopen and one more llm step")
	// A failed attempt whose response carried usage counts, retried
	// (its own append) or not (DESIGN §21½.9).
	appendAll(t, s, id, []eventlog.Event{
		{Data: &eventlog.StepStarted{StepID: "m7", StepKind: eventlog.StepLLM, Target: "model", Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		{Data: &eventlog.StepFailed{StepID: "m7", Error: "HTTP 503", RetryAt: time.Unix(1, 0).UTC(), Tokens: eventlog.Tokens{Input: 40}}},
	})
	wantTokens(t, s, id, eventlog.Tokens{Input: 61, Output: 108}, "after a failed attempt that carried usage")
	appendAll(t, s, id, append(llmStep("m6", eventlog.Tokens{Input: 2, Output: 2}),
		eventlog.Event{Data: &eventlog.ExecutionCompleted{Output: []byte(`"done"`)}}))
	wantTokens(t, s, id, eventlog.Tokens{Input: 63, Output: 110}, "after the execution ended")

	// The events carry what Info sums.
	var sum eventlog.Tokens
	for _, ev := range readEvents(t, s, id) {
		sum = sum.Plus(eventlog.TokensOf(ev.Data))
	}
	if sum != (eventlog.Tokens{Input: 63, Output: 110}) {
		t.Errorf("the lineage's step.succeeded and step.failed events carry %+v tokens, want 63+110", sum)
	}
}

// llmStep is an llm step that succeeded reporting tokens.
func llmStep(step string, tokens eventlog.Tokens) []eventlog.Event {
	return []eventlog.Event{
		{Data: &eventlog.StepStarted{StepID: step, StepKind: eventlog.StepLLM, Target: "model", Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		{Data: &eventlog.StepSucceeded{StepID: step, Result: []byte(`"reply"`), Tokens: tokens}},
	}
}

// wantTokens checks id's Tokens in Info and in List.
func wantTokens(t *testing.T, s eventlog.Log, id eventlog.ID, want eventlog.Tokens, when string) {
	t.Helper()
	info, err := s.Info(t.Context(), id)
	if err != nil {
		t.Fatalf("Info(%s) %s: %v", id, when, err)
	}
	if info.Tokens != want {
		t.Errorf("Info(%s).Tokens %s = %+v, want %+v", id, when, info.Tokens, want)
	}
	found := false
	for _, in := range listAll(t, s, eventlog.Filter{}) {
		if in.ID == id {
			found = true
			if in.Tokens != want {
				t.Errorf("List's %s Tokens %s = %+v, want %+v", id, when, in.Tokens, want)
			}
		}
	}
	if !found {
		t.Errorf("List %s does not yield %s", when, id)
	}
}
