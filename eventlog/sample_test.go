package eventlog_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// sampleTime is the fixed time of every sample event: nanosecond precision,
// so a codec that drops digits fails.
var sampleTime = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// sampleParent is the fixed parent of the sample fork.created.
var sampleParent = mustParseID("0192f0c4-7b1a-7c3d-8e4f-0123456789ab")

func mustParseID(s string) eventlog.ID {
	id, err := eventlog.ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// fullEvents returns one event of every kind, in code order, with every
// field of its payload set to a non-zero value.
func fullEvents() []eventlog.Event {
	payloads := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "coder", Input: []byte(`{"task":"fix the bug"}`)},
		&eventlog.DispatchStarted{Dispatch: 3},
		&eventlog.StepStarted{
			StepID: "st-1", StepKind: eventlog.StepTool, Target: "write_file",
			Args: []byte{0x81, 0xa4, 'p', 'a', 't', 'h'}, Resources: []string{"db", "workspace"},
			Idempotency: eventlog.AtMostOnce, Attempt: 2,
		},
		&eventlog.StepSucceeded{StepID: "st-1", Result: []byte(`"wrote a.go"`)},
		&eventlog.StepFailed{StepID: "st-2", Error: "disk full", Indeterminate: true},
		&eventlog.StepCancelled{StepID: "st-3"},
		&eventlog.StepDenied{StepID: "st-4", StepKind: eventlog.StepLLM, Target: "gpt", Reason: "budget"},
		&eventlog.ResourceBound{
			Key: "workspace", DriverID: "dirfs.v1", Configuration: json.RawMessage(`{"root":"/w"}`),
			Binding: json.RawMessage(`{"dir":"/w/1"}`), From: "snap-7", EverySteps: 5,
			OnCompletion: true, CoverageReuse: true,
		},
		&eventlog.ResourceCaptured{Key: "workspace", Ref: "snap-8", Generation: 4, Reason: eventlog.CaptureSteps},
		&eventlog.ResourceCaptureFailed{Key: "workspace", Reason: eventlog.CaptureCompletion, Error: "quota"},
		&eventlog.ExecutionCompleted{Output: []byte(`{"answer":42}`)},
		&eventlog.ExecutionFailed{Error: "boom", Code: eventlog.FailCheckpointUnavailable},
		&eventlog.ForkCreated{Parent: sampleParent, At: 17, Selections: []eventlog.ForkSelection{
			{Key: "db", Ref: "db-3", CapturedAt: 12, Generation: 2, Covered: true},
			{Key: "workspace", Ref: "snap-8", CapturedAt: 9, Generation: 4, Covered: false},
		}},
	}
	evs := make([]eventlog.Event, len(payloads))
	for i, p := range payloads {
		evs[i] = eventlog.Event{Seq: uint64(i + 1), Time: sampleTime.Add(time.Duration(i) * time.Millisecond), Data: p}
	}
	return evs
}

// minimalEvents returns one event of every kind with only the fields its
// invariants require, and a zero time.
func minimalEvents() []eventlog.Event {
	payloads := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a"},
		&eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepLocal, Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "s"},
		&eventlog.StepFailed{StepID: "s"},
		&eventlog.StepCancelled{StepID: "s"},
		&eventlog.StepDenied{StepID: "s", StepKind: eventlog.StepTool},
		&eventlog.ResourceBound{Key: "k", DriverID: "d", Binding: json.RawMessage(`null`), EverySteps: 1},
		&eventlog.ResourceCaptured{Key: "k", Ref: "r", Reason: eventlog.CaptureBaseline},
		&eventlog.ResourceCaptureFailed{Key: "k", Reason: eventlog.CaptureBaseline},
		&eventlog.ExecutionCompleted{},
		&eventlog.ExecutionFailed{Code: eventlog.FailHandler},
		&eventlog.ForkCreated{Parent: sampleParent, At: 1},
	}
	evs := make([]eventlog.Event, len(payloads))
	for i, p := range payloads {
		evs[i] = eventlog.Event{Seq: uint64(i + 1), Data: p}
	}
	return evs
}

// eventDiff compares events; nil and empty slices are the same value
// (omitempty fields decode as nil).
func eventDiff(want, got any) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

func mustRecord(ev eventlog.Event) []byte {
	rec, err := eventlog.AppendRecord(nil, ev)
	if err != nil {
		panic(fmt.Sprintf("AppendRecord(%s): %v", ev.Kind(), err))
	}
	return rec
}
