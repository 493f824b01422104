package coverage_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
	"pgregory.net/rapid"
)

// genOpts says what a generated history may hold.
type genOpts struct {
	reuse *rapid.Generator[bool] // CoverageReuse of each resource.bound
	forks bool                   // fork.created events inside the lineage (not writable with Append)
}

var (
	genKeys  = []string{"a", "b", "c"}
	genSteps = []string{"s1", "s2", "s3", "s4", "s5"}
)

// genWake is the RetryAt and WakeAt of generated events.
var genWake = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// bodiless returns one event of each Part II and Part III kind that has no
// body.
func bodiless() []eventlog.Payload {
	return []eventlog.Payload{
		&eventlog.CancelRequested{Reason: "r"},
		&eventlog.DispatchParked{WakeAt: genWake, Reason: eventlog.ParkTimer},
		&eventlog.TimerStarted{TimerID: "t1", WakeAt: genWake},
		&eventlog.TimerFired{TimerID: "t1"},
		&eventlog.ApprovalRequested{StepID: "s1", StepKind: eventlog.StepTool, Target: "t"},
		&eventlog.ApprovalGranted{StepID: "s1"},
		&eventlog.ApprovalRejected{StepID: "s2"},
		&eventlog.MarkerRecorded{Name: "m"},
		&eventlog.ForkDiverged{Unconsumed: []string{"s1"}},
		&eventlog.MessageReceived{MessageID: "m1", Topic: "chat", Value: []byte(`"hi"`)},
		&eventlog.EventSet{Key: "progress", Value: []byte(`1`)},
		&eventlog.DispatchParked{Reason: eventlog.ParkMessage},
		&eventlog.StepDenied{StepID: "s3", StepKind: eventlog.StepTool, Target: "t", Reason: "r", RuleID: "r1", Code: eventlog.DenyBudget},
	}
}

// genHistory draws a root lineage: execution.created, then up to maxEvents events.
func genHistory(t *rapid.T, o genOpts, maxEvents int) []eventlog.Event {
	events := []eventlog.Event{{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "gen"}}}
	return genMore(t, events, o, rapid.IntRange(0, maxEvents).Draw(t, "events"))
}

// genMore draws n more events after events: binds, steps that start and
// land (or stay orphaned, or start again), captures of the current
// generation, failed captures, denials, dispatches and — with o.forks —
// fork.created with arbitrary selections. Every event is one the checkpoint
// index accepts.
func genMore(t *rapid.T, events []eventlog.Event, o genOpts, n int) []eventlog.Event {
	events = slices.Clip(events)
	add := func(p eventlog.Payload) {
		events = append(events, eventlog.Event{Seq: uint64(len(events)) + 1, Data: p})
	}
	actions := []string{"bind", "start", "start", "start", "land", "land", "land", "capture", "capture", "noise"}
	if o.forks {
		actions = append(actions, "fork")
	}
	for range n {
		bound := naiveKeys(events, len(events))
		switch rapid.SampledFrom(actions).Draw(t, "action") {
		case "bind":
			key := rapid.SampledFrom(genKeys).Draw(t, "key")
			from := rapid.SampledFrom([]string{"", "r"}).Draw(t, "from")
			if from != "" {
				from = fmt.Sprintf("bound-%d", len(events)+1)
			}
			add(&eventlog.ResourceBound{Key: key, DriverID: "gen", Binding: json.RawMessage(`{}`), From: from,
				EverySteps: 1, OnCompletion: true, CoverageReuse: o.reuse.Draw(t, "reuse")})
		case "start":
			var affects []string
			for _, k := range bound {
				if rapid.Bool().Draw(t, "affects "+k) {
					affects = append(affects, k)
				}
			}
			kind := rapid.SampledFrom([]eventlog.StepKind{eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM, eventlog.StepChild, eventlog.StepRecv}).Draw(t, "kind")
			var wake time.Time
			if kind == eventlog.StepRecv {
				// A recv step has no body: it affects nothing (DESIGN §21½.1).
				affects, wake = nil, genWake
			}
			add(&eventlog.StepStarted{StepID: rapid.SampledFrom(genSteps).Draw(t, "step"), StepKind: kind, Target: "t",
				Resources: affects, Idempotency: eventlog.SafeToRetry, Attempt: 1, WakeAt: wake})
		case "land":
			id := rapid.SampledFrom(genSteps).Draw(t, "step")
			switch rapid.IntRange(0, 5).Draw(t, "terminal") {
			case 0:
				add(&eventlog.StepSucceeded{StepID: id})
			case 1:
				add(&eventlog.StepFailed{StepID: id, Error: "e"})
			case 2:
				add(&eventlog.StepFailed{StepID: id, Error: "e", Indeterminate: true})
			case 3:
				add(&eventlog.StepFailed{StepID: id, Error: "e", RetryAt: genWake})
			case 4:
				add(&eventlog.StepAbandoned{StepID: id})
			default:
				add(&eventlog.StepCancelled{StepID: id})
			}
		case "capture":
			if len(bound) == 0 {
				continue
			}
			key := rapid.SampledFrom(bound).Draw(t, "key")
			add(&eventlog.ResourceCaptured{Key: key, Ref: fmt.Sprintf("cap-%d", len(events)+1),
				Generation: naiveGeneration(events, key, len(events)), Reason: eventlog.CaptureSteps})
		case "noise":
			switch rapid.IntRange(0, 3).Draw(t, "noise") {
			case 0:
				add(&eventlog.DispatchStarted{Dispatch: uint64(len(events))})
			case 3:
				// The Part II kinds without a body advance nothing (DESIGN §8½).
				add(rapid.SampledFrom(bodiless()).Draw(t, "bodiless"))
			case 1:
				add(&eventlog.StepDenied{StepID: rapid.SampledFrom(genSteps).Draw(t, "step"), StepKind: eventlog.StepTool, Target: "t", Reason: "no"})
			default:
				if len(bound) > 0 {
					add(&eventlog.ResourceCaptureFailed{Key: rapid.SampledFrom(bound).Draw(t, "key"), Reason: eventlog.CaptureSteps, Error: "e"})
				}
			}
		case "fork":
			at := uint64(len(events))
			fc := &eventlog.ForkCreated{Parent: eventlog.ID{'G'}, At: at}
			for _, k := range bound {
				s := eventlog.ForkSelection{Key: k, Generation: naiveGeneration(events, k, len(events)),
					Covered: rapid.Bool().Draw(t, "covered")}
				if s.Covered || rapid.Bool().Draw(t, "has ref") {
					s.Ref = fmt.Sprintf("sel-%d", at+1)
					s.CapturedAt = rapid.Uint64Range(1, at+20).Draw(t, "captured at")
				}
				fc.Selections = append(fc.Selections, s)
			}
			add(fc)
		}
	}
	return events
}
