// Package benchmarks measures what forkline costs, each figure beside a
// baseline measured in the same run: the physical limit (raw Pebble synced
// writes, raw scanning and decoding of the same records) or what a user
// would pick instead (SQLite, a full copy, go-workflows).
//
// [Run] runs every scenario with its baselines in one process and returns a
// [Report], which [Report.Write] saves as RESULTS.md (a table: scenario,
// forkline, baseline, ratio, target, machine) and results.json. The command
// [github.com/forkline/forkline/benchmarks/cmd/bench] is its front end; the
// Go benchmarks of this package (bench_test.go) measure the same operations
// under names benchstat can compare, such as
// BenchmarkDurableAppend/system=forkline/writers=64.
//
// # Scenarios
//
//  1. Durable append: one event per synced [eventlog.Log] Append, 1 writer
//     and 64 writers on 64 executions, vs the same bytes written with a
//     synced Pebble Set and inserted into SQLite (WAL, synchronous=FULL).
//  2. Live tool call: a safe_to_retry call costs one fsync, an
//     at_most_once call two (DESIGN §4), vs one synced Pebble write.
//  3. Replay: Run of an execution whose steps are all recorded, vs scanning
//     and msgpack-decoding the same records from Pebble. 3m: the peak live
//     heap of that Run against the folds' own state, at two sizes.
//  4. Fork: at an early seq vs at the last of a long history, and vs a fork
//     that copies the prefix.
//  5. Coverage: [github.com/forkline/forkline/coverage.FoldEvents] of a long
//     history vs the raw decode, and point queries on the fold.
//  6. dirfs: an incremental checkpoint with one file changed, and a restore,
//     vs a full copy of the workspace.
//  7. A peer engine: a workflow of N durable steps on go-workflows with its
//     SQLite backend and on forkline, one and sixteen at a time.
//
// # Measuring honestly
//
// Every scenario that syncs runs on the real disk (the system temporary
// folder or [Config.TempDir]), never in memory. Contestants are measured
// for [Config.Duration] each, in [Config.Rounds] rounds whose order reverses
// every round, so that a burst of load from elsewhere hits both sides; the
// figures are medians, and every round's figure is kept in the report.
// Each row records the load average when its measurement began. Only the
// measured part of an operation is timed: building a history, forking
// before a replay, deleting a copy are not.
//
// Each scenario checks what it measures: a replay in which a single step
// ran live, a fork that selected no checkpoint, a workflow that returned the
// wrong value fail the run instead of printing a number.
//
// # Short mode
//
// [Config.Short] runs every scenario at small sizes for 100ms per
// contestant, in seconds. CI runs it so that the harness cannot rot; its
// figures are not the published ones.
package benchmarks
