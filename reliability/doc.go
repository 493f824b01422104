// Package reliability proves, with tests that hurt, that forkline loses
// nothing and runs nothing twice that must not run twice. It has no API: its
// code is its tests, and this file says what they prove and how.
//
// # Killing the process
//
// TestKillAndResume re-executes the test binary as a child that runs the
// coder agent of [github.com/forkline/forkline/examples/coder] (and a variant
// with [github.com/forkline/forkline/sdk.AtMostOnce] tools) on a dirfs
// workspace and a synced, on-disk Pebble log, and SIGKILLs it at a random
// moment: a random time into the run, just after a random acknowledged
// append, inside a random checkpoint capture or inside an at-most-once body.
// The child reports each moment on its standard output, and writes every
// append the log acknowledged, and every at-most-once effect, to append-only
// side files that it fsyncs before going on. After every kill the parent
// reopens the log and checks (DESIGN §4, §8.6, §8.7):
//
//   - every execution's log decodes completely;
//   - every append the child saw acknowledged is present, event for event;
//   - running the execution to completion gives the output and the workspace
//     of an uninterrupted run, and leaves the events written before the kill
//     unchanged;
//   - no at-most-once body ran twice, and one whose step succeeded ran once;
//   - coverage and forking work at every event, each fork selects what
//     coverage says, and every checkpoint a fork could select verifies and
//     restores; a fork at a random event runs to the same output.
//
// TestKillDuringCapture aims every kill inside a dirfs capture of a large
// workspace: no half checkpoint becomes visible, the resource is uncovered
// at the head, and no selection points at a missing ref.
//
// The number of trials is 100 by default (25 with -short) and is set with
// -reliability.trials=N; -reliability.seed fixes the kill plans and
// -reliability.keep keeps every trial's folder.
//
// # Concurrency
//
// TestConcurrentExecutionsAndForks runs many executions and forks at once on
// one kernel (run it with -race): no two bodies of one execution overlap
// (DESIGN §8.8) and every execution ends as an uninterrupted one. Two Runs of
// one execution give exactly one [github.com/forkline/forkline/sdk.ErrBusy];
// racing appends give [github.com/forkline/forkline/eventlog.ErrConflict] to
// all but one writer and lose or duplicate no event.
//
// # Corrupt data
//
// Every byte of stored events, index entries and headers is flipped in turn
// in a closed on-disk log (through Pebble directly), and blobs and manifests
// of dirfs checkpoints are damaged: every read reports an error that names
// the execution and seq (or the ref and path) — never a panic, never a
// silently skipped event — and Run, forks of the damaged prefix, and the
// forkline command report the same error.
//
// # Bad input
//
// TestBadInput walks every bad input of DESIGN §7 and more (credentials in a
// configuration, refs with "..", panicking drivers, empty refs, bindings that
// are not JSON, 64 MiB args): each gets a clear error and appends nothing.
//
// # Fuzzing
//
// The fuzz targets live beside the code they reach: eventlog's
// FuzzDecodeRecord, policy's FuzzParseRules, dirfs's FuzzParseManifest and
// sdk's FuzzStepIdentity (identity is stable under map ordering and JSON
// round trips).
package reliability
