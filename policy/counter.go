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
// A counted call for resource R is an attempt — one step.started — of a
// tool call, local step or child step that lists R among its Resources,
// counted at its first terminal event: step.succeeded, step.failed (an
// indeterminate failure of an orphan too, and a failed attempt that will be
// retried, step.failed with RetryAt), step.cancelled or step.abandoned
// (DESIGN §8½, §15). A later terminal event of the same attempt (the
// indeterminate step.failed of an at_most_once step that was cancelled in an
// earlier dispatch, or its step.abandoned) is not counted again. LLM calls,
// denied calls (which have no step.started) and replayed calls (which append
// nothing) never count.
//
// resource.captured of R and every resource.bound of R reset R's count to
// 0; resource.capture_failed does not, so the next counted call finds the
// capture still due. fork.created changes nothing: a fork continues its
// parent's lineage and its counts.
//
// A Counter is not safe for concurrent use.
type Counter struct {
	// started holds every StepID with a step.started, so that a terminal
	// event without one is refused; nil when startedBy answers instead.
	started map[string]struct{}
	// startedBy, when set, says whether a StepID has had a step.started
	// (see [NewCounterOver]).
	startedBy func(stepID string) bool
	// pending holds, for each step whose newest attempt affects some key
	// and has not reached a terminal event yet, the keys that event will
	// count for: sorted and unique. A step that affects nothing, an LLM
	// call and a landed attempt have no entry, so the Counter's state
	// beyond started is O(steps in flight).
	pending  map[string][]string
	counts   map[string]int         // counted calls per key since its reset
	policies map[string]Checkpoints // recorded policy per key
}

// NewCounter returns a Counter for a lineage with no events yet.
func NewCounter() *Counter {
	return &Counter{
		started:  make(map[string]struct{}),
		pending:  make(map[string][]string),
		counts:   make(map[string]int),
		policies: make(map[string]Checkpoints),
	}
}

// NewCounterOver returns a Counter for a lineage with no events yet that
// keeps no set of started steps of its own: started reports whether a
// step.started of stepID has been applied, at the time a terminal event of
// stepID is. A caller that already folds the lineage into a replay.State
// passes its Started method (applying each event to the State first), and the Counter's state is then O(keys and steps in
// flight) instead of O(steps). started must not be nil.
func NewCounterOver(started func(stepID string) bool) *Counter {
	c := NewCounter()
	c.started, c.startedBy = nil, started
	return c
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
		if c.startedBy == nil {
			c.started[p.StepID] = struct{}{}
		}
		counted := p.StepKind == eventlog.StepTool || p.StepKind == eventlog.StepLocal || p.StepKind == eventlog.StepChild
		if counted && len(p.Resources) > 0 {
			c.pending[p.StepID] = slices.Compact(slices.Sorted(slices.Values(p.Resources)))
		} else {
			delete(c.pending, p.StepID)
		}
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

// land counts the terminal event ev of step stepID if it is the first one
// of the step's newest attempt.
func (c *Counter) land(ev eventlog.Event, stepID string, indeterminate bool) error {
	if !c.hasStarted(stepID) {
		if indeterminate {
			return nil
		}
		return fmt.Errorf("policy: seq %d: %s of step %q, which has no step.started: %w",
			ev.Seq, ev.Kind(), stepID, eventlog.ErrInvalid)
	}
	for _, k := range c.counting(stepID) {
		c.counts[k]++
	}
	delete(c.pending, stepID)
	return nil
}

// hasStarted reports whether step stepID has had a step.started.
func (c *Counter) hasStarted(stepID string) bool {
	if c.startedBy != nil {
		return c.startedBy(stepID)
	}
	_, ok := c.started[stepID]
	return ok
}

// counting returns the keys that a terminal event of step stepID counts
// for now: those of its newest step.started, or none if that attempt has
// already landed (or stepID never started, or is an LLM call).
func (c *Counter) counting(stepID string) []string { return c.pending[stepID] }

// Count returns the number of counted calls for key since its last
// successful capture or its newest resource.bound (0 for a key never bound
// or never affected).
func (c *Counter) Count(key string) int { return c.counts[key] }

// Due reports whether a capture of key is due: key is bound and Count(key)
// has reached the EverySteps recorded in key's newest resource.bound.
func (c *Counter) Due(key string) bool { return c.due(key, c.counts[key]) }

// DueAfter returns the keys, sorted, for which a capture is due once a
// terminal event of step stepID is applied — before it is: the keys whose
// Due would then be true among those the terminal event counts for. It is
// nil when the event counts for nothing (an LLM call, an attempt that has
// already landed, a step with no step.started). The SDK asks it to decide
// which captures to commit with a step's outcome (DESIGN §5).
func (c *Counter) DueAfter(stepID string) []string {
	var out []string
	for _, k := range c.counting(stepID) {
		if c.due(k, c.counts[k]+1) {
			out = append(out, k)
		}
	}
	return out
}

// due is the rule of DESIGN §5: a capture of key is due when key is bound
// and count has reached its recorded EverySteps.
func (c *Counter) due(key string, count int) bool {
	p, ok := c.policies[key]
	return ok && count >= p.EverySteps
}

// Policy returns the checkpoint policy recorded in key's newest
// resource.bound in the lineage, and false if key was never bound.
func (c *Counter) Policy(key string) (Checkpoints, bool) {
	p, ok := c.policies[key]
	return p, ok
}
