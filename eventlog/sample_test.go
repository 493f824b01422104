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

// sampleTraceParent is the traceparent of the sample execution.created
// (the W3C specification's example).
const sampleTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"

// sampleWake is the fixed wake time, retry time and deadline of the sample
// events: nanosecond precision and a zone other than UTC (it decodes as the
// same instant in UTC).
var sampleWake = time.Date(2025, 3, 14, 16, 0, 0, 123456789, time.FixedZone("CET", 3600))

// fullEvents returns one event of every kind, in code order, with every
// field of its payload set to a non-zero value.
func fullEvents() []eventlog.Event {
	evs := fullEventsV2()
	ec := evs[0].Data.(*eventlog.ExecutionCreated)
	ec.Version, ec.Queue, ec.Priority = "v7", "default", -2
	ec.Budget = eventlog.Limits{MaxTokens: 100000, MaxLLMCalls: 50, MaxToolCalls: 200}
	ec.TraceParent = sampleTraceParent
	evs[2].Data = &eventlog.StepStarted{StepID: "st-1", StepKind: eventlog.StepRecv, Target: "chat",
		Args: []byte{0x81, 0xa5, 't', 'o', 'p', 'i', 'c'}, Idempotency: eventlog.SafeToRetry, Attempt: 2, WakeAt: sampleWake}
	ss := evs[3].Data.(*eventlog.StepSucceeded)
	ss.Tokens, ss.Truncated = eventlog.Tokens{Input: 1200, Output: 345}, true
	evs[4].Data.(*eventlog.StepFailed).Tokens = eventlog.Tokens{Input: 80, Output: 3}
	sd := evs[6].Data.(*eventlog.StepDenied)
	sd.RuleID, sd.Code = "llm-budget", eventlog.DenyBudget
	evs[7].Data.(*eventlog.ResourceBound).Portable = true
	fc := evs[12].Data.(*eventlog.ForkCreated)
	fc.Version = "v8"
	fc.Budget = eventlog.Limits{MaxTokens: 5000, MaxLLMCalls: 3, MaxToolCalls: 9}
	fc.Messages = []eventlog.Message{{MessageID: "m-1", Topic: "chat", Value: []byte(`"edited question"`), From: "alice"}}
	fc.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00"
	ar := evs[18].Data.(*eventlog.ApprovalRequested)
	ar.RuleID, ar.ExpiresAt, ar.Approvers, ar.Message = "review-rm", sampleWake, []string{"bob", "carol"}, "please check"
	for _, p := range []eventlog.Payload{
		&eventlog.MessageReceived{MessageID: "m-2", Topic: "chat", Value: []byte(`{"text":"hello"}`), From: "bob"},
		&eventlog.EventSet{Key: "progress", Value: []byte(`0.5`)},
		&eventlog.ChildEnded{StepID: "st-9"},
	} {
		i := len(evs)
		evs = append(evs, eventlog.Event{Seq: uint64(i + 1), Time: sampleTime.Add(time.Duration(i) * time.Millisecond), Data: p})
	}
	return evs
}

// fullEventsV2 returns one event of every kind of format version 2, in code
// order, with every field of format version 2 set to a non-zero value: the
// events of testdata/records_v2.golden, written by the version 2 encoder.
func fullEventsV2() []eventlog.Event {
	evs := fullEventsV1()
	evs[0].Data.(*eventlog.ExecutionCreated).Deadline = sampleWake
	evs[0].Data.(*eventlog.ExecutionCreated).Key = "order-42"
	evs[1].Data.(*eventlog.DispatchStarted).Owner = "host-a/7"
	evs[1].Data.(*eventlog.DispatchStarted).Epoch = 9
	evs[4].Data = &eventlog.StepFailed{StepID: "st-2", Error: "rate limited", RetryAt: sampleWake}
	fc := evs[12].Data.(*eventlog.ForkCreated)
	fc.Input = []byte(`{"task":"fix it differently"}`)
	fc.Overrides = []eventlog.StepOverride{{StepID: "st-1", Result: []byte(`"edited"`)}, {StepID: "st-9", Result: []byte(`1`)}}
	fc.Deadline = sampleWake
	payloads := []eventlog.Payload{
		&eventlog.CancelRequested{Reason: "user asked", By: "alice"},
		&eventlog.ExecutionCancelled{Reason: "user asked"},
		&eventlog.DispatchParked{WakeAt: sampleWake, Reason: eventlog.ParkTimer},
		&eventlog.TimerStarted{TimerID: "tm-1", WakeAt: sampleWake},
		&eventlog.TimerFired{TimerID: "tm-1"},
		&eventlog.ApprovalRequested{StepID: "st-5", StepKind: eventlog.StepChild, Target: "reviewer",
			Args: []byte{0x81, 0xa2, 'p', 'r'}, Reason: "at_most_once in a fork"},
		&eventlog.ApprovalGranted{StepID: "st-5", By: "bob", Note: "looks fine"},
		&eventlog.ApprovalRejected{StepID: "st-6", By: "carol", Note: "too risky"},
		&eventlog.MarkerRecorded{Name: "use-v2-prompt"},
		&eventlog.StepAbandoned{StepID: "st-7"},
		&eventlog.ForkDiverged{Unconsumed: []string{"st-8", "st-9"}},
	}
	for _, p := range payloads {
		i := len(evs)
		evs = append(evs, eventlog.Event{Seq: uint64(i + 1), Time: sampleTime.Add(time.Duration(i) * time.Millisecond), Data: p})
	}
	return evs
}

// fullEventsV1 returns one event of every kind of format version 1, in code
// order, with every field of format version 1 set to a non-zero value: the
// events of testdata/records.golden, written by the version 1 encoder.
func fullEventsV1() []eventlog.Event {
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
		&eventlog.CancelRequested{},
		&eventlog.ExecutionCancelled{},
		&eventlog.DispatchParked{Reason: eventlog.ParkApproval},
		&eventlog.TimerStarted{TimerID: "t", WakeAt: sampleWake},
		&eventlog.TimerFired{TimerID: "t"},
		&eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool},
		&eventlog.ApprovalGranted{StepID: "s"},
		&eventlog.ApprovalRejected{StepID: "s"},
		&eventlog.MarkerRecorded{Name: "m"},
		&eventlog.StepAbandoned{StepID: "s"},
		&eventlog.ForkDiverged{Unconsumed: []string{"s"}},
		&eventlog.MessageReceived{MessageID: "m", Topic: "t"},
		&eventlog.EventSet{Key: "k"},
		&eventlog.ChildEnded{},
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

// testID is the execution the sample records belong to.
var testID = eventlog.ID{0x01, 0x8f, 0x3a, 0x5c, 0x00, 0x00, 0x70, 0x01, 0x80, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}

// mustRecord encodes ev as the event at ev.Seq of testID.
func mustRecord(ev eventlog.Event) []byte {
	rec, err := eventlog.AppendRecord(nil, testID, ev)
	if err != nil {
		panic(fmt.Sprintf("AppendRecord(%s): %v", ev.Kind(), err))
	}
	return rec
}
