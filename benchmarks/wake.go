package benchmarks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// Row 8w, the wake across processes on Postgres (DESIGN §15½.6, §15½.14):
// kernel A, on its own pgstore.Store, Serves with a 30 s poll; an
// execution of it parks awaiting an approval; kernel B, on another store
// of the same schema (another process), approves it. The latency is from
// B's approval.granted to A's next dispatch.started (both event times, one
// host's clock): what LISTEN/NOTIFY carries, since A's poll never fires.

// wakeSamples is how many wakes each round measures.
const wakeSamples = 8

// runPGWake measures e.cfg.Rounds rounds of wakeSamples wakes.
func runPGWake(e *env, b *pgBench) (Row, error) {
	kA, kB, stop, err := newPGWakePair(e.ctx, b)
	if err != nil {
		return Row{}, err
	}
	defer stop()
	load := loadAverage()[0]
	var all, rounds []float64
	for range e.cfg.Rounds {
		var round []float64
		for range wakeSamples {
			ms, err := pgWakeOnce(e.ctx, kA, kB)
			if err != nil {
				return Row{}, err
			}
			round = append(round, ms)
		}
		all = append(all, round...)
		rounds = append(rounds, median(round))
	}
	med := median(all)
	p99 := quantile(all, 0.99)
	met := med < 100
	return Row{ID: "8w", Scenario: "Postgres wake across processes: Approve in store B to dispatch.started in store A (Serve polling every 30 s)",
		Bench: "PostgresWake/event=approve", Forkline: Figure{What: "forkline on Postgres, median", Value: med, Unit: "ms", Rounds: rounds},
		Target: "median < 100 ms", Met: &met, Load: load,
		Note: fmt.Sprintf("%d wakes; p99 %.1f ms, max %.1f ms. Rounds are each round's median of %d wakes. Each wake: B's Approve (a request and, with no live owner, B's claim, take and release; the request and the release NOTIFY forkline_<schema> at their commits); A's Serve, woken by its LISTEN connection, claims the execution and appends dispatch.started.",
			len(all), p99, slices.Max(all), wakeSamples)}, nil
}

// newPGWakePair opens two stores on b's schema (two processes) and a
// kernel on each: A Serves with a 30 s poll and parks a wait past 1 ms;
// stop ends the Serve and closes the stores.
func newPGWakePair(ctx context.Context, b *pgBench) (kA, kB *sdk.Kernel, stop func(), err error) {
	stA, err := b.store(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	stB, err := b.store(ctx)
	if err != nil {
		stA.Close()
		return nil, nil, nil, err
	}
	closeStores := func() { stB.Close(); stA.Close() }
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		return policy.Decision{Allow: true, Approval: c.Target == "wake_tool"}
	}
	register := func(k *sdk.Kernel) error {
		tool := sdk.DefineTool("wake_tool", func(_ context.Context, n int) (int, error) { return n, nil })
		_, err := sdk.Register(k, "wake", func(ctx context.Context, n int) (int, error) { return tool.Call(ctx, n) })
		return err
	}
	kA, err = sdk.New(stA, sdk.WithOwner("bench-A"), sdk.WithGate(gate), sdk.ParkAfter(time.Millisecond))
	if err == nil {
		err = register(kA)
	}
	if err != nil {
		closeStores()
		return nil, nil, nil, err
	}
	kB, err = sdk.New(stB, sdk.WithOwner("bench-B"), sdk.WithGate(gate))
	if err == nil {
		err = register(kB)
	}
	if err != nil {
		closeStores()
		return nil, nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- kA.Serve(sctx, sdk.PollEvery(30*time.Second)) }()
	return kA, kB, func() { cancel(); <-served; closeStores() }, nil
}

// pgWakeOnce parks one execution in kA, approves it from kB and returns the
// milliseconds from approval.granted to the next dispatch.started.
func pgWakeOnce(ctx context.Context, kA, kB *sdk.Kernel) (float64, error) {
	id, err := kA.Start(ctx, "wake", 1)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(30 * time.Second)
	var step string
	for step == "" {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("wake: %s did not park for its approval", id)
		}
		info, err := kB.Log().Info(ctx, id)
		if err != nil {
			return 0, err
		}
		if info.Status == eventlog.StatusWaiting && len(info.Approvals) == 1 {
			step = info.Approvals[0]
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	if err := kB.Approve(ctx, id, step); err != nil {
		return 0, err
	}
	for {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("wake: %s was not dispatched again within 30 s", id)
		}
		var granted, started time.Time
		for ev, err := range kB.Log().Events(ctx, id, 1) {
			if err != nil {
				return 0, err
			}
			switch p := ev.Data.(type) {
			case *eventlog.ApprovalGranted:
				granted = ev.Time
			case *eventlog.DispatchStarted:
				if p.Dispatch == 2 {
					started = ev.Time
				}
			}
		}
		if !granted.IsZero() && !started.IsZero() {
			return float64(started.Sub(granted).Microseconds()) / 1000, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// quantile returns the q-quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
