package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Rows 10a and 10b, a message to a running Recv (DESIGN §18): an
// execution's handler loops sdk.Recv; each sample is one Kernel.Send and
// the time until the Recv waiting in the handler returns it. 10a: one
// process, the kernel that sends also runs the execution, on a synced
// on-disk Pebble store (sdk.Open). 10b: two processes on Postgres, each
// kernel on its own store of one schema; B sends, A's running dispatch
// takes the request from its inbox.

// messageSamples is how many Sends each round measures.
const messageSamples = 40

// recvLoop registers agent "recv" on k: it receives ints on "in" until a
// negative one and reports, on got, when each Recv returned.
func recvLoop(k *sdk.Kernel, got chan<- time.Time) error {
	_, err := sdk.Register(k, "recv", func(ctx context.Context, _ int) (int, error) {
		n := 0
		for {
			v, err := sdk.Recv[int](ctx, "in", time.Hour)
			if err != nil {
				return n, err
			}
			if v < 0 {
				return n, nil
			}
			n++
			if !sdk.IsReplaying(ctx) {
				got <- time.Now()
			}
		}
	})
	return err
}

// sendRecvRounds runs e.cfg.Rounds rounds of messageSamples Sends from
// sender to execution id, which runner's handler receives (reporting on
// got), and returns every sample and each round's median, in ms.
func sendRecvRounds(e *env, sender *sdk.Kernel, id eventlog.ID, got <-chan time.Time, done <-chan error) (all, rounds []float64, err error) {
	// Wait for the first Recv: a Send before the run claims the execution
	// would claim it itself, and the run would find it busy.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		info, err := sender.Log().Info(e.ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if info.Head >= 3 { // execution.created, dispatch.started, the recv's step.started
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, errors.New("messages: the receiving run did not start within 30 s")
		}
	}
	n := 0
	for range e.cfg.Rounds {
		var round []float64
		for range messageSamples {
			n++
			// A pause of 0–50 ms, so that Sends do not fall in step
			// with the receiving dispatch's inbox poll.
			time.Sleep(time.Duration(rand.Int64N(int64(50 * time.Millisecond))))
			start := time.Now()
			if err := sender.Send(e.ctx, id, "in", n, sdk.MessageID(fmt.Sprintf("m%d", n))); err != nil {
				return nil, nil, err
			}
			select {
			case at := <-got:
				round = append(round, float64(at.Sub(start).Microseconds())/1000)
			case err := <-done:
				return nil, nil, fmt.Errorf("messages: the receiving run ended: %v", err)
			case <-time.After(30 * time.Second):
				return nil, nil, errors.New("messages: a Send was not received within 30 s")
			}
		}
		all = append(all, round...)
		rounds = append(rounds, median(round))
	}
	if err := sender.Send(e.ctx, id, "in", -1, sdk.MessageID("end")); err != nil {
		return nil, nil, err
	}
	if err := <-done; err != nil {
		return nil, nil, err
	}
	return all, rounds, nil
}

// runMessages measures row 10a and, with a Postgres URL, 10b.
func runMessages(e *env) ([]Row, error) {
	dir, err := e.mkdir("messages")
	if err != nil {
		return nil, err
	}
	k, err := sdk.Open(dir, sdk.ParkAfter(time.Hour))
	if err != nil {
		return nil, err
	}
	defer k.Close()
	got := make(chan time.Time, 1)
	if err := recvLoop(k, got); err != nil {
		return nil, err
	}
	id, err := k.Start(e.ctx, "recv", 0)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { _, err := k.Run(e.ctx, id); done <- err }()
	load := loadAverage()[0]
	all, rounds, err := sendRecvRounds(e, k, id, got, done)
	if err != nil {
		return nil, err
	}
	med := median(all)
	met := med < 1
	rows := []Row{{ID: "10a", Scenario: "message to a running Recv, one process: Kernel.Send to the Recv returning it (synced Pebble on disk)",
		Bench: "SendRecv/process=one", Forkline: Figure{What: "forkline, median", Value: med, Unit: "ms", Rounds: rounds},
		Target: "median < 1 ms", Met: &met, Load: load,
		Note: fmt.Sprintf("%d messages; p99 %.2f ms, max %.2f ms. Each: Send writes the request with its MessageID's record (eventlog.MessageInbox; one synced write) and pokes the dispatch in its process, which takes it into the lineage with the waiting Recv's step.succeeded (message.received and step.succeeded, removing the request; one synced write): two synced writes. A pause of 0–50 ms precedes each Send.",
			len(all), quantile(all, 0.99), slices.Max(all))}}
	if e.cfg.Postgres == "" {
		e.logf("   10b skipped: no Postgres URL (Config.Postgres, bench -postgres)")
		return rows, nil
	}
	row, err := runPGMessages(e)
	if err != nil {
		return nil, err
	}
	return append(rows, row), nil
}

// runPGMessages measures row 10b.
func runPGMessages(e *env) (Row, error) {
	b, err := openPGBench(e.ctx, e.cfg.Postgres)
	if err != nil {
		return Row{}, err
	}
	defer b.Close()
	stA, err := b.store(e.ctx)
	if err != nil {
		return Row{}, err
	}
	defer stA.Close()
	stB, err := b.store(e.ctx)
	if err != nil {
		return Row{}, err
	}
	defer stB.Close()
	got := make(chan time.Time, 1)
	kA, err := sdk.New(stA, sdk.WithOwner("bench-A"), sdk.ParkAfter(time.Hour))
	if err == nil {
		err = recvLoop(kA, got)
	}
	if err != nil {
		return Row{}, err
	}
	kB, err := sdk.New(stB, sdk.WithOwner("bench-B"))
	if err == nil {
		err = recvLoop(kB, make(chan time.Time, 1))
	}
	if err != nil {
		return Row{}, err
	}
	id, err := kA.Start(e.ctx, "recv", 0)
	if err != nil {
		return Row{}, err
	}
	done := make(chan error, 1)
	go func() { _, err := kA.Run(e.ctx, id); done <- err }()
	load := loadAverage()[0]
	all, rounds, err := sendRecvRounds(e, kB, id, got, done)
	if err != nil {
		return Row{}, err
	}
	med := median(all)
	met := med < 100
	return Row{ID: "10b", Scenario: "message to a running Recv across processes on Postgres: Send in store B to the Recv returning in store A",
		Bench: "SendRecv/process=two/store=postgres", Forkline: Figure{What: "forkline on Postgres, median", Value: med, Unit: "ms", Rounds: rounds},
		Target: "median < 100 ms", Met: &met, Load: load,
		Note: fmt.Sprintf("%d messages; p99 %.1f ms, max %.1f ms. B's Send checks the MessageID in the request's own transaction (message_ids) and writes the request (whose commit NOTIFYs) and, A holding the claim, returns; A's running dispatch, woken by its LISTEN connection (or its 40 ms inbox poll), takes the request with its Recv's step.succeeded in one transaction. A pause of 0–50 ms precedes each Send.",
			len(all), quantile(all, 0.99), slices.Max(all))}, nil
}
