package proptest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// Divergence is a recorded execution the current handlers do not replay.
type Divergence struct {
	Execution eventlog.ID
	Agent     string
	Seq       uint64 // the recorded call the replay expected, else the execution's last recorded event
	Reason    string
}

// String renders the divergence on one line (its Reason may add more).
func (d Divergence) String() string {
	return fmt.Sprintf("%s (%s) at seq %d: %s", d.Execution, d.Agent, d.Seq, d.Reason)
}

// ReplayReport is what ReplayLog found.
type ReplayReport struct {
	Replayed    int          // executions replayed against the current handlers
	Skipped     []string     // executions not replayed, each with the reason
	Divergences []Divergence // in the order of the log's List
}

// Replay replays every recorded execution of log against the current
// handlers (DESIGN §15) and reports each divergence as an error of t; it
// returns them. See ReplayLog.
func Replay(t TB, log eventlog.Log, newKernel NewKernel) []Divergence {
	t.Helper()
	rep, err := ReplayLog(context.Background(), log, newKernel)
	if err != nil {
		t.Fatalf("proptest: replay: %v", err)
		return nil
	}
	for _, d := range rep.Divergences {
		t.Errorf("proptest: replay diverges: %v", d)
	}
	return rep.Divergences
}

// ReplayLog replays every recorded execution of log against the handlers
// newKernel registers, and lists where they diverge. It never appends to
// log: each execution's lineage is copied, without its terminal event and
// its deadline, into an in-memory log (an execution's own events, its
// fork's parents as forks) and run there by a kernel made with
// sdk.ReplayOnly — no body runs, Resource returns the zero handle.
//
// An execution diverges when, replayed, its handler makes a call other than
// the one recorded at that position, or leaves recorded calls unmade
// (ErrNonDeterministic), or — for a completed execution — makes a call
// past its recorded history, or returns another output; a failed one
// diverges when its handler now completes. A running, waiting or pending
// execution replays until its history ends. Executions of agents newKernel
// does not register, cancelled ones and ones the kernel failed (a
// mismatched resource, a deadline, a divergence) are skipped.
func ReplayLog(ctx context.Context, log eventlog.Log, newKernel NewKernel) (ReplayReport, error) {
	var rep ReplayReport
	mem, err := pebblestore.Open("")
	if err != nil {
		return rep, err
	}
	defer mem.Close()
	k, err := newKernel(mem, sdk.ReplayOnly())
	if err != nil {
		return rep, fmt.Errorf("proptest: newKernel: %w", err)
	}
	defer k.Close()
	for info, err := range log.List(ctx, eventlog.Filter{}) {
		if err != nil {
			return rep, err
		}
		d, skip, err := replayOne(ctx, log, mem, k, info)
		switch {
		case err != nil:
			return rep, err
		case skip != "":
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s (%s): %s", info.ID, info.Agent, skip))
		default:
			rep.Replayed++
			if d != nil {
				rep.Divergences = append(rep.Divergences, *d)
			}
		}
	}
	return rep, nil
}

// replayOne replays one execution. It returns its divergence (nil if it
// replays), or why it was skipped.
func replayOne(ctx context.Context, log eventlog.Log, mem *pebblestore.Store, k *sdk.Kernel, info eventlog.Info) (*Divergence, string, error) {
	switch info.Status {
	case eventlog.StatusCancelled:
		return nil, "cancelled", nil
	}
	var evs []eventlog.Event
	for ev, err := range log.Events(ctx, info.ID, 1) {
		if err != nil {
			return nil, "", fmt.Errorf("proptest: read %s: %w", info.ID, err)
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return nil, "no events", nil
	}
	last := evs[len(evs)-1]
	var recorded *eventlog.ExecutionCompleted
	switch p := last.Data.(type) {
	case *eventlog.ExecutionCompleted:
		recorded = p
		evs = evs[:len(evs)-1]
	case *eventlog.ExecutionFailed:
		if p.Code != eventlog.FailHandler && p.Code != eventlog.FailPanic {
			return nil, fmt.Sprintf("failed by the kernel (%s)", p.Code), nil
		}
		evs = evs[:len(evs)-1]
	case *eventlog.ExecutionCancelled:
		return nil, "cancelled", nil
	}
	for _, ev := range evs[lastFork(evs)+1:] {
		if _, ok := ev.Data.(*eventlog.CancelRequested); ok {
			return nil, "cancel requested", nil
		}
	}
	id, err := copyLineage(ctx, mem, evs)
	if err != nil {
		return nil, "", fmt.Errorf("proptest: copy %s: %w", info.ID, err)
	}
	diverged := func(seq uint64, format string, args ...any) (*Divergence, string, error) {
		return &Divergence{Execution: info.ID, Agent: info.Agent, Seq: seq, Reason: fmt.Sprintf(format, args...)}, "", nil
	}
	res, err := k.Run(ctx, id)
	var nd *sdk.NonDeterministicError
	switch {
	case errors.As(err, &nd):
		// The message without the in-memory copy's ID.
		_, reason, _ := strings.Cut(nd.Error(), "nondeterministic: ")
		return diverged(errSeq(err, last.Seq), "%s", reason)
	case errors.Is(err, sdk.ErrNotRecorded):
		if recorded == nil {
			return nil, "", nil // the history of a running or failed execution ends here
		}
		var ee *sdk.ExecutionError
		if errors.As(err, &ee) {
			return diverged(last.Seq, "%s", ee.Message)
		}
		return diverged(last.Seq, "%v", err)
	case errors.Is(err, eventlog.ErrInvalid) && res == nil && isUnregistered(err):
		return nil, "agent not registered", nil
	case err != nil && recorded != nil:
		return diverged(last.Seq, "recorded completed, the replay failed: %v", err)
	case err != nil:
		return nil, "", nil // recorded failed (or unfinished), fails again
	case recorded == nil && last.Kind() == eventlog.KindExecutionFailed:
		return diverged(last.Seq, "recorded failed (%s), the replay completed with %s", last.Data.(*eventlog.ExecutionFailed).Error, res.Output)
	case recorded != nil && string(res.Output) != string(recorded.Output):
		return diverged(last.Seq, "recorded output %s, the replay returned %s", recorded.Output, res.Output)
	}
	return nil, "", nil
}

// isUnregistered reports a Run refused for an agent the kernel does not
// register.
func isUnregistered(err error) bool {
	var ee *sdk.ExecutionError
	return !errors.As(err, &ee) && errors.Is(err, sdk.ErrInvalid)
}

// lastFork returns the index of the newest fork.created of evs, -1 if none.
func lastFork(evs []eventlog.Event) int {
	for i := len(evs) - 1; i >= 0; i-- {
		if _, ok := evs[i].Data.(*eventlog.ForkCreated); ok {
			return i
		}
	}
	return -1
}

// copyLineage writes the lineage evs to mem as a new execution: a root
// created from its execution.created, or — when evs hold a fork.created —
// a fork of a copy of the events before it. Deadlines and start keys are
// left out (a replay runs now, and copies never share a key).
func copyLineage(ctx context.Context, mem *pebblestore.Store, evs []eventlog.Event) (eventlog.ID, error) {
	var id eventlog.ID
	start := lastFork(evs)
	if start < 0 {
		c, ok := evs[0].Data.(*eventlog.ExecutionCreated)
		if !ok {
			return id, fmt.Errorf("%w: lineage starts with %s", eventlog.ErrInvalid, evs[0].Kind())
		}
		created := *c
		created.Deadline, created.Key = time.Time{}, ""
		var err error
		if id, err = mem.Create(ctx, &created, evs[0].Time); err != nil {
			return id, err
		}
		start = 0
	} else {
		parent, err := copyLineage(ctx, mem, evs[:start])
		if err != nil {
			return id, err
		}
		fc := *evs[start].Data.(*eventlog.ForkCreated)
		fc.Parent, fc.Deadline = parent, time.Time{}
		if id, err = mem.Fork(ctx, parent, uint64(start), &fc, evs[start].Time); err != nil {
			return id, err
		}
	}
	if rest := evs[start+1:]; len(rest) > 0 {
		if _, err := mem.Append(ctx, id, uint64(start+1), rest...); err != nil {
			return id, err
		}
	}
	return id, nil
}
