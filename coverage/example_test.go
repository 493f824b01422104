package coverage_test

import (
	"encoding/json"
	"fmt"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
)

// A workspace with a baseline, one write_file and the capture committed
// with its outcome: the bind and the baseline are covered by the baseline,
// the step.started is in flight (a fork there restores the baseline and runs
// the step again), and its outcome is covered by the capture after it.
func ExampleFold() {
	events := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "coder"},
		&eventlog.ResourceBound{Key: "workspace", DriverID: "dirfs", Binding: json.RawMessage(`{}`), EverySteps: 1, OnCompletion: true},
		&eventlog.ResourceCaptured{Key: "workspace", Ref: "snap-1", Generation: 1, Reason: eventlog.CaptureBaseline},
		&eventlog.StepStarted{StepID: "w1", StepKind: eventlog.StepTool, Target: "write_file",
			Resources: []string{"workspace"}, Idempotency: eventlog.SafeToRetry, Attempt: 1},
		&eventlog.StepSucceeded{StepID: "w1"},
		&eventlog.ResourceCaptured{Key: "workspace", Ref: "snap-2", Generation: 2, Reason: eventlog.CaptureSteps},
	}
	f := coverage.New()
	for i, p := range events {
		if err := f.Apply(eventlog.Event{Seq: uint64(i + 1), Data: p}); err != nil {
			fmt.Println(err)
			return
		}
	}
	for seq := uint64(1); seq <= f.Head(); seq++ {
		p, _ := f.Point(seq)
		fmt.Printf("%d covered=%t %+v\n", seq, p.Covered, p.Resources)
	}
	for _, w := range f.Windows() {
		fmt.Printf("%s %d..%d %s@%d\n", w.Key, w.From, w.To, w.Ref, w.CapturedAt)
	}
	// Output:
	// 1 covered=true []
	// 2 covered=true [{Key:workspace Ref:snap-1 CapturedAt:3 Generation:1 Covered:true}]
	// 3 covered=true [{Key:workspace Ref:snap-1 CapturedAt:3 Generation:1 Covered:true}]
	// 4 covered=false [{Key:workspace Ref:snap-1 CapturedAt:3 Generation:2 Covered:false}]
	// 5 covered=true [{Key:workspace Ref:snap-2 CapturedAt:6 Generation:2 Covered:true}]
	// 6 covered=true [{Key:workspace Ref:snap-2 CapturedAt:6 Generation:2 Covered:true}]
	// workspace 2..3 snap-1@3
	// workspace 5..6 snap-2@6
}
