package sdk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
)

// ErrCancelled is wrapped by the error of a cancelled execution: Run, Wait
// and a child's caller see it (DESIGN §9). A *CancelledError carries the
// reason.
var ErrCancelled = errors.New("sdk: execution cancelled")

// CancelledError is the error of an execution that ended
// execution.cancelled.
type CancelledError struct {
	ID     eventlog.ID
	Reason string
}

// Error implements error.
func (e *CancelledError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("sdk: execution %s cancelled", e.ID)
	}
	return fmt.Sprintf("sdk: execution %s cancelled: %s", e.ID, e.Reason)
}

// Is reports whether target is ErrCancelled.
func (e *CancelledError) Is(target error) bool { return target == ErrCancelled }

// MaxKeyLen bounds an idempotency key (WithKey).
const MaxKeyLen = 1024

type startOptions struct {
	key        string
	deadline   time.Time
	budget     eventlog.Limits // Budget
	caller     eventlog.ID
	callerStep string // the caller's StepID of the child step (Agent.Call)
	queue      string // OnQueue
	priority   int    // Priority
}

// WithKey makes Start idempotent (DESIGN §9): a Start with a key already
// used returns that execution, when it is of the same agent with the same
// input, and an error wrapping eventlog.ErrConflict otherwise. Nothing is
// written in either case. Concurrent Starts with one key start one
// execution. A key is UTF-8 text without NUL bytes (what both stores can
// keep and compare alike); any other is ErrInvalid, before anything is
// written.
func WithKey(key string) StartOption {
	return startFunc(func(o *startOptions) error {
		if key == "" {
			return fmt.Errorf("%w: empty idempotency key", ErrInvalid)
		}
		if len(key) > MaxKeyLen {
			return fmt.Errorf("%w: idempotency key of %d bytes, more than %d", ErrInvalid, len(key), MaxKeyLen)
		}
		if !utf8.ValidString(key) {
			return fmt.Errorf("%w: idempotency key %q is not UTF-8", ErrInvalid, key)
		}
		if i := strings.IndexByte(key, 0); i >= 0 {
			return fmt.Errorf("%w: idempotency key %q has a NUL byte at %d", ErrInvalid, key, i)
		}
		o.key = key
		return nil
	})
}

// Deadline gives the execution a deadline, recorded in execution.created:
// past it the kernel cancels the handler's context and the execution fails
// with Code deadline. A deadline that has passed already is refused; one
// past eventlog.MaxWakeTime is recorded as that time. Given to Fork, it is
// the fork's own deadline, recorded in fork.created (a fork never inherits
// its parent's, DESIGN §8½).
func Deadline(t time.Time) RunOption { return deadlineOption(t) }

// deadlineOption is Deadline's RunOption.
type deadlineOption time.Time

// check returns the deadline to record, or why it is refused.
func (d deadlineOption) check() (time.Time, error) {
	t := time.Time(d)
	if t.IsZero() {
		return time.Time{}, fmt.Errorf("%w: zero deadline", ErrInvalid)
	}
	if !t.After(time.Now()) {
		return time.Time{}, fmt.Errorf("%w: deadline %s has passed", ErrInvalid, t.Format(time.RFC3339Nano))
	}
	return eventlog.ClampWake(t.UTC()), nil
}

func (d deadlineOption) applyStart(o *startOptions) (err error) {
	o.deadline, err = d.check()
	return err
}

func (d deadlineOption) applyFork(e *forkEdit) (err error) {
	e.deadline, err = d.check()
	return err
}

// Filter selects executions for List: by agent, status, parent (forks of),
// caller (children of), in pages of Limit after After, in ID order.
type Filter = eventlog.Filter

// List returns the executions f selects, in ID order; the next page starts
// After the last one returned. It never folds a lineage. An unknown status
// or a negative limit is ErrInvalid.
func (k *Kernel) List(ctx context.Context, f Filter) ([]eventlog.Info, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out []eventlog.Info
	for info, err := range k.log.List(ctx, f) {
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Cancel asks for execution id to be cancelled (DESIGN §9): the request goes
// to the store's inbox; the execution's owner cancels its handler's context
// and ends it execution.cancelled{Reason}. An execution with no live owner
// (pending, waiting, interrupted) is cancelled at once, by this call. Its
// running children are cancelled too. Cancelling an ended execution is no
// error and writes nothing; an unknown one is ErrNotFound.
func (k *Kernel) Cancel(ctx context.Context, id eventlog.ID, reason string) error {
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return err
	}
	if info.Status.Terminal() {
		return nil
	}
	var inbox eventlog.Inbox
	ok := eventlog.As(k.log, &inbox)
	if !ok {
		return fmt.Errorf("%w: the log keeps no inbox (eventlog.Inbox): cancel needs one", ErrInvalid)
	}
	if _, err := inbox.Request(ctx, id, &eventlog.CancelRequested{Reason: reason, By: k.owner}, k.now()); err != nil {
		return fmt.Errorf("sdk: cancel %s: %w", id, err)
	}
	if err := k.settle(ctx, id); err != nil {
		return err
	}
	k.notify()
	return k.cancelChildren(ctx, id, reason)
}

// cancelChildren cancels the children of id that have not ended.
func (k *Kernel) cancelChildren(ctx context.Context, id eventlog.ID, reason string) error {
	children, err := k.List(ctx, Filter{Caller: id, Status: []eventlog.Status{
		eventlog.StatusPending, eventlog.StatusRunning, eventlog.StatusWaiting}})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range children {
		if err := k.Cancel(ctx, c.ID, fmt.Sprintf("parent %s cancelled: %s", id, reason)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// settle moves id's pending requests into its lineage when no live owner
// exists to do it, ending the execution if one of them cancels it. With a
// live owner it does nothing: the owner takes them.
func (k *Kernel) settle(ctx context.Context, id eventlog.ID) error {
	ctx, lease, release, _, err := k.ownAs(ctx, id, k.owner+settleMark)
	if errors.Is(err, ErrBusy) || errors.Is(err, eventlog.ErrVersion) {
		// Its owner, or a worker of its own code version, takes the
		// requests when it next runs it.
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	d, err := k.load(ctx, id)
	if err != nil {
		return err
	}
	d.lease = lease
	d.ctx = context.WithoutCancel(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.Status.Terminal() {
		return nil
	}
	if err := d.takeRequestsLocked(); err != nil {
		return err
	}
	if d.state.CancelRequested {
		return d.appendLocked(false, &eventlog.ExecutionCancelled{Reason: d.state.CancelReason})
	}
	return nil
}

// Wait waits until execution id has ended and returns what Run returns for
// it: the result, the recorded failure, or a *CancelledError. It never runs
// anything: Serve, or a Run elsewhere, must run the execution.
func (k *Kernel) Wait(ctx context.Context, id eventlog.ID) (*Result, error) {
	delay := 5 * time.Millisecond
	for {
		info, err := k.log.Info(ctx, id)
		if err != nil {
			return nil, err
		}
		if info.Status.Terminal() {
			return k.outcome(ctx, id, info.Head)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("sdk: wait for %s: %w", id, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// outcome reads how execution id ended from its terminal event at head.
func (k *Kernel) outcome(ctx context.Context, id eventlog.ID, head uint64) (*Result, error) {
	for ev, err := range k.log.Events(ctx, id, head) {
		if err != nil {
			return nil, err
		}
		switch p := ev.Data.(type) {
		case *eventlog.ExecutionCompleted:
			return &Result{ID: id, Output: p.Output}, nil
		case *eventlog.ExecutionFailed:
			return nil, recordedFailure(id, p.Code, p.Error)
		case *eventlog.ExecutionCancelled:
			return nil, &CancelledError{ID: id, Reason: p.Reason}
		}
	}
	return nil, &eventlog.CorruptionError{Execution: id, Seq: head, What: "event",
		Err: errors.New("the store says the execution ended, its newest event is not terminal")}
}

// Wait waits until execution id has ended (Kernel.Wait) and decodes its
// output.
func (a *Agent[In, Out]) Wait(ctx context.Context, id eventlog.ID) (Out, error) {
	var out Out
	if a == nil {
		return out, errNilAgent()
	}
	res, err := a.k.Wait(ctx, id)
	if err != nil {
		return out, err
	}
	err = res.Decode(&out)
	return out, err
}
