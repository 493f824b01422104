package proptest

import (
	"slices"

	"github.com/forkline/forkline/eventlog"
)

// This file is the reference model: DESIGN §5 written as plainly as the
// text reads, with no state carried from one seq to the next. Every question
// about seq n rescans events 1..n (and, for "a checkpoint of generation g
// exists in the lineage", the whole lineage). It shares no code with
// eventlog.IndexState, coverage or policy: it is the oracle they are checked
// against, so it must stay slow and obvious.

// Change is one change a step body made to one resource's real state.
type Change struct {
	Key   string // the resource key
	Value string // what the body did, unique in a world
}

// Lineage is one execution as the model sees it: the events 1..head of its
// lineage (a fork's first At events are its parent's) and, for each event,
// the changes bodies made to resources just before the event was written.
type Lineage struct {
	ID      eventlog.ID
	Events  []eventlog.Event // Events[i].Seq == i+1
	Effects [][]Change       // Effects[i]: changes made before Events[i]
}

// Selection is what the model says a fork at one seq restores one resource
// from: the same fields as a fork.created selection.
type Selection = eventlog.ForkSelection

// Point is the model's answer for one seq: every resource bound up to it,
// sorted by key, and whether all of them are covered.
type Point struct {
	Seq       uint64
	Covered   bool
	Resources []Selection
}

// LineageCheckpoint is one checkpoint of one resource the lineage knows of:
// a capture, a binding from a ref, or a covered selection a fork carried over.
type LineageCheckpoint struct {
	Ref        string
	CapturedAt uint64 // seq of the event that established Ref (the parent's seq for a carried one)
	Generation uint64 // the generation whose state Ref holds
	Pos        uint64 // seq of the event of this lineage that records it
}

// BoundKeys returns the keys with a resource.bound among events, sorted.
func BoundKeys(events []eventlog.Event) []string {
	var keys []string
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.ResourceBound); ok && !slices.Contains(keys, p.Key) {
			keys = append(keys, p.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// Binding returns the newest resource.bound of key among events, or nil.
func Binding(events []eventlog.Event, key string) *eventlog.ResourceBound {
	var b *eventlog.ResourceBound
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.ResourceBound); ok && p.Key == key {
			b = p
		}
	}
	return b
}

// advances reports whether a live step.started advances resource key, whose
// newest binding declared coverageReuse (DESIGN §5): every live step
// advances every resource, except that a CoverageReuse resource is advanced
// only by tool calls and local steps that affect it. A recv step has no body
// and advances nothing (DESIGN §21½.1).
func advances(p *eventlog.StepStarted, key string, coverageReuse bool) bool {
	if p.StepKind == eventlog.StepRecv {
		return false
	}
	if !coverageReuse {
		return true
	}
	return p.StepKind != eventlog.StepLLM && slices.Contains(p.Resources, key)
}

// terminalStep returns the StepID of an event that ends a step's attempt —
// step.succeeded, step.failed (with a RetryAt too: the attempt ended, DESIGN
// §8½), step.cancelled or step.abandoned (§15) — and false for any other
// event.
func terminalStep(ev eventlog.Event) (string, bool) {
	switch p := ev.Data.(type) {
	case *eventlog.StepAbandoned:
		return p.StepID, true
	case *eventlog.StepSucceeded:
		return p.StepID, true
	case *eventlog.StepFailed:
		return p.StepID, true
	case *eventlog.StepCancelled:
		return p.StepID, true
	}
	return "", false
}

// Generation returns key's generation after events (a lineage's events
// 1..n): its own bindings plus the live steps that advanced it, counted over
// the lineage. fork.created keeps generations as they are.
func Generation(events []eventlog.Event, key string) uint64 {
	var g uint64
	bound, reuse := false, false
	for _, ev := range events {
		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			if p.Key == key {
				g++
				bound, reuse = true, p.CoverageReuse
			}
		case *eventlog.StepStarted:
			if bound && advances(p, key, reuse) {
				g++
			}
		}
	}
	return g
}

// InFlight returns, sorted, the steps that advanced key and have no terminal
// event after they started, among events (1..n). An own resource.bound
// empties the set: no earlier body ran against the new resource (the choice
// written in eventlog's doc).
func InFlight(events []eventlog.Event, key string) []string {
	var out []string
	bound, reuse := false, false
	for _, ev := range events {
		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			if p.Key == key {
				out = nil
				bound, reuse = true, p.CoverageReuse
			}
		case *eventlog.StepStarted:
			if bound && advances(p, key, reuse) && !slices.Contains(out, p.StepID) {
				out = append(out, p.StepID)
			}
		default:
			if id, ok := terminalStep(ev); ok {
				out = slices.DeleteFunc(out, func(s string) bool { return s == id })
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return out
}

// Checkpoints returns every checkpoint of key recorded in events (a whole
// lineage), in seq order. The generation of a binding from a ref, or of a
// selection a fork carried, is key's generation after that event.
func Checkpoints(events []eventlog.Event, key string) []LineageCheckpoint {
	var out []LineageCheckpoint
	for i, ev := range events {
		pos := uint64(i + 1)
		switch p := ev.Data.(type) {
		case *eventlog.ResourceCaptured:
			if p.Key == key {
				out = append(out, LineageCheckpoint{Ref: p.Ref, CapturedAt: pos, Generation: p.Generation, Pos: pos})
			}
		case *eventlog.ResourceBound:
			if p.Key == key && p.From != "" {
				out = append(out, LineageCheckpoint{Ref: p.From, CapturedAt: pos, Generation: Generation(events[:pos], key), Pos: pos})
			}
		case *eventlog.ForkCreated:
			for _, s := range p.Selections {
				if s.Key == key && s.Covered {
					out = append(out, LineageCheckpoint{Ref: s.Ref, CapturedAt: s.CapturedAt, Generation: Generation(events[:pos], key), Pos: pos})
				}
			}
		}
	}
	return out
}

// PointAt is DESIGN §5 for seq n of the lineage events (n in 1..len(events)):
//
//   - g is the resource's generation after events 1..n;
//   - it is covered when no step that advances it is in flight at n and some
//     checkpoint of generation g exists anywhere in the lineage;
//   - its selection is the newest covering checkpoint if covered; otherwise
//     the newest checkpoint at or before n; otherwise the initial
//     environment.
//
// A resource that was bound when a fork.diverged came (DESIGN §12) is
// uncovered from that event on.
//
// To ask about a lineage as it stood when it ended at n, pass events[:n].
func PointAt(events []eventlog.Event, n uint64) Point { return pointAt(events, n, true) }

// PhysicalPointAt is [PointAt] leaving fork.diverged out: whether a
// checkpoint restores exactly what each resource holds, which is what
// decides the completion captures (a diverged resource is reported
// uncovered but needs no capture).
func PhysicalPointAt(events []eventlog.Event, n uint64) Point { return pointAt(events, n, false) }

func pointAt(events []eventlog.Event, n uint64, divergence bool) Point {
	prefix := events[:n]
	pt := Point{Seq: n, Covered: true}
	for _, key := range BoundKeys(prefix) {
		sel := Selection{Key: key, Generation: Generation(prefix, key)}
		cks := Checkpoints(events, key)
		if len(InFlight(prefix, key)) == 0 && !(divergence && Diverged(prefix, key)) {
			for _, c := range cks {
				if c.Generation == sel.Generation {
					sel.Ref, sel.CapturedAt, sel.Covered = c.Ref, c.CapturedAt, true // the newest wins
				}
			}
		}
		if !sel.Covered {
			for _, c := range cks {
				if c.Pos <= n {
					sel.Ref, sel.CapturedAt = c.Ref, c.CapturedAt
				}
			}
		}
		pt.Covered = pt.Covered && sel.Covered
		pt.Resources = append(pt.Resources, sel)
	}
	return pt
}

// Diverged reports whether a fork.diverged among events came while key was
// bound (DESIGN §12).
func Diverged(events []eventlog.Event, key string) bool {
	bound := false
	for _, ev := range events {
		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			bound = bound || p.Key == key
		case *eventlog.ForkDiverged:
			if bound {
				return true
			}
		}
	}
	return false
}

// RealState is the simulated state of key's resource just after event n of
// the lineage: the changes bodies made to it since the resource was made.
// A resource.bound makes a new resource holding the contents of its From
// (nothing for the initial environment); fork.created stands for the
// resources the fork will restore from its selections.
func RealState(l Lineage, n uint64, key string, contents map[string][]string) []string {
	var state []string
	for i := range n {
		for _, c := range l.Effects[i] {
			if c.Key == key {
				state = append(state, c.Value)
			}
		}
		switch p := l.Events[i].Data.(type) {
		case *eventlog.ResourceBound:
			if p.Key == key {
				state = slices.Clone(contents[p.From])
			}
		case *eventlog.ForkCreated:
			for _, s := range p.Selections {
				if s.Key == key {
					state = slices.Clone(contents[s.Ref])
				}
			}
		}
	}
	return state
}

// stepStartedBefore returns the newest step.started of id among events.
func stepStartedBefore(events []eventlog.Event, id string) *eventlog.StepStarted {
	var st *eventlog.StepStarted
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && p.StepID == id {
			st = p
		}
	}
	return st
}

// CountedFor returns the keys whose counted call the event at seq n is
// (DESIGN §5 "Checkpoint policy"): the first terminal event after the newest
// step.started of a tool call, a local step or a child step; the keys are
// those it affects that are bound. An LLM call or a denial counts for nothing.
//
// Each started attempt counts once, at its first terminal event: a step
// cancelled in one dispatch and failed as indeterminate when a later
// dispatch reaches it again (DESIGN §4 treats it as an orphan) counted at
// its cancellation and does not count again at the failure.
func CountedFor(events []eventlog.Event, n uint64) []string {
	id, ok := terminalStep(events[n-1])
	if !ok {
		return nil
	}
	st := stepStartedBefore(events[:n-1], id)
	if st == nil || st.StepKind == eventlog.StepLLM {
		return nil // an LLM call, or an indeterminate failure of a step this lineage never saw start
	}
	if landedBefore(events[:n-1], id) {
		return nil // this attempt already reached a terminal event
	}
	bound := BoundKeys(events[:n])
	var keys []string
	for _, k := range st.Resources {
		if slices.Contains(bound, k) && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// landedBefore reports whether a terminal event of step id follows its
// newest step.started among events.
func landedBefore(events []eventlog.Event, id string) bool {
	landed := false
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && p.StepID == id {
			landed = false
		}
		if tid, ok := terminalStep(ev); ok && tid == id {
			landed = true
		}
	}
	return landed
}

// CountSince returns the number of counted calls for key among events 1..n
// since key's newest resource.bound or resource.captured.
func CountSince(events []eventlog.Event, n uint64, key string) int {
	count := 0
	for i := uint64(1); i <= n; i++ {
		switch p := events[i-1].Data.(type) {
		case *eventlog.ResourceBound:
			if p.Key == key {
				count = 0
			}
		case *eventlog.ResourceCaptured:
			if p.Key == key {
				count = 0
			}
		default:
			if slices.Contains(CountedFor(events, i), key) {
				count++
			}
		}
	}
	return count
}

// Due reports whether a capture of key is due after events 1..n: key is bound
// and its count has reached the EverySteps of its newest binding.
func Due(events []eventlog.Event, n uint64, key string) bool {
	b := Binding(events[:n], key)
	return b != nil && CountSince(events, n, key) >= b.EverySteps
}
