package replay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// Status is the state of an execution: eventlog's, so that the replay
// fold and the stores (which run the same [eventlog.StatusState]) agree.
type Status = eventlog.Status

// The execution statuses (DESIGN §9). A State that has folded no event has
// the zero Status.
const (
	StatusPending   = eventlog.StatusPending   // created (or forked), no dispatch of its own yet
	StatusRunning   = eventlog.StatusRunning   // dispatched, nothing terminal, not waiting
	StatusWaiting   = eventlog.StatusWaiting   // an approval without decision, or parked
	StatusCompleted = eventlog.StatusCompleted // execution.completed
	StatusFailed    = eventlog.StatusFailed    // execution.failed
	StatusCancelled = eventlog.StatusCancelled // execution.cancelled
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
	StepRetrying  StepStatus = "retrying"  // step.failed with RetryAt: the attempt ended, the next runs at RetryAt
	StepAbandoned StepStatus = "abandoned" // step.abandoned: a dispatch completed without reaching it again
)

// ApprovalDecision is what became of an approval.requested.
type ApprovalDecision string

// The approval decisions; "" while none was recorded.
const (
	ApprovalGranted  ApprovalDecision = "granted"  // approval.granted
	ApprovalRejected ApprovalDecision = "rejected" // approval.rejected
	// ApprovalExpired: the request passed its ExpiresAt undecided, and
	// the step was denied (step.denied{Code: approval_expired}, DESIGN
	// §17). No decision is taken for it any more.
	ApprovalExpired ApprovalDecision = "expired"
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
	Result      []byte // of step.succeeded, or of the newest fork.created override
	Error       string // of step.failed (for a retrying step, the failed attempt's)
	// RetryAt is when a retrying step runs its next attempt (of its
	// step.failed); zero otherwise.
	RetryAt time.Time
	// Overridden reports that Result is a fork.created override (DESIGN
	// §12): the step replays it, whatever was recorded.
	Overridden bool
	// Indeterminate marks a step.failed that resolved an orphan.
	Indeterminate bool
	Reason        string // of step.denied
	// Code and RuleID are step.denied's: why the call was refused and the
	// policy rule that refused it ("" in records before format 3, and for
	// a denial no rule made).
	Code      eventlog.DenialCode
	RuleID    string
	StartedAt uint64 // seq of the newest step.started (0 for denied)
	EndedAt   uint64 // seq of the terminal or denied event (0 while started)
	Dispatch  uint64 // dispatch during which the newest step.started (or the denial) was written
	// WakeAt is when a recv step times out: its newest step.started's
	// (start + timeout, DESIGN §21½.1); zero for every other kind.
	WakeAt time.Time

	// Retried counts the step's step.failed events with a RetryAt: its
	// attempts that failed and were retried (a child step's key counts
	// them, DESIGN §15½.7). Orphaned and cancelled attempts are not.
	Retried uint32
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
	// Portable is the recorded resource.bound Portable: the binding opens
	// from any host. Bindings of format 1 and 2 read false (DESIGN §15½.4).
	Portable bool
	// Owner is the Owner of the newest dispatch.started before the
	// resource.bound: the owner that made the binding ("" if unrecorded).
	Owner string
	Seq   uint64 // seq of its resource.bound
	// Own reports that this execution bound it: its resource.bound follows
	// the lineage's newest fork.created (every binding of a root is own). A
	// fork never opens an inherited binding; it creates its own resource.
	Own bool
}

// Timer is a durable sleep of the lineage (timer.started, timer.fired).
type Timer struct {
	ID        string
	WakeAt    time.Time
	StartedAt uint64 // seq of its timer.started
	FiredAt   uint64 // seq of its timer.fired; 0 while it sleeps
}

// Approval is the newest approval.requested of one step and its decision.
type Approval struct {
	StepID   string
	StepKind eventlog.StepKind
	Target   string
	Args     []byte
	Reason   string
	RuleID   string // the policy rule that asked (format 3); "" for none
	// ExpiresAt is when the request expires undecided (format 3); zero
	// for never.
	ExpiresAt time.Time
	// Approvers may decide (format 3); none means anyone.
	Approvers   []string
	Message     string // shown to the approvers (format 3)
	RequestedAt uint64 // seq of the approval.requested
	// RequestedTime is the approval.requested's time (the forkline.approval.wait
	// metric measures from it).
	RequestedTime time.Time
	Decision      ApprovalDecision // "" while undecided
	By, Note      string           // of the decision
	DecidedAt     uint64           // seq of the decision (of the step.denied when expired); 0 while undecided
	// Own reports that it was requested by this execution's run: after the
	// lineage's newest fork.created. An approval of the prefix never
	// approves a live run of a fork (DESIGN §8½), so only an own, undecided
	// approval is awaited.
	Own bool
}

// Pending reports whether the approval is awaited: own and undecided.
func (a Approval) Pending() bool { return a.Own && a.Decision == "" }

// Marker is a marker.recorded of the lineage (sdk.Patched).
type Marker struct {
	Name     string
	Seq      uint64
	Dispatch uint64 // the dispatch during which it was recorded
}

// Message is a message.received of the lineage, or one that a fork.created
// injected (sdk.WithMessages), and what became of it (DESIGN §18).
type Message struct {
	eventlog.Message
	// ReceivedAt is the seq of its message.received, or of the fork.created
	// that injected it.
	ReceivedAt uint64
	// ConsumedAt is the seq of the step.succeeded of the recv step that
	// returned it, and ConsumedBy that step's StepID; 0 and "" while it
	// waits to be received.
	ConsumedAt uint64
	ConsumedBy string
}

// Consumed reports whether a recv step returned the message.
func (m Message) Consumed() bool { return m.ConsumedAt != 0 }

// EventValue is an event.set of the lineage (sdk.SetEvent): the value
// published under Key at Seq.
type EventValue struct {
	Key   string
	Value []byte
	Seq   uint64
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

	// Deadline is the run's deadline: of execution.created, or of the
	// newest fork.created (a fork never inherits its parent's). WakeAt is
	// the newest dispatch.parked's while it is the newest dispatch event.
	Deadline time.Time
	WakeAt   time.Time

	// Version is the code version the run is for (DESIGN §19, §21½.5):
	// execution.created's Version, or the newest fork.created's (which
	// records the parent's unless sdk.OnVersion moved the fork). "" runs
	// on any worker.
	Version string

	// CancelRequested reports an execution.cancel_requested of this run
	// (after the newest fork.created: a fork never inherits a request);
	// CancelReason and CancelBy are the first request's, and CancelReason
	// becomes execution.cancelled's Reason when the execution is cancelled.
	CancelRequested bool
	CancelReason    string
	CancelBy        string

	// Markers lists the lineage's marker.recorded events in order.
	Markers []Marker

	// Diverged holds the Unconsumed steps of the newest fork.diverged of
	// this fork, and DivergedAt its seq; nil and 0 if the fork did not
	// diverge.
	Diverged   []string
	DivergedAt uint64

	// Tokens sums the token usage the lineage's llm steps recorded
	// (eventlog.TokensOf: step.succeeded Tokens, DESIGN §16, and a failed
	// attempt's step.failed Tokens, §21½.9): a fork's prefix counts, an
	// override (which ran nothing) does not.
	Tokens eventlog.Tokens

	// Budget is the lineage's budget (DESIGN §17, §21½.9): of
	// execution.created, replaced by the Budget of a fork.created that
	// gives one (sdk.Budget on the fork). It is the one run setting a fork
	// inherits: a fork.created without a Budget keeps its parent's.
	Budget eventlog.Limits

	// LLMCalls and ToolCalls count the lineage's live llm and tool calls:
	// one per step.started of the kind — every attempt, a retry or an
	// orphan's re-run included — a fork's prefix included. A replayed
	// call appends nothing and a denied one never started: neither
	// counts. Together with Tokens they are the spend the budget limits.
	LLMCalls  uint64
	ToolCalls uint64

	// Created is the time of execution.created, or of the newest
	// fork.created: when this run began. TraceParent is the W3C trace
	// context its caller recorded there ("" for none): a fork's own, never
	// its parent's (DESIGN §8½, §13). RunDispatches counts the
	// dispatch.started events since then (Dispatches counts the whole
	// lineage's, a fork's prefix included).
	Created       time.Time
	TraceParent   string
	RunDispatches uint64

	// Parent, ForkAt and Selections come from the lineage's newest
	// fork.created; they are zero for a root execution.
	Parent     eventlog.ID
	ForkAt     uint64
	Selections []eventlog.ForkSelection

	steps     map[string]int    // StepID → index in order
	order     stepChunks        // in order of first appearance
	dropArgs  bool              // Options.DropArgs
	targets   map[string]string // interned Targets of the steps
	bindings  map[string]Binding
	keys      []string // bound keys, sorted
	forkSeq   uint64   // seq of the newest fork.created; 0 for a root
	owner     string   // Owner of the newest dispatch.started
	status    eventlog.StatusState
	overrides map[string][]byte // StepID → result, newest fork.created override winning
	timers    map[string]int    // TimerID → index in timerList
	timerList []Timer
	approvals map[string]Approval // StepID → newest request

	// Messages (DESIGN §18): every message in arrival order, by MessageID,
	// by topic (indexes into msgs), and how many of a topic's were
	// consumed — a recv step always takes the oldest unconsumed one, so
	// the consumed ones of a topic are its first.
	msgs     []Message
	msgIDs   map[string]int
	byTopic  map[string][]int
	consumed map[string]int
	// Published events (sdk.SetEvent): every event.set in order, and the
	// indexes of each key's.
	events []EventValue
	byKey  map[string][]int
}

// New returns the state of a lineage with no events.
func New() *State { return NewWith(Options{}) }

// Options configure what a [State] keeps. The zero value keeps everything.
type Options struct {
	// DropArgs leaves the Args of step.started out of the state: [Step]
	// and the other step accessors return steps with nil Args (their
	// StartedAt says where in the log to read them). Replay needs a step's
	// outcome, not its args, and a long lineage's args are most of what
	// the state would otherwise hold. Default false: Args are kept.
	DropArgs bool
}

// NewWith returns the state of a lineage with no events, configured by o.
func NewWith(o Options) *State {
	return &State{
		steps: make(map[string]int), bindings: make(map[string]Binding), targets: make(map[string]string),
		overrides: make(map[string][]byte), timers: make(map[string]int), approvals: make(map[string]Approval),
		msgIDs: make(map[string]int), byTopic: make(map[string][]int), consumed: make(map[string]int),
		byKey:    make(map[string][]int),
		dropArgs: o.DropArgs,
	}
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
	if s.Head > 0 && s.Status.Terminal() && ev.Kind() != eventlog.KindForkCreated {
		return invalid(ev, "%s after the execution %s", ev.Kind(), s.Status)
	}
	if err := s.apply(ev); err != nil {
		return err
	}
	s.status.Apply(ev)
	s.Status, s.Deadline, s.WakeAt = s.status.Status, s.status.Deadline, s.status.WakeAt
	s.Head = ev.Seq
	return nil
}

// apply folds a payload that passed the checks common to every kind.
func (s *State) apply(ev eventlog.Event) error {
	switch p := ev.Data.(type) {
	case *eventlog.ExecutionCreated:
		if s.Head != 0 {
			return invalid(ev, "execution.created after seq 1")
		}
		s.Agent, s.Input, s.Version = p.Agent, slices.Clone(p.Input), p.Version
		s.Budget = p.Budget
		s.Created, s.TraceParent = ev.Time, p.TraceParent

	case *eventlog.DispatchStarted:
		if p.Dispatch != s.Dispatches+1 {
			return invalid(ev, "dispatch %d after dispatch %d", p.Dispatch, s.Dispatches)
		}
		s.Dispatches = p.Dispatch
		s.RunDispatches++
		s.owner = p.Owner

	case *eventlog.StepStarted:
		if err := s.applyStarted(ev, p); err != nil {
			return err
		}

	case *eventlog.StepSucceeded:
		st, err := s.terminal(ev, p.StepID, false)
		if err != nil {
			return err
		}
		if st.Kind == eventlog.StepRecv {
			if err := s.consume(ev, st); err != nil {
				return err
			}
		}
		st.Status, st.Result, st.EndedAt = StepSucceeded, slices.Clone(p.Result), ev.Seq
		s.Tokens = s.Tokens.Plus(p.Tokens)

	case *eventlog.StepFailed:
		st, err := s.terminal(ev, p.StepID, p.Indeterminate)
		if err != nil {
			return err
		}
		st.Status, st.Error, st.Indeterminate, st.EndedAt = StepFailed, p.Error, p.Indeterminate, ev.Seq
		s.Tokens = s.Tokens.Plus(p.Tokens) // a failed attempt's usage counts (DESIGN §21½.9)
		if !p.RetryAt.IsZero() {
			st.Status, st.RetryAt = StepRetrying, p.RetryAt
			st.Retried++
		}

	case *eventlog.StepCancelled:
		st, err := s.terminal(ev, p.StepID, false)
		if err != nil {
			return err
		}
		st.Status, st.EndedAt = StepCancelled, ev.Seq

	case *eventlog.StepAbandoned:
		st, ok := s.step(p.StepID)
		if !ok {
			return invalid(ev, "step.abandoned of step %q, which never started", p.StepID)
		}
		switch st.Status {
		case StepStarted, StepCancelled, StepRetrying:
		default:
			return invalid(ev, "step.abandoned of step %q, which is already %s", p.StepID, st.Status)
		}
		st.Status, st.EndedAt, st.RetryAt = StepAbandoned, ev.Seq, time.Time{}

	case *eventlog.StepDenied:
		if p.Code == eventlog.DenyApprovalExpired {
			// The expiry of an awaited request ends it (DESIGN §17), as
			// the status fold says (eventlog.StatusState).
			if a, ok := s.approval(p.StepID); ok && a.Pending() {
				a.Decision, a.DecidedAt, a.Own = ApprovalExpired, ev.Seq, false
				s.approvals[p.StepID] = a
			}
		}
		if st, ok := s.step(p.StepID); ok {
			if st.Status != StepRetrying && st.Status != StepAbandoned {
				return invalid(ev, "step.denied of step %q, which is already %s", p.StepID, st.Status)
			}
			if st.Kind != p.StepKind || st.Target != p.Target {
				return invalid(ev, "step.denied of step %q as %s %q, it started as %s %q", p.StepID, p.StepKind, p.Target, st.Kind, st.Target)
			}
			// The gate refused a retried or abandoned step's next attempt
			// (every live attempt in a fork is gated, DESIGN §8½, an orphan's
			// re-run too, abandoned first): the step ends denied. Its
			// attempts stay; none is in flight, none more is counted.
			st.Status, st.Reason, st.EndedAt, st.RetryAt = StepDenied, p.Reason, ev.Seq, time.Time{}
			st.Code, st.RuleID = p.Code, p.RuleID
			st.Dispatch = s.Dispatches
			break
		}
		if _, ok := s.overrides[p.StepID]; ok {
			return invalid(ev, "step.denied of step %q, which a fork overrides", p.StepID)
		}
		s.steps[p.StepID] = s.order.push(Step{
			ID: p.StepID, Kind: p.StepKind, Target: s.intern(p.Target), Status: StepDenied,
			Reason: p.Reason, Code: p.Code, RuleID: p.RuleID, EndedAt: ev.Seq, Dispatch: s.Dispatches,
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
			CoverageReuse: p.CoverageReuse, Portable: p.Portable, Owner: s.owner, Seq: ev.Seq,
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
		s.Output = slices.Clone(p.Output)

	case *eventlog.ExecutionFailed:
		s.Error, s.Code = p.Error, p.Code

	case *eventlog.ExecutionCancelled:
		s.CancelReason = p.Reason

	case *eventlog.CancelRequested:
		if !s.CancelRequested {
			s.CancelRequested, s.CancelReason, s.CancelBy = true, p.Reason, p.By
		}

	case *eventlog.DispatchParked:
		if !s.status.Dispatched {
			return invalid(ev, "dispatch.parked before a dispatch of this run started")
		}
		if s.status.Parked {
			return invalid(ev, "dispatch.parked of a dispatch that is already parked")
		}

	case *eventlog.TimerStarted:
		if _, ok := s.timers[p.TimerID]; ok {
			return invalid(ev, "timer.started of timer %q, which already started", p.TimerID)
		}
		s.timers[p.TimerID] = len(s.timerList)
		s.timerList = append(s.timerList, Timer{ID: p.TimerID, WakeAt: p.WakeAt, StartedAt: ev.Seq})

	case *eventlog.TimerFired:
		i, ok := s.timers[p.TimerID]
		if !ok {
			return invalid(ev, "timer.fired of timer %q, which never started", p.TimerID)
		}
		if s.timerList[i].FiredAt != 0 {
			return invalid(ev, "timer.fired of timer %q, which already fired", p.TimerID)
		}
		s.timerList[i].FiredAt = ev.Seq

	case *eventlog.ApprovalRequested:
		if a, ok := s.approval(p.StepID); ok && a.Pending() {
			return invalid(ev, "approval.requested of step %q, which awaits a decision", p.StepID)
		}
		if st, ok := s.Step(p.StepID); ok && (st.Status == StepSucceeded || st.Status == StepFailed || st.Status == StepDenied) {
			return invalid(ev, "approval.requested of step %q, which is already %s; replay never runs it again", p.StepID, st.Status)
		}
		s.approvals[p.StepID] = Approval{
			StepID: p.StepID, StepKind: p.StepKind, Target: p.Target, Args: slices.Clone(p.Args),
			Reason: p.Reason, RuleID: p.RuleID, ExpiresAt: p.ExpiresAt, Approvers: slices.Clone(p.Approvers),
			Message: p.Message, RequestedAt: ev.Seq, RequestedTime: ev.Time,
		}

	case *eventlog.ApprovalGranted:
		if err := s.decide(ev, p.StepID, ApprovalGranted, p.By, p.Note); err != nil {
			return err
		}

	case *eventlog.ApprovalRejected:
		if err := s.decide(ev, p.StepID, ApprovalRejected, p.By, p.Note); err != nil {
			return err
		}

	case *eventlog.MarkerRecorded:
		s.Markers = append(s.Markers, Marker{Name: p.Name, Seq: ev.Seq, Dispatch: s.Dispatches})

	case *eventlog.MessageReceived:
		// No body (DESIGN §8½, §21½.1): it changes no step, binding or
		// coverage; it waits to be consumed by a recv step.
		if err := s.receive(ev, eventlog.Message{MessageID: p.MessageID, Topic: p.Topic, Value: p.Value, From: p.From}); err != nil {
			return err
		}

	case *eventlog.EventSet:
		// No body either: a value published under a key (DESIGN §21½.6).
		s.byKey[p.Key] = append(s.byKey[p.Key], len(s.events))
		s.events = append(s.events, EventValue{Key: p.Key, Value: slices.Clone(p.Value), Seq: ev.Seq})

	case *eventlog.ForkDiverged:
		if s.forkSeq == 0 {
			return invalid(ev, "fork.diverged in an execution that is not a fork")
		}
		for _, id := range p.Unconsumed {
			if _, ok := s.step(id); !ok {
				return invalid(ev, "fork.diverged names step %q, which the lineage does not hold", id)
			}
		}
		s.Diverged, s.DivergedAt = slices.Clone(p.Unconsumed), ev.Seq

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
		s.Version = p.Version
		s.forkSeq = ev.Seq
		s.Created, s.TraceParent, s.RunDispatches = ev.Time, p.TraceParent, 0
		s.Output, s.Error, s.Code = nil, "", ""
		s.CancelRequested, s.CancelReason, s.CancelBy = false, "", ""
		s.Diverged, s.DivergedAt = nil, 0
		for _, o := range p.Overrides {
			s.overrides[o.StepID] = slices.Clone(o.Result)
		}
		if len(p.Input) > 0 {
			s.Input = slices.Clone(p.Input)
		}
		if p.Budget != (eventlog.Limits{}) {
			s.Budget = p.Budget
		}
		// Injected messages are received at fork.created (DESIGN §21½.16),
		// after every message of the prefix.
		for _, m := range p.Messages {
			if err := s.receive(ev, m); err != nil {
				return err
			}
		}

	default:
		return invalid(ev, "unknown event kind %s", ev.Kind())
	}
	return nil
}

// receive folds message m, received at ev.
func (s *State) receive(ev eventlog.Event, m eventlog.Message) error {
	if i, ok := s.msgIDs[m.MessageID]; ok {
		return invalid(ev, "message %q received again (first at seq %d)", m.MessageID, s.msgs[i].ReceivedAt)
	}
	m.Value = slices.Clone(m.Value)
	s.msgIDs[m.MessageID] = len(s.msgs)
	s.byTopic[m.Topic] = append(s.byTopic[m.Topic], len(s.msgs))
	s.msgs = append(s.msgs, Message{Message: m, ReceivedAt: ev.Seq})
	return nil
}

// consume marks the oldest unconsumed message of recv step st's topic (its
// Target) as returned by st's step.succeeded ev. A recv step that succeeds
// with no message to return breaks the lineage.
func (s *State) consume(ev eventlog.Event, st *Step) error {
	n := s.consumed[st.Target]
	idx := s.byTopic[st.Target]
	if n >= len(idx) {
		return invalid(ev, "recv step %q of topic %q succeeded, no message of the topic waits", st.ID, st.Target)
	}
	m := &s.msgs[idx[n]]
	m.ConsumedAt, m.ConsumedBy = ev.Seq, st.ID
	s.consumed[st.Target] = n + 1
	return nil
}

// approval returns the newest approval of stepID with Own set.
func (s *State) approval(stepID string) (Approval, bool) {
	a, ok := s.approvals[stepID]
	if !ok {
		return Approval{}, false
	}
	a.Args = slices.Clone(a.Args)
	a.Approvers = slices.Clone(a.Approvers)
	a.Own = a.RequestedAt > s.forkSeq
	return a, true
}

// decide records the decision of an awaited approval.
func (s *State) decide(ev eventlog.Event, stepID string, d ApprovalDecision, by, note string) error {
	a, ok := s.approval(stepID)
	if !ok || !a.Pending() {
		return invalid(ev, "%s of step %q, which awaits no decision", ev.Kind(), stepID)
	}
	a.Decision, a.By, a.Note, a.DecidedAt = d, by, note, ev.Seq
	a.Own = false // recomputed on read
	s.approvals[stepID] = a
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
	if _, ok := s.overrides[p.StepID]; ok {
		return invalid(ev, "step.started of step %q, which a fork overrides; replay never runs it", p.StepID)
	}
	st, ok := s.step(p.StepID)
	if !ok {
		if p.Attempt != 1 {
			return invalid(ev, "first step.started of step %q has attempt %d, want 1", p.StepID, p.Attempt)
		}
		i := s.order.push(Step{ID: p.StepID})
		s.steps[p.StepID] = i
		st = s.order.at(i)
	} else {
		switch {
		case st.Status != StepStarted && st.Status != StepCancelled && st.Status != StepRetrying && st.Status != StepAbandoned:
			return invalid(ev, "step.started of step %q, which is already %s; replay never runs it again", p.StepID, st.Status)
		case st.Kind != p.StepKind || st.Target != p.Target:
			return invalid(ev, "step.started of step %q as %s %q, it started as %s %q", p.StepID, p.StepKind, p.Target, st.Kind, st.Target)
		case p.Attempt != st.Attempts+1:
			return invalid(ev, "step.started of step %q has attempt %d, want %d", p.StepID, p.Attempt, st.Attempts+1)
		}
	}
	var args []byte
	if !s.dropArgs {
		args = slices.Clone(p.Args)
	}
	var resources []string
	if len(p.Resources) > 0 {
		resources = slices.Clone(p.Resources)
	}
	switch p.StepKind {
	case eventlog.StepLLM:
		s.LLMCalls++
	case eventlog.StepTool:
		s.ToolCalls++
	}
	*st = Step{
		ID: st.ID, Kind: p.StepKind, Target: s.intern(p.Target),
		Args: args, Resources: resources,
		Idempotency: p.Idempotency, Status: StepStarted, Attempts: p.Attempt, Retried: st.Retried,
		StartedAt: ev.Seq, Dispatch: s.Dispatches, WakeAt: p.WakeAt,
	}
	return nil
}

// intern returns target, sharing the memory of an equal target seen
// before: a lineage has many steps and few targets.
func (s *State) intern(target string) string {
	if t, ok := s.targets[target]; ok {
		return t
	}
	s.targets[target] = target
	return target
}

// terminal returns the step a terminal event resolves: one that is started,
// or for an indeterminate failure also one that was cancelled or abandoned
// (an at_most_once step resolved on a later dispatch).
func (s *State) terminal(ev eventlog.Event, id string, indeterminate bool) (*Step, error) {
	st, ok := s.step(id)
	if !ok {
		return nil, invalid(ev, "%s of step %q, which never started", ev.Kind(), id)
	}
	if st.Status == StepStarted || indeterminate && (st.Status == StepCancelled || st.Status == StepAbandoned) {
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
	return s.order.at(i), true
}

// Lookup is [State.Step] without copies, for a caller that only reads: it
// returns what the lineage recorded about step id, overrides applied, and
// the step's index in order of first appearance ([State.At]; -1 for an
// override of a step the lineage does not hold). The returned Args,
// Resources and Result share the State's memory: they must not be
// modified. They stay valid: the fold replaces a step's slices, it never
// writes into them.
func (s *State) Lookup(id string) (st Step, index int, ok bool) {
	i, ok := s.steps[id]
	if !ok {
		if r, over := s.overrides[id]; over {
			return Step{ID: id, Status: StepSucceeded, Result: r, Overridden: true}, -1, true
		}
		return Step{}, -1, false
	}
	return s.overriddenShared(*s.order.at(i)), i, true
}

// Started reports whether the lineage holds a step.started of step id
// (a denied step, which never started, and an override of a step the
// lineage does not hold have none). It reads no more than one map entry.
func (s *State) Started(id string) bool {
	i, ok := s.steps[id]
	return ok && s.order.at(i).Attempts > 0
}

// Len returns the number of steps the lineage holds (overrides of steps
// it does not hold are not counted).
func (s *State) Len() int { return s.order.n }

// At returns the i-th step in order of first appearance, overrides
// applied, without copies: the same read-only rules as [State.Lookup]
// hold. It panics if i is not in [0, Len()), like an index out of range.
func (s *State) At(i int) Step {
	if i < 0 || i >= s.order.n {
		panic(fmt.Sprintf("replay: step index %d out of range [0, %d)", i, s.order.n))
	}
	return s.overriddenShared(*s.order.at(i))
}

// Step returns a copy of what the lineage recorded about step id. A step a
// fork.created overrides (DESIGN §12) is succeeded with the override as
// its Result and Overridden set, whether or not the lineage holds it.
func (s *State) Step(id string) (Step, bool) {
	st, ok := s.step(id)
	if !ok {
		if r, over := s.overrides[id]; over {
			return Step{ID: id, Status: StepSucceeded, Result: slices.Clone(r), Overridden: true}, true
		}
		return Step{}, false
	}
	return s.overridden(st.clone()), true
}

// overriddenShared is overridden without copying the override.
func (s *State) overriddenShared(st Step) Step {
	if r, ok := s.overrides[st.ID]; ok {
		st.Status, st.Result, st.Overridden = StepSucceeded, r, true
		st.Error, st.Indeterminate, st.RetryAt = "", false, time.Time{}
	}
	return st
}

// Steps returns copies of every step the lineage holds, in order of first
// appearance, overrides applied. An override of a step the lineage does
// not hold is in [State.Overrides] and [State.Step].
func (s *State) Steps() []Step {
	out := make([]Step, s.order.n)
	for i := range out {
		out[i] = s.overridden(s.order.at(i).clone())
	}
	return out
}

// overridden applies a fork's override of st, if any.
func (s *State) overridden(st Step) Step {
	if r, ok := s.overrides[st.ID]; ok {
		st.Status, st.Result, st.Overridden = StepSucceeded, slices.Clone(r), true
		st.Error, st.Indeterminate, st.RetryAt = "", false, time.Time{}
	}
	return st
}

// Overrides returns the results the lineage's fork.created events override,
// newest per StepID winning, sorted by StepID.
func (s *State) Overrides() []eventlog.StepOverride {
	out := make([]eventlog.StepOverride, 0, len(s.overrides))
	for id, r := range s.overrides {
		out = append(out, eventlog.StepOverride{StepID: id, Result: slices.Clone(r)})
	}
	slices.SortFunc(out, func(a, b eventlog.StepOverride) int { return strings.Compare(a.StepID, b.StepID) })
	return out
}

// Timer returns the lineage's timer id.
func (s *State) Timer(id string) (Timer, bool) {
	i, ok := s.timers[id]
	if !ok {
		return Timer{}, false
	}
	return s.timerList[i], true
}

// Timers returns every timer of the lineage, in order of timer.started.
func (s *State) Timers() []Timer { return slices.Clone(s.timerList) }

// Approval returns the newest approval.requested of step stepID and its
// decision.
func (s *State) Approval(stepID string) (Approval, bool) { return s.approval(stepID) }

// Awaited returns, sorted, the StepIDs whose approval the run awaits (the
// status fold's): own, undecided approvals, none once the run ended.
func (s *State) Awaited() []string { return slices.Clone(s.status.Approvals) }

// Approvals returns the newest approval of every step that has one, in
// order of request.
func (s *State) Approvals() []Approval {
	out := make([]Approval, 0, len(s.approvals))
	for id := range s.approvals {
		a, _ := s.approval(id)
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Approval) int { return cmp.Compare(a.RequestedAt, b.RequestedAt) })
	return out
}

// StatusState returns the status fold of the lineage, as a store keeps it.
func (s *State) StatusState() eventlog.StatusState { return s.status.Clone() }

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

// Messages returns every message the lineage received, in arrival order
// (their Values are copies).
func (s *State) Messages() []Message {
	out := make([]Message, len(s.msgs))
	for i, m := range s.msgs {
		m.Value = slices.Clone(m.Value)
		out[i] = m
	}
	return out
}

// Message returns the message received with MessageID id.
func (s *State) Message(id string) (Message, bool) {
	i, ok := s.msgIDs[id]
	if !ok {
		return Message{}, false
	}
	m := s.msgs[i]
	m.Value = slices.Clone(m.Value)
	return m, true
}

// NextMessage returns the oldest received, not yet consumed message of
// topic: what the next recv step of the topic returns (DESIGN §18). Its
// Value shares the State's memory and must not be modified.
func (s *State) NextMessage(topic string) (Message, bool) {
	n, idx := s.consumed[topic], s.byTopic[topic]
	if n >= len(idx) {
		return Message{}, false
	}
	return s.msgs[idx[n]], true
}

// Unconsumed returns the received messages no recv step returned, in
// arrival order.
func (s *State) Unconsumed() []Message {
	var out []Message
	for _, m := range s.msgs {
		if !m.Consumed() {
			m.Value = slices.Clone(m.Value)
			out = append(out, m)
		}
	}
	return out
}

// Events returns every event.set of the lineage in order.
func (s *State) Events() []EventValue {
	out := make([]EventValue, len(s.events))
	for i, e := range s.events {
		e.Value = slices.Clone(e.Value)
		out[i] = e
	}
	return out
}

// Event returns the newest value published under key.
func (s *State) Event(key string) (EventValue, bool) {
	idx := s.byKey[key]
	if len(idx) == 0 {
		return EventValue{}, false
	}
	e := s.events[idx[len(idx)-1]]
	e.Value = slices.Clone(e.Value)
	return e, true
}

// EventAt returns the n-th (0-based) event.set of key in the lineage: what
// the n-th SetEvent of key in a dispatch matches on replay (DESIGN §21½.6).
// Its Value shares the State's memory and must not be modified.
func (s *State) EventAt(key string, n int) (EventValue, bool) {
	idx := s.byKey[key]
	if n < 0 || n >= len(idx) {
		return EventValue{}, false
	}
	return s.events[idx[n]], true
}

// EventKeys returns, sorted, the keys the lineage published values under.
func (s *State) EventKeys() []string {
	keys := make([]string, 0, len(s.byKey))
	for k := range s.byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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

// stepChunkSize is the number of steps in one chunk of a stepChunks.
const stepChunkSize = 256

// stepChunks is a growing sequence of steps kept in fixed-size chunks:
// appending never copies the steps already held (a single slice would copy
// them, and hold old and new backing arrays at once, at every growth), and
// a pointer to a step stays valid as steps are added.
type stepChunks struct {
	chunks [][]Step
	n      int
}

// push appends st and returns its index.
func (c *stepChunks) push(st Step) int {
	if c.n%stepChunkSize == 0 {
		c.chunks = append(c.chunks, make([]Step, 0, stepChunkSize))
	}
	last := len(c.chunks) - 1
	c.chunks[last] = append(c.chunks[last], st)
	c.n++
	return c.n - 1
}

// at returns the step at index i, for the fold to change.
func (c *stepChunks) at(i int) *Step { return &c.chunks[i/stepChunkSize][i%stepChunkSize] }

// BudgetReached reports whether the lineage's spend has reached a limit of
// its Budget that applies to a live call of kind, and which: a call is
// denied when spend ≥ a limit (DESIGN §21½.9; tokens cannot be known before
// the call). MaxTokens (input plus output tokens) and MaxLLMCalls limit llm
// calls; MaxToolCalls limits tool calls; no other kind of step is limited.
// The text names the limit and the spend, as "budget of 100 tokens reached:
// 120 spent"; it is "" and false when no limit is reached.
func (s *State) BudgetReached(kind eventlog.StepKind) (string, bool) {
	b := s.Budget
	switch kind {
	case eventlog.StepLLM:
		if spent := s.Tokens.Input + s.Tokens.Output; b.MaxTokens != 0 && spent >= b.MaxTokens {
			return fmt.Sprintf("budget of %d tokens reached: %d spent", b.MaxTokens, spent), true
		}
		if b.MaxLLMCalls != 0 && s.LLMCalls >= b.MaxLLMCalls {
			return fmt.Sprintf("budget of %d llm calls reached: %d made", b.MaxLLMCalls, s.LLMCalls), true
		}
	case eventlog.StepTool:
		if b.MaxToolCalls != 0 && s.ToolCalls >= b.MaxToolCalls {
			return fmt.Sprintf("budget of %d tool calls reached: %d made", b.MaxToolCalls, s.ToolCalls), true
		}
	}
	return "", false
}
