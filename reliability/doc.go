// Package reliability proves, with tests that hurt, that forkline loses
// nothing and runs nothing twice that must not run twice. It has no API: its
// code is its tests, and this file says what they prove and how.
//
// # Killing the process
//
// TestKillAndResume re-executes the test binary as a child that runs the
// coder agent of [github.com/forkline/forkline/examples/coder] (and a
// variant, "publisher", that wraps it between two
// [github.com/forkline/forkline/sdk.AtMostOnce] tool calls) on a dirfs
// workspace and a synced, on-disk Pebble log (with the store's leases, as a
// real kernel runs), and SIGKILLs it at a random moment: a random time into
// the run, just after a random acknowledged append, inside a random
// checkpoint capture or inside an at-most-once body.
// The scripted model is served by the parent. The child reports each such
// moment on its standard output, and writes every append the log
// acknowledged (with a fingerprint of each event's record), and every
// at-most-once effect, to append-only side files that it fsyncs before it
// goes on. After every kill the parent reopens the log and checks (DESIGN
// §4, §5, §8.6, §8.7):
//
//   - every execution's log decodes completely;
//   - every append the child saw acknowledged is present, event for event
//     (an unsynced append may be lost only with everything after it);
//   - every checkpoint in the dirfs store verifies: no half checkpoint is
//     visible; when the kill interrupted a capture, the resource is
//     uncovered at the head;
//   - running the execution to completion gives the output and the
//     workspace of an uninterrupted run, and leaves the events written
//     before the kill unchanged;
//   - no at-most-once body ran twice, and one whose step succeeded ran
//     exactly once;
//   - coverage and forking work at every event, each fork selects what
//     coverage says, and every checkpoint a fork could select verifies and
//     restores; a fork at a random event runs to the same output.
//
// TestKillAndResumeSyncAtEffects runs the same trials with the child and
// the resuming kernel under sdk.Durability(sdk.SyncAtEffects) (DESIGN
// §21), and the same checks hold. A SIGKILL there does lose acknowledged
// unsynced appends — Pebble buffers a NoSync write in the process before
// its write-ahead log file has it — always with everything after them;
// the head is then the newest synced append, which may be the previous
// capture's, so a kill inside a capture need not leave the head
// uncovered, and the trial counts those apart.
//
// TestKillDuringCapture aims every kill at a dirfs capture of a workspace
// big enough that dirfs checks its context in the middle of the walk. Half
// of its trials freeze the child at that check — some blobs stored, no
// manifest yet — and kill it there, so those kills land inside a capture
// for certain; the others kill at a random moment of a capture.
//
// # Recovering through Serve
//
// TestServeKillAndRecover checks DESIGN §9 "Recovery": a child starts 20
// publisher executions, each with an idempotency key
// ([github.com/forkline/forkline/sdk.WithKey]), and runs
// [github.com/forkline/forkline/sdk.Kernel.Serve] over them, four at a time,
// on a log that keeps the store's leases. The parent SIGKILLs it after a
// random acknowledged append plus a random delay, or a random delay into a
// random at-most-once body. A second child starts the same 20 — finding
// those the first created, creating those it had not — and runs Serve until
// List shows every one ended; it is not killed. Then:
//
//   - every append the first child saw acknowledged is in the log left by
//     the kill, and every append the second saw is in the final log;
//   - the log holds one execution per key, of its input, each completed
//     with the output and workspace of an uninterrupted run of that input
//     (run beforehand in the test process on an in-memory store);
//   - no event written before the kill changed;
//   - no at-most-once body ran twice, one whose step succeeded ran once, and
//     the steps resolved as indeterminate are exactly those the kill left
//     started without an outcome.
//
// TestChildKillAndResume checks child executions (DESIGN §9): a child runs
// a caller execution whose handler runs a publisher as its child
// ([github.com/forkline/forkline/sdk.Agent.Call]) and is SIGKILLed while the
// child runs: frozen inside one of the child's at-most-once bodies, or just
// after a random acknowledged append of the child. A second child runs
// Serve until the caller has ended. Exactly one child execution exists for
// the call (List with Filter{Caller}), the caller records one child step
// that succeeded once, both outputs are those of an uninterrupted run (the
// caller's holding the child's), and the checks above hold for both.
//
// # Many processes on Postgres
//
// TestPostgresWorkers checks DESIGN §11 with processes: three worker
// children run [github.com/forkline/forkline/sdk.Kernel.Serve] (four at a
// time, leases of 2 s, claims through the store's Claimer) on one Postgres
// log over 50 keyed publisher executions (20 with -short;
// -reliability.pg.executions=N for a bigger run), sharing a dirfs store and
// the at-most-once effects file. In "kill-and-stop", worker 0 is SIGKILLed
// just after one of its first at-most-once bodies begins and restarted
// under its own name once its lease has expired, and worker 1 is
// SIGSTOPped inside one of its at-most-once bodies, kept stopped until
// every execution it held has another owner, ended, or is left to it
// (below), then SIGCONTed: it must
// report appends refused with [github.com/forkline/forkline/eventlog.ErrLeaseLost],
// and the body it was stopped in, which goes on to make its effect, ran
// once and its step was resolved as indeterminate by the new owner, never
// as a success. In "server-restart", a private cluster (initdb and pg_ctl
// from FORKLINE_PG_BIN, default /usr/lib/postgresql/15/bin; as root, run
// as the user postgres through runuser; the shared server is never
// restarted) is restarted with pg_ctl restart -m fast in the middle of the
// run: every worker reports the outage (Serve returns the store's error;
// the worker runs it again) and goes on. In both, ALL executions
// completed once per key, as an uninterrupted run, every append a worker saw acknowledged is in the log
// inside a dispatch that worker owned (dispatch.started{Owner}), no
// at-most-once body ran twice and every checkpoint verifies.
//
// A dirfs workspace is not portable (DESIGN §11, §15½.4): a worker taking
// an execution over binds it anew from the checkpoint covering the head;
// when none does, it appends nothing and leaves the execution to the
// owner that bound the workspace, which resumes it when it returns (the
// restarted worker 0, worker 1 after SIGCONT, any worker after the
// server's restart). So the workers capture after every write
// (EverySteps(1)) and declare dirfs.Config.CoverageReuse (only
// write_file, which says sdk.Affects("workspace"), changes the
// workspace): the head is uncovered only while a write is in flight. In
// "kill-and-stop", whose kills land in publish bodies, every execution
// whose publish body was cut completed with the output and workspace of
// an uninterrupted run, and so did every other: none fails because its
// owner was away (the kernel no longer writes resource_unavailable).
//
// TestPostgresSharedRateLimit checks DESIGN §17's shared limits with two
// worker children calling one tool as fast as one global rule lets them:
// 10 calls per 2 s for 10 s by default, the 10 calls a minute for
// 30 s with -reliability.rate.minute. By the database's own record of
// each admission, no window holds more than the limit, every call that
// ran took one admission, and the limit was reached.
//
// # Trials
//
// Trials run three at a time (server trials two at a time): 100 of
// TestKillAndResume, 12 of TestKillDuringCapture, 10 of
// TestServeKillAndRecover and 5 of TestChildKillAndResume by default (25, 6,
// 3 and 3 with -short). The flag -reliability.trials=N sets the first number
// (the others are N/8, N/10 and N/20, at least 6, 3 and 3);
// -reliability.seed fixes the kill plans; -reliability.keep keeps every
// trial's folder (a failed trial's folder is always kept and logged).
//
// # Concurrency
//
// Run with -race. TestConcurrentExecutionsAndForks runs many executions and
// forks at once on one kernel while coverage is read beside them: no two
// tool bodies of one execution overlap (DESIGN §8.8) and every execution and
// fork ends with the output of an uninterrupted run. TestConcurrentRunsOneBusy:
// of many Runs of one execution at once, one runs and every other returns
// [github.com/forkline/forkline/sdk.ErrBusy]. TestRacingAppends: of writers
// appending at the same head, one wins and the others get
// [github.com/forkline/forkline/eventlog.ErrConflict] having written
// nothing; writers that retry lose, split and duplicate no event.
// TestTwoKernelsOneExecution: two kernels on one log run one execution; the
// dispatch that appends second gets ErrConflict and stops.
//
// # Corrupt data
//
// TestCorruptEvents damages stored event records of a closed on-disk log
// through Pebble itself — bits flipped in every part of a record, records
// truncated, extended and deleted, headers damaged — and TestCorruptIndex
// damages checkpoint-index entries: every read reports an error that names
// the execution and the seq, never a panic, never a silently skipped event,
// and Run, forks whose prefix holds the damage, and the forkline command
// (built with go build; the tests skip if it does not build) report the same
// error. TestCorruptCheckpoint damages the blobs and manifest of a dirfs
// checkpoint: Verify, Create, the Run of a fork that restores it and the
// forkline command name the ref and the path. -reliability.exhaustive
// damages every byte of every event.
//
// # Bad input
//
// TestBadInput walks the bad inputs of DESIGN §7 and more — credentials in a
// configuration, bindings that are not JSON, 64 MiB args, unknown agents and
// executions, seqs out of range — comparing every execution's events before
// and after: each gets a clear error and appends nothing. TestRefsWithDotDot,
// TestNestedStep and TestPanickingDriver cover refs with "..", nested steps,
// and drivers that panic or return an empty ref: a panicking Checkpoint is a
// capture failure; a panicking Create or Open is recovered and returned by
// sdk.Resource as an error wrapping resource.ErrDriverPanic, which the
// handler may return (failing the execution with code handler) or handle.
//
// # Fuzzing
//
// The fuzz targets live beside the code they reach: eventlog's
// FuzzDecodeRecord, policy's FuzzParseRules, dirfs's FuzzParseManifest and
// sdk's FuzzStepIdentity (a call's identity is the same however its args
// were written: key order, white space, Go maps, JSON round trips).
package reliability
