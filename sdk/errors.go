package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/resource"
)

// ErrDenied is wrapped by the error of a call the gate refused. The call
// never ran; a *DeniedError carries the reason.
var ErrDenied = errors.New("sdk: call denied")

// ErrRateLimited is wrapped by the error of a call a policy rate limit
// refused (step.denied Code rate_limited, DESIGN §17): its wait would have
// been longer than the rule's max_wait. errors.Is(err, ErrDenied) holds
// too.
var ErrRateLimited = errors.New("sdk: call denied: rate limited")

// ErrBudget is wrapped by the error of a call refused because the
// execution's budget is spent (step.denied Code budget, DESIGN §17).
// errors.Is(err, ErrDenied) holds too.
var ErrBudget = errors.New("sdk: call denied: budget spent")

// ErrApprovalExpired is wrapped by the error of a call whose approval
// request passed its ExpiresAt undecided (step.denied Code
// approval_expired, DESIGN §17). errors.Is(err, ErrDenied) holds too.
var ErrApprovalExpired = errors.New("sdk: call denied: approval expired")

// ErrForbidden is returned by Approve and Reject when the decider is not
// one of the request's Approvers (DESIGN §17); nothing is appended. It is
// a guardrail against mistakes, not authentication.
var ErrForbidden = errors.New("sdk: not an approver of this request")

// ErrResourceMismatch is wrapped when a driver's DriverID or Configuration
// differ from those recorded for its resource key. The execution fails with
// code resource_mismatch.
var ErrResourceMismatch = resource.ErrMismatch

// ErrResourceUnavailable is wrapped when a new owner of an execution (a
// takeover, another host) cannot open a resource's binding — it is not
// portable and another owner made it — and no checkpoint covers the head
// to bind anew from. Since DESIGN §15½.4 the new owner appends nothing
// and Run returns an *AwaitingOwnerError that wraps it, naming the owner
// the execution is left to; the execution is not failed. A failure with
// code resource_unavailable, written by older kernels, still reads as it.
var ErrResourceUnavailable = errors.New("sdk: resource unavailable to this owner")

// ErrNotInExecution is returned by Resource, Tool.Call and Step when their
// context does not come from a running handler.
var ErrNotInExecution = errors.New("sdk: not called from a running handler")

// ErrBusy is returned by Run for an execution that has a live owner: a Run
// of this kernel, or — through the store's eventlog.Leaser — of another
// kernel on the same store. The error also says whose lease it is.
var ErrBusy = errors.New("sdk: execution is already running")

// ErrIndeterminate is wrapped by the error of an at_most_once call whose
// earlier attempt started but never recorded an outcome: it may or may not
// have taken effect, so it is not run again.
var ErrIndeterminate = errors.New("sdk: outcome of an at_most_once call is indeterminate")

// ErrInvalid is wrapped by errors for bad input: an empty key, a nil driver,
// EverySteps(0), an unknown agent, a seq out of range. Nothing is written.
// It is eventlog.ErrInvalid, so both packages classify alike.
var ErrInvalid = eventlog.ErrInvalid

// ErrWaiting is wrapped by the error of a call made after its dispatch
// parked, and by Run's error for a dispatch that parked (DESIGN §9, §10):
// the execution is waiting — for a child, a retry's backoff, a Sleep or an
// approval — and Serve dispatches it again when what it waits for has
// happened.
var ErrWaiting = errors.New("sdk: execution is waiting")

// ErrNestedStep is returned when a tool or local step is called from inside
// the body of another step: bodies are the unit of replay and do not nest.
var ErrNestedStep = errors.New("sdk: steps do not nest")

// DeniedError is the error of a denied call.
type DeniedError struct {
	Target string // the tool, step or model that was refused
	Reason string // the gate's reason; for a rejected approval, "approval rejected" and the note
	// Code classifies the denial (step.denied's Code): policy,
	// rate_limited, budget, approval_expired or approval_rejected; ""
	// when replaying records written before format 3.
	Code eventlog.DenialCode
	// RuleID names the policy rule that decided; "" for none.
	RuleID string
	// By and Note are a rejected approval's (Kernel.Reject): who decided
	// and the note they gave, live and on replay; "" for a gate's denial.
	By, Note string
}

// Error implements error.
func (e *DeniedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("sdk: call to %s denied", e.Target)
	}
	return fmt.Sprintf("sdk: call to %s denied: %s", e.Target, e.Reason)
}

// Is reports whether target is ErrDenied, or the sentinel of e's Code:
// ErrRateLimited, ErrBudget or ErrApprovalExpired (DESIGN §21½.11: each
// wraps ErrDenied and is rebuilt from Code on replay).
func (e *DeniedError) Is(target error) bool {
	switch target {
	case ErrDenied:
		return true
	case ErrRateLimited:
		return e.Code == eventlog.DenyRateLimited
	case ErrBudget:
		return e.Code == eventlog.DenyBudget
	case ErrApprovalExpired:
		return e.Code == eventlog.DenyApprovalExpired
	}
	return false
}

// StepError is the recorded error of a tool call, local step or LLM call.
// A step's error is recorded as text, so the same *StepError is returned
// live and on every replay: handlers see one outcome whichever way it came.
type StepError struct {
	StepID        string
	Target        string
	Message       string
	Indeterminate bool // an at_most_once orphan; errors.Is(err, ErrIndeterminate)
}

// Error implements error.
func (e *StepError) Error() string { return fmt.Sprintf("%s: %s", e.Target, e.Message) }

// Is reports whether target is ErrIndeterminate for an indeterminate step.
func (e *StepError) Is(target error) bool { return e.Indeterminate && target == ErrIndeterminate }

// ExecutionError is the error Run returns for a failed execution: the
// failure code and message recorded in execution.failed. It unwraps to the
// cause: the handler's error on the dispatch that failed, or — when the
// failure is read back from the log — the sentinel of its code
// (driver.ErrCheckpointUnavailable, ErrResourceMismatch).
type ExecutionError struct {
	ID      eventlog.ID
	Code    eventlog.FailureCode
	Message string
	cause   error
}

// Error implements error.
func (e *ExecutionError) Error() string {
	return fmt.Sprintf("sdk: execution %s failed (%s): %s", e.ID, e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *ExecutionError) Unwrap() error { return e.cause }

func recordedFailure(id eventlog.ID, code eventlog.FailureCode, msg string) *ExecutionError {
	e := &ExecutionError{ID: id, Code: code, Message: msg}
	switch code {
	case eventlog.FailCheckpointUnavailable:
		e.cause = driver.ErrCheckpointUnavailable
	case eventlog.FailResourceMismatch:
		e.cause = ErrResourceMismatch
	case eventlog.FailResourceUnavailable:
		e.cause = ErrResourceUnavailable
	case eventlog.FailDeadline:
		e.cause = context.DeadlineExceeded
	case eventlog.FailNondeterministic:
		e.cause = ErrNonDeterministic
	}
	return e
}
