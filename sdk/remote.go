package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// This file is what a kernel for agents that run elsewhere (package
// kernelapi, DESIGN §20) needs from a dispatch: a handler registered for
// such an agent is a proxy whose calls arrive over the network, with their
// args already encoded as JSON.

// RemoteCall runs one call of kind, target and args (a JSON document) in
// the dispatch of ctx, a handler's context, by the three cases of DESIGN
// §4: a recorded outcome is returned without running body; otherwise the
// call is gated and, if allowed, body runs live and its outcome is
// recorded. body receives the step's context (Info gives its StepID) and
// returns the result as JSON. stepID is the call's StepID (hex) and ran
// reports whether body was called. The
// StepID is computed here from the canonical args and the occurrence of
// the call in this dispatch, as for a Go call.
func RemoteCall(ctx context.Context, kind eventlog.StepKind, target string, args []byte, idem eventlog.Idempotency,
	body func(ctx context.Context) ([]byte, error)) (result []byte, stepID string, ran bool, err error) {
	return RemoteCallAffecting(ctx, kind, target, args, idem, nil, body)
}

// RemoteCallAffecting is RemoteCall of a tool call or local step that
// affects the resources affects (keys the dispatch has obtained with
// Resource), as a Go tool's Affects declares them: its step.started lists
// them, and the captures due after it (DESIGN §5) are taken — through
// their drivers' Checkpoint — and appended with its outcome. A key the
// dispatch has not obtained is ErrInvalid, and nothing is written.
func RemoteCallAffecting(ctx context.Context, kind eventlog.StepKind, target string, args []byte, idem eventlog.Idempotency,
	affects []string, body func(ctx context.Context) ([]byte, error)) (result []byte, stepID string, ran bool, err error) {
	switch kind {
	case eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM:
	default:
		return nil, "", false, fmt.Errorf("%w: remote call of kind %q (want tool, local or llm)", ErrInvalid, kind)
	}
	switch idem {
	case eventlog.SafeToRetry, eventlog.AtMostOnce:
	default:
		return nil, "", false, fmt.Errorf("%w: remote call with idempotency %q", ErrInvalid, idem)
	}
	if target == "" || body == nil {
		return nil, "", false, fmt.Errorf("%w: remote call with an empty target or no body", ErrInvalid)
	}
	canon, err := CanonicalArgs(args)
	if err != nil {
		return nil, "", false, err
	}
	d, err := dispatchFrom(ctx)
	if err != nil {
		return nil, "", false, fmt.Errorf("remote %s %q: %w", kind, target, err)
	}
	res, err := d.do(ctx, call{
		kind: kind, target: target, args: canon, idem: idem, idOut: &stepID, affects: affects,
		body: func(ctx context.Context) ([]byte, error) {
			ran = true
			return body(ctx)
		},
	})
	return res, stepID, ran, err
}

// CanonicalArgs returns the canonical form of args, a JSON document: what
// a StepID is computed from (DESIGN §4). Not JSON, or over MaxValueSize, is
// ErrInvalid.
func CanonicalArgs(args []byte) ([]byte, error) {
	if err := checkSize(len(args)); err != nil {
		return nil, fmt.Errorf("%w: args are too large: %v", ErrInvalid, err)
	}
	canon, err := canonicalJSON(args)
	if err != nil {
		return nil, fmt.Errorf("%w: args are not JSON: %v", ErrInvalid, err)
	}
	return canon, nil
}

// ParkUntil parks the dispatch of ctx, a handler's context, until wakeAt
// with reason retry (a dispatch to run again later: an undelivered
// webhook, a stalled remote agent). Every later call of the dispatch
// returns ErrWaiting; the handler returns the error ParkUntil returns, and
// the dispatch ends with dispatch.parked. Serve runs the execution again
// at wakeAt, as a new dispatch.
func ParkUntil(ctx context.Context, wakeAt time.Time) error {
	d, err := dispatchFrom(ctx)
	if err != nil {
		return err
	}
	if wakeAt.IsZero() {
		return fmt.Errorf("%w: park without a wake time", ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.parkUntilLocked(eventlog.ParkRetry, wakeAt)
	return d.parkErr()
}

// FailExecution makes the kernel fail the execution of ctx, a handler's
// context, with code and message when the handler returns (whatever it
// returns). It returns the error for the handler to return.
func FailExecution(ctx context.Context, code eventlog.FailureCode, message string) error {
	d, err := dispatchFrom(ctx)
	if err != nil {
		return err
	}
	if code == "" || message == "" {
		return fmt.Errorf("%w: FailExecution without a code or a message", ErrInvalid)
	}
	e := errors.New(message)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failLocked(code, e)
	return e
}

// PublishDelta passes a delta of a step of execution id to its
// WatchDeltas watchers in this kernel — and, on a store that carries
// deltas (Postgres), of other processes when it is at most 8 KB —
// best-effort, as a streaming model call's are: a remote agent's live
// output.
func (k *Kernel) PublishDelta(id eventlog.ID, dl Delta) {
	k.publishDelta(id, dl)
}
