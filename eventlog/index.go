package eventlog

import (
	"fmt"
	"slices"
	"sort"
)

// Checkpoint is a checkpoint a lineage knows of for one resource.
type Checkpoint struct {
	Ref        string // the driver's immutable ref; "" = none
	At         uint64 // seq of the event that established Ref (a capture, a bind from Ref, or the parent's capture a fork carried over)
	Generation uint64 // the generation whose state Ref holds
}

// ResourceState is the checkpoint state of one resource after one event of a
// lineage (DESIGN §5 "Coverage: generations"):
//
//  1. Generation counts the resource's own bindings and the live steps that
//     advanced it, over the whole lineage.
//
//  2. InFlight lists, sorted, the steps that advanced it and have no terminal
//     event yet (an orphan stays in flight until it is resolved).
//
//  3. Latest is the newest checkpoint at or before Seq; Latest.Generation is
//     at most Generation. A resource.captured must name the current
//     generation (Apply rejects any other), so a checkpoint of the current
//     generation is never hidden by an older one.
//
//  4. Diverged is the seq of the fork.diverged (DESIGN §12) after which the
//     resource may hold effects its lineage no longer records; 0 if none.
//     Once set it stays set, through later bindings, captures and forks.
//
// The resource is covered after Seq when InFlight is empty, Diverged is 0
// and some checkpoint of Generation exists in the lineage — Latest, or one
// written after Seq before the next generation starts. A diverged resource
// still restores exactly what it held (its checkpoints are real), so a
// kernel deciding whether to capture ignores Diverged; coverage reports it
// uncovered because its history no longer explains its state.
type ResourceState struct {
	Key           string
	Seq           uint64
	Generation    uint64
	InFlight      []string
	CoverageReuse bool
	Bound         uint64 // seq of the resource.bound that made the current resource
	Latest        Checkpoint
	Diverged      uint64 // seq of the fork.diverged that tainted it; 0 if none
}

// IndexState is the fold that produces ResourceStates: it holds the newest
// state of every bound resource of one lineage and, for each event, returns
// the states the event changed. It does no IO. A store runs it on every
// Append and writes what it returns beside the events.
type IndexState struct {
	res  map[string]*ResourceState
	keys []string // sorted
}

// NewIndexState resumes the fold from states read back from an index (the
// newest state of each resource); nil starts an empty lineage.
func NewIndexState(states []ResourceState) *IndexState {
	s := &IndexState{res: make(map[string]*ResourceState, len(states))}
	for _, st := range states {
		st := st.clone()
		s.res[st.Key] = &st
		s.keys = append(s.keys, st.Key)
	}
	sort.Strings(s.keys)
	return s
}

// States returns the newest state of every resource, sorted by key.
func (s *IndexState) States() []ResourceState {
	out := make([]ResourceState, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, s.res[k].clone())
	}
	return out
}

// clone returns a copy of st that shares no memory with it.
func (st *ResourceState) clone() ResourceState {
	c := *st
	c.InFlight = slices.Clone(st.InFlight)
	return c
}

// Apply folds ev into the state and returns the states it changed, sorted by
// key, each with Seq = ev.Seq. The returned states are the caller's. An event that contradicts the state (a capture
// of a resource that is not bound, a fork whose selections do not match the
// bound resources) is an error wrapping ErrInvalid, and the state is
// unchanged.
func (s *IndexState) Apply(ev Event) ([]ResourceState, error) {
	switch p := ev.Data.(type) {
	case *ResourceBound:
		st, ok := s.res[p.Key]
		if !ok {
			st = &ResourceState{Key: p.Key}
			s.res[p.Key] = st
			i, _ := slices.BinarySearch(s.keys, p.Key)
			s.keys = slices.Insert(s.keys, i, p.Key)
		}
		st.Generation++
		st.InFlight = nil // a new resource: no body ran against it
		st.CoverageReuse = p.CoverageReuse
		st.Bound = ev.Seq
		if p.From != "" {
			st.Latest = Checkpoint{Ref: p.From, At: ev.Seq, Generation: st.Generation}
		}
		st.Seq = ev.Seq
		return []ResourceState{st.clone()}, nil

	case *StepStarted:
		for _, k := range p.Resources {
			if _, ok := s.res[k]; !ok {
				return nil, fmt.Errorf("%w: step %s affects %q, which is not bound", ErrInvalid, p.StepID, k)
			}
		}
		if !p.StepKind.HasBody() {
			// A recv step has no body (DESIGN §21½.1): it advances nothing
			// and is never in flight.
			return nil, nil
		}
		var out []ResourceState
		for _, k := range s.keys {
			st := s.res[k]
			if st.CoverageReuse && (p.StepKind == StepLLM || !slices.Contains(p.Resources, k)) {
				continue
			}
			st.Generation++
			if i, found := slices.BinarySearch(st.InFlight, p.StepID); !found {
				st.InFlight = slices.Insert(slices.Clone(st.InFlight), i, p.StepID)
			}
			st.Seq = ev.Seq
			out = append(out, st.clone())
		}
		return out, nil

	case *StepSucceeded:
		return s.land(ev.Seq, p.StepID), nil
	case *StepFailed:
		return s.land(ev.Seq, p.StepID), nil
	case *StepCancelled:
		return s.land(ev.Seq, p.StepID), nil
	case *StepAbandoned:
		return s.land(ev.Seq, p.StepID), nil

	case *ResourceCaptured:
		st, ok := s.res[p.Key]
		if !ok {
			return nil, fmt.Errorf("%w: capture of %q, which is not bound", ErrInvalid, p.Key)
		}
		if p.Generation != st.Generation {
			// A capture records the generation it captured, and is only
			// taken (and written) while nothing advances the resource: a
			// capture of another generation is not one a kernel writes, and
			// accepting an older one would hide the current generation's
			// checkpoints.
			return nil, fmt.Errorf("%w: capture of %q at generation %d, resource is at generation %d",
				ErrInvalid, p.Key, p.Generation, st.Generation)
		}
		st.Latest = Checkpoint{Ref: p.Ref, At: ev.Seq, Generation: p.Generation}
		st.Seq = ev.Seq
		return []ResourceState{st.clone()}, nil

	case *ForkDiverged:
		// fork.diverged advances nothing and lands nothing (DESIGN §8½): it
		// only marks every resource bound now, once.
		var out []ResourceState
		for _, k := range s.keys {
			st := s.res[k]
			if st.Diverged != 0 {
				continue
			}
			st.Diverged = ev.Seq
			st.Seq = ev.Seq
			out = append(out, st.clone())
		}
		return out, nil

	case *ForkCreated:
		if len(p.Selections) != len(s.keys) {
			return nil, fmt.Errorf("%w: fork.created has %d selections, %d resources are bound",
				ErrInvalid, len(p.Selections), len(s.keys))
		}
		for i, sel := range p.Selections {
			st, ok := s.res[sel.Key]
			if !ok || s.keys[i] != sel.Key {
				return nil, fmt.Errorf("%w: fork.created selects %q, which is not bound at the fork point", ErrInvalid, sel.Key)
			}
			if sel.Generation != st.Generation {
				return nil, fmt.Errorf("%w: fork.created selects %q at generation %d, resource is at generation %d",
					ErrInvalid, sel.Key, sel.Generation, st.Generation)
			}
		}
		out := make([]ResourceState, 0, len(s.keys))
		for _, sel := range p.Selections {
			st := s.res[sel.Key]
			if sel.Covered {
				st.Latest = Checkpoint{Ref: sel.Ref, At: sel.CapturedAt, Generation: st.Generation}
			}
			st.Seq = ev.Seq
			out = append(out, st.clone())
		}
		return out, nil
	}
	return nil, nil
}

// land removes a step that reached a terminal event from every in-flight set.
func (s *IndexState) land(seq uint64, stepID string) []ResourceState {
	var out []ResourceState
	for _, k := range s.keys {
		st := s.res[k]
		i, found := slices.BinarySearch(st.InFlight, stepID)
		if !found {
			continue
		}
		st.InFlight = slices.Delete(slices.Clone(st.InFlight), i, i+1)
		if len(st.InFlight) == 0 {
			st.InFlight = nil
		}
		st.Seq = seq
		out = append(out, st.clone())
	}
	return out
}
