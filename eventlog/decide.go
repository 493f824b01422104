package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrNotAwaited is wrapped by Decider.Decide's error when the step it
// decides awaits no decision: no approval.requested of it is undecided in
// the execution's own run (it was never asked, was decided in the lineage,
// or the execution ended), or a decision of it waits in the inbox already.
var ErrNotAwaited = errors.New("eventlog: no decision awaited")

// Decider is an Inbox that decides approvals atomically (DESIGN §8½, §12):
// of two concurrent decisions of one step — an Approve racing a Reject —
// exactly one is stored and the other is refused, so the decision reported
// to its caller is the one the owner records. Both stores implement it;
// callers find it with As.
type Decider interface {
	Inbox

	// Decide stores decision p (*ApprovalGranted or *ApprovalRejected) in
	// id's inbox as Request does, in one atomic step with the check that
	// p's step awaits a decision: its StepID is among the approvals the
	// status fold of id's own run awaits (StatusState.Approvals, empty once
	// the run ended) and no request pending in id's inbox decides it. When
	// the check fails, nothing is written and the error wraps
	// ErrNotAwaited. Another payload, or one with an empty StepID, is
	// ErrInvalid; an unknown id is ErrNotFound. The request is durable when
	// Decide returns its number.
	Decide(ctx context.Context, id ID, p Payload, at time.Time) (uint64, error)
}

// DecisionStep returns the StepID that p decides: the StepID of an
// *ApprovalGranted or *ApprovalRejected, "" for any other payload.
func DecisionStep(p Payload) string {
	switch p := p.(type) {
	case *ApprovalGranted:
		return p.StepID
	case *ApprovalRejected:
		return p.StepID
	}
	return ""
}

// CheckDecision validates decision p for Decider.Decide: it must be an
// approval decision with a StepID (else ErrInvalid).
func CheckDecision(id ID, p Payload) error {
	if p == nil {
		return fmt.Errorf("%w: decision for %s with no payload", ErrInvalid, id)
	}
	if k := p.Kind(); k != KindApprovalGranted && k != KindApprovalRejected {
		return fmt.Errorf("%w: decision for %s: %s is not an approval decision", ErrInvalid, id, k)
	}
	if DecisionStep(p) == "" {
		return fmt.Errorf("%w: decision for %s: empty step ID", ErrInvalid, id)
	}
	return nil
}

// Awaits checks, for a Decider, that step stepID of execution id awaits a
// decision: st is the status of id's own run and pending its inbox's
// requests, read under the lock or in the transaction the write takes.
// The error wraps ErrNotAwaited.
func Awaits(id ID, stepID string, st StatusState, pending []Request) error {
	if st.Status.Terminal() {
		return fmt.Errorf("decision of step %s of %s: the execution ended (%s): %w", stepID, id, st.Status, ErrNotAwaited)
	}
	if !slices.Contains(st.Approvals, stepID) {
		return fmt.Errorf("decision of step %s of %s: its run awaits no decision of it: %w", stepID, id, ErrNotAwaited)
	}
	for _, r := range pending {
		if DecisionStep(r.Data) == stepID {
			return fmt.Errorf("decision of step %s of %s: request %d (%s) decides it already: %w",
				stepID, id, r.N, r.Data.Kind(), ErrNotAwaited)
		}
	}
	return nil
}
