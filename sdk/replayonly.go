package sdk

import (
	"errors"
	"fmt"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/replay"
	"github.com/forkline/forkline/resource"
)

// ErrNotRecorded is wrapped by the error of a call that a [ReplayOnly]
// kernel cannot replay: the lineage holds no outcome for it (the recorded
// history ends before it, or it is an orphan). The call does not run.
var ErrNotRecorded = errors.New("sdk: call has no recorded outcome to replay")

// ReplayOnly makes a kernel that never runs a body and never touches a
// resource: it replays recorded histories against the current handlers,
// as [github.com/forkline/forkline/proptest.Replay] does on an in-memory
// copy of a log (DESIGN §15). It implies [Strict]. Under it:
//
//   - Resource returns the zero handle, without calling the driver and
//     without recording anything (recorded bodies never run, so nothing
//     uses the handle);
//   - a call whose outcome the lineage recorded replays it, as always;
//   - any other call does not run, and the kernel fails the execution
//     when the handler returns: a call the history does not hold while
//     recorded calls remain unconsumed returns an error that is
//     ErrNonDeterministic, naming them (the first is where the handler
//     parts from its history); a call past the end of the recorded
//     history, or an orphan, one that is ErrNotRecorded.
//
// Give a ReplayOnly kernel a log you can throw away: its dispatches append
// dispatch.started and the execution's end as any dispatch does.
func ReplayOnly() Option {
	return func(k *Kernel) error {
		k.strict, k.replayOnly = true, true
		return nil
	}
}

// replayOnlyResource stands in for Resource on a ReplayOnly kernel: key is
// obtained in this dispatch, with no driver and no handle, and nothing is
// recorded. It reports whether the kernel is ReplayOnly.
func (d *dispatch) replayOnlyResource(key string, drv resource.Driver) (bool, error) {
	if !d.k.replayOnly {
		return false, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enterCallLocked("resource", key); err != nil {
		return true, err
	}
	defer d.calls.Done()
	if err := d.usableLocked(); err != nil {
		return true, err
	}
	if _, ok := d.res[key]; !ok {
		// OnCompletion false: no completion capture is ever attempted.
		d.res[key] = &bound{key: key, driver: drv, pol: policy.Checkpoints{EverySteps: 1}}
	}
	return true, nil
}

// replayOnlyLocked refuses, on a ReplayOnly kernel, a call the lineage
// holds no outcome for (rec, seen: its record), failing the execution.
// d.mu is held.
func (d *dispatch) replayOnlyLocked(c call, rec replay.Step, seen bool) error {
	if !d.k.replayOnly {
		return nil
	}
	switch {
	case !seen:
	case rec.Status == replay.StepSucceeded || rec.Status == replay.StepFailed || rec.Status == replay.StepDenied:
		return nil
	}
	if unreached := d.unreachedLocked(); !seen && len(unreached) > 0 {
		// Recorded calls remain that this call is not: the handler parts
		// from its history here.
		nd := &NonDeterministicError{ID: d.id, Got: &RecordedCall{Kind: c.kind, Target: c.target, Args: shortArgs(c.args)}}
		for _, st := range unreached {
			nd.Expected = append(nd.Expected, d.recordedCallLocked(st, d.recordedPosition(st)))
		}
		d.failLocked(eventlog.FailNondeterministic, nd)
		return nd
	}
	what := "past the end of the recorded history"
	if seen {
		what = fmt.Sprintf("recorded as %s (seq %d), without an outcome", rec.Status, rec.StartedAt)
	}
	err := fmt.Errorf("%w: %s %q %s: %s", ErrNotRecorded, c.kind, c.target, shortArgs(c.args), what)
	d.failLocked(eventlog.FailNondeterministic, err)
	return err
}
