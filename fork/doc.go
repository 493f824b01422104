// Package fork plans and creates forks (DESIGN §5 "Forking"): any event N of
// any execution can become the starting point of a new execution that
// replays the parent's events 1..N and restores each resource from the
// checkpoint [coverage] selects for N.
//
// # Plans
//
// A [Plan] is a pure value: the parent, the fork point, whether it is
// covered, and one [coverage.Selection] per resource bound up to the point —
// the newest checkpoint covering it, else the newest at or before it, else
// the initial environment. [PlanFromFold] computes it from an in-memory
// [coverage.Fold]; [PlanFromIndex] from a store's [eventlog.Index] with a few
// index reads, which is how a fork of event 1,000,000 stays as cheap as a
// fork of event 10. Both give the same plan for the same lineage. A fork of
// a fork at M, where M lies in the prefix the two share, has the same plan as
// a fork of the original at M (DESIGN §8.5): when the capture covering M lies
// past the first fork's point, that fork's fork.created carries it.
//
// [Plan.Event] is the fork.created payload that records the plan as the
// fork's first own event: a selection marked Covered is then a checkpoint of
// the resource's current generation in the fork's lineage.
//
// # Creating
//
// [Create] plans from the index and writes the fork with
// [eventlog.Log.Fork]: one header and one fork.created, no event copied, no
// existing event changed (DESIGN §8.7). Resources are not touched: the SDK
// creates each one lazily from its selection when the fork first runs.
//
// # Editing
//
// Options of [Create] edit the fork (DESIGN §12) for any kernel, with or
// without the SDK: [WithInput] records a new handler input in
// fork.created; [WithOverride] records a result the fork replays instead of
// the recorded one, and requires the fork point to be the overridden step's
// terminal event ([CheckOverrides] says exactly what is allowed); a fork of
// an edited fork inherits its overrides, the newest per step winning (the
// replay fold applies them). [RequireCovered] refuses an uncovered point
// with [coverage.ErrUncovered]. Bad options write nothing.
//
// A fork with a new input may take another path than its prefix: when its
// run makes a live call while recorded steps of the prefix remain
// unconsumed, the kernel appends fork.diverged, and coverage reports every
// resource bound then uncovered from that event on, in the fork and in its
// forks: the restored state may hold effects the new run no longer makes.
//
// An uncovered fork still works: results recorded after the restored
// checkpoint replay even though the restored state lacks their changes. That
// is the documented trade-off; [Plan.Covered] tells the user before they
// fork.
//
// # Comparing
//
// [Diff] compares two executions (DESIGN §12 "Diff"), a pure fold over
// their lineages: the shared prefix (the events both read from a common
// ancestor's log), the steps past it aligned by StepID ([Same], [Changed],
// [OnlyA], [OnlyB]), the two outcomes, and for every resource the newest
// checkpoint at each head. Comparing what those checkpoints hold is a
// driver's job ([github.com/forkline/forkline/driver.Differ]); a checkpoint
// that does not cover its head ([ResourceHead.Covered] false) is the
// newest state the log knows, not the live one.
package fork
