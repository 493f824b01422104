package eventlog

import (
	"fmt"
	"slices"
	"time"
)

// Status is the state of an execution (DESIGN §9). Its numeric value is
// stored by stores; its String form is the wire and CLI name.
type Status uint8

// The execution statuses. The zero Status is "no status": a lineage with no
// events.
const (
	StatusPending   Status = 1 // created or forked, no dispatch of its own started yet
	StatusRunning   Status = 2 // a dispatch started, nothing terminal, not waiting
	StatusWaiting   Status = 3 // an approval without decision, or the newest dispatch event is dispatch.parked
	StatusCompleted Status = 4 // execution.completed
	StatusFailed    Status = 5 // execution.failed
	StatusCancelled Status = 6 // execution.cancelled
)

var statusNames = [...]string{
	StatusPending:   "pending",
	StatusRunning:   "running",
	StatusWaiting:   "waiting",
	StatusCompleted: "completed",
	StatusFailed:    "failed",
	StatusCancelled: "cancelled",
}

// Statuses returns every status in code order.
func Statuses() []Status {
	out := make([]Status, 0, len(statusNames)-1)
	for s := StatusPending; int(s) < len(statusNames); s++ {
		out = append(out, s)
	}
	return out
}

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool { return s >= StatusPending && int(s) < len(statusNames) }

// Terminal reports whether s is completed, failed or cancelled: the
// execution has ended and only a fork continues it.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// String returns the name, such as "running"; "" for the zero Status and
// "status(N)" for an unknown code.
func (s Status) String() string {
	switch {
	case s == 0:
		return ""
	case !s.Valid():
		return fmt.Sprintf("status(%d)", uint8(s))
	}
	return statusNames[s]
}

// ParseStatus returns the status whose name is name ("running", …).
func ParseStatus(name string) (Status, error) {
	for _, s := range Statuses() {
		if statusNames[s] == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown status %q (want one of pending, running, waiting, completed, failed, cancelled)", ErrInvalid, name)
}

// MarshalText implements encoding.TextMarshaler: the status name.
func (s Status) MarshalText() ([]byte, error) {
	if s != 0 && !s.Valid() {
		return nil, fmt.Errorf("eventlog: cannot marshal %s", s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: a status name, or ""
// for the zero Status.
func (s *Status) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*s = 0
		return nil
	}
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// StatusState is the status fold of DESIGN §9: the status of an execution
// and what a store keeps with it, folded from the lineage's events. Both
// the replay fold and the stores run it, so that a listing (from the
// store) and a replay agree on every execution's status.
//
// Status is a fold of the execution's own run: fork.created starts the
// fork's status afresh (pending; no dispatch, approval, park or deadline
// of the prefix applies past it, DESIGN §8½). So folding a fork's own
// events from its fork.created on gives the same state as folding its
// whole lineage.
//
// Apply never fails: it is total over any event sequence, so that a store
// can run it on every append. Whether a lineage is well formed is the
// replay fold's question. It does no IO and never reads the clock; Updated
// is the Time of an event.
type StatusState struct {
	Status  Status
	Head    uint64    // seq of the newest event folded
	Updated time.Time // Time of the newest event folded
	// WakeAt is when a parked execution is to run again: the newest
	// dispatch.parked's, moved earlier to the Time of an approval decision
	// or a message.received folded while it is parked (either wakes it at
	// once, also when the requester appended it with no owner running,
	// DESIGN §8½, §18); zero when
	// the newest dispatch event is not dispatch.parked.
	WakeAt   time.Time
	Deadline time.Time // of execution.created, or of the newest fork.created (never inherited)

	// Dispatched reports that a dispatch.started followed the newest
	// execution.created or fork.created: the execution is no longer pending.
	Dispatched bool
	// Parked reports that the newest dispatch event is dispatch.parked.
	Parked bool
	// Approvals lists, sorted, the StepIDs with an approval.requested of
	// this run and no decision yet: neither approval.granted,
	// approval.rejected nor a step.denied{Code: approval_expired}.
	Approvals []string
	// Tokens sums the Tokens of this run's step.succeeded and step.failed
	// events (TokensOf: llm steps and failed llm attempts that reported
	// usage, DESIGN §16, §21½.9): the execution's own run
	// only, since fork.created starts it afresh like the rest of the
	// status; a fork's prefix is not included (replay.State.Tokens folds
	// the whole lineage).
	Tokens Tokens
}

// Apply folds the next event of the lineage into the status.
func (s *StatusState) Apply(ev Event) {
	s.Head = ev.Seq
	s.Updated = ev.Time
	switch p := ev.Data.(type) {
	case *ExecutionCreated:
		*s = StatusState{Head: ev.Seq, Updated: ev.Time, Status: StatusPending, Deadline: p.Deadline}
		return
	case *ForkCreated:
		*s = StatusState{Head: ev.Seq, Updated: ev.Time, Status: StatusPending, Deadline: p.Deadline}
		return
	case *ExecutionCompleted:
		s.end(StatusCompleted)
		return
	case *ExecutionFailed:
		s.end(StatusFailed)
		return
	case *ExecutionCancelled:
		s.end(StatusCancelled)
		return
	case *DispatchStarted:
		s.Dispatched, s.Parked, s.WakeAt = true, false, time.Time{}
	case *DispatchParked:
		s.Parked, s.WakeAt = true, p.WakeAt
	case *ApprovalRequested:
		if i, found := slices.BinarySearch(s.Approvals, p.StepID); !found {
			s.Approvals = slices.Insert(slices.Clone(s.Approvals), i, p.StepID)
		}
	case *ApprovalGranted:
		s.decide(p.StepID, ev.Time)
	case *ApprovalRejected:
		s.decide(p.StepID, ev.Time)
	case *StepDenied:
		if p.Code == DenyApprovalExpired {
			// The request passed its ExpiresAt undecided (DESIGN §17): it
			// is no longer awaited, and a decision for it is refused.
			s.decide(p.StepID, ev.Time)
		}
	case *MessageReceived:
		s.wake(ev.Time)
	case *StepSucceeded, *StepFailed:
		s.Tokens = s.Tokens.Plus(TokensOf(p)) // a failed attempt's usage too (DESIGN §21½.9)
	}
	if s.Status.Terminal() {
		return
	}
	switch {
	case s.Parked || len(s.Approvals) > 0:
		s.Status = StatusWaiting
	case s.Dispatched:
		s.Status = StatusRunning
	default:
		s.Status = StatusPending
	}
}

// end makes the status terminal: nothing is awaited any more.
func (s *StatusState) end(st Status) {
	s.Status, s.Parked, s.WakeAt, s.Approvals = st, false, time.Time{}, nil
}

// decide removes stepID from the approvals awaited. A parked execution
// wakes at the decision's time at, so that Serve runs it again.
func (s *StatusState) decide(stepID string, at time.Time) {
	i, found := slices.BinarySearch(s.Approvals, stepID)
	if !found {
		return
	}
	s.Approvals = slices.Delete(slices.Clone(s.Approvals), i, i+1)
	if len(s.Approvals) == 0 {
		s.Approvals = nil
	}
	s.wake(at)
}

// wake makes a parked execution due at at, unless it is due earlier.
func (s *StatusState) wake(at time.Time) {
	if s.Parked && (s.WakeAt.IsZero() || at.Before(s.WakeAt)) {
		s.WakeAt = at
	}
}

// Clone returns a copy of s that shares no memory with it.
func (s StatusState) Clone() StatusState {
	s.Approvals = slices.Clone(s.Approvals)
	return s
}

// CheckAfterEnd refuses, for a store's Append, events that would follow an
// execution's terminal event (completed, failed, cancelled): an ended
// execution continues only in a fork, and a handler's leftover goroutine
// must not write past the end. st and head are the execution's status and
// head before the append; events are the append's, with their seqs.
func CheckAfterEnd(id ID, st Status, head uint64, events []Event) error {
	if st.Terminal() {
		return fmt.Errorf("%w: execution %s ended (%s) at seq %d; nothing is appended after it",
			ErrInvalid, id, st, head)
	}
	for i, ev := range events[:max(len(events)-1, 0)] {
		switch ev.Kind() {
		case KindExecutionCompleted, KindExecutionFailed, KindExecutionCancelled:
			return fmt.Errorf("%w: execution %s: %s at seq %d is followed by %s in the same append",
				ErrInvalid, id, ev.Kind(), ev.Seq, events[i+1].Kind())
		}
	}
	return nil
}
