// Package proptest checks forkline's fork invariants (DESIGN §8) with
// property tests: generated histories that a real kernel could write, a
// deliberately naive reference model of DESIGN §5, and the folds of
// [github.com/forkline/forkline/coverage], [github.com/forkline/forkline/fork],
// [github.com/forkline/forkline/policy] and [github.com/forkline/forkline/replay]
// compared against it at every seq of every lineage.
//
// # The model
//
// model.go answers every question about seq n of a lineage by rescanning
// events 1..n (and the whole lineage for "a checkpoint of generation g exists
// in the lineage"): a resource's [Generation], the steps [InFlight] against
// it, its [Checkpoints], and the [Point] a fork at n selects ([PointAt]).
// It shares no code with [eventlog.IndexState] or the folds it judges.
//
// It also simulates each resource's real state ([RealState]) as the list of
// changes step bodies made to it, which is what gives coverage its meaning:
// at every covered point, the selected checkpoint holds exactly the
// resource's state at that point (DESIGN §8.1 at the model level).
//
// # The generator
//
// gen.go grows a [World] — a forest of executions and forks written through
// an in-memory [pebblestore.Store] — with rapid state-machine actions, each
// one thing a kernel does: dispatch (the handler mostly asks for its
// resources first thing and reaches its orphans soon), bind a resource
// (Open, create from the initial environment with a baseline, or from a
// fork's selection), run a tool call, local step or child step
// (serialized; a retried attempt among the outcomes) or LLM calls
// (concurrent), end a step (succeeded, failed, cancelled; due captures
// committed with it), crash (leaving orphans whose bodies may have changed
// their resources), resolve an orphan or a step cancelled in an earlier
// dispatch (safe_to_retry runs again with Attempt+1, at_most_once fails as
// indeterminate), deny a call, sleep (timer.started, timer.fired, or a
// park), complete (abandoning unreached orphans, then completion captures
// of uncovered resources), fail, and fork any execution at any event, forks
// included.
// Resources with CoverageReuse only change through the calls that declare
// them; the others also suffer undeclared changes. The generator keeps a
// kernel's incremental books to decide what to write; after every action
// they are checked against the model.
//
// Choices the generator makes where DESIGN leaves room:
//
//   - a due capture that another in-flight step blocks is retried at the
//     resource's next counted call (or at completion), not when the blocking
//     step lands;
//   - a fork completes only after it has made every resource it inherited (a
//     kernel cannot capture a resource it has not created);
//   - completion does not capture a resource a step (an orphan) is still in
//     flight for;
//   - a due capture is decided at a step's terminal event by the count after
//     it, as [policy.Counter] counts (DESIGN §5): each started attempt counts
//     once, at its first terminal event, so a step cancelled in one dispatch
//     and failed as indeterminate in a later one counts at the cancellation
//     only;
//   - a completing dispatch abandons (step.abandoned, DESIGN §15) the
//     orphans whose attempt never ended, with the steps captures that
//     makes due, before the completion captures; a step whose attempt
//     ended (cancelled, or failed with a RetryAt) is left as it is;
//   - a retried attempt (step.failed with a RetryAt) is drawn only for
//     safe_to_retry calls, and the handler retries it like an orphan;
//   - a long sleep parks the dispatch (it ends like a crash without
//     orphans), and the next dispatch fires every unfired timer first.
//
// # The properties
//
// Each test names the invariant it checks: the meaning of coverage (§8.1 at
// the model level), selections of every fold and of fork.Create (§8.2), the
// folds against the model and split anywhere (§8.3), captures and counts
// against the policy (§8.4), forks of forks (§8.5), immutability of written
// events (§8.7), the store's index against the model.
//
// sdk_e2e_test.go runs the real SDK: generated programs (tool calls, local
// steps, LLM calls held in flight while a tool that affects a resource
// finishes, identical repeated calls, denied affecting calls, at_most_once
// affecting calls, affecting calls retried under an sdk.RetryPolicy whose
// first two attempts change the resource and fail — each attempt counted,
// DESIGN §8½) on a log that records every append and whether it was
// synced, with dispatches killed at random events and forks at random
// points. Every lineage the SDK wrote is folded and judged by the same
// model: its captures and their reasons (§8.4), no capture while a step
// advancing the resource is in flight, nothing appended for a call whose
// outcome replays, at_most_once intents synced. Hand-written
// scenarios pin the model itself, and every failure the properties found
// is kept as a named regression test.
//
// # A kit for users' agents
//
// [CheckAgent] runs the same invariants on a user's own agent (DESIGN §15):
// it runs the agent, kills the run after every event and resumes it, forks
// it at every event and runs the forks — every kernel under sdk.Strict —
// and fails on the first broken invariant of DESIGN §8 with its seq, a
// window of the events around it ([Window]) and, for a divergence, the
// likely cause: a clock read outside a step, a map's iteration order, a
// step that changes a resource it does not declare in Affects. Resource
// states are compared through [driver.Differ] ([WithDiffer]) or a
// function of a checkpoint ref ([WithState]). [Replay] (and [ReplayLog],
// which `forkline check` runs) replays every recorded execution of a log
// against the current handlers on an in-memory copy, with sdk.ReplayOnly,
// and lists the divergences; it never appends to the log.
//
// kit_test.go runs CheckAgent on the coder agent of examples/coder, which
// passes, and on three small agents with a planted bug each, which fail
// with a message that names the cause.
//
// # Running longer
//
// The defaults keep the package well under two minutes with -race on two
// cores. Use rapid's own flags for more: -rapid.checks=1000 for more worlds,
// -rapid.steps=100 for bigger ones (a world is three rounds of Repeat).
//
// [driver.Differ]: https://pkg.go.dev/github.com/forkline/forkline/driver#Differ
// [pebblestore.Store]: https://pkg.go.dev/github.com/forkline/forkline/eventlog/pebblestore#Store
// [policy.Counter]: https://pkg.go.dev/github.com/forkline/forkline/policy#Counter
package proptest
