// Package policy holds the two decisions the kernel takes about a call
// before and after it runs, as pure functions of recorded events and
// configuration: when a resource's checkpoint is due ([Checkpoints],
// [Counter]) and whether a live call may run at all ([Gate], [Rules]).
//
// It imports only [github.com/forkline/forkline/eventlog]; it does no IO,
// reads no clock and starts no goroutine.
//
// # Checkpoint policy
//
// Each resource has a [Checkpoints] policy (DESIGN §5): EverySteps n ≥ 1
// (default 1) and OnCompletion (default true). The SDK records it in the
// resource's resource.bound; the recorded policy of the lineage wins over
// the options of a later call, across dispatches and forks.
//
// # Counted calls
//
// [Counter] folds a lineage's events, from seq 1 in order, into the number
// of counted calls per resource since its last successful capture or its
// newest binding. A counted call for resource R is a terminal event —
// succeeded, failed (an indeterminate failure of an at_most_once orphan too)
// or cancelled — of a tool call or local step (never an LLM call) whose
// step.started lists R. Denied calls have no step.started and replayed calls
// append nothing, so neither counts.
//
// Choices written down here:
//
//   - A safe_to_retry orphan that is re-run has two step.started and one
//     terminal event: it counts once. The orphan's own attempt never reached
//     a terminal event, and the terminal event is matched to the newest
//     step.started of its StepID.
//   - Every terminal event counts, as the SDK computes a due capture from
//     it: a step cancelled after starting counts, and if a later dispatch
//     resolves it as an indeterminate failure (DESIGN §4 treats a cancelled
//     step like an orphan) that failure counts again.
//   - A step that lists a key twice counts once for it.
//   - Every resource.bound of R resets R's count, whether it restores a
//     checkpoint (the state is exactly the checkpoint) or creates from the
//     initial environment (the SDK captures a baseline at once anyway).
//   - resource.captured resets the count; resource.capture_failed does not,
//     so the capture stays due and the next counted call tries again.
//   - fork.created leaves every count as it was at the fork point.
//
// [Counter.Due] says a capture is due when the count reached the EverySteps
// recorded in R's newest resource.bound. The SDK asks it after folding a
// counted call's terminal event and, if it is due, commits the capture (or
// its failure) in the same append.
//
// # Gating calls
//
// A [Gate] decides whether a live call may run (DESIGN §7); a denied call is
// recorded as step.denied and never runs, and replaying it returns the
// recorded denial without asking again. [Rules] is a small gate: the first
// [Rule] that matches a [Call] decides it, and a call no rule matches is
// allowed.
//
// # Approvals
//
// A gate may also answer [Decision] Approval (DESIGN §12; it wins over
// Allow): the SDK records approval.requested with the decision's Reason, the
// execution is waiting, and the call runs live once a person grants it, or
// returns the SDK's ErrDenied once they reject it. [ApproveForkEffects] is
// the gate that asks for approval of every at_most_once call running live in
// a fork ([Call] InFork and Idempotency), and allows everything else. A fork
// never inherits an approval of its prefix: every live attempt in a fork is
// gated again, retries and orphan re-runs included.
//
// # Rule text
//
// [ParseRules] reads rules one per line:
//
//	# comments and blank lines are ignored
//	allow|deny|approve KIND:TARGET [in-fork] [at-most-once] [reason text…]
//
// For example:
//
//	deny tool:rm_* in-fork forks must not delete files
//	approve tool:* in-fork at-most-once effects of forks are approved
//	allow llm:*
//	deny local:deploy
//
// The parts of a rule:
//
//   - KIND and TARGET are [path.Match] patterns, split at the first colon;
//     an empty pattern or "*" matches anything (for TARGET even a name with
//     a slash). A malformed pattern is an error, and so is a KIND pattern
//     that matches none of tool, local, llm and child, since its rule could
//     never apply.
//   - approve asks for approval of a matching call (Decision.Approval)
//     instead of allowing or denying it.
//   - in-fork restricts the rule to calls that run live in a fork, past
//     their fork point; at-most-once restricts it to at_most_once calls.
//     The two may come in either order, each at most once: a repeated one
//     is the first word of the reason.
//   - The rest of the line, trimmed, is the reason recorded with the
//     decision. Without one, the reason says which rule decided:
//     "denied by rule 1: deny local:deploy", "approval asked by rule 2:
//     approve tool:* in-fork at-most-once". A # is a comment only at the
//     start of a line; elsewhere it is part of the reason.
//
// Errors name the line number and what was wrong, and wrap
// [eventlog.ErrInvalid]. [Rules.String] writes the same form back, so that
// ParseRules(rules.String()) returns the same rules.
package policy
