package coverage

import (
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/forkline/forkline/eventlog"
)

// Fold is the coverage fold of one lineage, in memory: it applies the
// lineage's events in seq order and answers [Fold.Point] for any seq up to
// the head in O(resources · log events).
//
// It is built on [eventlog.IndexState], the single implementation of
// DESIGN §5's generations, in-flight steps and checkpoints, and keeps, per
// resource, the state after every event that changed it plus, per
// generation, which of those states holds the generation's newest
// checkpoint.
//
// A Fold does no IO and reads no clock. It is not safe for concurrent use
// while events are applied; once no more events are applied, its read
// methods may be called from many goroutines.
type Fold struct {
	head  uint64
	index *eventlog.IndexState
	res   map[string]*resource
	keys  []string // sorted
	most  int      // the most marks any resource has
	amo   attempts // at_most_once attempts, for Point.InFlight
}

// resource is the history of one resource in a Fold.
type resource struct {
	key   string
	marks chunked[mark] // one per event that changed the resource, by seq
	// ckpts holds each distinct newest checkpoint once, in the order the
	// marks first point at it; marks refer to it by index, so that marks
	// stay small and free of pointers for a lineage of millions of events.
	ckpts []eventlog.Checkpoint
	// cover[g-gen0] is the index in marks of the last mark of generation g
	// that holds a checkpoint of g, or -1.
	cover chunked[int32]
	gen0  uint64                 // generation of marks[0]
	head  eventlog.ResourceState // the newest state
}

// mark is the state of one resource after one event, as a Fold stores it.
type mark struct {
	seq      uint64
	gen      uint64
	ckpt     int32 // index in resource.ckpts of the newest checkpoint, -1 for none
	busy     bool  // a step that advances the resource is in flight
	diverged bool  // a fork.diverged marked the resource (DESIGN §12)
}

// New returns an empty Fold, ready for the event at seq 1.
func New() *Fold {
	return &Fold{index: eventlog.NewIndexState(nil), res: make(map[string]*resource)}
}

// FoldEvents folds a whole lineage, such as the one a [eventlog.Log]'s
// Events yields from seq 1. An error yielded by events, or one from
// [Fold.Apply], stops the fold and is returned wrapped.
func FoldEvents(events iter.Seq2[eventlog.Event, error]) (*Fold, error) {
	f := New()
	for ev, err := range events {
		if err != nil {
			return nil, fmt.Errorf("coverage: fold: after seq %d: %w", f.head, err)
		}
		if err := f.Apply(ev); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Head returns the seq of the newest applied event (0 for none).
func (f *Fold) Head() uint64 { return f.head }

// Apply folds the next event of the lineage, whose seq must be Head()+1.
// An event out of order, one that breaks its payload's invariants, a
// fork.created whose At is not the seq before it, or an event that
// contradicts the fold (a capture of a resource that is not bound, a fork
// whose selections do not match the bound resources) is an error wrapping
// [eventlog.ErrInvalid], and the Fold is unchanged. So is an event that would
// change a resource for the 2,147,483,647th time: a Fold is for lineages that
// fit in memory, [At] has no such limit.
func (f *Fold) Apply(ev eventlog.Event) error {
	if ev.Seq != f.head+1 {
		return fmt.Errorf("%w: coverage: event seq %d, the fold expects %d", eventlog.ErrInvalid, ev.Seq, f.head+1)
	}
	if err := ev.Validate(); err != nil { // also refuses a nil payload
		return fmt.Errorf("coverage: %w", err)
	}
	if fc, ok := ev.Data.(*eventlog.ForkCreated); ok && fc.At+1 != ev.Seq {
		return fmt.Errorf("%w: coverage: seq %d: fork.created at %d must directly follow its fork point",
			eventlog.ErrInvalid, ev.Seq, fc.At)
	}
	if f.most >= math.MaxInt32 {
		// Marks are indexed with int32 (a resource this busy needs tens of
		// gigabytes in memory); ask At instead.
		return fmt.Errorf("%w: coverage: seq %d: a resource changed %d times, more than a Fold holds",
			eventlog.ErrInvalid, ev.Seq, f.most)
	}
	changed, err := f.index.Apply(ev)
	if err != nil {
		return fmt.Errorf("coverage: seq %d: %w", ev.Seq, err)
	}
	for _, st := range changed {
		r := f.res[st.Key]
		if r == nil {
			r = &resource{key: st.Key, gen0: st.Generation}
			f.res[st.Key] = r
			i, _ := slices.BinarySearch(f.keys, st.Key)
			f.keys = slices.Insert(f.keys, i, st.Key)
		}
		r.add(st)
		f.most = max(f.most, r.marks.len())
	}
	f.amo.apply(ev)
	f.head = ev.Seq
	return nil
}

// add records the resource's state after one event.
func (r *resource) add(st eventlog.ResourceState) {
	m := mark{seq: st.Seq, gen: st.Generation, ckpt: -1, busy: len(st.InFlight) > 0, diverged: st.Diverged != 0}
	if st.Latest.Ref != "" {
		if n := len(r.ckpts); n == 0 || r.ckpts[n-1] != st.Latest {
			r.ckpts = append(r.ckpts, st.Latest)
		}
		m.ckpt = int32(len(r.ckpts) - 1)
	}
	r.marks.append(m)
	r.head = st
	if m.gen < r.gen0 {
		// Generations never go back (eventlog.IndexState only increments
		// them); keep the fold total anyway: such a mark covers nothing later.
		return
	}
	g := int(m.gen - r.gen0)
	for r.cover.len() <= g {
		r.cover.append(-1)
	}
	if m.ckpt >= 0 && holds(st.Latest, m.gen) {
		r.cover.set(g, int32(r.marks.len()-1))
	}
}

// view returns the i-th mark as choose reads it.
func (r *resource) view(i int) view {
	m := r.marks.at(i)
	v := view{seq: m.seq, gen: m.gen, busy: m.busy, diverged: m.diverged}
	if m.ckpt >= 0 {
		v.latest = r.ckpts[m.ckpt]
	}
	return v
}

// reported returns the Selection coverage reports for r at its i-th mark:
// its selection, uncovered if a fork.diverged marked r.
func (r *resource) reported(i int) Selection { return reported(r.selection(i), r.view(i)) }

// selection returns the Selection of r at its i-th mark, with choose reading
// the one later mark that matters: the last of the generation that holds a
// checkpoint of it. It ignores a divergence (see [Fold.Covered]).
func (r *resource) selection(i int) Selection {
	at := r.view(i)
	c := -1 // the mark to hand to choose, if any
	if at.gen >= r.gen0 {
		if g := int(at.gen - r.gen0); g < r.cover.len() {
			if k := int(r.cover.at(g)); k > i {
				c = k
			}
		}
	}
	return choose(r.key, at, func() (view, bool) {
		if c < 0 {
			return view{}, false
		}
		v := r.view(c)
		c = -1
		return v, true
	})
}

// find returns the index of r's newest mark at or before seq, or -1.
func (r *resource) find(seq uint64) int {
	lo, hi := 0, r.marks.len() // marks before lo are at or before seq, from hi on after
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.marks.at(mid).seq <= seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// Point returns the coverage of event at, which must be in 1..Head();
// otherwise the error wraps [eventlog.ErrInvalid]. Events applied later can
// change it: a capture committed after at covers at if no generation started
// in between.
func (f *Fold) Point(at uint64) (Point, error) {
	if at == 0 || at > f.head {
		return Point{}, fmt.Errorf("%w: coverage: seq %d: seqs run from 1 to %d", eventlog.ErrInvalid, at, f.head)
	}
	p := Point{Seq: at, Covered: true, InFlight: f.amo.at(at)}
	for _, k := range f.keys {
		r := f.res[k]
		i := r.find(at)
		if i < 0 {
			continue // bound after at
		}
		sel := r.reported(i)
		p.Covered = p.Covered && sel.Covered
		p.Resources = append(p.Resources, sel)
	}
	return p, nil
}

// Windows returns every window of every resource up to Head(), sorted by
// Key, then From.
func (f *Fold) Windows() []Window {
	var out []Window
	for _, k := range f.keys {
		r := f.res[k]
		first := len(out)
		for i := range r.marks.len() {
			m := r.marks.at(i)
			sel := r.reported(i)
			if !sel.Covered {
				continue
			}
			to := f.head
			if i+1 < r.marks.len() {
				to = r.marks.at(i+1).seq - 1
			}
			if n := len(out); n > first {
				w := &out[n-1]
				if w.To+1 == m.seq && w.Ref == sel.Ref && w.CapturedAt == sel.CapturedAt && w.Generation == sel.Generation {
					w.To = to
					continue
				}
			}
			out = append(out, Window{Key: k, From: m.seq, To: to, Ref: sel.Ref, CapturedAt: sel.CapturedAt, Generation: sel.Generation})
		}
	}
	return out
}

// State returns the newest state of resource key, after event Head(): its
// generation, the steps in flight against it and its latest checkpoint. ok
// is false when key was never bound in the lineage.
func (f *Fold) State(key string) (st eventlog.ResourceState, ok bool) {
	r := f.res[key]
	if r == nil {
		return eventlog.ResourceState{}, false
	}
	st = r.head
	st.InFlight = slices.Clone(st.InFlight)
	return st, true
}

// Covered reports whether resource key is covered after event Head(): no
// step that advances it is in flight and a checkpoint of its current
// generation exists. An SDK asks this when the handler returns, to decide
// the completion captures. It is false for a key that was never bound.
//
// Unlike [Fold.Point], it ignores a fork.diverged (DESIGN §12): a checkpoint
// of the current generation restores exactly what the resource holds, so
// no capture is needed, even though coverage reports the point uncovered.
func (f *Fold) Covered(key string) bool {
	r := f.res[key]
	if r == nil {
		return false
	}
	return r.selection(r.marks.len() - 1).Covered
}
