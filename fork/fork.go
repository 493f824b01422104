package fork

import (
	"context"
	"fmt"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
)

// Plan is what a fork of Parent at At restores (DESIGN §5 "Forking"): one
// Selection per resource bound up to At, sorted by key, and whether the fork
// point is covered — every resource restores its exact state at At.
type Plan struct {
	Parent     eventlog.ID
	At         uint64
	Covered    bool
	Selections []coverage.Selection
}

// PlanFromFold plans a fork of parent at at from an in-memory fold of
// parent's lineage. It is pure. at must be in 1..f.Head() and parent must not
// be the zero ID; otherwise the error wraps [eventlog.ErrInvalid].
func PlanFromFold(f *coverage.Fold, parent eventlog.ID, at uint64) (Plan, error) {
	if f == nil {
		return Plan{}, fmt.Errorf("%w: fork: plan of %s at seq %d: nil fold", eventlog.ErrInvalid, parent, at)
	}
	if parent.IsZero() {
		return Plan{}, fmt.Errorf("%w: fork: plan at seq %d: zero parent ID", eventlog.ErrInvalid, at)
	}
	p, err := f.Point(at)
	if err != nil {
		return Plan{}, fmt.Errorf("fork: plan of %s: %w", parent, err)
	}
	return planOf(parent, p), nil
}

// PlanFromIndex plans a fork of parent at at from a store's checkpoint index
// ([coverage.At]), with a few index reads however long the lineage is. at
// must be in 1..head (otherwise the error wraps [eventlog.ErrInvalid]); an
// unknown parent is an error that wraps [eventlog.ErrNotFound].
func PlanFromIndex(ctx context.Context, idx eventlog.Index, parent eventlog.ID, at uint64) (Plan, error) {
	if parent.IsZero() {
		return Plan{}, fmt.Errorf("%w: fork: plan at seq %d: zero parent ID", eventlog.ErrInvalid, at)
	}
	p, err := coverage.At(ctx, idx, parent, at)
	if err != nil {
		return Plan{}, fmt.Errorf("fork: plan of %s: %w", parent, err)
	}
	return planOf(parent, p), nil
}

func planOf(parent eventlog.ID, p coverage.Point) Plan {
	return Plan{Parent: parent, At: p.Seq, Covered: p.Covered, Selections: p.Resources}
}

// Event returns the fork.created payload that records the plan: the fork's
// first own event.
func (p Plan) Event() *eventlog.ForkCreated {
	fc := &eventlog.ForkCreated{Parent: p.Parent, At: p.At}
	if len(p.Selections) > 0 {
		fc.Selections = make([]eventlog.ForkSelection, len(p.Selections))
		for i, s := range p.Selections {
			fc.Selections[i] = eventlog.ForkSelection{Key: s.Key, Ref: s.Ref, CapturedAt: s.CapturedAt,
				Generation: s.Generation, Covered: s.Covered}
		}
	}
	return fc
}

// Create forks parent at at: it plans the fork from log's index, then writes
// the fork — a new execution header pointing at (parent, at) and its
// fork.created — with log.Fork, copying no event. Its cost does not grow with
// at beyond the index lookups. t is the fork's creation time (zero: the
// store's clock).
//
// Bad input (at 0 or past the head, an unknown parent) writes nothing and
// returns an error that wraps [eventlog.ErrInvalid] or [eventlog.ErrNotFound].
// The plan reflects the parent's log when it was read: a capture the parent
// appends between the plan and the write may cover at, and the fork will not
// know of it.
func Create(ctx context.Context, log eventlog.IndexedLog, parent eventlog.ID, at uint64, t time.Time) (eventlog.ID, Plan, error) {
	if log == nil {
		return eventlog.ID{}, Plan{}, fmt.Errorf("%w: fork: nil log", eventlog.ErrInvalid)
	}
	plan, err := PlanFromIndex(ctx, log, parent, at)
	if err != nil {
		return eventlog.ID{}, Plan{}, err
	}
	id, err := log.Fork(ctx, parent, at, plan.Event(), t)
	if err != nil {
		return eventlog.ID{}, Plan{}, fmt.Errorf("fork: %s at seq %d: %w", parent, at, err)
	}
	return id, plan, nil
}
