package eventlog_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

func TestEventKind(t *testing.T) {
	if k := (eventlog.Event{}).Kind(); k != 0 {
		t.Errorf("Kind of an event without payload = %v, want 0", k)
	}
	for _, ev := range fullEvents() {
		if ev.Kind() != ev.Data.Kind() || !ev.Kind().Valid() {
			t.Errorf("%T: Kind() = %v", ev.Data, ev.Kind())
		}
		if err := ev.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", ev.Kind(), err)
		}
	}
	if err := (eventlog.Event{Seq: 3}).Validate(); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("Validate(no payload) = %v, want ErrInvalid", err)
	}
}

// A CorruptionError names the execution and the seq, classifies as
// ErrCorrupt and unwraps to its cause (DESIGN §3).
func TestCorruptionError(t *testing.T) {
	id := sampleParent
	cause := fmt.Errorf("%w: checksum", eventlog.ErrCorrupt)
	var err error = fmt.Errorf("reading: %w", &eventlog.CorruptionError{Execution: id, Seq: 17, What: "event", Err: io.ErrUnexpectedEOF})
	if !errors.Is(err, eventlog.ErrCorrupt) {
		t.Error("errors.Is(ErrCorrupt) is false")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Error("the cause is not unwrapped")
	}
	var ce *eventlog.CorruptionError
	if !errors.As(err, &ce) || ce.Execution != id || ce.Seq != 17 {
		t.Errorf("errors.As = %+v", ce)
	}
	for _, want := range []string{"eventlog: ", id.String(), "seq 17", "event"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	noSeq := &eventlog.CorruptionError{Execution: id, What: "header", Err: cause}
	if s := noSeq.Error(); strings.Contains(s, "seq") || !strings.Contains(s, "header") || !strings.Contains(s, id.String()) {
		t.Errorf("header corruption reads %q", s)
	}
	if errors.Is(noSeq, eventlog.ErrNotFound) || errors.Is(noSeq, eventlog.ErrInvalid) {
		t.Error("CorruptionError classifies as another sentinel")
	}
}

// Every sentinel carries the package prefix and is distinct.
func TestSentinels(t *testing.T) {
	all := []error{eventlog.ErrNotFound, eventlog.ErrConflict, eventlog.ErrCorrupt, eventlog.ErrInvalid, eventlog.ErrClosed}
	for i, a := range all {
		if !strings.HasPrefix(a.Error(), "eventlog: ") {
			t.Errorf("%q lacks the package prefix", a)
		}
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v is %v", a, b)
			}
		}
	}
}

// TestEventStepID: step.* and approval.* events name their step; no other
// event does.
func TestEventStepID(t *testing.T) {
	for _, p := range []eventlog.Payload{
		&eventlog.StepStarted{StepID: "s"}, &eventlog.StepSucceeded{StepID: "s"}, &eventlog.StepFailed{StepID: "s"},
		&eventlog.StepCancelled{StepID: "s"}, &eventlog.StepDenied{StepID: "s"}, &eventlog.StepAbandoned{StepID: "s"},
		&eventlog.ApprovalRequested{StepID: "s"}, &eventlog.ApprovalGranted{StepID: "s"}, &eventlog.ApprovalRejected{StepID: "s"},
	} {
		if got := (eventlog.Event{Data: p}).StepID(); got != "s" {
			t.Errorf("%s: StepID %q", p.Kind(), got)
		}
	}
	for _, p := range []eventlog.Payload{&eventlog.DispatchStarted{Dispatch: 1}, &eventlog.TimerStarted{TimerID: "s"}, &eventlog.ExecutionCompleted{}, nil} {
		if got := (eventlog.Event{Data: p}).StepID(); got != "" {
			t.Errorf("%v: StepID %q, want none", p, got)
		}
	}
}
