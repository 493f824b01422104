// Package replay folds the events of a lineage into the state of an
// execution: its status and output, every step with its recorded outcome,
// the resources it bound and, for a fork, where it forked from; and the
// run state Part II needs (DESIGN §8½): retries, timers, approvals, cancel
// requests, markers, parking, overrides and divergence. The SDK
// looks each call up in this fold to decide whether to return a recorded
// outcome, run the call again or run it live (DESIGN §4).
//
// It imports only [github.com/forkline/forkline/eventlog]. The fold is pure
// and incremental: [Fold] of events 1..N and [New] followed by
// [State.Apply] of each event, in one go or split anywhere, give the same
// [State] (DESIGN §8.3). It does no IO, reads no clock (it never looks at
// an event's Time) and starts no goroutine.
//
// # Steps
//
// A [Step] is keyed by its StepID and appears in [State.Steps] in the order
// of its first event. Its status follows its events:
//
//	step.started                 → started (Attempts 1)
//	started   + step.succeeded   → succeeded
//	started   + step.failed      → failed
//	started   + step.cancelled   → cancelled
//	started   + step.started     → started, Attempts+1 (a safe_to_retry orphan run again)
//	cancelled + step.started     → started, Attempts+1 (a cancelled step run again)
//	cancelled + step.failed      → failed, Indeterminate (an at_most_once step resolved)
//	started   + step.failed{RetryAt} → retrying (the attempt ended; not terminal)
//	retrying  + step.started     → started, Attempts+1 (the retry)
//	started, cancelled or retrying + step.abandoned → abandoned (DESIGN §15)
//	abandoned + step.started     → started, Attempts+1
//	abandoned + step.failed      → failed, Indeterminate
//	step.denied                  → denied (it never ran)
//	retrying  + step.denied      → denied (the gate refused the next attempt, DESIGN §8½)
//	abandoned + step.denied      → denied (the gate refused an orphan's re-run in a fork)
//
// A fork.created's Overrides (DESIGN §12) make [State.Step] return the
// override as the step's result (status succeeded, Overridden set), also
// for a step past the fork point that the lineage does not hold; a later
// fork.created of the lineage inherits them, newest per StepID winning,
// and an overridden step is never started or denied again.
//
// # Status
//
// [State.Status] is [eventlog.StatusState]'s, the same fold the stores
// keep: pending (created or forked, no dispatch of this run yet), running,
// waiting (an own approval.requested without decision, or dispatch.parked
// is the newest dispatch event), completed, failed, cancelled. Forks do not
// inherit what belongs to a run: past fork.created the status, the
// deadline (fork.created's own, if any), cancel requests, awaited
// approvals, parking and divergence are the fork's own. An approval of the
// prefix never approves a live run of the fork: the fork asks again.
// DESIGN §4 treats a cancelled step like an orphan — "started but not
// succeeded or failed" — so a later dispatch may run it again or resolve it
// as indeterminate; succeeded, failed and denied steps are final and replay
// returns their recorded outcome.
//
// # Well-formed lineages
//
// [State.Apply] checks each event against the state and rejects, with an
// error that names the seq and wraps [eventlog.ErrInvalid], an event that:
//
//   - breaks its payload's invariants ([eventlog.Event.Validate]);
//   - does not have seq Head+1, or starts the lineage without being
//     execution.created at seq 1, or is an execution.created after seq 1;
//   - follows execution.completed, execution.failed or
//     execution.cancelled and is not fork.created (a fork of a finished
//     execution continues live past its fork point, so fork.created sets
//     Status back to pending);
//   - is a dispatch.started whose Dispatch is not the previous one plus 1;
//   - is a step.started of a step that succeeded, failed or was denied
//     (replay never runs a terminal step again), or re-runs a step with a
//     different kind or target or an Attempt other than Attempts+1, or starts
//     a new step with an Attempt other than 1, or affects a key that is not
//     bound;
//   - is a terminal event of a step that never started, or of one that is
//     not started (an indeterminate failure may also resolve a cancelled
//     step) — so a second step.succeeded of a step is an error;
//   - is a step.denied of a step the lineage already has, unless that step
//     is retrying or abandoned (with the same kind and target);
//   - is a step.started or step.denied of a step a fork overrides;
//   - is a step.abandoned of a step that is not started, cancelled or
//     retrying;
//   - is a dispatch.parked before this run's first dispatch, or of a
//     dispatch already parked;
//   - is a timer.started of a timer that started, or a timer.fired of one
//     that did not start or already fired;
//   - is an approval.requested of a step that awaits a decision or is
//     terminal, or a decision of a step that awaits none (of this run);
//   - is a fork.diverged outside a fork, or naming a step the lineage does
//     not hold;
//   - is a capture (or failed capture) of a key that is not bound;
//   - is a fork.created whose At is not the seq before it, or whose
//     selections are not exactly the resources bound at the fork point.
//
// Generations and coverage are not checked here: they are the coverage
// fold's, built on [eventlog.IndexState].
//
// # Bindings
//
// [State.Binding] returns the newest resource.bound of a key in the whole
// lineage, with Own set when this execution wrote it: after the lineage's
// newest fork.created. A fork never opens an inherited binding (DESIGN §5);
// it compares the inherited DriverID and Configuration with its driver's and
// creates its own resource from [State.Selection].
//
// # Tests
//
// The golden scenarios in testdata/*.txt document these rules case by case:
// an event list in the text form of internal/eventtext, then "----", then
// the folded state (or the error and the state it left). Regenerate the
// expected output with
//
//	go test ./replay -run TestGolden -rewrite
//
// and review it as a diff. A rapid property test folds generated
// well-formed lineages whole, one event at a time and split at a random
// seq, and checks the three agree with each other and with the generator's
// model; BenchmarkFold measures a long generated agent run.
//
// # Copies
//
// Apply copies the bytes it keeps out of the event, and every [Step],
// [Binding] and slice a method returns is a copy the caller may keep and
// change — except [State.Lookup] and [State.At], the read-only lookups a
// replaying kernel makes for every call: their slices are the State's own.
//
// # Memory
//
// Steps are kept in fixed-size chunks, so a growing lineage never copies
// the steps already folded, and step targets are interned. A state made
// with [NewWith] and [Options.DropArgs] keeps no step args: replay needs a
// step's outcome, not its args, and a caller that must quote them reads
// the step.started at the step's StartedAt.
package replay
