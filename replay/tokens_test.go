package replay

import (
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestTokensFold: State.Tokens sums the Tokens of every step.succeeded
// of the lineage — a fork's prefix included, a step without usage adding
// nothing — and a fork's override, which ran nothing, adds none.
func TestTokensFold(t *testing.T) {
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	pay := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a"},
		&eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepLLM, Target: "m", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s1", Result: []byte(`{}`), Tokens: eventlog.Tokens{Input: 10, Output: 3}},
		&eventlog.StepStarted{StepID: "s2", StepKind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s2", Result: []byte(`1`)},
		&eventlog.StepStarted{StepID: "s3", StepKind: eventlog.StepLLM, Target: "m", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s3", Result: []byte(`{}`), Tokens: eventlog.Tokens{Input: 20, Output: 7}, Truncated: true},
		&eventlog.ForkCreated{Parent: eventlog.ID{1}, At: 8, Overrides: []eventlog.StepOverride{{StepID: "s1", Result: []byte(`{"x":1}`)}}},
		&eventlog.DispatchStarted{Dispatch: 2},
		&eventlog.StepStarted{StepID: "s4", StepKind: eventlog.StepLLM, Target: "m", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s4", Result: []byte(`{}`), Tokens: eventlog.Tokens{Input: 100, Output: 1}},
	}
	s := New()
	want := map[uint64]eventlog.Tokens{3: {}, 4: {Input: 10, Output: 3}, 8: {Input: 30, Output: 10}, 9: {Input: 30, Output: 10}, 12: {Input: 130, Output: 11}}
	for i, p := range pay {
		seq := uint64(i + 1)
		if err := s.Apply(eventlog.Event{Seq: seq, Time: at, Data: p}); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		if w, ok := want[seq]; ok && s.Tokens != w {
			t.Fatalf("tokens at seq %d = %+v, want %+v", seq, s.Tokens, w)
		}
	}
}
