package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/sdk"
)

// Scenario 3s, resume: an execution of 1,000,000 events died after its
// last recorded step; Run resumes it. Timed: from Run's call to the start
// of the handler's first live call — loading the lineage, then replaying
// every recorded call. The ceiling is scanning and msgpack-decoding the
// same records from Pebble directly (as in 3). Beside it, Run of a fork of
// the execution at its last event, timed the same way: a fork replays its
// parent's prefix through the lineage, and must not be slower than the
// parent's own resume.
//
// The live call stops its Run by cancelling the Run's context, which
// records step.cancelled and leaves the execution resumable: the next
// round's Run resumes the same execution, whose first live call is that
// step again (safe_to_retry runs a cancelled step again).

// resumeKernel is a kernel whose replayAgent's execution has one read more
// to make than it recorded.
type resumeKernel struct {
	k      *sdk.Kernel
	st     *pebblestore.Store
	id     eventlog.ID
	head   uint64 // head of the built execution
	steps  int
	mu     sync.Mutex
	cancel context.CancelFunc // of the Run in progress
	live   time.Time          // when its first live call began; zero if none
	lives  int                // live calls of the Run in progress
}

func openResumeKernel(ctx context.Context, dir string, steps int) (*resumeKernel, error) {
	st, err := pebblestore.Open(dir)
	if err != nil {
		return nil, err
	}
	rk := &resumeKernel{st: st, steps: steps}
	if rk.id, rk.head, err = buildReplayOf(ctx, st, steps, steps+1, false); err != nil {
		st.Close()
		return nil, err
	}
	if rk.k, err = sdk.New(st); err != nil {
		st.Close()
		return nil, err
	}
	read := sdk.DefineTool(replayTool, func(ctx context.Context, a readArgs) (string, error) {
		now := time.Now()
		rk.mu.Lock()
		if rk.lives++; rk.lives == 1 {
			rk.live = now
		}
		cancel := rk.cancel
		rk.mu.Unlock()
		cancel()
		return "", ctx.Err()
	})
	_, err = sdk.Register(rk.k, replayAgent, func(ctx context.Context, in replayInput) (int, error) {
		for i := range in.Files {
			if _, err := read.Call(ctx, readArgs{Path: replayPath(i)}); err != nil {
				return 0, err
			}
		}
		return 0, nil
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return rk, nil
}

func (rk *resumeKernel) Close() error { return rk.st.Close() }

// resumeOp runs id (made by target, untimed) until its first live call and
// returns the events of its lineage per unit and the time to that call.
// It checks that exactly one call ran live and that the Run ended
// cancelled, with the execution resumable.
func (rk *resumeKernel) resumeOp(ctx context.Context, target func() (eventlog.ID, error)) op {
	return func() (float64, time.Duration, error) {
		id, err := target()
		if err != nil {
			return 0, 0, err
		}
		head, err := rk.st.Head(ctx, id)
		if err != nil {
			return 0, 0, err
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		rk.mu.Lock()
		rk.cancel, rk.live, rk.lives = cancel, time.Time{}, 0
		rk.mu.Unlock()
		start := time.Now()
		_, err = rk.k.Run(rctx, id)
		rk.mu.Lock()
		live, lives := rk.live, rk.lives
		rk.mu.Unlock()
		if err == nil || !errors.Is(err, context.Canceled) {
			return 0, 0, fmt.Errorf("%w: resumed Run ended with %v, want the live call's cancellation", errCheck, err)
		}
		if lives != 1 {
			return 0, 0, fmt.Errorf("%w: %d calls ran live, want 1 (the recorded step IDs do not match the SDK's)", errCheck, lives)
		}
		return float64(head), live.Sub(start), nil
	}
}

func runResume(e *env) ([]Row, error) {
	dir, err := e.mkdir("resume")
	if err != nil {
		return nil, err
	}
	steps := max((e.sizes.ResumeEvents-2)/2, 1)
	e.logf("   building an execution of %d recorded steps and one to run live", steps)
	rk, err := openResumeKernel(e.ctx, filepath.Join(dir, "kernel"), steps)
	if err != nil {
		return nil, err
	}
	defer rk.Close()
	raw, err := rawCopy(e.ctx, filepath.Join(dir, "raw"), rk.st, rk.id, rk.head)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	parent := func() (eventlog.ID, error) { return rk.id, nil }
	forked := func() (eventlog.ID, error) {
		head, err := rk.st.Head(e.ctx, rk.id)
		if err != nil {
			return eventlog.ID{}, err
		}
		id, _, err := fork.Create(e.ctx, rk.st, rk.id, head, time.Time{})
		return id, err
	}
	rates, load, err := e.interleave(
		contestant{"forkline Run resuming the execution", rk.resumeOp(e.ctx, parent)},
		contestant{"forkline Run of a fork at its last event", rk.resumeOp(e.ctx, forked)},
		contestant{"raw Pebble scan + msgpack decode", timed(func() (float64, error) {
			n, err := raw.scanDecode(rk.id)
			return float64(n), err
		})},
	)
	if err != nil {
		return nil, err
	}
	events := humanize.Comma(int64(rk.head))
	seconds := func(rate float64) string { return fmt.Sprintf("%.2f s", float64(rk.head)/rate) }
	resume := Figure{What: "forkline", Value: median(rates[0]), Unit: "events/s", Rounds: rates[0]}
	forkFig := Figure{What: "forkline, a fork at the last event", Value: median(rates[1]), Unit: "events/s", Rounds: rates[1]}
	base := Figure{What: "raw Pebble scan + msgpack decode", Value: median(rates[2]), Unit: "events/s", Rounds: rates[2]}
	row := rowOf("3s", fmt.Sprintf("resume of a %s-event execution: Run to its first live call", events),
		fmt.Sprintf("Resume/events=%d/system=forkline", rk.head), resume, base, div, "forkline/decode", "≥ 0.5", atLeast(0.5), load)
	row.Note = fmt.Sprintf("Run loads the lineage (%s events: dispatch.started and %s recorded steps), replays every recorded call and starts the one it did not record: %s to the first live call against %s to scan and decode the records. The live call cancels its Run (step.cancelled), so every round resumes the same execution.",
		events, humanize.Comma(int64(steps)), seconds(median(rates[0])), seconds(median(rates[2])))
	forkRow := rowOf("3sf", fmt.Sprintf("Run of a fork of the %s-event execution vs the execution's own resume", events),
		fmt.Sprintf("Resume/events=%d/system=forkline/fork", rk.head), forkFig, resume, div, "fork/parent", "0.8–1.2", within(0.8, 1.2), load)
	forkRow.Note = fmt.Sprintf("Each round forks the execution at its last event (not timed) and times the fork's Run to its first live call, which replays the parent's prefix through the lineage: %s against %s for the parent's resume.",
		seconds(median(rates[1])), seconds(median(rates[0])))
	return []Row{row, forkRow}, nil
}
