package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
)

// StepIdempotencyKey returns the key IdempotencyKey gives the body of step
// stepID (a StepID, as step.started records it) of execution id: what a
// tool passed to an outside service, for a tool that looks the request up
// there, or a test kit that tells a fork's keys from its parent's
// (proptest.CheckAgent). A fork is another execution, so its steps have
// other keys than its parent's.
func StepIdempotencyKey(id eventlog.ID, stepID string) string {
	return idempotencyKey(id, stepID)
}

// ExecutionInfo is what Info tells a handler, or the body of one of its
// steps, about the run it is part of.
type ExecutionInfo struct {
	ID    eventlog.ID // the execution (a fork is an execution of its own)
	Agent string
	// Dispatch is the number of the dispatch running the handler, 1-based
	// over the lineage (dispatch.started's Dispatch): 1 on the first run,
	// more after a crash, a park or a takeover — the handler's attempt.
	Dispatch uint64
	// Replaying is IsReplaying(ctx): the handler is replaying recorded
	// calls and has not gone live yet. A step body runs live: false there.
	Replaying bool
	// In a step body (a tool call, a local step): its StepID, the attempt
	// its step.started records (1 for the first run) and its
	// IdempotencyKey. Empty in the handler itself.
	StepID         string
	Attempt        uint32
	IdempotencyKey string
}

// Info returns what ctx, a handler's or a step body's context, says about
// its execution, and true; outside a handler, the zero ExecutionInfo and
// false. (The name ExecutionInfo keeps it apart from eventlog.Info, what a
// store says about an execution.)
func Info(ctx context.Context) (ExecutionInfo, bool) {
	d, err := dispatchFrom(ctx)
	if err != nil {
		return ExecutionInfo{}, false
	}
	replaying := d.replaying()
	d.mu.Lock()
	info := ExecutionInfo{ID: d.id, Agent: d.state.Agent, Dispatch: d.state.Dispatches}
	d.mu.Unlock()
	if si, ok := ctx.Value(stepKey{}).(*stepInfo); ok {
		info.StepID, info.Attempt, info.IdempotencyKey = si.id, si.attempt, si.idem
	} else {
		info.Replaying = replaying
	}
	return info, true
}

// StartByName creates an execution of agent with input and returns its ID,
// for a client that knows the agent by name — an HTTP front end, a CLI, a
// process that only enqueues while workers Serve — as Temporal's
// ExecuteWorkflow takes a workflow's name. input is any value that encodes
// to JSON, or a json.RawMessage or []byte holding JSON. It does not run
// the execution.
//
// When this kernel registers agent, input is checked as Start checks it.
// When it does not, nothing here can tell a mistyped name from an agent
// another process registers: the execution is written as pending, and a
// kernel that registers the agent runs it (Serve); it is never run by a
// kernel that does not. Refused with ErrInvalid, with nothing written: an
// empty agent name, or one that is not UTF-8 or holds a NUL byte; input
// that is not JSON (or does not decode into a registered agent's input);
// a bad option. opts are Start's.
func (k *Kernel) StartByName(ctx context.Context, agent string, input any, opts ...StartOption) (eventlog.ID, error) {
	if agent == "" || !utf8.ValidString(agent) || strings.IndexByte(agent, 0) >= 0 {
		return eventlog.ID{}, fmt.Errorf("%w: agent name %q", ErrInvalid, agent)
	}
	if raw, ok := input.([]byte); ok {
		input = json.RawMessage(raw)
	}
	if raw, ok := input.(json.RawMessage); ok && !json.Valid(raw) {
		return eventlog.ID{}, fmt.Errorf("%w: input of agent %q is not JSON", ErrInvalid, agent)
	}
	k.mu.Lock()
	_, registered := k.mu.agents[agent]
	k.mu.Unlock()
	if registered {
		return k.Start(ctx, agent, input, opts...)
	}
	o, err := startOpts(opts)
	if err != nil {
		return eventlog.ID{}, err
	}
	in, err := encodeValue(input)
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("%w: input of agent %q does not encode: %v", ErrInvalid, agent, err)
	}
	created := o.created(agent, in, k.version)
	created.TraceParent = k.tel.traceParent(ctx)
	return k.create(ctx, created)
}
