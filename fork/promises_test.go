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

// TestDiffFailureMessages: two sides whose step failed with different
// errors differ in that step (Changed), and with the same error they are
// the Same: a failure's message is part of its outcome, as a success's
// result is.
func TestDiffFailureMessages(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	started := &eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepTool, Target: "t", Args: []byte(`{}`),
		Idempotency: eventlog.SafeToRetry, Attempt: 1}
	var evs []eventlog.Event
	for i, p := range []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a", Input: []byte(`"in"`)},
		&eventlog.DispatchStarted{Dispatch: 1},
		started,
		&eventlog.StepFailed{StepID: "s1", Error: "disk full"},
		&eventlog.ExecutionFailed{Code: "tool_failed", Error: "disk full"},
	} {
		evs = append(evs, eventlog.Event{Seq: uint64(i + 1), Time: epoch, Data: p})
	}
	root := writeRoot(t, s, evs)
	forkFailing := func(msg string) eventlog.ID {
		t.Helper()
		id, _, err := fork.Create(ctx, s, root, 2, epoch)
		if err != nil {
			t.Fatal(err)
		}
		own := []eventlog.Event{
			{Time: epoch, Data: &eventlog.DispatchStarted{Dispatch: 2}},
			{Time: epoch, Data: started},
			{Time: epoch, Data: &eventlog.StepFailed{StepID: "s1", Error: msg}},
			{Time: epoch, Data: &eventlog.ExecutionFailed{Code: "tool_failed", Error: msg}},
		}
		if _, err := s.Append(ctx, id, 3, own...); err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, c := range []struct {
		msg  string
		want fork.Change
	}{{"quota exceeded", fork.Changed}, {"disk full", fork.Same}} {
		f := forkFailing(c.msg)
		cmpn, err := fork.Diff(ctx, s, root, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmpn.Steps) != 1 || cmpn.Steps[0].StepID != "s1" {
			t.Fatalf("Diff steps = %+v, want s1 alone", cmpn.Steps)
		}
		d := cmpn.Steps[0]
		if d.Change != c.want || d.A == nil || d.B == nil || d.A.Error != "disk full" || d.B.Error != c.msg {
			t.Errorf("s1 failed with %q vs %q: change %s, A %+v, B %+v; want %s", "disk full", c.msg, d.Change, d.A, d.B, c.want)
		}
	}
}
