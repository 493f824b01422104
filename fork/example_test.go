package fork_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
)

// Fork an execution at the step.started of a write_file: the point is in
// flight, so the fork is uncovered and restores the baseline; its lineage is
// the parent's events 1..4 and its own fork.created.
func ExampleCreate() {
	ctx := context.Background()
	log, err := pebblestore.Open("") // in memory
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close()
	id, _ := log.Create(ctx, &eventlog.ExecutionCreated{Agent: "coder"}, time.Time{})
	_, err = log.Append(ctx, id, 1,
		eventlog.Event{Data: &eventlog.ResourceBound{Key: "workspace", DriverID: "dirfs", Binding: json.RawMessage(`{}`), EverySteps: 1, OnCompletion: true}},
		eventlog.Event{Data: &eventlog.ResourceCaptured{Key: "workspace", Ref: "snap-1", Generation: 1, Reason: eventlog.CaptureBaseline}},
		eventlog.Event{Data: &eventlog.StepStarted{StepID: "w1", StepKind: eventlog.StepTool, Target: "write_file",
			Resources: []string{"workspace"}, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		eventlog.Event{Data: &eventlog.StepSucceeded{StepID: "w1"}},
		eventlog.Event{Data: &eventlog.ResourceCaptured{Key: "workspace", Ref: "snap-2", Generation: 2, Reason: eventlog.CaptureSteps}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, at := range []uint64{4, 5} {
		forkID, plan, err := fork.Create(ctx, log, id, at, time.Time{})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("fork at %d: covered=%t %+v\n", at, plan.Covered, plan.Selections)
		for ev, err := range log.Events(ctx, forkID, at) {
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("  %d %s\n", ev.Seq, ev.Kind())
		}
	}
	// Output:
	// fork at 4: covered=false [{Key:workspace Ref:snap-1 CapturedAt:3 Generation:2 Covered:false}]
	//   4 step.started
	//   5 fork.created
	// fork at 5: covered=true [{Key:workspace Ref:snap-2 CapturedAt:6 Generation:2 Covered:true}]
	//   5 step.succeeded
	//   6 fork.created
}
