// Package policy holds the two decisions the kernel takes about a call
// before and after it runs, as pure functions of recorded events and
// configuration: when a resource's checkpoint is due ([Checkpoints],
// [Counter]) and whether a live call may run at all ([Gate], [Rules],
// [Bundle]).
//
// It imports only [github.com/forkline/forkline/eventlog] and a YAML
// parser (go.yaml.in/yaml/v3, for bundles); it does no IO, reads no clock
// and starts no goroutine.
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
//
// # Policy bundles
//
// [ParseBundle] reads a bundle (DESIGN §17) in YAML:
//
//	default: deny            # allow or deny: calls no rule matches (required)
//	on_budget: approve       # approve or deny (default): a call past its budget
//	rules:
//	  - id: model-calls      # unique, non-empty; every decision records it
//	    priority: 10         # unique; the lowest is tried first, first match wins
//	    when:                # every condition given must hold; none: any call
//	      kind: llm          # a glob over tool, local, llm, child
//	      agents: [researcher, "writer-*"]   # or agent: NAME (globs)
//	      args:              # predicates on the call's JSON args
//	        model: {one_of: [gpt-4o-mini, claude-haiku]}
//	        messages.0.content: {contains: "invoice"}
//	    then:
//	      decision: allow    # allow, deny or approve (required)
//	      reason: model calls are capped
//	      rate_limit: {max_calls: 10, window: 1m, per: agent, max_wait: 5s}
//	      on_limiter_error: open   # or closed; only with rate_limit
//	  - id: deploys
//	    priority: 20
//	    when: {kind: tool, targets: [deploy, "release_*"], at_most_once: true, in_fork: false}
//	    then:
//	      decision: approve
//	      approval: {approvers: [alice, bob], timeout: 1h, message: "ship it?"}
//
// The fields, and what is refused:
//
//   - Unknown fields, a field given twice, YAML aliases and a second YAML
//     document are refused. Errors are a *[BundleError]: one line naming
//     the line of the text and the field by its path
//     (rules[1].then.rate_limit.window), wrapping [eventlog.ErrInvalid].
//   - kind, target/targets and agent/agents are [path.Match] globs with
//     [Rules]' conventions ("" and "*" match anything, even a slash); a
//     field and its list form may not both be given. A kind that matches
//     none of tool, local, llm and child is refused.
//   - in_fork and at_most_once: true restricts the rule to calls in a fork
//     (at_most_once calls); false to calls outside forks (safe_to_retry
//     calls); absent, either.
//   - args: a mapping of dotted paths to predicates. A path names object
//     members, and array elements by decimal index (messages.0.role). A
//     predicate's constraints all must hold: equals (a string, number,
//     bool or null of the same type and value; 3 equals 3.0), contains (a
//     string with that substring, or an array with an element equal to the
//     value), one_of (equal to one of a non-empty list) and regex (an RE2
//     regular expression matched against a string, unanchored: write ^ and
//     $ to anchor). A predicate with no constraint, a bad regex, or a list
//     or mapping given to equals or contains is refused. Args that are not
//     a JSON object, malformed JSON, a missing path or a value of another
//     type: the predicate does not match, so neither does its rule.
//   - then.decision approve asks for approval; approval: (only with
//     approve) has approvers (empty: anyone may decide), timeout (a
//     duration; 0 or absent: the request never expires) and message.
//   - rate_limit: (not on a deny rule) max_calls in 1..
//     [eventlog.MaxLimiterCalls] and a positive window are required; per
//     is execution, agent or global (the default); max_wait ≥ 0 (default 0:
//     a call over the limit is denied at once). on_limiter_error says what
//     a call gets when the store's limiter fails: open (the default, it
//     runs) or closed (it is denied). Negative or zero windows and maxima,
//     negative waits and timeouts are refused.
//
// [Bundle.Decide] returns the deciding rule's [Decision]: Allow or
// Approval, the reason (given, or "allowed by rule ID", "denied by rule
// ID", "approval asked by rule ID"), RuleID, and the rule's
// ApprovalSettings and RateLimit; a call no rule matches gets the default
// ("allowed by the bundle's default", no RuleID). Policy stays pure: it
// neither counts calls nor asks anyone. A kernel takes the rate limit from
// the store's [eventlog.Limiter] under [RateLimit.Key] and asks for the
// approval. Globs, regexes and paths are compiled at parse, and a rule that
// does not match allocates nothing, except a regex tested against a JSON
// string that holds an escape, which is decoded first. [Bundle.String]
// prints the canonical form (every field with a value, in a fixed order,
// rules by priority), which ParseBundle reads back to the same bundle;
// `forkline policy check` prints it.
package policy
