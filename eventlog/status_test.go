package eventlog_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
)

// The status codes are stored by stores and the names are CLI and JSON
// words: both are pinned.
func TestStatusPinned(t *testing.T) {
	want := []string{"", "pending", "running", "waiting", "completed", "failed", "cancelled"}
	for code, name := range want {
		s := eventlog.Status(code)
		if s.String() != name {
			t.Errorf("Status(%d) = %q, pinned %q", code, s, name)
		}
		if code == 0 {
			continue
		}
		if !s.Valid() {
			t.Errorf("%s not Valid", s)
		}
		if p, err := eventlog.ParseStatus(name); err != nil || p != s {
			t.Errorf("ParseStatus(%q) = %v, %v", name, p, err)
		}
		b, err := json.Marshal(s)
		if err != nil || string(b) != `"`+name+`"` {
			t.Errorf("json.Marshal(%s) = %s, %v", s, b, err)
		}
		var back eventlog.Status
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Errorf("json.Unmarshal(%s) = %v, %v", b, back, err)
		}
		if s.Terminal() != (code >= 4) {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
	if len(eventlog.Statuses()) != 6 {
		t.Errorf("Statuses() = %v", eventlog.Statuses())
	}
	for _, bad := range []string{"", "Running", "unfinished", "created"} {
		if _, err := eventlog.ParseStatus(bad); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("ParseStatus(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if s := eventlog.Status(7); s.Valid() || s.String() != "status(7)" {
		t.Errorf("Status(7): Valid %v String %q", s.Valid(), s)
	}
	if _, err := json.Marshal(eventlog.Status(9)); err == nil {
		t.Error("an unknown status marshals")
	}
}

// TestStatusFold checks the status fold of DESIGN §9 and §8½ event by
// event: what each event makes the status, the wake time and deadline.
func TestStatusFold(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	wake := t0.Add(time.Hour)
	dl := t0.Add(24 * time.Hour)
	dl2 := t0.Add(48 * time.Hour)
	type step struct {
		p        eventlog.Payload
		status   eventlog.Status
		wake     time.Time
		deadline time.Time
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"created, run, completed", []step{
			{&eventlog.ExecutionCreated{Agent: "a", Deadline: dl}, eventlog.StatusPending, time.Time{}, dl},
			{&eventlog.DispatchStarted{Dispatch: 1}, eventlog.StatusRunning, time.Time{}, dl},
			{&eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Idempotency: eventlog.SafeToRetry, Attempt: 1}, eventlog.StatusRunning, time.Time{}, dl},
			{&eventlog.ExecutionCancelled{}, eventlog.StatusCancelled, time.Time{}, dl},
		}},
		{"approval waits until decided", []step{
			{&eventlog.ExecutionCreated{Agent: "a"}, eventlog.StatusPending, time.Time{}, time.Time{}},
			{&eventlog.DispatchStarted{Dispatch: 1}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.ApprovalRequested{StepID: "x", StepKind: eventlog.StepTool}, eventlog.StatusWaiting, time.Time{}, time.Time{}},
			{&eventlog.ApprovalRequested{StepID: "y", StepKind: eventlog.StepTool}, eventlog.StatusWaiting, time.Time{}, time.Time{}},
			{&eventlog.ApprovalGranted{StepID: "x"}, eventlog.StatusWaiting, time.Time{}, time.Time{}},
			{&eventlog.ApprovalRejected{StepID: "y"}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.ExecutionCompleted{}, eventlog.StatusCompleted, time.Time{}, time.Time{}},
		}},
		{"parked until the next dispatch", []step{
			{&eventlog.ExecutionCreated{Agent: "a"}, eventlog.StatusPending, time.Time{}, time.Time{}},
			{&eventlog.DispatchStarted{Dispatch: 1}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.TimerStarted{TimerID: "t", WakeAt: wake}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.DispatchParked{WakeAt: wake, Reason: eventlog.ParkTimer}, eventlog.StatusWaiting, wake, time.Time{}},
			{&eventlog.CancelRequested{Reason: "r"}, eventlog.StatusWaiting, wake, time.Time{}},
			{&eventlog.DispatchStarted{Dispatch: 2}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.TimerFired{TimerID: "t"}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.ExecutionFailed{Code: eventlog.FailHandler}, eventlog.StatusFailed, time.Time{}, time.Time{}},
		}},
		{"a decision wakes a parked execution at its time", []step{
			{&eventlog.ExecutionCreated{Agent: "a"}, eventlog.StatusPending, time.Time{}, time.Time{}},
			{&eventlog.DispatchStarted{Dispatch: 1}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.ApprovalRequested{StepID: "x", StepKind: eventlog.StepTool}, eventlog.StatusWaiting, time.Time{}, time.Time{}},
			{&eventlog.ApprovalRequested{StepID: "y", StepKind: eventlog.StepTool}, eventlog.StatusWaiting, time.Time{}, time.Time{}},
			{&eventlog.DispatchParked{WakeAt: wake, Reason: eventlog.ParkApproval}, eventlog.StatusWaiting, wake, time.Time{}},
			// Event i has Time t0+i s: the decision at seq 6 wakes it at t0+5s.
			{&eventlog.ApprovalGranted{StepID: "x"}, eventlog.StatusWaiting, t0.Add(5 * time.Second), time.Time{}},
			{&eventlog.ApprovalRejected{StepID: "y"}, eventlog.StatusWaiting, t0.Add(5 * time.Second), time.Time{}},
			{&eventlog.DispatchStarted{Dispatch: 2}, eventlog.StatusRunning, time.Time{}, time.Time{}},
		}},
		{"a fork's status is its own", []step{
			{&eventlog.ExecutionCreated{Agent: "a", Deadline: dl}, eventlog.StatusPending, time.Time{}, dl},
			{&eventlog.DispatchStarted{Dispatch: 1}, eventlog.StatusRunning, time.Time{}, dl},
			{&eventlog.ApprovalRequested{StepID: "x", StepKind: eventlog.StepTool}, eventlog.StatusWaiting, time.Time{}, dl},
			{&eventlog.DispatchParked{Reason: eventlog.ParkApproval}, eventlog.StatusWaiting, time.Time{}, dl},
			{&eventlog.ForkCreated{Parent: sampleParent, At: 4}, eventlog.StatusPending, time.Time{}, time.Time{}},
			{&eventlog.DispatchStarted{Dispatch: 2}, eventlog.StatusRunning, time.Time{}, time.Time{}},
			{&eventlog.ExecutionCompleted{}, eventlog.StatusCompleted, time.Time{}, time.Time{}},
			{&eventlog.ForkCreated{Parent: sampleParent, At: 7, Deadline: dl2}, eventlog.StatusPending, time.Time{}, dl2},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s eventlog.StatusState
			for i, st := range c.steps {
				at := t0.Add(time.Duration(i) * time.Second)
				s.Apply(eventlog.Event{Seq: uint64(i + 1), Time: at, Data: st.p})
				if s.Status != st.status || !s.WakeAt.Equal(st.wake) || !s.Deadline.Equal(st.deadline) {
					t.Errorf("after %s: status %s wake %v deadline %v, want %s %v %v",
						st.p.Kind(), s.Status, s.WakeAt, s.Deadline, st.status, st.wake, st.deadline)
				}
				if s.Head != uint64(i+1) || !s.Updated.Equal(at) {
					t.Errorf("after %s: head %d updated %v, want %d %v", st.p.Kind(), s.Head, s.Updated, i+1, at)
				}
			}
		})
	}
}

// Folding a fork's own events from its fork.created gives the state the
// whole lineage gives: stores rely on it to keep a fork's status without
// reading its prefix.
func TestStatusFoldForkIsOwn(t *testing.T) {
	prefix := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a", Deadline: sampleWake},
		&eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.ApprovalRequested{StepID: "x", StepKind: eventlog.StepTool},
		&eventlog.DispatchParked{WakeAt: sampleWake, Reason: eventlog.ParkRetry},
		&eventlog.CancelRequested{},
	}
	own := []eventlog.Payload{
		&eventlog.ForkCreated{Parent: sampleParent, At: 5},
		&eventlog.DispatchStarted{Dispatch: 2},
	}
	var whole, part eventlog.StatusState
	for i, p := range append(prefix, own...) {
		ev := eventlog.Event{Seq: uint64(i + 1), Time: sampleTime, Data: p}
		whole.Apply(ev)
		if i >= len(prefix) {
			part.Apply(ev)
		}
	}
	if d := cmp.Diff(whole, part); d != "" {
		t.Errorf("own events fold differently (-whole +own):\n%s", d)
	}
	if whole.Status != eventlog.StatusRunning {
		t.Errorf("fork status %s, want running", whole.Status)
	}
}

// TestCheckAfterEnd: nothing follows a terminal event, neither in a later
// append nor in the same one; a terminal event may end an append.
func TestCheckAfterEnd(t *testing.T) {
	id := eventlog.NewID()
	done := eventlog.Event{Seq: 5, Data: &eventlog.ExecutionCompleted{Output: []byte(`1`)}}
	step := eventlog.Event{Seq: 6, Data: &eventlog.DispatchStarted{Dispatch: 2}}
	for _, c := range []struct {
		name   string
		st     eventlog.Status
		events []eventlog.Event
		ok     bool
	}{
		{"running, ends with the terminal event", eventlog.StatusRunning, []eventlog.Event{step, done}, true},
		{"running, one event", eventlog.StatusRunning, []eventlog.Event{step}, true},
		{"after completed", eventlog.StatusCompleted, []eventlog.Event{step}, false},
		{"after cancelled", eventlog.StatusCancelled, []eventlog.Event{step}, false},
		{"terminal then more in one append", eventlog.StatusRunning, []eventlog.Event{done, step}, false},
	} {
		err := eventlog.CheckAfterEnd(id, c.st, 4, c.events)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, eventlog.ErrInvalid)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestStatusFoldTokens: the status fold sums the Tokens of step.succeeded
// events, and fork.created starts the sum afresh (Info.Tokens is the own
// run's, DESIGN §16).
func TestStatusFoldTokens(t *testing.T) {
	var st eventlog.StatusState
	seq := uint64(0)
	apply := func(p eventlog.Payload) {
		seq++
		st.Apply(eventlog.Event{Seq: seq, Time: time.Unix(int64(seq), 0), Data: p})
	}
	apply(&eventlog.ExecutionCreated{Agent: "a"})
	apply(&eventlog.DispatchStarted{Dispatch: 1})
	apply(&eventlog.StepSucceeded{StepID: "m1", Tokens: eventlog.Tokens{Input: 10, Output: 5}})
	apply(&eventlog.StepSucceeded{StepID: "t1"})
	apply(&eventlog.StepSucceeded{StepID: "m2", Tokens: eventlog.Tokens{Input: 1, Output: 2}})
	if want := (eventlog.Tokens{Input: 11, Output: 7}); st.Tokens != want {
		t.Errorf("after three steps Tokens = %+v, want %+v", st.Tokens, want)
	}
	// A failed attempt's usage counts, retried or final (DESIGN §21½.9).
	apply(&eventlog.StepFailed{StepID: "m3", Error: "HTTP 500", RetryAt: time.Unix(100, 0), Tokens: eventlog.Tokens{Input: 20}})
	apply(&eventlog.StepFailed{StepID: "m3", Error: "stream broke", Tokens: eventlog.Tokens{Input: 30, Output: 1}})
	if want := (eventlog.Tokens{Input: 61, Output: 8}); st.Tokens != want {
		t.Errorf("after two failed attempts with usage Tokens = %+v, want %+v", st.Tokens, want)
	}
	apply(&eventlog.ForkCreated{})
	if st.Tokens != (eventlog.Tokens{}) {
		t.Errorf("after fork.created Tokens = %+v, want none (the own run's)", st.Tokens)
	}
	apply(&eventlog.StepSucceeded{StepID: "m3", Tokens: eventlog.Tokens{Input: 4}})
	apply(&eventlog.ExecutionCompleted{})
	if want := (eventlog.Tokens{Input: 4}); st.Tokens != want {
		t.Errorf("the fork's Tokens = %+v, want %+v (kept past the end)", st.Tokens, want)
	}
}
