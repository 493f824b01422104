package coverage

import (
	"errors"

	"github.com/forkline/forkline/eventlog"
)

// ErrUncovered is wrapped by the error of a question that needs a covered
// point and finds none: [LatestCovered] when no point at or before the
// asked seq is covered, a fork that requires a covered point (DESIGN §12).
var ErrUncovered = errors.New("coverage: fork point is not covered")

// Point is the coverage of one event of a lineage (DESIGN §7): whether a
// fork at Seq restores every resource exactly, and what each one restores.
type Point struct {
	Seq       uint64
	Covered   bool        // every resource bound up to Seq is covered (true when there are none)
	Resources []Selection // one per resource bound up to Seq, sorted by Key; nil when there are none
	// InFlight lists the at_most_once steps in flight at Seq, in the order
	// they started; nil when there are none. A fork at Seq sees each as
	// indeterminate ([InFlight]). [Fold.Point] fills it; [At], which reads
	// only the index, leaves it nil: ask [InFlightAt] for it.
	InFlight []InFlight
}

// Selection is what a fork at a point restores one resource from
// (DESIGN §5, §7).
type Selection struct {
	Key        string
	Ref        string // "" = the initial environment
	CapturedAt uint64 // seq of the event that established Ref; 0 if Ref is ""
	Generation uint64 // the resource's generation after the point
	Covered    bool   // Ref holds exactly the resource's state at the point
}

// Window is a maximal run of seqs From..To (inclusive) at which Key is
// covered by the same checkpoint Ref of one Generation. Windows are for
// display, such as a timeline in the CLI: a fork anywhere inside a window
// restores Ref and loses nothing.
type Window struct {
	Key        string
	From, To   uint64
	Ref        string
	CapturedAt uint64
	Generation uint64
}

// view is the part of an [eventlog.ResourceState] that coverage reads: the
// state of one resource after the event seq.
type view struct {
	seq      uint64
	gen      uint64
	busy     bool // a step that advances the resource is in flight
	diverged bool // a fork.diverged marked the resource (DESIGN §12)
	latest   eventlog.Checkpoint
}

func viewOf(st eventlog.ResourceState) view {
	return view{seq: st.Seq, gen: st.Generation, busy: len(st.InFlight) > 0, diverged: st.Diverged != 0, latest: st.Latest}
}

// reported is the selection coverage reports for a resource whose state
// after the point is at, given the selection choose made: a resource a
// fork.diverged marked (DESIGN §12) holds effects its lineage no longer
// records, so it is reported uncovered however exactly a checkpoint
// restores it, and selects the newest checkpoint at or before the point.
func reported(sel Selection, at view) Selection {
	if !at.diverged || !sel.Covered {
		return sel
	}
	sel.Covered = false
	sel.Ref, sel.CapturedAt = at.latest.Ref, at.latest.At
	return sel
}

// holds reports whether the view's checkpoint is one of its own generation.
func (v view) holds() bool { return holds(v.latest, v.gen) }

// holds reports whether c is a checkpoint of generation gen.
func holds(c eventlog.Checkpoint, gen uint64) bool { return c.Ref != "" && c.Generation == gen }

// choose is the one place that decides a Selection (DESIGN §5), shared by
// [Fold.Point] and [At] so that they cannot disagree. at is the resource's
// state after the point; next returns its states written after the point, in
// seq order, one per call, and false when there are no more. choose stops
// calling next at the first state of another generation, so a caller may
// also return only the last state of at's generation that holds a checkpoint
// of it.
//
// The resource is covered when no step that advances it is in flight and a
// checkpoint of its generation exists: at's own, or one established later in
// the same generation (a capture committed with a step's outcome covers that
// outcome; a fork's covered selection). The selection is then the newest such
// checkpoint; otherwise the newest checkpoint at or before the point;
// otherwise the initial environment.
func choose(key string, at view, next func() (view, bool)) Selection {
	sel := Selection{Key: key, Generation: at.gen}
	if !at.busy {
		cover, ok := at.latest, at.holds()
		for {
			v, more := next()
			if !more || v.gen != at.gen {
				break
			}
			if v.holds() {
				cover, ok = v.latest, true
			}
		}
		if ok {
			sel.Ref, sel.CapturedAt, sel.Covered = cover.Ref, cover.At, true
			return sel
		}
	}
	if at.latest.Ref != "" {
		sel.Ref, sel.CapturedAt = at.latest.Ref, at.latest.At
	}
	return sel
}
