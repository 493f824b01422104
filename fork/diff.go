package fork

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
)

// Comparison is what [Diff] finds between two executions A and B (DESIGN
// §12 "Diff"): the prefix their lineages share, their steps past it aligned
// by StepID, their outcomes, and the checkpoint each side's resources would
// be compared at.
type Comparison struct {
	A eventlog.ID `json:"a"`
	B eventlog.ID `json:"b"`
	// AHead and BHead are the heads the comparison read.
	AHead uint64 `json:"a_head"`
	BHead uint64 `json:"b_head"`

	// Shared is the length of the shared prefix: events 1..Shared of both
	// lineages are the same events, read from Ancestor's log (0 and the
	// zero ID for executions with no common ancestor).
	Shared   uint64      `json:"shared"`
	Ancestor eventlog.ID `json:"ancestor"`

	// Prefix lists, in order of first appearance, the steps that lie whole
	// in the shared prefix and that both sides see alike (no override on
	// either side changes them).
	Prefix []PrefixStep `json:"prefix"`

	// Steps aligns every other step of either side by StepID, in order of
	// first appearance (see [Diff]).
	Steps []StepDiff `json:"steps"`

	// OutputA and OutputB are the two outcomes.
	OutputA Outcome `json:"output_a"`
	OutputB Outcome `json:"output_b"`

	// Resources has one entry per key either side bound, sorted by key.
	Resources []ResourceDiff `json:"resources"`
}

// Change classifies an aligned step.
type Change string

// The changes of a step past the shared prefix.
const (
	Same    Change = "same"    // both sides recorded the same outcome
	Changed Change = "changed" // both sides hold the step, with different outcomes
	OnlyA   Change = "only_a"  // only A holds the step
	OnlyB   Change = "only_b"  // only B holds the step
)

// PrefixStep is a step of the shared prefix, which both sides recorded
// alike.
type PrefixStep struct {
	StepID string            `json:"step_id"`
	Kind   eventlog.StepKind `json:"kind"`
	Target string            `json:"target"`
	StepOutcome
}

// StepDiff is one step past the shared prefix, as each side holds it.
type StepDiff struct {
	StepID string            `json:"step_id"`
	Kind   eventlog.StepKind `json:"kind"`
	Target string            `json:"target"`
	Args   json.RawMessage   `json:"args"` // the same on both sides: args are part of the StepID
	Change Change            `json:"change"`
	A      *StepOutcome      `json:"a,omitempty"` // nil when A does not hold the step
	B      *StepOutcome      `json:"b,omitempty"` // nil when B does not hold the step
	// Fields are the changed fields of a changed result (JSONDiff of A's
	// and B's Result), when both sides succeeded.
	Fields []FieldChange `json:"fields,omitempty"`
}

// StepOutcome is what one side recorded for a step.
type StepOutcome struct {
	// Seq is the seq of the step's terminal (or denied) event, or of its
	// newest step.started while it has none; 0 for an override the lineage
	// does not hold yet.
	Seq           uint64            `json:"seq"`
	Status        replay.StepStatus `json:"status"`
	Result        json.RawMessage   `json:"result,omitempty"` // of a succeeded step, as JSON ([eventlog.JSONValue]); an LLM call's response body
	Error         string            `json:"error,omitempty"`
	Indeterminate bool              `json:"indeterminate,omitempty"`
	Reason        string            `json:"reason,omitempty"`     // of a denied step
	Overridden    bool              `json:"overridden,omitempty"` // the result is a fork's override (DESIGN §12)
}

// Outcome is how an execution ended: its status and its
// terminal event.
type Outcome struct {
	// Seq is the seq of the terminal event; 0 while the execution has not
	// ended (Status pending, running or waiting).
	Seq    uint64               `json:"seq"`
	Status eventlog.Status      `json:"status"`
	Output json.RawMessage      `json:"output,omitempty"` // of execution.completed, as JSON ([eventlog.JSONValue])
	Error  string               `json:"error,omitempty"`  // of execution.failed
	Code   eventlog.FailureCode `json:"code,omitempty"`   // of execution.failed
	Reason string               `json:"reason,omitempty"` // of execution.cancelled
}

// ResourceDiff names the checkpoints at which a resource's two states are
// compared: the newest checkpoint of each side at its head.
type ResourceDiff struct {
	Key string        `json:"key"`
	A   *ResourceHead `json:"a,omitempty"` // nil when A never bound the key
	B   *ResourceHead `json:"b,omitempty"` // nil when B never bound the key
}

// ResourceHead is a side's resource at its head.
type ResourceHead struct {
	DriverID      string          `json:"driver_id"`
	Configuration json.RawMessage `json:"configuration,omitempty"`
	// Ref is the newest checkpoint: the one covering the head, else the
	// newest at or before it; "" when the resource has none (its state is
	// the initial environment as far as the log knows).
	Ref        string `json:"ref"`
	CapturedAt uint64 `json:"captured_at"`
	// Covered reports that Ref is the resource's state at the head. When
	// false, the live resource may hold changes made after Ref, and a
	// comparison of Ref is a comparison of the newest checkpoint, not of
	// the live state.
	Covered bool `json:"covered"`
}

// maxAncestors bounds the fork chain Diff walks: a longer one is a corrupt
// store (a cycle), not a real lineage.
const maxAncestors = 1 << 16

// link is one execution of a fork chain: the lineage reads its events up
// to seq upto.
type link struct {
	id   eventlog.ID
	upto uint64
}

// Diff compares the lineages of executions a and b of log. It is a pure
// fold of what it reads — Info of the two and of their ancestors, and their
// events up to the heads Info gave — and writes nothing.
//
// The shared prefix is the longest run of events 1..Shared that both
// lineages read from the same execution's log: for a parent and its fork
// at N it is 1..N; for two forks of one parent, at N and M, 1..min(N, M);
// for a fork of a fork it is found through the chain of parents. Two
// executions with no common ancestor have an empty shared prefix (Shared 0,
// zero Ancestor): they are still compared step by step, since a StepID does
// not include the execution, so two runs of one agent align. A deleted
// ancestor ends the chain Diff can walk: executions whose only common
// ancestors lie above a deleted one compare as unrelated.
//
// Steps whose events all lie in the shared prefix and that both sides see
// alike are listed in Prefix. Every other step of either lineage (with any
// override of a fork.created the lineage does not hold yet) is aligned by
// StepID in Steps: A's steps in their order of first appearance, each step
// only B holds placed before the next step of B that both hold (steps only
// A holds come first where both sides add steps at one place).
//
// An unknown a or b is an error wrapping [eventlog.ErrNotFound]; a zero ID
// or nil log wraps [eventlog.ErrInvalid]; a lineage that does not fold
// (replay's or coverage's checks) is an error naming the execution.
func Diff(ctx context.Context, log eventlog.Log, a, b eventlog.ID) (*Comparison, error) {
	if log == nil {
		return nil, fmt.Errorf("%w: fork: diff: nil log", eventlog.ErrInvalid)
	}
	if a.IsZero() || b.IsZero() {
		return nil, fmt.Errorf("%w: fork: diff %s %s: zero execution ID", eventlog.ErrInvalid, a, b)
	}
	chainA, err := chain(ctx, log, a)
	if err != nil {
		return nil, err
	}
	chainB, err := chain(ctx, log, b)
	if err != nil {
		return nil, err
	}
	c := &Comparison{A: a, B: b, AHead: chainA[0].upto, BHead: chainB[0].upto}
	c.Ancestor, c.Shared = sharedPrefix(chainA, chainB)

	sa, err := readSide(ctx, log, a, c.AHead)
	if err != nil {
		return nil, err
	}
	sb, err := readSide(ctx, log, b, c.BHead)
	if err != nil {
		return nil, err
	}
	c.OutputA, c.OutputB = sa.outcome, sb.outcome
	c.Prefix, c.Steps = align(sa, sb, c.Shared)
	if c.Resources, err = resources(sa, sb); err != nil {
		return nil, err
	}
	return c, nil
}

// chain returns id's fork chain, id first: each execution whose events the
// lineage reads and up to which seq.
func chain(ctx context.Context, log eventlog.Log, id eventlog.ID) ([]link, error) {
	info, err := log.Info(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("fork: diff: execution %s: %w", id, err)
	}
	links := []link{{id: id, upto: info.Head}}
	seen := map[eventlog.ID]bool{id: true}
	for upto := info.Head; !info.Parent.IsZero(); {
		parent := info.Parent
		if seen[parent] || len(links) >= maxAncestors {
			return nil, fmt.Errorf("%w: fork: diff: execution %s: the fork chain loops at %s", eventlog.ErrCorrupt, id, parent)
		}
		seen[parent] = true
		upto = min(upto, info.ForkSeq)
		links = append(links, link{id: parent, upto: upto})
		info, err = log.Info(ctx, parent)
		if errors.Is(err, eventlog.ErrNotFound) {
			break // deleted: its own parent is no longer known
		}
		if err != nil {
			return nil, fmt.Errorf("fork: diff: execution %s: ancestor %s: %w", id, parent, err)
		}
	}
	return links, nil
}

// sharedPrefix returns the execution whose events the two chains share
// the most of, and how many. A tie goes to the older ancestor (later in
// a's chain): a younger one's own events all lie past the tied seq, so the
// older one's log holds the shared events.
func sharedPrefix(a, b []link) (eventlog.ID, uint64) {
	var anc eventlog.ID
	var shared uint64
	for _, la := range a {
		for _, lb := range b {
			if la.id == lb.id {
				if n := min(la.upto, lb.upto); anc.IsZero() || n >= shared {
					anc, shared = la.id, n
				}
			}
		}
	}
	return anc, shared
}

// side is one folded lineage.
type side struct {
	id      eventlog.ID
	state   *replay.State
	cover   *coverage.Fold
	outcome Outcome
}

// readSide folds id's lineage up to head.
func readSide(ctx context.Context, log eventlog.Log, id eventlog.ID, head uint64) (*side, error) {
	s := &side{id: id, state: replay.New(), cover: coverage.New()}
	for ev, err := range log.Events(ctx, id, 1) {
		if err != nil {
			return nil, fmt.Errorf("fork: diff: execution %s: %w", id, err)
		}
		if ev.Seq > head {
			break
		}
		if err := s.state.Apply(ev); err != nil {
			return nil, fmt.Errorf("fork: diff: execution %s: %w", id, err)
		}
		if err := s.cover.Apply(ev); err != nil {
			return nil, fmt.Errorf("fork: diff: execution %s: %w", id, err)
		}
		switch p := ev.Data.(type) {
		case *eventlog.ExecutionCompleted:
			s.outcome = Outcome{Seq: ev.Seq, Status: eventlog.StatusCompleted, Output: eventlog.JSONValue(p.Output)}
		case *eventlog.ExecutionFailed:
			s.outcome = Outcome{Seq: ev.Seq, Status: eventlog.StatusFailed, Error: p.Error, Code: p.Code}
		case *eventlog.ExecutionCancelled:
			s.outcome = Outcome{Seq: ev.Seq, Status: eventlog.StatusCancelled, Reason: p.Reason}
		case *eventlog.ForkCreated:
			s.outcome = Outcome{} // a fork does not inherit the prefix's end (DESIGN §8½)
		}
	}
	if s.state.Head != head {
		return nil, fmt.Errorf("%w: fork: diff: execution %s: read %d events, its head is %d", eventlog.ErrCorrupt, id, s.state.Head, head)
	}
	s.outcome.Status = s.state.Status
	return s, nil
}

// steps returns the side's steps in order of first appearance, followed
// by the overrides of steps the lineage does not hold, by StepID.
func (s *side) steps() []replay.Step {
	steps := s.state.Steps()
	for _, o := range s.state.Overrides() {
		if _, held := s.index(steps, o.StepID); !held {
			st, _ := s.state.Step(o.StepID)
			steps = append(steps, st)
		}
	}
	return steps
}

func (s *side) index(steps []replay.Step, id string) (int, bool) {
	i := slices.IndexFunc(steps, func(st replay.Step) bool { return st.ID == id })
	return i, i >= 0
}

// lastSeq is the seq of st's newest event.
func lastSeq(st replay.Step) uint64 { return max(st.StartedAt, st.EndedAt) }

// sameOutcome reports whether two sides recorded the same outcome of a step.
func sameOutcome(a, b replay.Step) bool {
	return a.Status == b.Status && bytes.Equal(a.Result, b.Result) && a.Error == b.Error &&
		a.Indeterminate == b.Indeterminate && a.Reason == b.Reason
}

// align splits the steps of the two sides into the shared prefix's and the
// aligned rest.
func align(sa, sb *side, shared uint64) ([]PrefixStep, []StepDiff) {
	stepsA, stepsB := sa.steps(), sb.steps()
	inA := make(map[string]int, len(stepsA))
	for i, st := range stepsA {
		inA[st.ID] = i
	}
	inB := make(map[string]int, len(stepsB))
	for i, st := range stepsB {
		inB[st.ID] = i
	}
	prefix := []PrefixStep{}
	rest := []StepDiff{}
	done := map[string]bool{}
	emit := func(a, b *replay.Step) {
		st := a
		if st == nil {
			st = b
		}
		done[st.ID] = true
		if a != nil && b != nil && sameOutcome(*a, *b) && !a.Overridden && !b.Overridden &&
			lastSeq(*a) <= shared && lastSeq(*b) <= shared {
			prefix = append(prefix, PrefixStep{StepID: st.ID, Kind: st.Kind, Target: st.Target, StepOutcome: *sideOutcome(*a)})
			return
		}
		d := StepDiff{StepID: st.ID, Kind: st.Kind, Target: st.Target, Args: eventlog.JSONValue(st.Args)}
		if b != nil && len(st.Args) == 0 && st.Kind == "" {
			// an override the lineage does not hold knows only its StepID
			d.Kind, d.Target, d.Args = b.Kind, b.Target, eventlog.JSONValue(b.Args)
		}
		switch {
		case b == nil:
			d.Change = OnlyA
		case a == nil:
			d.Change = OnlyB
		case sameOutcome(*a, *b):
			d.Change = Same
		default:
			d.Change = Changed
		}
		if a != nil {
			d.A = sideOutcome(*a)
		}
		if b != nil {
			d.B = sideOutcome(*b)
		}
		if d.Change == Changed && len(d.A.Result) > 0 && len(d.B.Result) > 0 {
			d.Fields = JSONDiff(d.A.Result, d.B.Result)
		}
		rest = append(rest, d)
	}
	j := 0
	for i := range stepsA {
		a := &stepsA[i]
		if done[a.ID] {
			continue
		}
		bi, common := inB[a.ID]
		if common {
			// B's steps before a that A does not hold come first.
			for ; j < bi; j++ {
				if _, held := inA[stepsB[j].ID]; !held && !done[stepsB[j].ID] {
					emit(nil, &stepsB[j])
				}
			}
			emit(a, &stepsB[bi])
			continue
		}
		emit(a, nil)
	}
	for ; j < len(stepsB); j++ {
		if !done[stepsB[j].ID] {
			emit(nil, &stepsB[j])
		}
	}
	return prefix, rest
}

// sideOutcome is what one side holds of a step.
func sideOutcome(st replay.Step) *StepOutcome {
	o := &StepOutcome{Seq: lastSeq(st), Status: st.Status, Error: st.Error, Indeterminate: st.Indeterminate,
		Reason: st.Reason, Overridden: st.Overridden}
	if st.Status == replay.StepSucceeded {
		o.Result = eventlog.JSONValue(st.Result)
		if body, ok := eventlog.LLMResponseBody(st.Result); ok && st.Kind == eventlog.StepLLM {
			o.Result = body
		}
	}
	return o
}

// resources returns the newest checkpoint of every key either side bound.
func resources(sa, sb *side) ([]ResourceDiff, error) {
	pa, err := sa.cover.Point(sa.state.Head)
	if err != nil {
		return nil, fmt.Errorf("fork: diff: execution %s: %w", sa.id, err)
	}
	pb, err := sb.cover.Point(sb.state.Head)
	if err != nil {
		return nil, fmt.Errorf("fork: diff: execution %s: %w", sb.id, err)
	}
	byKey := map[string]*ResourceDiff{}
	var keys []string
	at := func(key string) *ResourceDiff {
		r, ok := byKey[key]
		if !ok {
			r = &ResourceDiff{Key: key}
			byKey[key] = r
			keys = append(keys, key)
		}
		return r
	}
	for _, sel := range pa.Resources {
		at(sel.Key).A = head(sa, sel)
	}
	for _, sel := range pb.Resources {
		at(sel.Key).B = head(sb, sel)
	}
	slices.Sort(keys)
	out := make([]ResourceDiff, len(keys))
	for i, k := range keys {
		out[i] = *byKey[k]
	}
	return out, nil
}

// head describes a side's resource at its head from its selection there.
func head(s *side, sel coverage.Selection) *ResourceHead {
	h := &ResourceHead{Ref: sel.Ref, CapturedAt: sel.CapturedAt, Covered: sel.Covered}
	if b, ok := s.state.Binding(sel.Key); ok {
		h.DriverID, h.Configuration = b.DriverID, b.Configuration
	}
	return h
}
