package coverage_test

import (
	"slices"
	"sort"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
)

// This file is the deliberately naive reference model of DESIGN §5
// "Coverage: generations" (raft's quorum/quick_test.go idea): for each N it
// recomputes everything from scratch by scanning the whole lineage, with
// maps and no index, written from the DESIGN text and not from
// eventlog.IndexState. It is quadratic and meant to be obviously right.

// naiveCheckpoint is a checkpoint of a resource, as the event that
// established it recorded it.
type naiveCheckpoint struct {
	ref        string
	capturedAt uint64
	generation uint64
}

// naiveResource is what the scan knows of one resource after some events.
type naiveResource struct {
	bound       bool
	reuse       bool
	generation  uint64
	inFlight    map[string]bool
	checkpoints []naiveCheckpoint // every checkpoint so far, in lineage order
	diverged    bool              // a fork.diverged came while it was bound (DESIGN §12)
}

// naiveScan folds events[:n] for key from scratch.
func naiveScan(events []eventlog.Event, key string, n int) naiveResource {
	r := naiveResource{inFlight: map[string]bool{}}
	for _, ev := range events[:n] {
		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			if p.Key != key {
				continue
			}
			r.bound = true
			r.reuse = p.CoverageReuse
			r.generation++
			r.inFlight = map[string]bool{} // a new resource: nothing ran against it
			if p.From != "" {
				r.checkpoints = append(r.checkpoints, naiveCheckpoint{p.From, ev.Seq, r.generation})
			}
		case *eventlog.StepStarted:
			if !r.bound {
				continue
			}
			// A recv step has no body and advances nothing (DESIGN §21½.1).
			advances := p.StepKind != eventlog.StepRecv && (!r.reuse || (p.StepKind != eventlog.StepLLM && slices.Contains(p.Resources, key)))
			if advances {
				r.generation++
				r.inFlight[p.StepID] = true
			}
		case *eventlog.StepSucceeded:
			delete(r.inFlight, p.StepID)
		case *eventlog.StepFailed:
			delete(r.inFlight, p.StepID)
		case *eventlog.StepCancelled:
			delete(r.inFlight, p.StepID)
		case *eventlog.StepAbandoned:
			delete(r.inFlight, p.StepID)
		case *eventlog.ResourceCaptured:
			if p.Key == key {
				r.checkpoints = append(r.checkpoints, naiveCheckpoint{p.Ref, ev.Seq, p.Generation})
			}
		case *eventlog.ForkCreated:
			for _, s := range p.Selections {
				if s.Key == key && s.Covered {
					r.checkpoints = append(r.checkpoints, naiveCheckpoint{s.Ref, s.CapturedAt, r.generation})
				}
			}
		case *eventlog.ForkDiverged:
			r.diverged = r.diverged || r.bound
		}
	}
	return r
}

// naiveKeys returns the keys bound in events[:n], sorted.
func naiveKeys(events []eventlog.Event, n int) []string {
	var keys []string
	for _, ev := range events[:n] {
		if p, ok := ev.Data.(*eventlog.ResourceBound); ok && !slices.Contains(keys, p.Key) {
			keys = append(keys, p.Key)
		}
	}
	sort.Strings(keys)
	return keys
}

// naiveGeneration is key's generation after events[:n].
func naiveGeneration(events []eventlog.Event, key string, n int) uint64 {
	return naiveScan(events, key, n).generation
}

// naivePoint is the Point at seq n of the lineage events (DESIGN §5, read
// literally): R is covered at N when nothing that advances it is in flight
// at N and some checkpoint of its generation g exists anywhere in the
// lineage; the selection is the newest such checkpoint, else the newest
// checkpoint at or before N, else the initial environment. A resource bound
// when a fork.diverged came is uncovered from then on (DESIGN §12).
func naivePoint(events []eventlog.Event, n uint64) coverage.Point {
	p := coverage.Point{Seq: n, Covered: true}
	for _, key := range naiveKeys(events, int(n)) {
		at := naiveScan(events, key, int(n))
		all := naiveScan(events, key, len(events))
		sel := coverage.Selection{Key: key, Generation: at.generation}
		var cover *naiveCheckpoint
		if len(at.inFlight) == 0 && !at.diverged {
			for i := range all.checkpoints {
				if all.checkpoints[i].generation == at.generation {
					cover = &all.checkpoints[i]
				}
			}
		}
		switch {
		case cover != nil:
			sel.Ref, sel.CapturedAt, sel.Covered = cover.ref, cover.capturedAt, true
		case len(at.checkpoints) > 0:
			last := at.checkpoints[len(at.checkpoints)-1]
			sel.Ref, sel.CapturedAt = last.ref, last.capturedAt
		}
		p.Covered = p.Covered && sel.Covered
		p.Resources = append(p.Resources, sel)
	}
	p.InFlight = naiveInFlight(events, n)
	return p
}

// naiveInFlight lists the at_most_once steps started at or before n whose
// outcome no event up to n records, scanning the prefix again for each.
func naiveInFlight(events []eventlog.Event, n uint64) []coverage.InFlight {
	var out []coverage.InFlight
	for i, ev := range events[:n] {
		p, ok := ev.Data.(*eventlog.StepStarted)
		if !ok || p.Idempotency != eventlog.AtMostOnce {
			continue
		}
		ended := false
		for _, later := range events[i+1 : n] {
			if id, ok := outcomeOf(later); ok && id == p.StepID {
				ended = true
			}
			if s, ok := later.Data.(*eventlog.StepStarted); ok && s.StepID == p.StepID {
				break // a later attempt of the step: this one ended before it
			}
		}
		if !ended {
			out = append(out, coverage.InFlight{StepID: p.StepID, Kind: p.StepKind, Target: p.Target, StartedAt: ev.Seq})
		}
	}
	return out
}

// outcomeOf returns the StepID of an event that ends a step attempt.
func outcomeOf(ev eventlog.Event) (string, bool) {
	switch p := ev.Data.(type) {
	case *eventlog.StepSucceeded:
		return p.StepID, true
	case *eventlog.StepFailed:
		return p.StepID, true
	case *eventlog.StepCancelled:
		return p.StepID, true
	case *eventlog.StepAbandoned:
		return p.StepID, true
	case *eventlog.StepDenied:
		return p.StepID, true
	}
	return "", false
}

// naiveWindows derives the windows from naivePoint at every seq.
func naiveWindows(events []eventlog.Event) []coverage.Window {
	byKey := map[string][]coverage.Window{}
	for n := 1; n <= len(events); n++ {
		for _, s := range naivePoint(events, uint64(n)).Resources {
			if !s.Covered {
				continue
			}
			ws := byKey[s.Key]
			if k := len(ws); k > 0 && ws[k-1].To == uint64(n-1) && ws[k-1].Ref == s.Ref &&
				ws[k-1].CapturedAt == s.CapturedAt && ws[k-1].Generation == s.Generation {
				ws[k-1].To = uint64(n)
				continue
			}
			byKey[s.Key] = append(ws, coverage.Window{Key: s.Key, From: uint64(n), To: uint64(n),
				Ref: s.Ref, CapturedAt: s.CapturedAt, Generation: s.Generation})
		}
	}
	var out []coverage.Window
	for _, k := range naiveKeys(events, len(events)) {
		out = append(out, byKey[k]...)
	}
	return out
}

// naiveCovered is whether key is covered after the whole lineage, leaving
// a divergence out: nothing advancing it in flight and a checkpoint of its
// generation in the lineage.
func naiveCovered(events []eventlog.Event, key string) bool {
	all := naiveScan(events, key, len(events))
	if len(all.inFlight) > 0 {
		return false
	}
	return slices.ContainsFunc(all.checkpoints, func(c naiveCheckpoint) bool { return c.generation == all.generation })
}
