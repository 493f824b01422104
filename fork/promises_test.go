package fork_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
)

// TestOverrideOnlyFinalOutcome: an override replaces a step's final
// outcome only. A failed attempt that was retried later (step.failed with
// a RetryAt) is not one, nor is a step whose last attempt failed with a
// retry still to come; the final success of the retried step is. Refused
// forks write nothing.
func TestOverrideOnlyFinalOutcome(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	started := func(id string, attempt uint32) *eventlog.StepStarted {
		return &eventlog.StepStarted{StepID: id, StepKind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: attempt}
	}
	retry := epoch.Add(time.Minute)
	ps := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a", Input: []byte(`"in"`)},
		&eventlog.DispatchStarted{Dispatch: 1},
		started("s1", 1),
		&eventlog.StepFailed{StepID: "s1", Error: "flaky", RetryAt: retry}, // 4: retried below
		started("s1", 2),
		&eventlog.StepSucceeded{StepID: "s1", Result: []byte("1")}, // 6: s1's final outcome
		started("s2", 1),
		&eventlog.StepFailed{StepID: "s2", Error: "flaky", RetryAt: retry}, // 8: s2 still retrying
	}
	evs := make([]eventlog.Event, len(ps))
	for i, p := range ps {
		evs[i] = eventlog.Event{Seq: uint64(i + 1), Time: epoch, Data: p}
	}
	id := writeRoot(t, s, evs)
	before := count(t, s)
	for _, c := range []struct {
		name string
		step string
		at   uint64
		msg  string
	}{
		{"a failed attempt retried later", "s1", 4, "step s1 ended at seq 6"},
		{"a step still retrying", "s2", 8, "not succeeded or failed"},
	} {
		err := fork.CheckOverrides(ctx, s, id, c.at, []eventlog.StepOverride{{StepID: c.step, Result: []byte(`"x"`)}})
		if !errors.Is(err, eventlog.ErrInvalid) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: CheckOverrides = %v, want ErrInvalid saying %q", c.name, err, c.msg)
		}
		if _, _, err := fork.Create(ctx, s, id, c.at, epoch, fork.WithOverride(c.step, []byte(`"x"`))); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("%s: Create = %v, want ErrInvalid", c.name, err)
		}
	}
	if n := count(t, s); n != before {
		t.Fatalf("refused forks wrote %d events", n-before)
	}
	fid, _, err := fork.Create(ctx, s, id, 6, epoch, fork.WithOverride("s1", []byte(`"x"`)))
	if err != nil {
		t.Fatalf("override of s1's final outcome: %v", err)
	}
	got := readAll(t, s, fid)
	if len(got) != 7 {
		t.Fatalf("the fork holds %d events, want the 6 of the prefix and fork.created", len(got))
	}
	if fc, ok := got[6].Data.(*eventlog.ForkCreated); !ok || fc.At != 6 || len(fc.Overrides) != 1 || fc.Overrides[0].StepID != "s1" {
		t.Fatalf("fork's last event %s %+v, want fork.created at 6 overriding s1", got[6].Kind(), got[6].Data)
	}
}
