package policy

import (
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/eventtext"
)

// DESIGN §8½: a retried attempt (step.failed with RetryAt) and an abandoned
// step are ended attempts and count like them; a child step counts like a
// tool call; the kinds without a body count nothing.
func TestCounterPartII(t *testing.T) {
	tests := []struct {
		name   string
		events string // after prelude
		want   string // counts(ws)
	}{
		{"a retried attempt counts", `
started s1 tool fetch affects=ws
failed s1 err=503 retry_at=2025-01-01T00:00:05Z`, "ws=1"},
		{"the retry counts as another attempt", `
started s1 tool fetch affects=ws
failed s1 err=503 retry_at=2025-01-01T00:00:05Z
started s1 tool fetch affects=ws attempt=2
succeeded s1`, "ws=2"},
		{"an abandoned step counts", `
started s1 tool write affects=ws
dispatch 2
abandoned s1`, "ws=1"},
		{"a child step counts", `
started c1 child reviewer affects=ws
succeeded c1`, "ws=1"},
		{"a child step that affects nothing counts nothing", `
started c1 child reviewer
succeeded c1`, "ws=0"},
		{"the kinds without a body count nothing", `
timer_started t1 wake=2025-01-01T00:01:00Z
parked timer wake=2025-01-01T00:01:00Z
dispatch 2
timer_fired t1
approval_requested s1 tool rm
granted s1
marker m
cancel_requested reason=stop`, "ws=0"},
		{"three ended attempts make a capture due", `
started s1 tool fetch affects=ws
failed s1 err=503 retry_at=2025-01-01T00:00:05Z
started s2 child writer affects=ws
succeeded s2
started s3 tool write affects=ws
dispatch 2
abandoned s3`, "ws=3 due"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := counts(fold(t, prelude+tc.events), "ws"); got != tc.want {
				t.Errorf("counts = %q, want %q", got, tc.want)
			}
		})
	}
}

// StepKind child is valid everywhere a step kind is checked (DESIGN §8½):
// a rule may name it, and a rule for "child" matches only child calls.
func TestRulesChildKind(t *testing.T) {
	rules, err := ParseRules("deny child:reviewer\nallow *:*")
	if err != nil {
		t.Fatalf("ParseRules(child): %v", err)
	}
	for _, c := range []struct {
		kind, target string
		allow        bool
	}{
		{"child", "reviewer", false},
		{"tool", "reviewer", true},
		{"child", "writer", true},
	} {
		if got := rules.Gate()(t.Context(), Call{Kind: c.kind, Target: c.target}); got.Allow != c.allow {
			t.Errorf("%s:%s: Allow = %v, want %v", c.kind, c.target, got.Allow, c.allow)
		}
	}
	if _, err := ParseRules("deny chil:*"); err == nil {
		t.Error("a kind pattern that matches no step kind parsed")
	}
}

// Part III's bodiless records count nothing (DESIGN §21½.1, §8½): a recv
// step, even one that lands, a received message and a published event.
func TestCounterPartIIIBodiless(t *testing.T) {
	c := fold(t, prelude)
	wake := time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC)
	seq := uint64(len(mustParse(t, prelude)))
	for _, p := range []eventlog.Payload{
		&eventlog.StepStarted{StepID: "r1", StepKind: eventlog.StepRecv, Target: "chat", Idempotency: eventlog.SafeToRetry, Attempt: 1, WakeAt: wake},
		&eventlog.MessageReceived{MessageID: "m1", Topic: "chat", Value: []byte(`"hi"`)},
		&eventlog.StepSucceeded{StepID: "r1", Result: []byte(`"hi"`)},
		&eventlog.EventSet{Key: "progress", Value: []byte(`1`)},
		&eventlog.StepStarted{StepID: "r2", StepKind: eventlog.StepRecv, Target: "chat", Idempotency: eventlog.SafeToRetry, Attempt: 1, WakeAt: wake},
		&eventlog.DispatchParked{Reason: eventlog.ParkMessage},
		&eventlog.DispatchStarted{Dispatch: 2},
		&eventlog.StepFailed{StepID: "r2", Error: "timeout"},
	} {
		seq++
		if err := c.Apply(eventlog.Event{Seq: seq, Data: p}); err != nil {
			t.Fatalf("Apply(%s): %v", p.Kind(), err)
		}
	}
	if got := counts(c, "ws"); got != "ws=0" {
		t.Errorf("counts = %q, want ws=0", got)
	}
}

func mustParse(t *testing.T, text string) []eventlog.Event {
	t.Helper()
	evs, err := eventtext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
