package benchmarks

import (
	"fmt"
	"github.com/dustin/go-humanize"
	"path/filepath"
)

// Scenario 3r, replay with retries (DESIGN §10): Run of an execution of
// 1,000 recorded steps that each failed once and succeeded on a retry
// (step.started, step.failed{RetryAt}, step.started, step.succeeded), side
// by side with 1,000 steps that each succeeded at once. Each round forks
// the recorded execution at its last event (not timed) and times Run of
// the fork, which replays every step without running or waiting. The
// target: the retried execution replays at the same rate in steps/s,
// within 20 %.

// retryReplaySteps is the size of both executions of scenario 3r.
const retryReplaySteps = 1_000

func runReplayRetried(e *env) ([]Row, error) {
	dir, err := e.mkdir("replay-retried")
	if err != nil {
		return nil, err
	}
	e.logf("   building two executions of %d recorded steps, one with a retry per step", retryReplaySteps)
	plain, err := openReplayKernelRetried(e.ctx, filepath.Join(dir, "plain"), retryReplaySteps, false)
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	retried, err := openReplayKernelRetried(e.ctx, filepath.Join(dir, "retried"), retryReplaySteps, true)
	if err != nil {
		return nil, err
	}
	defer retried.Close()
	rates, load, err := e.interleave(
		contestant{"forkline Run replaying retried steps", retried.replayOp(e.ctx, nil, nil)},
		contestant{"forkline Run replaying plain steps", plain.replayOp(e.ctx, nil, nil)},
	)
	if err != nil {
		return nil, err
	}
	// replayOp counts events; the comparison is in steps.
	perStep := func(rk *replayKernel) float64 { return float64(rk.head) / float64(rk.steps) }
	rr, pr := scaled(rates[0], 1/perStep(retried)), scaled(rates[1], 1/perStep(plain))
	fl := Figure{What: "forkline, every step retried once", Value: median(rr), Unit: "steps/s", Rounds: rr}
	base := Figure{What: "forkline, no retries", Value: median(pr), Unit: "steps/s", Rounds: pr}
	row := rowOf("3r", fmt.Sprintf("replay: Run of %s retried-then-succeeded steps vs %s plain ones", humanize.Comma(int64(retryReplaySteps)), humanize.Comma(int64(retryReplaySteps))),
		"ReplayRetried/steps=1000/retries=1", fl, base, div, "retried/plain", "0.8–1.2", within(0.8, 1.2), load)
	row.Note = fmt.Sprintf("A retried step is four events (step.started, step.failed{RetryAt}, step.started, step.succeeded), a plain one two; %s vs %s events/s replayed. Each Run also syncs its dispatch.started and execution.completed. The Go benchmark is sdk's BenchmarkReplayRetried (go test -run '^$' -bench ReplayRetried ./sdk).",
		humanNumber(median(rates[0])), humanNumber(median(rates[1])))
	return []Row{row}, nil
}

// within is a target band for a ratio.
func within(lo, hi float64) func(float64) bool {
	return func(r float64) bool { return r >= lo && r <= hi }
}
