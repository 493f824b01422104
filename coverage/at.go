package coverage

import (
	"context"
	"fmt"
	"iter"

	"github.com/forkline/forkline/eventlog"
)

// headReader is the part of an [eventlog.Log] that At uses, when the index
// has it, to reject a seq past the head before reading the index.
type headReader interface {
	Head(ctx context.Context, id eventlog.ID) (uint64, error)
}

// At returns the Point of event at of execution id from a store's checkpoint
// index, without folding the lineage: [eventlog.Index.ResourceStates] gives
// each resource's state after at, and for a resource with nothing in flight
// [eventlog.Index.ResourceHistory] is read forward from at only while the
// generation stays the same (to find the newest checkpoint of it). The
// answer equals [Fold.Point] of the same lineage: both decide through the
// same selection function.
//
// at must be in 1..head; otherwise the error wraps [eventlog.ErrInvalid]. An
// unknown execution is an error that wraps [eventlog.ErrNotFound]. An index
// entry that contradicts the query (a state of a later seq, keys out of
// order) wraps [eventlog.ErrCorrupt].
func At(ctx context.Context, idx eventlog.Index, id eventlog.ID, at uint64) (Point, error) {
	if idx == nil {
		return Point{}, fmt.Errorf("%w: coverage: nil index", eventlog.ErrInvalid)
	}
	if at == 0 {
		return Point{}, fmt.Errorf("%w: coverage: execution %s: seq 0: seqs start at 1", eventlog.ErrInvalid, id)
	}
	if h, ok := idx.(headReader); ok {
		head, err := h.Head(ctx, id)
		if err != nil {
			return Point{}, fmt.Errorf("coverage: execution %s: %w", id, err)
		}
		if at > head {
			return Point{}, fmt.Errorf("%w: coverage: execution %s: seq %d: seqs run from 1 to %d", eventlog.ErrInvalid, id, at, head)
		}
	}
	states, err := idx.ResourceStates(ctx, id, at)
	if err != nil {
		return Point{}, fmt.Errorf("coverage: execution %s at seq %d: %w", id, at, err)
	}
	p := Point{Seq: at, Covered: true}
	for i, st := range states {
		if st.Key == "" || st.Seq > at || (i > 0 && states[i-1].Key >= st.Key) {
			return Point{}, fmt.Errorf("%w: coverage: execution %s at seq %d: index state of %q at seq %d out of order",
				eventlog.ErrCorrupt, id, at, st.Key, st.Seq)
		}
		sel, err := selectAt(ctx, idx, id, at, st)
		if err != nil {
			return Point{}, err
		}
		p.Covered = p.Covered && sel.Covered
		p.Resources = append(p.Resources, sel)
	}
	return p, nil
}

// selectAt chooses the selection of st's resource at seq at, reading the
// resource's later index states lazily.
func selectAt(ctx context.Context, idx eventlog.Index, id eventlog.ID, at uint64, st eventlog.ResourceState) (Selection, error) {
	var (
		herr error
		prev = at
		pull func() (eventlog.ResourceState, error, bool)
		stop func()
	)
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	sel := choose(st.Key, viewOf(st), func() (view, bool) {
		if herr != nil {
			return view{}, false
		}
		if pull == nil {
			pull, stop = iter.Pull2(idx.ResourceHistory(ctx, id, st.Key, at))
		}
		h, err, ok := pull()
		switch {
		case !ok:
			return view{}, false
		case err != nil:
			herr = fmt.Errorf("coverage: execution %s: history of %q after seq %d: %w", id, st.Key, at, err)
			return view{}, false
		case h.Key != st.Key || h.Seq <= prev:
			herr = fmt.Errorf("%w: coverage: execution %s: history of %q after seq %d: state of %q at seq %d out of order",
				eventlog.ErrCorrupt, id, st.Key, at, h.Key, h.Seq)
			return view{}, false
		}
		prev = h.Seq
		return viewOf(h), true
	})
	if herr != nil {
		return Selection{}, herr
	}
	return reported(sel, viewOf(st)), nil
}

// LatestCovered returns the newest seq at or before at whose Point is
// covered (DESIGN §12: where a fork can restore exactly), reading the
// checkpoint index like [At]. Coverage changes only at events that change
// some resource, so it asks At once per such event, walking back from at,
// not once per seq. When no point at or before at is covered the error
// wraps [ErrUncovered]; at must be in 1..head (otherwise the error wraps
// [eventlog.ErrInvalid]).
func LatestCovered(ctx context.Context, idx eventlog.Index, id eventlog.ID, at uint64) (uint64, error) {
	for seq := at; ; {
		p, err := At(ctx, idx, id, seq)
		if err != nil {
			return 0, err
		}
		if p.Covered {
			return seq, nil
		}
		// Every resource's state, and so the point's coverage, is the same
		// from the newest index entry at or before seq up to seq.
		states, err := idx.ResourceStates(ctx, id, seq)
		if err != nil {
			return 0, fmt.Errorf("coverage: execution %s at seq %d: %w", id, seq, err)
		}
		var newest uint64
		for _, st := range states {
			newest = max(newest, st.Seq)
		}
		if newest == 0 || newest > seq {
			return 0, fmt.Errorf("%w: coverage: execution %s at seq %d: uncovered with no index entry at or before it",
				eventlog.ErrCorrupt, id, seq)
		}
		if newest == 1 {
			return 0, fmt.Errorf("%w: execution %s: no covered point at or before seq %d", ErrUncovered, id, at)
		}
		seq = newest - 1
	}
}
