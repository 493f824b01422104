package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// CallOption configures a tool or a local step.
type CallOption func(*callOptions) error

type callOptions struct {
	affects []string
	idem    eventlog.Idempotency
	retry   *RetryPolicy  // Retry
	timeout time.Duration // Timeout
}

func buildCallOptions(opts []CallOption) (callOptions, error) {
	o := callOptions{idem: eventlog.SafeToRetry}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	slices.Sort(o.affects)
	o.affects = slices.Compact(o.affects)
	return o, nil
}

// Affects names the resources a tool or local step may change (default:
// none). Each must have been obtained with Resource in the same dispatch
// before the call. An empty key is an error.
func Affects(keys ...string) CallOption {
	return func(o *callOptions) error {
		for _, k := range keys {
			if k == "" {
				return fmt.Errorf("%w: Affects with an empty resource key", ErrInvalid)
			}
		}
		o.affects = append(o.affects, keys...)
		return nil
	}
}

// AtMostOnce marks a call whose body must never run twice: if a dispatch
// dies after the body started, the next dispatch does not run it again but
// records it as failed and returns an error that is ErrIndeterminate. By
// default calls are safe to retry.
//
// The nonce trap: a call is recognized on the next dispatch by its
// identity, which includes its args (DESIGN §4). Args that change from one
// dispatch to the next — a time.Now(), a random nonce, a fresh UUID made
// outside a step — give the call a new identity after a crash, so its
// orphan is not recognized: the body runs a second time, with a second
// idempotency key, and the orphan is later abandoned (step.abandoned).
// Draw such values inside a Step (recorded, so replayed alike) and pass
// the result as args. Under [Strict] the trap is caught: the new call sits
// at the position of the recorded orphan with other args, and fails with
// ErrNonDeterministic before its body runs.
func AtMostOnce() CallOption {
	return func(o *callOptions) error {
		o.idem = eventlog.AtMostOnce
		return nil
	}
}

// IdempotencyKey returns the idempotency key of the step whose body ctx
// belongs to, "" outside a body. Every attempt of the step in one execution
// gets the same key, so an external service can deduplicate a retried
// effect; it is derived from the StepID and the execution running it.
func IdempotencyKey(ctx context.Context) string {
	if si, ok := ctx.Value(stepKey{}).(*stepInfo); ok {
		return si.idem
	}
	return ""
}

// Tool is a durable tool: its calls are recorded and replayed.
type Tool[A, R any] struct {
	name string
	fn   func(context.Context, A) (R, error)
	opts callOptions
	err  error // a definition error, returned by every Call
}

// DefineTool defines a tool named name whose body is fn. Args and results
// travel as JSON; a call is identified by name, canonical args and
// occurrence (DESIGN §4). An empty name, a nil fn or a bad option makes
// every Call return an error.
func DefineTool[A, R any](name string, fn func(context.Context, A) (R, error), opts ...CallOption) *Tool[A, R] {
	t := &Tool[A, R]{name: name, fn: fn}
	switch {
	case name == "":
		t.err = fmt.Errorf("%w: tool with an empty name", ErrInvalid)
	case fn == nil:
		t.err = fmt.Errorf("%w: tool %q has a nil function", ErrInvalid, name)
	default:
		t.opts, t.err = buildCallOptions(opts)
	}
	return t
}

// Name returns the tool's name.
func (t *Tool[A, R]) Name() string { return t.name }

// Call calls the tool: it returns the recorded outcome of this call if there
// is one, and otherwise runs it live and records it.
func (t *Tool[A, R]) Call(ctx context.Context, args A) (R, error) {
	var zero R
	if t.err != nil {
		return zero, t.err
	}
	d, err := dispatchFrom(ctx)
	if err != nil {
		return zero, fmt.Errorf("tool %q: %w", t.name, err)
	}
	enc, err := canonicalArgs(args)
	if errors.Is(err, errTooLarge) {
		return zero, fmt.Errorf("%w: tool %q: args are too large: %v", ErrInvalid, t.name, err)
	}
	if err != nil {
		return zero, fmt.Errorf("%w: tool %q: args do not encode: %v", ErrInvalid, t.name, err)
	}
	// One closure, the body itself, rather than doTyped's wrapper around a
	// closure of t.fn: replayed calls never run it, but pay for building it.
	return doDecoded[R](ctx, d, call{
		kind: eventlog.StepTool, target: t.name, args: enc, affects: t.opts.affects, idem: t.opts.idem,
		retry: t.opts.retry, timeout: t.opts.timeout,
		body: func(ctx context.Context) ([]byte, error) { return encodeResult(t.fn(ctx, args)) },
	})
}

// doTyped runs c with fn as its body, encoding fn's result for the log and
// decoding the recorded result (live or replayed alike) into R.
func doTyped[R any](ctx context.Context, d *dispatch, c call, fn func(context.Context) (R, error)) (R, error) {
	c.body = func(ctx context.Context) ([]byte, error) { return encodeResult(fn(ctx)) }
	return doDecoded[R](ctx, d, c)
}

// encodeResult encodes a body's result for the log, or passes its error on.
func encodeResult[R any](r R, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	b, err := encodeValue(r)
	if err != nil {
		return nil, fmt.Errorf("result does not encode: %w", err)
	}
	return b, nil
}

// doDecoded runs c, whose body encodes an R, and decodes the recorded
// result (live or replayed alike) into R.
func doDecoded[R any](ctx context.Context, d *dispatch, c call) (R, error) {
	var zero R
	res, err := d.do(ctx, c)
	if err != nil {
		return zero, err
	}
	var out R
	if p, ok := any(&out).(*string); ok {
		// decodeValue's own fast path, without handing &out to it: out then
		// stays off the heap.
		if s, ok := simpleJSONString(res); ok {
			*p = s
			return out, nil
		}
	}
	o := new(R)
	if err := decodeValue(res, o); err != nil {
		return zero, fmt.Errorf("sdk: %s %q: recorded result %.200s does not decode into %T: %w", c.kind, c.target, res, *o, err)
	}
	return *o, nil
}

// Step runs fn as a local step named name: recorded the first time, replayed
// after. Use it for anything nondeterministic or effectful that is not a
// tool: reading the clock, drawing a random number, an HTTP call.
func Step[R any](ctx context.Context, name string, fn func(context.Context) (R, error), opts ...CallOption) (R, error) {
	var zero R
	if name == "" {
		return zero, fmt.Errorf("%w: step with an empty name", ErrInvalid)
	}
	if fn == nil {
		return zero, fmt.Errorf("%w: step %q has a nil function", ErrInvalid, name)
	}
	o, err := buildCallOptions(opts)
	if err != nil {
		return zero, err
	}
	d, err := dispatchFrom(ctx)
	if err != nil {
		return zero, fmt.Errorf("step %q: %w", name, err)
	}
	return doTyped(ctx, d, call{kind: eventlog.StepLocal, target: name, affects: o.affects, idem: o.idem, retry: o.retry, timeout: o.timeout}, fn)
}
