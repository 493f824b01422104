package proptest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/policy"
	"github.com/google/go-cmp/cmp"
)

// lineage numbers payloads 1, 2, 3, … as the events of one lineage.
func lineage(payloads ...eventlog.Payload) []eventlog.Event {
	out := make([]eventlog.Event, len(payloads))
	for i, p := range payloads {
		out[i] = eventlog.Event{Seq: uint64(i + 1), Data: p}
	}
	return out
}

func bound(key, from string, every int, reuse bool) *eventlog.ResourceBound {
	return &eventlog.ResourceBound{Key: key, DriverID: "d", Binding: json.RawMessage(`{}`), From: from,
		EverySteps: every, OnCompletion: true, CoverageReuse: reuse}
}

func started(id string, kind eventlog.StepKind, affects ...string) *eventlog.StepStarted {
	return &eventlog.StepStarted{StepID: id, StepKind: kind, Target: id, Resources: affects,
		Idempotency: eventlog.SafeToRetry, Attempt: 1}
}

func captured(key, ref string, gen uint64, reason eventlog.CaptureReason) *eventlog.ResourceCaptured {
	return &eventlog.ResourceCaptured{Key: key, Ref: ref, Generation: gen, Reason: reason}
}

// The model's answers on hand-written lineages, one per rule of DESIGN §5,
// so that the oracle itself is pinned (a wrong model would make every
// property agree with a wrong fold).
func TestModelScenarios(t *testing.T) {
	sel := func(key, ref string, at, gen uint64, covered bool) Selection {
		return Selection{Key: key, Ref: ref, CapturedAt: at, Generation: gen, Covered: covered}
	}
	// A tool call affecting a, captured with its outcome, then an LLM call.
	base := func(reuse bool) []eventlog.Event {
		return lineage(
			&eventlog.ExecutionCreated{Agent: "x"},                                                     // 1
			&eventlog.DispatchStarted{Dispatch: 1},                                                     // 2
			bound("a", "", 1, reuse),                                                                   // 3 generation 1
			captured("a", "ck1", 1, eventlog.CaptureBaseline),                                          // 4
			started("s1", eventlog.StepTool, "a"),                                                      // 5 generation 2
			&eventlog.StepSucceeded{StepID: "s1"},                                                      // 6
			captured("a", "ck2", 2, eventlog.CaptureSteps),                                             // 7
			started("s2", eventlog.StepLLM),                                                            // 8 generation 3 unless CoverageReuse
			&eventlog.StepSucceeded{StepID: "s2"},                                                      // 9
			&eventlog.StepDenied{StepID: "s3", StepKind: eventlog.StepTool, Target: "t", Reason: "no"}, // 10
		)
	}
	forked := lineage(
		&eventlog.ExecutionCreated{Agent: "x"},            // 1
		&eventlog.DispatchStarted{Dispatch: 1},            // 2
		bound("a", "", 1, false),                          // 3
		captured("a", "ck1", 1, eventlog.CaptureBaseline), // 4
		started("s1", eventlog.StepTool, "a"),             // 5 generation 2, orphaned by the fork
		&eventlog.ForkCreated{Parent: eventlog.NewID(), At: 5, Selections: []eventlog.ForkSelection{sel("a", "ck1", 4, 2, false)}}, // 6
		&eventlog.DispatchStarted{Dispatch: 2}, // 7
		bound("a", "ck1", 1, false),            // 8 generation 3, covered by its From
		&eventlog.StepSucceeded{StepID: "s1"},  // 9 (not the re-run: lands nothing in a's new generation)
	)
	carried := lineage(
		&eventlog.ExecutionCreated{Agent: "x"}, // 1
		&eventlog.DispatchStarted{Dispatch: 1}, // 2
		bound("a", "", 1, false),               // 3
		started("s1", eventlog.StepTool, "a"),  // 4 generation 2
		&eventlog.StepSucceeded{StepID: "s1"},  // 5: the parent captured generation 2 at its seq 6
		&eventlog.ForkCreated{Parent: eventlog.NewID(), At: 5, Selections: []eventlog.ForkSelection{sel("a", "ck9", 6, 2, true)}}, // 6
	)
	for _, tc := range []struct {
		name   string
		events []eventlog.Event
		want   map[uint64]Selection // the selection of a at each seq
	}{
		{"every live step ends coverage", base(false), map[uint64]Selection{
			3:  sel("a", "ck1", 4, 1, true),  // the baseline after the binding covers it
			5:  sel("a", "ck1", 4, 2, false), // in flight: the state before the step
			6:  sel("a", "ck2", 7, 2, true),  // the capture committed with the outcome covers it
			8:  sel("a", "ck2", 7, 3, false), // an LLM call advances a resource without CoverageReuse
			9:  sel("a", "ck2", 7, 3, false),
			10: sel("a", "ck2", 7, 3, false),
		}},
		{"coverage reuse keeps coverage past LLM calls", base(true), map[uint64]Selection{
			5:  sel("a", "ck1", 4, 2, false),
			6:  sel("a", "ck2", 7, 2, true),
			8:  sel("a", "ck2", 7, 2, true),
			10: sel("a", "ck2", 7, 2, true),
		}},
		{"a fork keeps generations and rebinding starts a new one", forked, map[uint64]Selection{
			5: sel("a", "ck1", 4, 2, false),
			6: sel("a", "ck1", 4, 2, false), // still in flight in the fork
			7: sel("a", "ck1", 4, 2, false),
			8: sel("a", "ck1", 8, 3, true), // own binding: nothing in flight, From covers it
			9: sel("a", "ck1", 8, 3, true),
		}},
		{"a fork carries a covering capture from after its fork point", carried, map[uint64]Selection{
			3: sel("a", "", 0, 1, false), // no baseline: the initial environment
			4: sel("a", "", 0, 2, false),
			5: sel("a", "ck9", 6, 2, true),
			6: sel("a", "ck9", 6, 2, true),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for n, want := range tc.want {
				got := PointAt(tc.events, n)
				wantPt := Point{Seq: n, Covered: want.Covered, Resources: []Selection{want}}
				if diff := cmp.Diff(wantPt, got); diff != "" {
					t.Errorf("seq %d (-want +got):\n%s", n, diff)
				}
			}
		})
	}
	if got := PointAt(base(false), 2); !got.Covered || got.Resources != nil {
		t.Errorf("a point with no resource bound: %+v, want covered and no selections", got)
	}
}

// The model's counted calls (DESIGN §5 "Checkpoint policy"): tool calls and
// local steps that affect the resource and reached a terminal event count,
// once per attempt (an indeterminate failure of a cancelled step does not
// count again); LLM calls and denials do not; a capture and a binding reset
// the count, a failed capture does not.
func TestModelCountsCalls(t *testing.T) {
	events := lineage(
		&eventlog.ExecutionCreated{Agent: "x"},         // 1
		&eventlog.DispatchStarted{Dispatch: 1},         // 2
		bound("a", "", 2, false),                       // 3
		started("s1", eventlog.StepLocal, "a"),         // 4
		&eventlog.StepFailed{StepID: "s1", Error: "e"}, // 5 count 1
		started("s2", eventlog.StepLLM),                // 6
		&eventlog.StepSucceeded{StepID: "s2"},          // 7 LLM: no count
		&eventlog.StepDenied{StepID: "s3", StepKind: eventlog.StepTool, Target: "t", Reason: "no"}, // 8
		started("s4", eventlog.StepTool),                                                     // 9 affects nothing
		&eventlog.StepCancelled{StepID: "s4"},                                                // 10
		started("s5", eventlog.StepTool, "a"),                                                // 11
		&eventlog.StepCancelled{StepID: "s5"},                                                // 12 count 2: due
		&eventlog.ResourceCaptureFailed{Key: "a", Reason: eventlog.CaptureSteps, Error: "e"}, // 13 still due
		&eventlog.StepFailed{StepID: "s5", Error: "e", Indeterminate: true},                  // 14 a later dispatch resolves it: counted already
		captured("a", "ck1", 4, eventlog.CaptureCompletion),                                  // 15 reset
	)
	want := map[uint64]int{3: 0, 5: 1, 7: 1, 8: 1, 10: 1, 12: 2, 13: 2, 14: 2, 15: 0}
	for n, count := range want {
		if got := CountSince(events, n, "a"); got != count {
			t.Errorf("after seq %d: count %d, want %d", n, got, count)
		}
		if got := Due(events, n, "a"); got != (count >= 2) {
			t.Errorf("after seq %d: due %v, want %v", n, got, count >= 2)
		}
	}
	if got := CountedFor(events, 7); got != nil {
		t.Errorf("an LLM call counts for %v", got)
	}
}

// DESIGN §8.5, regression: the generator found that "a fork of a fork at M
// equals a fork of the original at M" holds only against the original as it
// stood when the fork was made. Here E binds a resource, runs a call that
// makes no capture due (EverySteps 5), and is forked at its head while it
// is still running; E then completes with a completion capture, which
// covers the shared points in E's log but not in the fork's, whose
// fork.created recorded the selection as uncovered.
func TestForkOfRunningExecutionKnowsItsCapturesAsOfTheFork(t *testing.T) {
	ctx := context.Background()
	st, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, err := st.Create(ctx, &eventlog.ExecutionCreated{Agent: "x"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(p eventlog.Payload) eventlog.Event { return eventlog.Event{Data: p} }
	head, err := st.Append(ctx, id, 1,
		ev(&eventlog.DispatchStarted{Dispatch: 1}),
		ev(bound("a", "", 5, false)),
		ev(captured("a", "ck1", 1, eventlog.CaptureBaseline)),
		ev(started("s1", eventlog.StepTool, "a")),
		ev(&eventlog.StepSucceeded{StepID: "s1"}), // seq 6: generation 2, uncovered
	)
	if err != nil {
		t.Fatal(err)
	}
	f, planF, err := fork.Create(ctx, st, id, head, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if planF.Covered {
		t.Fatalf("fork of the running execution at %d is covered: %+v", head, planF)
	}
	if _, err := st.Append(ctx, id, head,
		ev(captured("a", "ck2", 2, eventlog.CaptureCompletion)),
		ev(&eventlog.ExecutionCompleted{}),
	); err != nil {
		t.Fatal(err)
	}
	ofOriginal, err := fork.PlanFromIndex(ctx, st, id, head)
	if err != nil {
		t.Fatal(err)
	}
	ofFork, err := fork.PlanFromIndex(ctx, st, f, head)
	if err != nil {
		t.Fatal(err)
	}
	if !ofOriginal.Covered || ofOriginal.Selections[0].Ref != "ck2" {
		t.Errorf("original at %d after its completion capture: %+v, want covered by ck2", head, ofOriginal)
	}
	if diff := cmp.Diff(planPoint(planF), planPoint(ofFork)); diff != "" {
		t.Errorf("the fork at %d plans differently from its original when it was made (-then +fork):\n%s", head, diff)
	}
}

// DESIGN §8.4, regression (shrunk by TestPolicyCounterAgreesWithModel): an
// at_most_once step cancelled in one dispatch and failed as indeterminate
// when the next dispatch reaches it again (DESIGN §4) counts once, at its
// cancellation (DESIGN §5: each started attempt counts once, at its first
// terminal event), in policy.Counter and in the model alike.
func TestCounterCountsCancelledThenIndeterminate(t *testing.T) {
	amo := func(id string, affects ...string) *eventlog.StepStarted {
		st := started(id, eventlog.StepLocal, affects...)
		st.Idempotency = eventlog.AtMostOnce
		return st
	}
	events := lineage(
		&eventlog.ExecutionCreated{Agent: "x"},            // 1
		&eventlog.DispatchStarted{Dispatch: 1},            // 2
		bound("b", "", 3, false),                          // 3
		captured("b", "ck6", 1, eventlog.CaptureBaseline), // 4
		amo("s5"),                                         // 5
		&eventlog.StepCancelled{StepID: "s5"},             // 6
		amo("s6", "b"),                                    // 7
		&eventlog.StepCancelled{StepID: "s6"},             // 8 count 1
		&eventlog.DispatchStarted{Dispatch: 2},            // 9
		bound("a", "", 1, false),                          // 10
		captured("a", "ck8", 1, eventlog.CaptureBaseline), // 11
		&eventlog.StepFailed{StepID: "s5", Error: "indeterminate", Indeterminate: true}, // 12
		&eventlog.StepFailed{StepID: "s6", Error: "indeterminate", Indeterminate: true}, // 13 still count 1
	)
	c := policy.NewCounter()
	for i, ev := range events {
		n := uint64(i + 1)
		if err := c.Apply(ev); err != nil {
			t.Fatalf("Apply(%d): %v", n, err)
		}
		for _, key := range []string{"a", "b"} {
			if got, want := c.Count(key), CountSince(events, n, key); got != want {
				t.Errorf("after seq %d: Count(%s) = %d, the model says %d", n, key, got, want)
			}
		}
	}
	if got := c.Count("b"); got != 1 {
		t.Errorf("Count(b) = %d at the end, want 1", got)
	}
}

// The policy checker places a park capture (DESIGN §15½.8): it belongs to
// the run of captures that dispatch.parked ends, and nowhere else.
func TestPolicyParkCaptures(t *testing.T) {
	prefix := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a"}, &eventlog.DispatchStarted{Dispatch: 1},
		bound("a", "", 5, false), captured("a", "ck0", 1, eventlog.CaptureBaseline),
		started("s1", eventlog.StepTool, "a"), &eventlog.StepSucceeded{StepID: "s1"},
	}
	parked := lineage(append(slices.Clone(prefix), captured("a", "ck1", 2, eventlog.CapturePark),
		&eventlog.DispatchParked{Reason: eventlog.ParkTimer})...)
	if seq, err := capturesFollowPolicy(parked, 0); err != nil {
		t.Fatalf("park capture before dispatch.parked refused at seq %d: %v", seq, err)
	}
	completed := lineage(append(slices.Clone(prefix), captured("a", "ck1", 2, eventlog.CapturePark),
		&eventlog.ExecutionCompleted{})...)
	if seq, err := capturesFollowPolicy(completed, 0); err == nil || seq != 7 {
		t.Fatalf("park capture before execution.completed: seq %d, %v; want refused at seq 7", seq, err)
	}
}
