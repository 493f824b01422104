package coverage

import (
	"fmt"
	"iter"

	"github.com/forkline/forkline/eventlog"
)

// InFlight is an at_most_once step in flight at a point: its step.started
// is at or before the point and its outcome (succeeded, failed, cancelled,
// abandoned, denied) is not. Its body may or may not have taken effect,
// and at_most_once forbids running it again, so a fork at the point sees
// the call as indeterminate (DESIGN §4, §8.6): its handler gets an error
// that says so, and the fork may end otherwise than its parent, whatever
// the coverage of its resources.
type InFlight struct {
	StepID    string
	Kind      eventlog.StepKind
	Target    string
	StartedAt uint64 // seq of its step.started
}

// attempt is one at_most_once attempt a fold saw: started at seq, ended at
// end (0 while in flight).
type attempt struct {
	step InFlight
	end  uint64
}

// attempts folds the at_most_once attempts of a lineage.
type attempts struct {
	all  []attempt
	open map[string]int // StepID → index in all of its attempt in flight
}

// apply folds one event.
func (a *attempts) apply(ev eventlog.Event) {
	var ended string
	switch p := ev.Data.(type) {
	case *eventlog.StepStarted:
		if p.Idempotency != eventlog.AtMostOnce {
			return
		}
		if a.open == nil {
			a.open = map[string]int{}
		}
		a.open[p.StepID] = len(a.all)
		a.all = append(a.all, attempt{step: InFlight{StepID: p.StepID, Kind: p.StepKind, Target: p.Target, StartedAt: ev.Seq}})
		return
	case *eventlog.StepSucceeded:
		ended = p.StepID
	case *eventlog.StepFailed:
		ended = p.StepID
	case *eventlog.StepCancelled:
		ended = p.StepID
	case *eventlog.StepAbandoned:
		ended = p.StepID
	case *eventlog.StepDenied:
		ended = p.StepID
	default:
		return
	}
	if i, ok := a.open[ended]; ok {
		a.all[i].end = ev.Seq
		delete(a.open, ended)
	}
}

// at returns the attempts in flight at seq, in the order they started; nil
// for none.
func (a *attempts) at(seq uint64) []InFlight {
	var out []InFlight
	for _, t := range a.all {
		if t.step.StartedAt <= seq && (t.end == 0 || t.end > seq) {
			out = append(out, t.step)
		}
	}
	return out
}

// InFlightAt returns the at_most_once steps in flight at seq at of the
// lineage events yields from seq 1 ([Point.InFlight]); it reads events up
// to at only. It is the pure fold [Fold.Point] uses, for a caller that
// asked [At], which reads only the index and leaves Point.InFlight nil. An
// error yielded by events is returned wrapped; a lineage shorter than at
// is an error wrapping [eventlog.ErrInvalid].
func InFlightAt(events iter.Seq2[eventlog.Event, error], at uint64) ([]InFlight, error) {
	var a attempts
	var head uint64
	for ev, err := range events {
		if err != nil {
			return nil, fmt.Errorf("coverage: in flight: after seq %d: %w", head, err)
		}
		if ev.Seq > at {
			break
		}
		a.apply(ev)
		head = ev.Seq
	}
	if head < at {
		return nil, fmt.Errorf("%w: coverage: in flight at seq %d: the lineage ends at %d", eventlog.ErrInvalid, at, head)
	}
	return a.at(at), nil
}
