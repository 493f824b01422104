package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Payload is the data of one event: exactly one of the pointer types of this
// file (*ExecutionCreated, *StepStarted, …). Only pointers implement it, so a
// type switch over an event's Data has one case per kind.
type Payload interface {
	// Kind returns the kind of event the payload belongs to.
	Kind() Kind
	// validate checks the payload's own invariants.
	validate() error
}

// StepKind says what sort of call a step is.
type StepKind string

// The step kinds.
const (
	StepTool  StepKind = "tool"  // a tool call (DefineTool)
	StepLocal StepKind = "local" // a local step (Step)
	StepLLM   StepKind = "llm"   // an LLM call recorded by the transport
	StepChild StepKind = "child" // a child execution started and awaited (format 2)
	// StepRecv is sdk.Recv waiting for a message (format 3, DESIGN §21½.1).
	// It has no body: its step.started advances no resource, it is never
	// counted by a checkpoint policy and never gated; it affects nothing.
	StepRecv StepKind = "recv"
)

// Valid reports whether k is one of the step kinds.
func (k StepKind) Valid() bool {
	return k == StepTool || k == StepLocal || k == StepLLM || k == StepChild || k == StepRecv
}

// HasBody reports whether a step of kind k runs a body that may change
// resources: every kind but recv (DESIGN §21½.1). A step without a body
// advances nothing and is never counted.
func (k StepKind) HasBody() bool { return k != StepRecv }

// Idempotency says what may happen to a step orphaned by a dead dispatch.
type Idempotency string

// The idempotency classes of DESIGN §4.
const (
	SafeToRetry Idempotency = "safe_to_retry" // an orphan is run again
	AtMostOnce  Idempotency = "at_most_once"  // an orphan fails as indeterminate
)

// Valid reports whether i is one of the idempotency classes.
func (i Idempotency) Valid() bool { return i == SafeToRetry || i == AtMostOnce }

// CaptureReason says why a checkpoint was taken.
type CaptureReason string

// The capture reasons.
const (
	CaptureBaseline   CaptureReason = "baseline"   // right after creating from the initial environment
	CaptureSteps      CaptureReason = "steps"      // EverySteps counted calls were reached
	CaptureCompletion CaptureReason = "completion" // the handler returned with the resource uncovered
	// CapturePark (format version 2, DESIGN §15½.8): the dispatch parked
	// with the resource uncovered.
	CapturePark CaptureReason = "park"
	// CaptureShutdown (format version 2, DESIGN §15½.8, §21½.2): the
	// caller's context ended the dispatch with the non-portable resource
	// uncovered.
	CaptureShutdown CaptureReason = "shutdown"
)

// Valid reports whether r is one of the capture reasons.
func (r CaptureReason) Valid() bool {
	switch r {
	case CaptureBaseline, CaptureSteps, CaptureCompletion, CapturePark, CaptureShutdown:
		return true
	}
	return false
}

// FailureCode classifies why an execution failed.
type FailureCode string

// The failure codes. Other codes may be added; a decoder accepts any
// non-empty code.
const (
	FailHandler               FailureCode = "handler"                // the handler returned an error
	FailPanic                 FailureCode = "panic"                  // the handler or a body panicked
	FailCheckpointUnavailable FailureCode = "checkpoint_unavailable" // a fork's selected checkpoint could not be restored
	FailResourceMismatch      FailureCode = "resource_mismatch"      // a driver differs from the recorded binding
	FailResource              FailureCode = "resource"               // a driver failed to create or open a resource
	FailDeadline              FailureCode = "deadline"               // the execution's deadline passed (DESIGN §9)
	FailResourceUnavailable   FailureCode = "resource_unavailable"   // a new owner could not open a binding, the head uncovered (DESIGN §11); read in old logs, no longer written (§15½.4)
	FailNondeterministic      FailureCode = "nondeterministic"       // under sdk.Strict, the handler diverged from its recorded history (DESIGN §15)
)

// ParkReason says what a parked dispatch waits for.
type ParkReason string

// The park reasons of DESIGN §10. A dispatch parked on a timer or a retry
// backoff has a WakeAt; one parked on an approval or a child may have none
// (it waits for the decision or the child's end).
const (
	ParkTimer    ParkReason = "timer"    // sdk.Sleep
	ParkRetry    ParkReason = "retry"    // a retry backoff
	ParkApproval ParkReason = "approval" // an approval.requested without decision
	ParkChild    ParkReason = "child"    // a child execution that has not ended
	// ParkRateLimit waits for a rate limit's window to free a call
	// (format 3, DESIGN §17).
	ParkRateLimit ParkReason = "rate_limit"
	// ParkMessage waits for a message to sdk.Recv, or its timeout (format 3,
	// DESIGN §18).
	ParkMessage ParkReason = "message"
)

// Valid reports whether r is one of the park reasons.
func (r ParkReason) Valid() bool {
	return r == ParkTimer || r == ParkRetry || r == ParkApproval || r == ParkChild || r == ParkRateLimit || r == ParkMessage
}

// needsWake reports whether a dispatch parked for r must name its wake time.
func (r ParkReason) needsWake() bool { return r == ParkTimer || r == ParkRetry || r == ParkRateLimit }

// DenialCode classifies why a call was denied (format 3). Records of
// format versions 1 and 2 have none ("").
type DenialCode string

// The denial codes of DESIGN Part III.
const (
	DenyPolicy           DenialCode = "policy"            // a gate or a policy rule denied it
	DenyRateLimited      DenialCode = "rate_limited"      // a rate limit's wait was longer than allowed
	DenyBudget           DenialCode = "budget"            // the execution's budget is spent
	DenyApprovalExpired  DenialCode = "approval_expired"  // an approval request passed its ExpiresAt
	DenyApprovalRejected DenialCode = "approval_rejected" // an approval request was rejected
)

// Valid reports whether c is one of the denial codes.
func (c DenialCode) Valid() bool {
	return c == DenyPolicy || c == DenyRateLimited || c == DenyBudget || c == DenyApprovalExpired || c == DenyApprovalRejected
}

// Tokens is the token usage an LLM call's response reported (format 3).
type Tokens struct {
	Input  uint64 `msgpack:"input,omitempty" json:"input"`
	Output uint64 `msgpack:"output,omitempty" json:"output"`
}

// Plus returns the sum of t and u.
func (t Tokens) Plus(u Tokens) Tokens {
	return Tokens{Input: t.Input + u.Input, Output: t.Output + u.Output}
}

// TokensOf returns the token usage an event's payload records: the Tokens
// of a step.succeeded (an llm reply) or of a step.failed (a failed llm
// attempt whose response carried usage, DESIGN §21½.9); zero for every
// other payload. Every fold of spend sums it over the events it counts.
func TokensOf(p Payload) Tokens {
	switch p := p.(type) {
	case *StepSucceeded:
		return p.Tokens
	case *StepFailed:
		return p.Tokens
	}
	return Tokens{}
}

// Limits is an execution's budget (format 3, DESIGN §17): at most so many
// tokens, LLM calls and tool calls over the lineage; 0 is no limit.
type Limits struct {
	MaxTokens    uint64 `msgpack:"max_tokens,omitempty" json:"max_tokens"`
	MaxLLMCalls  uint64 `msgpack:"max_llm_calls,omitempty" json:"max_llm_calls"`
	MaxToolCalls uint64 `msgpack:"max_tool_calls,omitempty" json:"max_tool_calls"`
}

// Message is one message received by an execution (DESIGN §18): its
// idempotency ID, topic, value (encoded by the SDK) and sender.
type Message struct {
	MessageID string `msgpack:"message_id" json:"message_id"`
	Topic     string `msgpack:"topic" json:"topic"`
	Value     []byte `msgpack:"value,omitempty" json:"value"`
	From      string `msgpack:"from,omitempty" json:"from"`
}

func (m *Message) validate() error {
	switch {
	case m.MessageID == "":
		return errors.New("empty message id")
	case m.Topic == "":
		return fmt.Errorf("message %s: empty topic", m.MessageID)
	}
	return nil
}

// ExecutionCreated is the first event of every root execution.
type ExecutionCreated struct {
	Agent string `msgpack:"agent" json:"agent"`
	Input []byte `msgpack:"input,omitempty" json:"input"` // encoded by the SDK
	// Deadline is when the kernel cancels the handler and fails the
	// execution with Code deadline; zero for none (format 2).
	Deadline time.Time `msgpack:"deadline,omitempty" json:"deadline"`
	// Key is the idempotency key of sdk.WithKey; "" for none (format 2).
	Key string `msgpack:"key,omitempty" json:"key"`
	// Version is the code version of the kernel that started it; "" runs
	// on any worker (format 3, DESIGN §19).
	Version string `msgpack:"version,omitempty" json:"version"`
	// Queue and Priority place it in a queue; "" for none (format 3).
	Queue    string `msgpack:"queue,omitempty" json:"queue"`
	Priority int    `msgpack:"priority,omitempty" json:"priority"`
	// Budget limits what the lineage may spend (format 3, DESIGN §17).
	Budget Limits `msgpack:"budget,omitempty" json:"budget"`
	// TraceParent is the OpenTelemetry span context of the caller of
	// sdk.Start as W3C traceparent text (version 00:
	// "00-<trace id>-<span id>-<flags>"), written when the kernel traces
	// (sdk.WithTracerProvider) and the caller's context holds a valid span
	// context; "" otherwise (format 3, DESIGN §13). A child's is the span
	// of the parent's child step. Each dispatch's forkline.dispatch span
	// links to it. A malformed value is rejected, not ignored: the record
	// does not decode (ErrCorrupt, as any malformed field), and Create
	// refuses it (ErrInvalid); see [ParseTraceParent].
	TraceParent string `msgpack:"traceparent,omitempty" json:"traceparent"`
}

// DispatchStarted is written by each Run that begins executing the handler.
type DispatchStarted struct {
	Dispatch uint64 `msgpack:"dispatch" json:"dispatch"` // 1-based, counted over the whole lineage
	// Owner and Epoch name the lease the dispatch runs under (DESIGN §11);
	// "" and 0 when the store keeps no leases (format 2).
	Owner string `msgpack:"owner,omitempty" json:"owner"`
	Epoch uint64 `msgpack:"epoch,omitempty" json:"epoch"`
}

// StepStarted is written before a live tool call, local step or LLM call runs.
type StepStarted struct {
	StepID      string      `msgpack:"step_id" json:"step_id"`
	StepKind    StepKind    `msgpack:"step_kind" json:"step_kind"`
	Target      string      `msgpack:"target" json:"target"`
	Args        []byte      `msgpack:"args,omitempty" json:"args"`           // canonical encoding
	Resources   []string    `msgpack:"resources,omitempty" json:"resources"` // keys the call affects
	Idempotency Idempotency `msgpack:"idempotency" json:"idempotency"`
	Attempt     uint32      `msgpack:"attempt" json:"attempt"` // 1 for the first run
	// WakeAt is when a recv step times out (start + timeout), so a resumed
	// dispatch waits only the rest; only a recv step has one (format 3).
	WakeAt time.Time `msgpack:"wake_at,omitempty" json:"wake_at"`
}

// StepSucceeded records the value a step returned.
type StepSucceeded struct {
	StepID string `msgpack:"step_id" json:"step_id"`
	Result []byte `msgpack:"result,omitempty" json:"result"` // encoded by the SDK
	// Tokens is the usage an llm step's response reported (format 3).
	Tokens Tokens `msgpack:"tokens,omitempty" json:"tokens"`
	// Truncated says the caller closed an llm step's streamed body before
	// its end: Result holds what the caller read (format 3).
	Truncated bool `msgpack:"truncated,omitempty" json:"truncated"`
}

// StepFailed records the error a step returned, or an orphaned at_most_once
// step resolved as indeterminate on a later dispatch.
type StepFailed struct {
	StepID        string `msgpack:"step_id" json:"step_id"`
	Error         string `msgpack:"error" json:"error"`
	Indeterminate bool   `msgpack:"indeterminate,omitempty" json:"indeterminate"`
	// RetryAt, when set, says the attempt failed and the step runs again
	// (Attempt+1) at that time: the attempt has ended, the step is not
	// terminal. The final failure has none (format 2).
	RetryAt time.Time `msgpack:"retry_at,omitempty" json:"retry_at"`
	// Tokens is the token usage of a failed llm attempt whose response
	// carried it (DESIGN §21½.9): a 429 or 5xx answer that is retried,
	// a stream that broke after its usage arrived (Anthropic's
	// message_start). It counts in the spend like step.succeeded's;
	// zero for none (format 3).
	Tokens Tokens `msgpack:"tokens,omitempty" json:"tokens"`
}

// StepCancelled records that a step's context was cancelled after it started.
type StepCancelled struct {
	StepID string `msgpack:"step_id" json:"step_id"`
}

// StepDenied records that the gate refused a call; it never ran.
type StepDenied struct {
	StepID   string   `msgpack:"step_id" json:"step_id"`
	StepKind StepKind `msgpack:"step_kind" json:"step_kind"`
	Target   string   `msgpack:"target" json:"target"`
	Reason   string   `msgpack:"reason" json:"reason"`
	// RuleID names the policy rule that decided; "" for none (format 3).
	RuleID string `msgpack:"rule_id,omitempty" json:"rule_id"`
	// Code classifies the denial; "" only in records of format 1 and 2.
	Code DenialCode `msgpack:"code,omitempty" json:"code"`
}

// ResourceBound records that an execution created its own resource for Key,
// from checkpoint From or ("") the initial environment, with its policy.
type ResourceBound struct {
	Key           string          `msgpack:"key" json:"key"`
	DriverID      string          `msgpack:"driver_id" json:"driver_id"`
	Configuration json.RawMessage `msgpack:"configuration,omitempty" json:"configuration"` // JSON, no credentials
	Binding       json.RawMessage `msgpack:"binding" json:"binding"`                       // JSON
	From          string          `msgpack:"from,omitempty" json:"from"`
	EverySteps    int             `msgpack:"every_steps" json:"every_steps"`
	OnCompletion  bool            `msgpack:"on_completion" json:"on_completion"`
	CoverageReuse bool            `msgpack:"coverage_reuse,omitempty" json:"coverage_reuse"`
	// Portable says the binding opens from any host (driver.IsPortable at
	// bind time, DESIGN §15½.4). Bindings of format 1 and 2 read false: only
	// their owner opens them (format 3).
	Portable bool `msgpack:"portable,omitempty" json:"portable"`
}

// ResourceCaptured records a checkpoint of Key's resource at Generation.
type ResourceCaptured struct {
	Key        string        `msgpack:"key" json:"key"`
	Ref        string        `msgpack:"ref" json:"ref"`
	Generation uint64        `msgpack:"generation" json:"generation"`
	Reason     CaptureReason `msgpack:"reason" json:"reason"`
}

// ResourceCaptureFailed records that a due checkpoint failed.
type ResourceCaptureFailed struct {
	Key    string        `msgpack:"key" json:"key"`
	Reason CaptureReason `msgpack:"reason" json:"reason"`
	Error  string        `msgpack:"error" json:"error"`
}

// ExecutionCompleted records the handler's output.
type ExecutionCompleted struct {
	Output []byte `msgpack:"output,omitempty" json:"output"` // encoded by the SDK
}

// ExecutionFailed records why an execution failed.
type ExecutionFailed struct {
	Error string      `msgpack:"error" json:"error"`
	Code  FailureCode `msgpack:"code" json:"code"`
}

// ForkCreated is the first own event of a fork: the fork replays its parent's
// events 1..At and restores each resource from its selection.
type ForkCreated struct {
	Parent     ID              `msgpack:"parent" json:"parent"`
	At         uint64          `msgpack:"at" json:"at"`
	Selections []ForkSelection `msgpack:"selections,omitempty" json:"selections"`
	// Input, when set, is the fork's new handler input (sdk.WithInput,
	// format 2).
	Input []byte `msgpack:"input,omitempty" json:"input"`
	// Overrides are results the fork replays instead of the recorded ones
	// (sdk.WithResult), sorted by unique StepID (format 2).
	Overrides []StepOverride `msgpack:"overrides,omitempty" json:"overrides"`
	// Deadline is the fork's own deadline; a fork never inherits its
	// parent's (format 2).
	Deadline time.Time `msgpack:"deadline,omitempty" json:"deadline"`
	// Version is the fork's code version: its parent's unless
	// sdk.OnVersion (format 3, DESIGN §21½.5).
	Version string `msgpack:"version,omitempty" json:"version"`
	// Budget is the fork's budget: its parent's unless sdk.Budget on the
	// fork (format 3, DESIGN §21½.9).
	Budget Limits `msgpack:"budget,omitempty" json:"budget"`
	// Messages are received at fork.created (sdk.WithMessages, format 3,
	// DESIGN §21½.16).
	Messages []Message `msgpack:"messages,omitempty" json:"messages"`
	// TraceParent is the span context of the caller of sdk.Kernel.Fork, as
	// ExecutionCreated's TraceParent is of Start's (format 3, DESIGN §13):
	// the fork's dispatches link to it, never to the parent's (a fork does
	// not inherit what belongs to a run, §8½). Validated as
	// ExecutionCreated's.
	TraceParent string `msgpack:"traceparent,omitempty" json:"traceparent"`
}

// StepOverride is a result a fork replays for one step instead of the
// recorded one (DESIGN §12).
type StepOverride struct {
	StepID string `msgpack:"step_id" json:"step_id"`
	Result []byte `msgpack:"result,omitempty" json:"result"` // encoded by the SDK
}

// CancelRequested records a request to cancel the execution (DESIGN §9):
// the owner cancels its handler's context and the execution ends
// execution.cancelled.
type CancelRequested struct {
	Reason string `msgpack:"reason,omitempty" json:"reason"`
	By     string `msgpack:"by,omitempty" json:"by"` // who asked: a user, a parent execution, …
}

// ExecutionCancelled records that the execution was cancelled: a terminal
// event like execution.failed, with no completion capture before it.
type ExecutionCancelled struct {
	Reason string `msgpack:"reason,omitempty" json:"reason"`
}

// DispatchParked records that the dispatch stopped to wait (DESIGN §10):
// the execution is waiting until WakeAt or the awaited request.
type DispatchParked struct {
	WakeAt time.Time  `msgpack:"wake_at,omitempty" json:"wake_at"`
	Reason ParkReason `msgpack:"reason" json:"reason"`
}

// TimerStarted records a durable sleep until WakeAt (sdk.Sleep). TimerID is
// a StepID-like identity: kind timer, the duration, the occurrence.
type TimerStarted struct {
	TimerID string    `msgpack:"timer_id" json:"timer_id"`
	WakeAt  time.Time `msgpack:"wake_at" json:"wake_at"`
}

// TimerFired records that a timer's sleep ended.
type TimerFired struct {
	TimerID string `msgpack:"timer_id" json:"timer_id"`
}

// ApprovalRequested records that the gate asked for an approval of a call
// before it runs (DESIGN §12).
type ApprovalRequested struct {
	StepID   string   `msgpack:"step_id" json:"step_id"`
	StepKind StepKind `msgpack:"step_kind" json:"step_kind"`
	Target   string   `msgpack:"target" json:"target"`
	Args     []byte   `msgpack:"args,omitempty" json:"args"` // canonical encoding
	Reason   string   `msgpack:"reason,omitempty" json:"reason"`
	// RuleID names the policy rule that asked (format 3).
	RuleID string `msgpack:"rule_id,omitempty" json:"rule_id"`
	// ExpiresAt is when the request is denied as approval_expired; zero
	// for never (format 3).
	ExpiresAt time.Time `msgpack:"expires_at,omitempty" json:"expires_at"`
	// Approvers may decide; none means anyone (format 3).
	Approvers []string `msgpack:"approvers,omitempty" json:"approvers"`
	// Message is shown to the approvers (format 3).
	Message string `msgpack:"message,omitempty" json:"message"`
}

// ApprovalGranted records that a requested approval was granted: the step
// then runs live.
type ApprovalGranted struct {
	StepID string `msgpack:"step_id" json:"step_id"`
	By     string `msgpack:"by,omitempty" json:"by"`
	Note   string `msgpack:"note,omitempty" json:"note"`
}

// ApprovalRejected records that a requested approval was refused: the step
// returns ErrDenied.
type ApprovalRejected struct {
	StepID string `msgpack:"step_id" json:"step_id"`
	By     string `msgpack:"by,omitempty" json:"by"`
	Note   string `msgpack:"note,omitempty" json:"note"`
}

// MarkerRecorded records a named marker at its position (sdk.Patched).
type MarkerRecorded struct {
	Name string `msgpack:"name" json:"name"`
}

// StepAbandoned records that a step started on an earlier dispatch was not
// reached again by a dispatch that completed (DESIGN §15): the attempt
// lands.
type StepAbandoned struct {
	StepID string `msgpack:"step_id" json:"step_id"`
}

// ForkDiverged records that a fork with a new input ran a live call while
// recorded steps of its prefix (Unconsumed, their StepIDs) were not
// consumed (DESIGN §12).
type ForkDiverged struct {
	Unconsumed []string `msgpack:"unconsumed" json:"unconsumed"`
}

// MessageReceived records a message sent to the execution (sdk.Send,
// DESIGN §18), moved into the lineage by its owner (format 3). It has no
// body: it advances nothing and is never counted.
type MessageReceived struct {
	MessageID string `msgpack:"message_id" json:"message_id"`
	Topic     string `msgpack:"topic" json:"topic"`
	Value     []byte `msgpack:"value,omitempty" json:"value"` // encoded by the SDK
	From      string `msgpack:"from,omitempty" json:"from"`
}

// ChildEnded is the request a child execution's terminal append writes
// into its parent's inbox, in the same atomic write (DESIGN §15½.6): the
// child of the parent's step StepID has ended, so a parent parked waiting
// for it is due. It is a request, never an event of a lineage: the
// parent's dispatch removes it from the inbox without an event (the
// child's outcome is in the child's own log). StepID is "" for a child
// whose store did not record its step (created by an older build).
type ChildEnded struct {
	StepID string `msgpack:"step_id,omitempty" json:"step_id"`
}

// EventSet records a value the execution published under Key
// (sdk.SetEvent, format 3). It has no body: it advances nothing and is
// never counted.
type EventSet struct {
	Key   string `msgpack:"key" json:"key"`
	Value []byte `msgpack:"value,omitempty" json:"value"` // encoded by the SDK
}

// ForkSelection is what a fork restores one resource from (DESIGN §5).
type ForkSelection struct {
	Key        string `msgpack:"key" json:"key"`
	Ref        string `msgpack:"ref,omitempty" json:"ref"` // "" = initial environment
	CapturedAt uint64 `msgpack:"captured_at,omitempty" json:"captured_at"`
	Generation uint64 `msgpack:"generation" json:"generation"`
	Covered    bool   `msgpack:"covered,omitempty" json:"covered"`
}

// Kind implements Payload.
func (*ExecutionCreated) Kind() Kind { return KindExecutionCreated }

// Kind implements Payload.
func (*DispatchStarted) Kind() Kind { return KindDispatchStarted }

// Kind implements Payload.
func (*StepStarted) Kind() Kind { return KindStepStarted }

// Kind implements Payload.
func (*StepSucceeded) Kind() Kind { return KindStepSucceeded }

// Kind implements Payload.
func (*StepFailed) Kind() Kind { return KindStepFailed }

// Kind implements Payload.
func (*StepCancelled) Kind() Kind { return KindStepCancelled }

// Kind implements Payload.
func (*StepDenied) Kind() Kind { return KindStepDenied }

// Kind implements Payload.
func (*ResourceBound) Kind() Kind { return KindResourceBound }

// Kind implements Payload.
func (*ResourceCaptured) Kind() Kind { return KindResourceCaptured }

// Kind implements Payload.
func (*ResourceCaptureFailed) Kind() Kind { return KindResourceCaptureFailed }

// Kind implements Payload.
func (*ExecutionCompleted) Kind() Kind { return KindExecutionCompleted }

// Kind implements Payload.
func (*ExecutionFailed) Kind() Kind { return KindExecutionFailed }

// Kind implements Payload.
func (*ForkCreated) Kind() Kind { return KindForkCreated }

// Kind implements Payload.
func (*CancelRequested) Kind() Kind { return KindCancelRequested }

// Kind implements Payload.
func (*ExecutionCancelled) Kind() Kind { return KindExecutionCancelled }

// Kind implements Payload.
func (*DispatchParked) Kind() Kind { return KindDispatchParked }

// Kind implements Payload.
func (*TimerStarted) Kind() Kind { return KindTimerStarted }

// Kind implements Payload.
func (*TimerFired) Kind() Kind { return KindTimerFired }

// Kind implements Payload.
func (*ApprovalRequested) Kind() Kind { return KindApprovalRequested }

// Kind implements Payload.
func (*ApprovalGranted) Kind() Kind { return KindApprovalGranted }

// Kind implements Payload.
func (*ApprovalRejected) Kind() Kind { return KindApprovalRejected }

// Kind implements Payload.
func (*MarkerRecorded) Kind() Kind { return KindMarkerRecorded }

// Kind implements Payload.
func (*StepAbandoned) Kind() Kind { return KindStepAbandoned }

// Kind implements Payload.
func (*ForkDiverged) Kind() Kind { return KindForkDiverged }

// Kind implements Payload.
func (*MessageReceived) Kind() Kind { return KindMessageReceived }

// Kind implements Payload.
func (*EventSet) Kind() Kind { return KindEventSet }

// Kind implements Payload.
func (*ChildEnded) Kind() Kind { return KindChildEnded }

var errEmptyStepID = errors.New("empty step id")

func (p *ExecutionCreated) validate() error {
	if p.Agent == "" {
		return errors.New("empty agent")
	}
	if p.Priority != 0 && p.Queue == "" {
		return fmt.Errorf("execution.created: priority %d without a queue", p.Priority)
	}
	if err := checkTraceParent(p.TraceParent); err != nil {
		return fmt.Errorf("execution.created: %w", err)
	}
	return nil
}

func (p *DispatchStarted) validate() error {
	if p.Dispatch == 0 {
		return errors.New("dispatch count 0 (counts start at 1)")
	}
	if p.Epoch != 0 && p.Owner == "" {
		return fmt.Errorf("dispatch %d: epoch %d without an owner", p.Dispatch, p.Epoch)
	}
	return nil
}

func (p *StepStarted) validate() error {
	switch {
	case p.StepID == "":
		return errEmptyStepID
	case !p.StepKind.Valid():
		return fmt.Errorf("step %s: unknown step kind %q", p.StepID, p.StepKind)
	case !p.Idempotency.Valid():
		return fmt.Errorf("step %s: unknown idempotency %q", p.StepID, p.Idempotency)
	case p.Attempt == 0:
		return fmt.Errorf("step %s: attempt 0 (attempts start at 1)", p.StepID)
	case p.StepKind != StepRecv && !p.WakeAt.IsZero():
		return fmt.Errorf("step %s: a %s step with a wake time (only recv has one)", p.StepID, p.StepKind)
	case !p.StepKind.HasBody() && len(p.Resources) > 0:
		return fmt.Errorf("step %s: a %s step affects resources (it has no body)", p.StepID, p.StepKind)
	}
	for _, k := range p.Resources {
		if k == "" {
			return fmt.Errorf("step %s: empty resource key", p.StepID)
		}
	}
	return nil
}

func (p *StepSucceeded) validate() error { return stepIDPresent(p.StepID) }

func (p *MessageReceived) validate() error {
	m := Message{MessageID: p.MessageID, Topic: p.Topic}
	return m.validate()
}

func (p *EventSet) validate() error {
	if p.Key == "" {
		return errors.New("event.set: empty key")
	}
	return nil
}
func (p *StepFailed) validate() error {
	if p.StepID == "" {
		return errEmptyStepID
	}
	if p.Indeterminate && !p.RetryAt.IsZero() {
		// An indeterminate at_most_once attempt is never retried (DESIGN §10).
		return fmt.Errorf("step %s: indeterminate failure with a retry time", p.StepID)
	}
	return nil
}
func (p *StepCancelled) validate() error { return stepIDPresent(p.StepID) }

func (p *StepDenied) validate() error {
	if p.StepID == "" {
		return errEmptyStepID
	}
	if !p.StepKind.Valid() {
		return fmt.Errorf("step %s: unknown step kind %q", p.StepID, p.StepKind)
	}
	if p.Code != "" && !p.Code.Valid() {
		return fmt.Errorf("step %s: unknown denial code %q", p.StepID, p.Code)
	}
	return nil
}

func (p *ResourceBound) validate() error {
	switch {
	case p.Key == "":
		return errors.New("resource.bound: empty key")
	case p.DriverID == "":
		return fmt.Errorf("resource %q: empty driver id", p.Key)
	case p.EverySteps < 1:
		return fmt.Errorf("resource %q: every_steps %d, must be at least 1", p.Key, p.EverySteps)
	case len(p.Configuration) > 0 && !json.Valid(p.Configuration):
		return fmt.Errorf("resource %q: configuration is not JSON", p.Key)
	case !json.Valid(p.Binding):
		return fmt.Errorf("resource %q: binding is not JSON", p.Key)
	}
	return nil
}

func (p *ResourceCaptured) validate() error {
	switch {
	case p.Key == "":
		return errors.New("resource.captured: empty key")
	case p.Ref == "":
		return fmt.Errorf("resource %q: empty checkpoint ref", p.Key)
	case !p.Reason.Valid():
		return fmt.Errorf("resource %q: unknown capture reason %q", p.Key, p.Reason)
	}
	return nil
}

func (p *ResourceCaptureFailed) validate() error {
	if p.Key == "" {
		return errors.New("resource.capture_failed: empty key")
	}
	if !p.Reason.Valid() {
		return fmt.Errorf("resource %q: unknown capture reason %q", p.Key, p.Reason)
	}
	return nil
}

func (p *ExecutionCompleted) validate() error { return nil }

func (p *ExecutionFailed) validate() error {
	if p.Code == "" {
		return errors.New("execution.failed: empty code")
	}
	return nil
}

func (p *ForkCreated) validate() error {
	if p.Parent.IsZero() {
		return errors.New("fork.created: zero parent")
	}
	if p.At == 0 {
		return errors.New("fork.created: at 0")
	}
	if err := checkTraceParent(p.TraceParent); err != nil {
		return fmt.Errorf("fork.created: %w", err)
	}
	for i, o := range p.Overrides {
		if o.StepID == "" {
			return fmt.Errorf("fork.created: override %d: %w", i, errEmptyStepID)
		}
		if i > 0 && p.Overrides[i-1].StepID >= o.StepID {
			return fmt.Errorf("fork.created: overrides not sorted by unique step id at %q", o.StepID)
		}
	}
	for i, s := range p.Selections {
		if s.Key == "" {
			return fmt.Errorf("fork.created: selection %d: empty key", i)
		}
		if i > 0 && p.Selections[i-1].Key >= s.Key {
			return fmt.Errorf("fork.created: selections not sorted by unique key at %q", s.Key)
		}
		if s.Covered && s.Ref == "" {
			return fmt.Errorf("fork.created: selection %q covered without a ref", s.Key)
		}
	}
	for i := range p.Messages {
		if err := p.Messages[i].validate(); err != nil {
			return fmt.Errorf("fork.created: message %d: %w", i, err)
		}
		for _, prev := range p.Messages[:i] {
			if prev.MessageID == p.Messages[i].MessageID {
				return fmt.Errorf("fork.created: message id %q twice", prev.MessageID)
			}
		}
	}
	return nil
}

func (p *CancelRequested) validate() error    { return nil }
func (p *ExecutionCancelled) validate() error { return nil }

func (p *DispatchParked) validate() error {
	if !p.Reason.Valid() {
		return fmt.Errorf("dispatch.parked: unknown reason %q", p.Reason)
	}
	if p.Reason.needsWake() && p.WakeAt.IsZero() {
		return fmt.Errorf("dispatch.parked: parked for %s without a wake time", p.Reason)
	}
	return nil
}

func (p *TimerStarted) validate() error {
	if p.TimerID == "" {
		return errors.New("empty timer id")
	}
	if p.WakeAt.IsZero() {
		return fmt.Errorf("timer %s: zero wake time", p.TimerID)
	}
	return nil
}

func (p *TimerFired) validate() error {
	if p.TimerID == "" {
		return errors.New("empty timer id")
	}
	return nil
}

func (p *ApprovalRequested) validate() error {
	if p.StepID == "" {
		return errEmptyStepID
	}
	if !p.StepKind.Valid() {
		return fmt.Errorf("step %s: unknown step kind %q", p.StepID, p.StepKind)
	}
	for i, a := range p.Approvers {
		if a == "" {
			return fmt.Errorf("step %s: approver %d is empty", p.StepID, i)
		}
	}
	return nil
}

func (p *ApprovalGranted) validate() error  { return stepIDPresent(p.StepID) }
func (p *ApprovalRejected) validate() error { return stepIDPresent(p.StepID) }

func (p *MarkerRecorded) validate() error {
	if p.Name == "" {
		return errors.New("marker.recorded: empty name")
	}
	return nil
}

func (p *StepAbandoned) validate() error { return stepIDPresent(p.StepID) }

func (p *ChildEnded) validate() error { return nil }

func (p *ForkDiverged) validate() error {
	if len(p.Unconsumed) == 0 {
		return errors.New("fork.diverged: no unconsumed steps")
	}
	for i, id := range p.Unconsumed {
		if id == "" {
			return fmt.Errorf("fork.diverged: unconsumed %d: %w", i, errEmptyStepID)
		}
	}
	return nil
}

func stepIDPresent(id string) error {
	if id == "" {
		return errEmptyStepID
	}
	return nil
}
