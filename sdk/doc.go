// Package sdk is what a Go agent runtime embeds: a [Kernel] that runs
// registered agents' executions durably on an event log, with tools
// ([DefineTool]), local steps ([Step]), LLM calls ([Transport]) and external
// resources ([Resource]) whose checkpoints make any event forkable ([Kernel.Fork]).
//
// # Replay
//
// Each [Kernel.Run] is one dispatch: the handler runs from the top, and each
// call is looked up by its StepID (kind, target, canonical args and
// occurrence in the dispatch — DESIGN §4). A recorded outcome is returned
// without running the body and without appending anything; a call that
// started but never finished is run again if it is safe to retry, or failed
// as indeterminate if it is [AtMostOnce]; anything else is gated and run
// live. A step's error is recorded as text and returned as a *[StepError],
// live and on replay alike, so a handler sees the same outcome either way.
//
// # Durability
//
// An at_most_once step's step.started is synced before its body runs; a
// safe_to_retry step's rides on the sync of its terminal event, so a live
// safe_to_retry call costs one fsync. Terminal events, captures, bindings
// and execution.* events are synced before the caller sees their outcome.
//
// # Resources
//
// [Resource] follows DESIGN §5: the same handle per key in a dispatch; the
// execution's own binding opened on later dispatches; a fork's own resource
// created from its selection; a baseline capture after creating from the
// initial environment; captures every [EverySteps] counted calls committed
// with the call's terminal event; completion captures committed with
// execution.completed. While an execution has resources, tool and local-step
// bodies run one at a time. Only resources obtained in the dispatch that
// completes can be captured at completion: the kernel has no driver for the
// others. When a dispatch ends, every handle it obtained that implements
// io.Closer is closed; handles belong to one dispatch.
//
// # Changing code safely
//
// A changed handler meets histories its old code recorded (DESIGN §15).
// Without [Strict], a recorded call the new code no longer makes is left
// as it is — except an orphan (a step started on an earlier dispatch and
// never finished) that a completing dispatch never reached again: the
// kernel ends it with step.abandoned before the completion captures, so it
// stops holding its resources' coverage, and counts it like an ended
// attempt. With [Strict], a call made where the history recorded another
// call, and a dispatch that completes with recorded calls unmade (a
// renamed or removed step, an unreached orphan), fail the execution with
// Code nondeterministic and an error that is [ErrNonDeterministic] (a
// *[NonDeterministicError] naming the expected and the actual call).
// [Patched] guards a change so that old histories keep replaying by the
// old path; [ReplayOnly] replays histories without running anything, which
// proptest.Replay and forkline check build on. See [AtMostOnce] for the
// nonce trap.
//
// # Idempotency keys
//
// [IdempotencyKey] is derived from the StepID and the execution that runs
// the body, so every attempt of one step in one execution shares it while a
// fork running the same step live gets its own (its effect is its own).
//
// # Choices where the design is silent
//
// Tool and local-step bodies do not nest ([ErrNestedStep]); an HTTP request
// made through [Transport] from inside a body passes straight through and is
// part of that body's recorded result. Values travel as JSON; a recorded
// result that no longer decodes into the caller's type (including a field
// the type no longer has) is an error, never a zero value.
package sdk
