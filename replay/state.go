package replay

import (
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"sort"

	"github.com/forkline/forkline/eventlog"
)

// Status is the state of an execution.
type Status string

// The execution statuses. A State that has folded no event has Status "".
const (
	StatusPending   Status = "pending"   // created (or forked) and not finished
	StatusCompleted Status = "completed" // execution.completed
	StatusFailed    Status = "failed"    // execution.failed
)

// StepStatus is the state of one step.
type StepStatus string

// The step statuses.
const (
	StepStarted   StepStatus = "started"   // step.started without a terminal event yet: running, or an orphan
	StepSucceeded StepStatus = "succeeded" // step.succeeded
	StepFailed    StepStatus = "failed"    // step.failed, Indeterminate for a resolved at_most_once orphan
	StepCancelled StepStatus = "cancelled" // step.cancelled: it may be run again or resolved as indeterminate
	StepDenied    StepStatus = "denied"    // step.denied: it never ran
)

// Step is what the lineage recorded about one StepID.
type Step struct {
	ID          string
	Kind        eventlog.StepKind
	Target      string
	Args        []byte   // from the newest step.started
	Resources   []string // keys the newest step.started affects
	Idempotency eventlog.Idempotency
	Status      StepStatus
	Attempts    uint32 // step.started events of the step (0 for denied)
	Result      []byte // of step.succeeded
	Error       string // of step.failed
	// Indeterminate marks a step.failed that resolved an orphan.
	Indeterminate bool
	Reason        string // of step.denied
	StartedAt     uint64 // seq of the newest step.started (0 for denied)
	EndedAt       uint64 // seq of the terminal or denied event (0 while started)
	Dispatch      uint64 // dispatch during which the newest step.started (or the denial) was written
}

// Binding is a resource.bound of the lineage.
type Binding struct {
	Key           string
	DriverID      string
	Configuration json.RawMessage
	Binding       json.RawMessage
	From          string // checkpoint ref it was created from; "" = initial environment
	EverySteps    int
	OnCompletion  bool
	CoverageReuse bool
	Seq           uint64 // seq of its resource.bound
	// Own reports that this execution bound it: its resource.bound follows
	// the lineage's newest fork.created (every binding of a root is own). A
	// fork never opens an inherited binding; it creates its own resource.
	Own bool
}

// State is the execution state a lineage's events fold into: the
// execution's status and output, every step with its recorded outcome, the
// resource bindings and, for a fork, where it forked from. It is built by
// [New] and [State.Apply] or by [Fold]. The exported fields are the fold's
// results; change them and later Applies fold from the changed values.
//
// A State is not safe for concurrent use.
type State struct {
	Agent  string // of execution.created
	Input  []byte // of execution.created
	Status Status
	Output []byte               // of execution.completed
	Error  string               // of execution.failed
	Code   eventlog.FailureCode // of execution.failed

	Dispatches uint64 // the newest dispatch.started's Dispatch; 0 before the first
	Head       uint64 // seq of the newest event folded

	// Parent, ForkAt and Selections come from the lineage's newest
	// fork.created; they are zero for a root execution.
	Parent     eventlog.ID
	ForkAt     uint64
	Selections []eventlog.ForkSelection

	steps    map[string]int // StepID → index in order
	order    []Step         // in order of first appearance
	bindings map[string]Binding
	keys     []string // bound keys, sorted
	forkSeq  uint64   // seq of the newest fork.created; 0 for a root
}

// New returns the state of a lineage with no events.
func New() *State {
	return &State{steps: make(map[string]int), bindings: make(map[string]Binding)}
}

// Fold folds a whole lineage, as read from [eventlog.Log.Events], into a
// new State. It stops at the first error the sequence yields or Apply
// returns, and returns it (with a nil State). An empty sequence folds into
// New().
func Fold(events iter.Seq2[eventlog.Event, error]) (*State, error) {
	s := New()
	for ev, err := range events {
		if err != nil {
			return nil, fmt.Errorf("replay: reading the lineage after seq %d: %w", s.Head, err)
		}
		if err := s.Apply(ev); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// invalid returns the error for an event that breaks the lineage's form.
func invalid(ev eventlog.Event, format string, args ...any) error {
	return fmt.Errorf("replay: seq %d: %s: %w", ev.Seq, fmt.Sprintf(format, args...), eventlog.ErrInvalid)
}

// Apply folds the next event of the lineage. It checks that the lineage
// stays well formed (see the package documentation) and otherwise returns
// an error that names the seq and wraps [eventlog.ErrInvalid], leaving the
// state unchanged. The state keeps copies of the event's bytes.
func (s *State) Apply(ev eventlog.Event) error {
	if nilPayload(ev.Data) {
		// eventlog's Validate dereferences a typed nil payload; refuse it first.
		return invalid(ev, "%s event without payload", ev.Kind())
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("replay: seq %d: %w", ev.Seq, err)
	}
	if ev.Seq != s.Head+1 {
		return invalid(ev, "%s out of order: want seq %d", ev.Kind(), s.Head+1)
	}
	if s.Head == 0 && ev.Kind() != eventlog.KindExecutionCreated {
		return invalid(ev, "lineage starts with %s, not execution.created", ev.Kind())
	}
	if s.Status != StatusPending && s.Head > 0 && ev.Kind() != eventlog.KindForkCreated {
		return invalid(ev, "%s after the execution %s", ev.Kind(), s.Status)
	}
	switch p := ev.Data.(type) {
	case *eventlog.ExecutionCreated:
		if s.Head != 0 {
			return invalid(ev, "execution.created after seq 1")
		}
		s.Agent, s.Input, s.Status = p.Agent, slices.Clone(p.Input), StatusPending

	case *eventlog.DispatchStarted:
		if p.Dispatch != s.Dispatches+1 {
			return invalid(ev, "dispatch %d after dispatch %d", p.Dispatch, s.Dispatches)
		}
		s.Dispatches = p.Dispatch

	case *eventlog.StepStarted:
		if err := s.applyStarted(ev, p); err != nil {
			return err
		}

	case *eventlog.StepSucceeded:
		st, err := s.terminal(ev, p.StepID, false)
		if err != nil {
			return err
		}
		st.Status, st.Result, st.EndedAt = StepSucceeded, slices.Clone(p.Result), ev.Seq

	case *eventlog.StepFailed:
		st, err := s.terminal(ev, p.StepID, p.Indeterminate)
		if err != nil {
			return err
		}
		st.Status, st.Error, st.Indeterminate, st.EndedAt = StepFailed, p.Error, p.Indeterminate, ev.Seq

	case *eventlog.StepCancelled:
		st, err := s.terminal(ev, p.StepID, false)
		if err != nil {
			return err
		}
		st.Status, st.EndedAt = StepCancelled, ev.Seq

	case *eventlog.StepDenied:
		if st, ok := s.step(p.StepID); ok {
			return invalid(ev, "step.denied of step %q, which is already %s", p.StepID, st.Status)
		}
		s.steps[p.StepID] = len(s.order)
		s.order = append(s.order, Step{
			ID: p.StepID, Kind: p.StepKind, Target: p.Target, Status: StepDenied,
			Reason: p.Reason, EndedAt: ev.Seq, Dispatch: s.Dispatches,
		})

	case *eventlog.ResourceBound:
		if _, ok := s.bindings[p.Key]; !ok {
			i, _ := slices.BinarySearch(s.keys, p.Key)
			s.keys = slices.Insert(s.keys, i, p.Key)
		}
		s.bindings[p.Key] = Binding{
			Key: p.Key, DriverID: p.DriverID,
			Configuration: slices.Clone(p.Configuration), Binding: slices.Clone(p.Binding),
			From: p.From, EverySteps: p.EverySteps, OnCompletion: p.OnCompletion,
			CoverageReuse: p.CoverageReuse, Seq: ev.Seq,
		}

	case *eventlog.ResourceCaptured:
		if _, ok := s.bindings[p.Key]; !ok {
			return invalid(ev, "resource.captured of %q, which is not bound", p.Key)
		}

	case *eventlog.ResourceCaptureFailed:
		if _, ok := s.bindings[p.Key]; !ok {
			return invalid(ev, "resource.capture_failed of %q, which is not bound", p.Key)
		}

	case *eventlog.ExecutionCompleted:
		s.Status, s.Output = StatusCompleted, slices.Clone(p.Output)

	case *eventlog.ExecutionFailed:
		s.Status, s.Error, s.Code = StatusFailed, p.Error, p.Code

	case *eventlog.ForkCreated:
		if p.At != s.Head {
			return invalid(ev, "fork.created at %d, want the fork point %d (the seq before it)", p.At, s.Head)
		}
		if len(p.Selections) != len(s.keys) {
			return invalid(ev, "fork.created has %d selections, %d resources are bound", len(p.Selections), len(s.keys))
		}
		for i, sel := range p.Selections {
			if sel.Key != s.keys[i] {
				return invalid(ev, "fork.created selects %q, which is not bound at the fork point", sel.Key)
			}
		}
		s.Parent, s.ForkAt, s.Selections = p.Parent, p.At, slices.Clone(p.Selections)
		s.forkSeq = ev.Seq
		s.Status, s.Output, s.Error, s.Code = StatusPending, nil, "", ""

	default:
		return invalid(ev, "unknown event kind %s", ev.Kind())
	}
	s.Head = ev.Seq
	return nil
}

// applyStarted folds a step.started: a new step, or a re-run of a started
// (orphaned) or cancelled one.
func (s *State) applyStarted(ev eventlog.Event, p *eventlog.StepStarted) error {
	for _, k := range p.Resources {
		if _, ok := s.bindings[k]; !ok {
			return invalid(ev, "step %q affects %q, which is not bound", p.StepID, k)
		}
	}
	st, ok := s.step(p.StepID)
	if !ok {
		if p.Attempt != 1 {
			return invalid(ev, "first step.started of step %q has attempt %d, want 1", p.StepID, p.Attempt)
		}
		s.steps[p.StepID] = len(s.order)
		s.order = append(s.order, Step{ID: p.StepID})
		st = &s.order[len(s.order)-1]
	} else {
		switch {
		case st.Status != StepStarted && st.Status != StepCancelled:
			return invalid(ev, "step.started of step %q, which is already %s; replay never runs it again", p.StepID, st.Status)
		case st.Kind != p.StepKind || st.Target != p.Target:
			return invalid(ev, "step.started of step %q as %s %q, it started as %s %q", p.StepID, p.StepKind, p.Target, st.Kind, st.Target)
		case p.Attempt != st.Attempts+1:
			return invalid(ev, "step.started of step %q has attempt %d, want %d", p.StepID, p.Attempt, st.Attempts+1)
		}
	}
	*st = Step{
		ID: p.StepID, Kind: p.StepKind, Target: p.Target,
		Args: slices.Clone(p.Args), Resources: slices.Clone(p.Resources),
		Idempotency: p.Idempotency, Status: StepStarted, Attempts: p.Attempt,
		StartedAt: ev.Seq, Dispatch: s.Dispatches,
	}
	return nil
}

// terminal returns the step a terminal event resolves: one that is started,
// or for an indeterminate failure also one that was cancelled.
func (s *State) terminal(ev eventlog.Event, id string, indeterminate bool) (*Step, error) {
	st, ok := s.step(id)
	if !ok {
		return nil, invalid(ev, "%s of step %q, which never started", ev.Kind(), id)
	}
	if st.Status == StepStarted || indeterminate && st.Status == StepCancelled {
		return st, nil
	}
	return nil, invalid(ev, "%s of step %q, which is already %s", ev.Kind(), id, st.Status)
}

// nilPayload reports whether p is a nil pointer of a payload type.
func nilPayload(p eventlog.Payload) bool {
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// step returns the stored step id, for the fold to change.
func (s *State) step(id string) (*Step, bool) {
	i, ok := s.steps[id]
	if !ok {
		return nil, false
	}
	return &s.order[i], true
}

// Step returns a copy of what the lineage recorded about step id.
func (s *State) Step(id string) (Step, bool) {
	st, ok := s.step(id)
	if !ok {
		return Step{}, false
	}
	return st.clone(), true
}

// Steps returns copies of every step, in order of first appearance.
func (s *State) Steps() []Step {
	out := make([]Step, len(s.order))
	for i := range s.order {
		out[i] = s.order[i].clone()
	}
	return out
}

// Binding returns a copy of the newest resource.bound of key in the
// lineage.
func (s *State) Binding(key string) (Binding, bool) {
	b, ok := s.bindings[key]
	if !ok {
		return Binding{}, false
	}
	return s.binding(b), true
}

// Bindings returns copies of the newest binding of every bound key, sorted
// by key.
func (s *State) Bindings() []Binding {
	out := make([]Binding, len(s.keys))
	for i, k := range s.keys {
		out[i] = s.binding(s.bindings[k])
	}
	return out
}

// binding returns a copy of b with Own set.
func (s *State) binding(b Binding) Binding {
	b.Configuration, b.Binding = slices.Clone(b.Configuration), slices.Clone(b.Binding)
	b.Own = b.Seq > s.forkSeq
	return b
}

// Selection returns what the lineage's newest fork.created selected for
// key, and false for a root or a key the fork did not select.
func (s *State) Selection(key string) (eventlog.ForkSelection, bool) {
	i := sort.Search(len(s.Selections), func(i int) bool { return s.Selections[i].Key >= key })
	if i < len(s.Selections) && s.Selections[i].Key == key {
		return s.Selections[i], true
	}
	return eventlog.ForkSelection{}, false
}

// clone returns st with its own copies of its slices.
func (st *Step) clone() Step {
	c := *st
	c.Args, c.Resources, c.Result = slices.Clone(st.Args), slices.Clone(st.Resources), slices.Clone(st.Result)
	return c
}
