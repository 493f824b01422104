package policy

import (
	"fmt"

	"github.com/forkline/forkline/eventlog"
)

// Checkpoints is the checkpoint policy of one resource (DESIGN §5). It is
// recorded in the resource's resource.bound event, and the recorded policy
// wins over the options of later calls: the kernel preserves it across
// dispatches and forks.
type Checkpoints struct {
	// EverySteps is n: a capture is due after every n-th counted call that
	// affects the resource. It must be at least 1; the default is 1.
	EverySteps int
	// OnCompletion captures the resource when the handler returns normally
	// and the resource is uncovered. The default is true.
	OnCompletion bool
}

// DefaultCheckpoints returns the policy of a resource bound without options:
// a capture after every counted call and one at completion if uncovered.
func DefaultCheckpoints() Checkpoints {
	return Checkpoints{EverySteps: 1, OnCompletion: true}
}

// Validate reports whether c is a policy the kernel can record. An
// EverySteps below 1 is an error that wraps [eventlog.ErrInvalid] and says
// the value.
func (c Checkpoints) Validate() error {
	if c.EverySteps < 1 {
		return fmt.Errorf("policy: every steps %d, must be at least 1: %w", c.EverySteps, eventlog.ErrInvalid)
	}
	return nil
}
