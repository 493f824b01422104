package eventlog_test

import (
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestStatusMessageWakes: a message received while the execution is
// parked makes it due at the message's time (DESIGN §18: Serve wakes it),
// and one received while it runs changes nothing.
func TestStatusMessageWakes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s eventlog.StatusState
	apply := func(seq uint64, at time.Time, p eventlog.Payload) {
		s.Apply(eventlog.Event{Seq: seq, Time: at, Data: p})
	}
	apply(1, t0, &eventlog.ExecutionCreated{Agent: "a"})
	apply(2, t0, &eventlog.DispatchStarted{Dispatch: 1})
	apply(3, t0, &eventlog.MessageReceived{MessageID: "m0", Topic: "in"})
	if s.Status != eventlog.StatusRunning || !s.WakeAt.IsZero() {
		t.Fatalf("running: %+v", s)
	}
	wake := t0.Add(time.Hour)
	apply(4, t0, &eventlog.DispatchParked{WakeAt: wake, Reason: eventlog.ParkMessage})
	if s.Status != eventlog.StatusWaiting || !s.WakeAt.Equal(wake) {
		t.Fatalf("parked: %+v", s)
	}
	at := t0.Add(time.Minute)
	apply(5, at, &eventlog.MessageReceived{MessageID: "m1", Topic: "in"})
	if s.Status != eventlog.StatusWaiting || !s.WakeAt.Equal(at) {
		t.Fatalf("after a message: status %s WakeAt %v, want waiting until %v", s.Status, s.WakeAt, at)
	}
}
