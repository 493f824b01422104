package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/forkline/forkline/eventlog"
)

// Agent is a registered agent with its input and output types: Start, Run
// and the other methods take and return In and Out, so a caller never
// decodes JSON by hand (DESIGN §9).
type Agent[In, Out any] struct {
	k    *Kernel
	name string
}

// Register makes h the handler of agent and returns the typed agent. Input
// and output travel as JSON; an input that does not decode into In is
// refused by Start, before anything is written.
func Register[In, Out any](k *Kernel, agent string, h func(context.Context, In) (Out, error)) (*Agent[In, Out], error) {
	if k == nil {
		return nil, fmt.Errorf("%w: nil kernel", ErrInvalid)
	}
	if agent == "" {
		return nil, fmt.Errorf("%w: empty agent name", ErrInvalid)
	}
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler for agent %q", ErrInvalid, agent)
	}
	check := func(input []byte) error {
		var in In
		if err := decodeValue(input, &in); err != nil {
			return fmt.Errorf("input does not decode into %T: %w", in, err)
		}
		return nil
	}
	run := func(ctx context.Context, input []byte) ([]byte, error) {
		var in In
		if err := decodeValue(input, &in); err != nil {
			return nil, fmt.Errorf("sdk: agent %q: input does not decode into %T: %w", agent, in, err)
		}
		out, err := h(ctx, in)
		if err != nil {
			return nil, err
		}
		b, err := encodeValue(out)
		if err != nil {
			return nil, fmt.Errorf("sdk: agent %q: output does not encode: %w", agent, err)
		}
		return b, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.mu.agents[agent]; dup {
		return nil, fmt.Errorf("%w: agent %q is already registered", ErrInvalid, agent)
	}
	var nullable bool
	switch reflect.TypeFor[In]().Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		nullable = true
	}
	k.mu.agents[agent] = registered{run: run, check: check, nullable: nullable}
	return &Agent[In, Out]{k: k, name: agent}, nil
}

// Name returns the agent's name ("" for a nil Agent).
func (a *Agent[In, Out]) Name() string {
	if a == nil {
		return ""
	}
	return a.name
}

// errNilAgent is the error of a method called on a nil *Agent: one whose
// Register failed.
func errNilAgent() error {
	return fmt.Errorf("%w: nil agent (did its Register fail?)", ErrInvalid)
}

// Start creates an execution of the agent with input in and returns its ID.
// It does not run it: call Run.
func (a *Agent[In, Out]) Start(ctx context.Context, in In, opts ...StartOption) (eventlog.ID, error) {
	if a == nil {
		return eventlog.ID{}, errNilAgent()
	}
	return a.k.Start(ctx, a.name, in, opts...)
}

// Run runs one dispatch of execution id (Kernel.Run) and decodes its output.
// An execution of another agent is refused with ErrInvalid.
func (a *Agent[In, Out]) Run(ctx context.Context, id eventlog.ID) (Out, error) {
	var out Out
	if a == nil {
		return out, errNilAgent()
	}
	info, err := a.k.log.Info(ctx, id)
	if err != nil {
		return out, err
	}
	if info.Agent != a.name {
		return out, fmt.Errorf("%w: execution %s is of agent %q, not %q", ErrInvalid, id, info.Agent, a.name)
	}
	res, err := a.k.Run(ctx, id)
	if err != nil {
		return out, err
	}
	err = res.Decode(&out)
	return out, err
}

func (k *Kernel) handler(agent string) (handler, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.mu.agents[agent]
	return r.run, ok
}

// StartOption configures Start. Options meant for both Start and Fork
// ([Deadline]) are a [RunOption], which is both (DESIGN §21½.15).
type StartOption interface {
	applyStart(*startOptions) error
}

// startFunc is a StartOption that is a function.
type startFunc func(*startOptions) error

func (f startFunc) applyStart(o *startOptions) error { return f(o) }

// RunOption is an option of a run that applies alike to Start and to Fork
// (DESIGN §21½.15): a [Deadline] given to a fork is the fork's own.
type RunOption interface {
	StartOption
	ForkOption
}

// Start creates an execution of agent with input and returns its ID. It does
// not run it: call Run. An unknown agent, or an input that does not decode
// into the agent's input type, is refused with ErrInvalid and nothing is
// written. When the kernel traces (WithTracerProvider) and ctx holds a
// valid span context, execution.created records it as TraceParent, and
// the execution's dispatch spans link to it.
func (k *Kernel) Start(ctx context.Context, agent string, input any, opts ...StartOption) (eventlog.ID, error) {
	o, err := startOpts(opts)
	if err != nil {
		return eventlog.ID{}, err
	}
	k.mu.Lock()
	r, ok := k.mu.agents[agent]
	k.mu.Unlock()
	if !ok {
		return eventlog.ID{}, fmt.Errorf("%w: unknown agent %q", ErrInvalid, agent)
	}
	in, err := encodeValue(input)
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("%w: input of agent %q does not encode: %v", ErrInvalid, agent, err)
	}
	if err := r.check(in); err != nil {
		return eventlog.ID{}, fmt.Errorf("%w: agent %q: %v", ErrInvalid, agent, err)
	}
	if err := k.checkQueue(ctx, &o); err != nil {
		return eventlog.ID{}, err
	}
	created := o.created(agent, in, k.version)
	created.TraceParent = k.tel.traceParent(ctx)
	var copts []eventlog.CreateOption
	if !o.caller.IsZero() {
		copts = append(copts, eventlog.WithCaller(o.caller), eventlog.WithCallerStep(o.callerStep))
	}
	return k.create(ctx, created, copts...)
}

// create writes created (Start, StartByName), wakes Serve and counts
// forkline.executions.started when it made a new execution. A keyed
// create that finds its execution writes nothing: when metering, the key
// is looked up first (eventlog.KeyLookup) so that it is not counted; two
// keyed Starts racing for a new key may both count.
func (k *Kernel) create(ctx context.Context, created *eventlog.ExecutionCreated, opts ...eventlog.CreateOption) (eventlog.ID, error) {
	existed := false
	if k.tel.meter != nil && created.Key != "" {
		var kl eventlog.KeyLookup
		if eventlog.As(k.log, &kl) {
			_, err := kl.LookupKey(ctx, created.Key)
			existed = err == nil
		}
	}
	id, err := k.log.Create(ctx, created, k.now(), opts...)
	if err != nil {
		return id, err
	}
	k.notify()
	if !existed {
		k.tel.executionStarted(ctx)
	}
	return id, nil
}

// withCaller records the parent of a child execution and the parent's
// step that starts it (Agent.Call): the child's end writes a child.ended
// request for that step into the parent's inbox (DESIGN §15½.6).
func withCaller(id eventlog.ID, stepID string) StartOption {
	return startFunc(func(o *startOptions) error {
		o.caller, o.callerStep = id, stepID
		return nil
	})
}

// startOpts applies opts in order; a nil option is ErrInvalid.
func startOpts(opts []StartOption) (startOptions, error) {
	var o startOptions
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil start option", ErrInvalid)
		}
		if err := opt.applyStart(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// created is the execution.created that Start appends for agent with
// input in under o, by a kernel of code version version.
func (o *startOptions) created(agent string, in []byte, version string) *eventlog.ExecutionCreated {
	return &eventlog.ExecutionCreated{Agent: agent, Input: in, Key: o.key, Deadline: o.deadline, Version: version, Budget: o.budget,
		Queue: o.queue, Priority: o.priority}
}

// childArgs is what a child step records as its args.
type childArgs struct {
	Input json.RawMessage `json:"input"`
}

// Call runs the agent as a child of the handler whose ctx it is given
// (DESIGN §9): a step of kind child whose body starts the child execution
// and waits for it to end. The child's output is the step's result; its
// failure or cancellation is the step's error. The child gets an
// idempotency key derived from the parent and the StepID, so a replayed or
// resumed parent finds the same child and never starts a second one; a
// fork that runs the step live starts its own. The child is run by Serve,
// or else by this kernel in the background — never by the parent's body,
// which only waits. Cancelling the parent cancels the child.
//
// A wait longer than ParkAfter parks the parent's dispatch (Run returns
// ErrWaiting) until the child has ended.
//
// opts may hold Retry and Affects. Retry retries a child that failed: each
// retry starts a new child (its key counts the step's failed attempts,
// DESIGN §15½.7), while a parent resumed after a crash or a park finds the
// child it started. The kernel's WithRetry does not apply to children.
// AtMostOnce and Timeout are ErrInvalid: a child is found again by its
// key, and its wait already parks.
func (a *Agent[In, Out]) Call(ctx context.Context, in In, opts ...CallOption) (Out, error) {
	var zero Out
	if a == nil {
		return zero, errNilAgent()
	}
	o, err := buildCallOptions(opts)
	if err != nil {
		return zero, fmt.Errorf("child %q: %w", a.name, err)
	}
	if o.idem == eventlog.AtMostOnce || o.timeout != 0 {
		return zero, fmt.Errorf("%w: child %q: AtMostOnce and Timeout do not apply to a child call", ErrInvalid, a.name)
	}
	d, err := dispatchFrom(ctx)
	if err != nil {
		return zero, fmt.Errorf("child %q: %w", a.name, err)
	}
	if d.k != a.k {
		return zero, fmt.Errorf("%w: child %q is registered in another kernel", ErrInvalid, a.name)
	}
	input, err := encodeValue(in)
	if err != nil {
		return zero, fmt.Errorf("%w: child %q: input does not encode: %v", ErrInvalid, a.name, err)
	}
	args, err := canonicalArgs(childArgs{Input: input})
	if err != nil {
		return zero, fmt.Errorf("%w: child %q: input: %v", ErrInvalid, a.name, err)
	}
	return doTyped(ctx, d, call{kind: eventlog.StepChild, target: a.name, args: args, idem: eventlog.SafeToRetry,
		affects: o.affects, retry: o.retry},
		func(bctx context.Context) (Out, error) {
			si, _ := bctx.Value(stepKey{}).(*stepInfo)
			id, err := a.Start(bctx, in, WithKey(childKey(d.id, si.id, si.retried)), withCaller(d.id, si.id))
			if err != nil {
				return zero, err
			}
			go func() {
				// Run it here unless someone (Serve) already does; ErrBusy
				// says they do. Its outcome is read by Wait below.
				_, _ = a.k.runUnlessWaiting(context.Background(), id)
			}()
			wctx, cancel := context.WithTimeout(bctx, a.k.parkAfter)
			defer cancel()
			out, err := a.Wait(wctx, id)
			if err != nil && bctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && wctx.Err() != nil {
				return zero, &parkError{reason: eventlog.ParkChild, what: "child " + id.String()}
			}
			return out, err
		})
}

// childKey is the idempotency key of the child started by step stepID of
// execution parent after retried failed attempts of that step (DESIGN
// §15½.7: the step's step.failed events with a RetryAt). A resumed parent
// — an orphaned or cancelled attempt run again — finds the same child; a
// retry of a failed child step starts a new one. For retried == 0 the key
// is the one earlier versions derived from (parent, StepID) alone, so the
// children of executions recorded by them are found again; earlier
// versions gave every retry the first attempt's child (which had ended),
// so a retry recorded by them now starts a new child.
func childKey(parent eventlog.ID, stepID string, retried uint32) string {
	b := append(parent[:], stepID...)
	if retried > 0 {
		b = binary.BigEndian.AppendUint32(append(b, 0), retried)
	}
	h := sha256.Sum256(b)
	return "fl-child-" + hex.EncodeToString(h[:16])
}
