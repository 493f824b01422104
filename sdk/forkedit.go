package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/replay"
)

// ErrUncovered is wrapped by the error of a fork made with [RequireCovered]
// at an uncovered point, and of [Kernel.LatestCovered] when no point is
// covered (DESIGN §12). It is coverage.ErrUncovered.
var ErrUncovered = coverage.ErrUncovered

// ForkOption edits a fork made by [Kernel.Fork] (DESIGN §12). Options
// meant for both Start and Fork ([Deadline]) are a [RunOption].
type ForkOption interface {
	applyFork(*forkEdit) error
}

// forkFunc is a ForkOption that is a function.
type forkFunc func(*forkEdit) error

func (f forkFunc) applyFork(e *forkEdit) error { return f(e) }

// forkEdit is what the ForkOptions of one Fork asked for.
type forkEdit struct {
	input    any
	hasInput bool
	results  []forkResult
	messages []Message
	covered  bool
	verify   bool
	deadline time.Time       // the fork's own (Deadline); zero for none
	version  *string         // OnVersion; nil: the parent's
	budget   eventlog.Limits // the fork's own (Budget); zero to inherit the parent's
}

// forkResult is one WithResult, or the WithToolArgs of one step.
type forkResult struct {
	stepID string
	value  any
	tools  []toolEdit // WithToolArgs: edits of the recorded reply, in order; nil for WithResult
}

// toolEdit is one WithToolArgs.
type toolEdit struct {
	tool string
	args []fork.ToolArg
}

// WithInput gives the fork a new input: its handler gets v instead of the
// lineage's input (recorded in fork.created's Input). A fork at seq 1 or 2
// is a clean re-run with v. At a later point, recorded steps whose identity
// is unchanged replay and the rest run live; when the run makes a live call
// while recorded steps of the prefix remain unconsumed, the kernel appends
// fork.diverged{Unconsumed} once, and [Kernel.Coverage] reports every
// resource bound then uncovered from that event on: the restored state may
// hold effects the new run no longer makes. A fork of such a fork is
// checked the same way.
//
// v must encode, and decode into the agent's input type when the agent is
// registered with this kernel (strictly: no unknown fields, no trailing
// data, and null only for an input type that has it — a pointer,
// interface, map or slice); otherwise Fork returns an error wrapping
// [ErrInvalid] and writes nothing. Strict is off in a fork with a new input.
func WithInput(v any) ForkOption {
	return forkFunc(func(e *forkEdit) error {
		e.input, e.hasInput = v, true
		return nil
	})
}

// WithResult makes the fork replay v as the result of step stepID (a
// StepID, as the CLI and the timeline show it): edit a tool's output, or an
// LLM reply. For an LLM call v replaces the response body and the recorded
// status and headers stay: a []byte, string or json.RawMessage v is the
// body as is, any other v is encoded as JSON. For other steps v is encoded
// as the step's result, as the body's return value would be.
//
// The fork point must be the step's terminal event (its step.succeeded, or
// its final step.failed — v then replaces the failure), so a covered point
// restores the state right after the edited step. With several WithResult
// the fork point is the terminal event of the one that ended first, and
// none of the others may be running there. A fork of an edited fork
// inherits its overrides, the newest per step winning. A step the lineage
// never ran or that has not ended, a wrong fork point, a v that does not
// encode, or the same step twice is an error wrapping [ErrInvalid], and
// nothing is written. Strict is off in an edited fork.
func WithResult(stepID string, v any) ForkOption {
	return forkFunc(func(e *forkEdit) error {
		if stepID == "" {
			return fmt.Errorf("%w: WithResult of an empty step ID", ErrInvalid)
		}
		for _, r := range e.results {
			if r.stepID == stepID {
				return fmt.Errorf("%w: WithResult of step %s twice", ErrInvalid, stepID)
			}
		}
		e.results = append(e.results, forkResult{stepID: stepID, value: v})
		return nil
	})
}

// WithToolArgs makes the fork replay the recorded reply of LLM call stepID
// with the arguments of one of its tool calls changed (fork.EditToolArgs:
// an OpenAI chat completion's tool_calls, an Anthropic message's tool_use
// input): tool names the call by its tool's name, or by its call ID when
// the reply calls that tool more than once, and each of args sets one
// argument the call has. The edited body is recorded in fork.created's
// Overrides as [WithResult] records one, with the recorded status and
// headers, and the same rules hold for the fork point. Several
// WithToolArgs of one step apply in order; WithToolArgs and WithResult of
// one step, a step that is not an LLM call with a recorded reply, a reply
// of another format, an unknown tool or argument are errors wrapping
// [ErrInvalid], and nothing is written.
func WithToolArgs(stepID, tool string, args ...fork.ToolArg) ForkOption {
	return forkFunc(func(e *forkEdit) error {
		if stepID == "" {
			return fmt.Errorf("%w: WithToolArgs of an empty step ID", ErrInvalid)
		}
		edit := toolEdit{tool: tool, args: slices.Clone(args)}
		for i, r := range e.results {
			if r.stepID != stepID {
				continue
			}
			if r.tools == nil {
				return fmt.Errorf("%w: WithToolArgs and WithResult of step %s", ErrInvalid, stepID)
			}
			e.results[i].tools = append(e.results[i].tools, edit)
			return nil
		}
		e.results = append(e.results, forkResult{stepID: stepID, tools: []toolEdit{edit}})
		return nil
	})
}

// Message is a message WithMessages injects into a fork: its MessageID
// (empty: a random one), topic, and value, encoded as JSON.
type Message struct {
	ID    string
	Topic string
	Value any
}

// WithMessages injects msgs into the fork (DESIGN §18, §21½.16): they are
// received at fork.created, after every message the prefix received, so the
// fork's Recv calls return them in order once the prefix's are consumed —
// a conversation replayed with an edited turn. A fork owns the messages of
// its prefix only (received at seq ≤ its fork point), never one its parent
// received later. An empty topic, a value that does not encode, a bad or
// repeated ID, or an ID the prefix received is ErrInvalid, and nothing is
// written.
func WithMessages(msgs ...Message) ForkOption {
	return forkFunc(func(e *forkEdit) error {
		for _, m := range msgs {
			if err := checkName("topic", m.Topic); err != nil {
				return fmt.Errorf("fork message: %w", err)
			}
			if m.ID != "" {
				if err := checkName("message id", m.ID); err != nil {
					return fmt.Errorf("fork message: %w", err)
				}
			}
			e.messages = append(e.messages, m)
		}
		return nil
	})
}

// RequireCovered makes Fork refuse an uncovered fork point — one where some
// resource would not be restored exactly — with an error wrapping
// [ErrUncovered], writing nothing. [Kernel.LatestCovered] finds a point
// that is covered.
func RequireCovered() ForkOption {
	return forkFunc(func(e *forkEdit) error {
		e.covered = true
		return nil
	})
}

// VerifyPrefix makes Fork check the stored records of the prefix 1..at
// first (eventlog.PrefixVerifier: each present, and whole where it
// belongs; no payload is decoded) and refuse a damaged one with the
// store's *eventlog.CorruptionError (wrapping eventlog.ErrCorrupt) naming
// the damaged execution and seq, writing nothing. Without it Fork reads
// no record of the prefix, so its cost does not grow with at (DESIGN §5),
// and damage is found when the fork runs (Run fails with ErrCorrupt;
// Serve quarantines it). Its cost grows with at; forkline fork uses it
// unless given --no-verify. A store that cannot verify makes Fork fail
// with ErrInvalid.
func VerifyPrefix() ForkOption {
	return forkFunc(func(e *forkEdit) error {
		e.verify = true
		return nil
	})
}

// Fork creates a fork of execution id at event at (DESIGN §5): a new
// execution that replays events 1..at and restores each resource from its
// selection on first use. Run it with Run. opts edit the fork (DESIGN
// §12): [WithInput], [WithResult], [WithMessages], [RequireCovered],
// [VerifyPrefix]. When the kernel traces, fork.created records ctx's span
// context (TraceParent), which the fork's dispatch spans link to. Bad
// input — at 0 or past the head, an unknown execution, an option the
// lineage does not allow — returns an error and writes nothing.
func (k *Kernel) Fork(ctx context.Context, id eventlog.ID, at uint64, opts ...ForkOption) (eventlog.ID, error) {
	var e forkEdit
	for _, opt := range opts {
		if opt == nil {
			return eventlog.ID{}, fmt.Errorf("%w: nil fork option", ErrInvalid)
		}
		if err := opt.applyFork(&e); err != nil {
			return eventlog.ID{}, err
		}
	}
	if e.verify {
		var pv eventlog.PrefixVerifier
		if !eventlog.As(k.log, &pv) {
			return eventlog.ID{}, fmt.Errorf("%w: sdk: fork of %s: VerifyPrefix: the store (%T) cannot verify records", ErrInvalid, id, k.log)
		}
		if err := pv.VerifyPrefix(ctx, id, at); err != nil {
			return eventlog.ID{}, fmt.Errorf("sdk: fork of %s at seq %d: %w", id, at, err)
		}
	}
	fopts, err := k.forkOptions(ctx, id, e)
	if err != nil {
		return eventlog.ID{}, err
	}
	if tp := k.tel.traceParent(ctx); tp != "" {
		fopts = append(fopts, fork.WithTraceParent(tp))
	}
	fid, _, err := fork.Create(ctx, k.log, id, at, k.now(), fopts...)
	if err == nil {
		k.tel.forked(ctx)
		k.tel.executionStarted(ctx)
	}
	return fid, err
}

// forkOptions encodes e's values into fork.Options.
func (k *Kernel) forkOptions(ctx context.Context, id eventlog.ID, e forkEdit) ([]fork.Option, error) {
	var out []fork.Option
	if e.hasInput {
		in, err := k.forkInput(ctx, id, e.input)
		if err != nil {
			return nil, err
		}
		out = append(out, fork.WithInput(in))
	}
	if len(e.results) > 0 {
		st, err := replay.Fold(k.log.Events(ctx, id, 1))
		if err != nil {
			return nil, fmt.Errorf("sdk: fork of %s: %w", id, err)
		}
		for _, r := range e.results {
			res, err := overrideResult(st, r)
			if err != nil {
				return nil, fmt.Errorf("%w: sdk: fork of %s: %v", ErrInvalid, id, err)
			}
			out = append(out, fork.WithOverride(r.stepID, res))
		}
	}
	if len(e.messages) > 0 {
		msgs := make([]eventlog.Message, len(e.messages))
		for i, m := range e.messages {
			b, err := encodeValue(m.Value)
			if err != nil {
				return nil, fmt.Errorf("%w: sdk: fork of %s: message on %q does not encode: %v", ErrInvalid, id, m.Topic, err)
			}
			if m.ID == "" {
				m.ID = randomID()
			}
			msgs[i] = eventlog.Message{MessageID: m.ID, Topic: m.Topic, Value: b, From: k.owner}
		}
		out = append(out, fork.WithMessages(msgs...))
	}
	if e.covered {
		out = append(out, fork.RequireCovered())
	}
	if !e.deadline.IsZero() {
		out = append(out, fork.WithDeadline(e.deadline))
	}
	if e.version != nil {
		out = append(out, fork.WithVersion(*e.version))
	}
	if e.budget != (eventlog.Limits{}) {
		out = append(out, fork.WithBudget(e.budget))
	}
	return out, nil
}

// forkInput encodes a fork's new input and, when id's agent is
// registered, checks that it decodes into the agent's input type.
func (k *Kernel) forkInput(ctx context.Context, id eventlog.ID, v any) ([]byte, error) {
	in, err := encodeValue(v)
	if err != nil {
		return nil, fmt.Errorf("%w: sdk: fork of %s: input does not encode: %v", ErrInvalid, id, err)
	}
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sdk: fork of %s: %w", id, err)
	}
	k.mu.Lock()
	r, ok := k.mu.agents[info.Agent]
	k.mu.Unlock()
	if ok {
		if !r.nullable && string(bytes.TrimSpace(in)) == "null" {
			// Go decodes null into any type as "no change": the handler
			// would get a zero input nobody gave.
			return nil, fmt.Errorf("%w: sdk: fork of %s: agent %q: input null: its input type has no null", ErrInvalid, id, info.Agent)
		}
		if err := r.check(in); err != nil {
			return nil, fmt.Errorf("%w: sdk: fork of %s: agent %q: %v", ErrInvalid, id, info.Agent, err)
		}
	}
	return in, nil
}

// overrideResult encodes r's value as the recorded result of its step in
// the lineage st: for an LLM call, the recorded response with v as its
// body.
func overrideResult(st *replay.State, r forkResult) ([]byte, error) {
	rec, ok := st.Step(r.stepID)
	if !ok {
		return nil, fmt.Errorf("override of step %s, which the lineage never ran", r.stepID)
	}
	if rec.Kind != eventlog.StepLLM && r.tools != nil {
		return nil, fmt.Errorf("WithToolArgs of step %s, which is not an LLM call (it is a %s step): edit its result with WithResult", r.stepID, rec.Kind)
	}
	if rec.Kind != eventlog.StepLLM {
		b, err := encodeValue(r.value)
		if err != nil {
			return nil, fmt.Errorf("result of step %s does not encode: %v", r.stepID, err)
		}
		return b, nil
	}
	if rec.Status != replay.StepSucceeded {
		return nil, fmt.Errorf("override of LLM call %s, which has no recorded response (it is %s)", r.stepID, rec.Status)
	}
	var resp llmResult
	if err := json.Unmarshal(rec.Result, &resp); err != nil {
		return nil, fmt.Errorf("recorded response of LLM call %s does not decode: %v", r.stepID, err)
	}
	switch v := r.value.(type) {
	case nil:
		if r.tools == nil {
			b, _ := json.Marshal(v)
			resp.Body = b
			break
		}
		for _, t := range r.tools {
			body, err := fork.EditToolArgs(resp.Body, t.tool, t.args...)
			if err != nil {
				return nil, fmt.Errorf("LLM call %s: %v", r.stepID, err)
			}
			resp.Body = body
		}
	case []byte:
		resp.Body = v
	case json.RawMessage:
		resp.Body = v
	case string:
		resp.Body = []byte(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("body of LLM call %s does not encode: %v", r.stepID, err)
		}
		resp.Body = b
	}
	b, err := encodeValue(resp)
	if err != nil {
		return nil, fmt.Errorf("response of LLM call %s does not encode: %v", r.stepID, err)
	}
	return b, nil
}

// LatestCovered returns the newest seq at or before at whose fork point is
// covered — where a fork restores every resource exactly — or 0 and an
// error wrapping [ErrUncovered] when there is none. at must be in 1..head.
func (k *Kernel) LatestCovered(ctx context.Context, id eventlog.ID, at uint64) (uint64, error) {
	return coverage.LatestCovered(ctx, k.log, id, at)
}
