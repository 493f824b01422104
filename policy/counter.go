package policy

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/forkline/forkline/eventlog"
)

// Counter is the counted-call rule of DESIGN §5 as a pure fold over the
// events of one lineage: for every resource key it counts the counted calls
// since the key's last successful capture or its own binding, and says when
// a capture is due. Apply the lineage's events in seq order from seq 1; the
// zero Counter is not usable, call [NewCounter].
//
// A counted call for resource R is a terminal event — step.succeeded,
// step.failed (an indeterminate failure of an orphan too, and a failed
// attempt that will be retried, step.failed with RetryAt), step.cancelled
// or step.abandoned (DESIGN §8½, §15) — of a tool call, local step or child
// step whose newest step.started lists R among its Resources. LLM calls, denied calls (which have no step.started) and
// replayed calls (which append nothing) never count.
//
// resource.captured of R and every resource.bound of R reset R's count to
// 0; resource.capture_failed does not, so the next counted call finds the
// capture still due. fork.created changes nothing: a fork continues its
// parent's lineage and its counts.
//
// A Counter is not safe for concurrent use.
type Counter struct {
	// affects holds, for the newest step.started of each StepID, the keys
	// it counts for: sorted and unique, nil for an LLM call.
	affects  map[string][]string
	counts   map[string]int         // counted calls per key since its reset
	policies map[string]Checkpoints // recorded policy per key
}

// NewCounter returns a Counter for a lineage with no events yet.
func NewCounter() *Counter {
	return &Counter{
		affects:  make(map[string][]string),
		counts:   make(map[string]int),
		policies: make(map[string]Checkpoints),
	}
}

// Apply folds the next event of the lineage into the counts. An event
// without a valid payload, or a terminal step event whose StepID has no
// earlier step.started (except an indeterminate step.failed, which then
// counts nothing), is an error wrapping [eventlog.ErrInvalid] that names the
// seq; the Counter is then unchanged.
func (c *Counter) Apply(ev eventlog.Event) error {
	if v := reflect.ValueOf(ev.Data); v.Kind() == reflect.Pointer && v.IsNil() {
		// eventlog's Validate dereferences a typed nil payload; refuse it first.
		return fmt.Errorf("policy: seq %d: %s event without payload: %w", ev.Seq, ev.Kind(), eventlog.ErrInvalid)
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("policy: seq %d: %w", ev.Seq, err)
	}
	switch p := ev.Data.(type) {
	case *eventlog.StepStarted:
		var keys []string
		if p.StepKind == eventlog.StepTool || p.StepKind == eventlog.StepLocal || p.StepKind == eventlog.StepChild {
			keys = slices.Compact(slices.Sorted(slices.Values(p.Resources)))
		}
		c.affects[p.StepID] = keys
	case *eventlog.StepSucceeded:
		return c.land(ev, p.StepID, false)
	case *eventlog.StepFailed:
		return c.land(ev, p.StepID, p.Indeterminate)
	case *eventlog.StepCancelled:
		return c.land(ev, p.StepID, false)
	case *eventlog.StepAbandoned:
		return c.land(ev, p.StepID, false)
	case *eventlog.ResourceBound:
		delete(c.counts, p.Key)
		c.policies[p.Key] = Checkpoints{EverySteps: p.EverySteps, OnCompletion: p.OnCompletion}
	case *eventlog.ResourceCaptured:
		delete(c.counts, p.Key)
	}
	return nil
}

// land counts the terminal event ev of step stepID.
func (c *Counter) land(ev eventlog.Event, stepID string, indeterminate bool) error {
	keys, ok := c.affects[stepID]
	if !ok {
		if indeterminate {
			return nil
		}
		return fmt.Errorf("policy: seq %d: %s of step %q, which has no step.started: %w",
			ev.Seq, ev.Kind(), stepID, eventlog.ErrInvalid)
	}
	for _, k := range keys {
		c.counts[k]++
	}
	return nil
}

// Count returns the number of counted calls for key since its last
// successful capture or its newest resource.bound (0 for a key never bound
// or never affected).
func (c *Counter) Count(key string) int { return c.counts[key] }

// Due reports whether a capture of key is due: key is bound and Count(key)
// has reached the EverySteps recorded in key's newest resource.bound.
func (c *Counter) Due(key string) bool {
	p, ok := c.policies[key]
	return ok && c.counts[key] >= p.EverySteps
}

// Policy returns the checkpoint policy recorded in key's newest
// resource.bound in the lineage, and false if key was never bound.
func (c *Counter) Policy(key string) (Checkpoints, bool) {
	p, ok := c.policies[key]
	return p, ok
}
