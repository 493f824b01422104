package benchmarks

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// Rows 12a and 12b, claims with a queue limit (DESIGN §19): what the
// concurrency count a queue adds to each claim to run costs. Each
// contestant claims executions of its own agent and releases them at
// once, so they stay runnable: "queued" ones are in a queue of
// concurrency queueBenchLimit, a limit the claims never reach (the count
// and its lock are paid, no claim is refused), "free" ones are in no
// queue. 12a: Pebble's ClaimToRun of one execution (under the store's
// queue lock, which every claim to run takes) by queueBenchWorkers
// goroutines. 12b (with -postgres): Postgres's bulk SKIP LOCKED claim
// (ClaimRunnableVersion) of up to queueBenchBatch executions by
// queueBenchWorkers goroutines on one store's pool; a queued claim locks
// the queue's row and counts its slots in the claim's transaction.
const (
	queueBenchWorkers    = 4
	queueBenchBatch      = 4
	queueBenchPerWorker  = 50
	queueBenchLimit      = 64
	queueBenchQueue      = "bench"
	queueBenchTTL        = time.Minute
	queueBenchAgentQueue = "queued"
	queueBenchAgentFree  = "free"
)

// runQueue measures rows 12a and, with a Postgres URL, 12b.
func runQueue(e *env) ([]Row, error) {
	dir, err := e.mkdir("queue")
	if err != nil {
		return nil, err
	}
	st, err := pebblestore.Open(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	row, err := runQueuePebble(e, st)
	if err != nil {
		return nil, err
	}
	rows := []Row{row}
	if e.cfg.Postgres == "" {
		e.logf("   12b skipped: no Postgres URL (Config.Postgres, bench -postgres)")
		return rows, nil
	}
	b, err := openPGBench(e.ctx, e.cfg.Postgres)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	pg, err := b.store(e.ctx)
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	row, err = runQueuePostgres(e, pg)
	if err != nil {
		return nil, err
	}
	return append(rows, row), nil
}

// queueFixture declares the queue and creates queueBenchPerWorker
// executions of each agent per worker: ids[agent][worker].
func queueFixture(ctx context.Context, s interface {
	eventlog.Log
	eventlog.Queuer
}) (map[string][][]eventlog.ID, error) {
	if err := s.PutQueue(ctx, eventlog.Queue{Name: queueBenchQueue, Concurrency: queueBenchLimit}); err != nil {
		return nil, err
	}
	out := map[string][][]eventlog.ID{}
	for _, agent := range []string{queueBenchAgentQueue, queueBenchAgentFree} {
		queue := ""
		if agent == queueBenchAgentQueue {
			queue = queueBenchQueue
		}
		for range queueBenchWorkers {
			var ids []eventlog.ID
			for range queueBenchPerWorker {
				id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: agent, Input: []byte(`1`), Queue: queue}, time.Now())
				if err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			out[agent] = append(out[agent], ids)
		}
	}
	return out, nil
}

func runQueuePebble(e *env, st *pebblestore.Store) (Row, error) {
	ids, err := queueFixture(e.ctx, st)
	if err != nil {
		return Row{}, err
	}
	next := make([]int, queueBenchWorkers)
	claimOne := func(agent string) func(int) (float64, error) {
		return func(w int) (float64, error) {
			id := ids[agent][w][next[w]%queueBenchPerWorker]
			next[w]++
			l, err := st.ClaimToRun(e.ctx, id, fmt.Sprintf("w%d", w), queueBenchTTL, "")
			if err != nil {
				return 0, err
			}
			return 1, st.Release(e.ctx, l)
		}
	}
	d := e.cfg.Duration
	rates, load, err := e.interleave(
		contestant{"Pebble ClaimToRun, queued", parallel(queueBenchWorkers, d, claimOne(queueBenchAgentQueue))},
		contestant{"Pebble ClaimToRun, no queue", parallel(queueBenchWorkers, d, claimOne(queueBenchAgentFree))},
	)
	if err != nil {
		return Row{}, err
	}
	f := Figure{What: "claims in a queue of concurrency 64", Value: median(rates[0]), Unit: "claims/s", Rounds: rates[0]}
	base := Figure{What: "claims in no queue", Value: median(rates[1]), Unit: "claims/s", Rounds: rates[1]}
	row := rowOf("12a", "Pebble claim to run (ClaimToRun + Release), 4 workers, with a queue limit vs without", "QueueClaim/store=pebble",
		f, base, div, "queued/no queue", "≥ 0.8", func(r float64) bool { return r >= 0.8 }, load)
	row.Note = fmt.Sprintf("%d goroutines, each claiming and releasing its own %d executions in turn on one on-disk store. A queued claim counts the queue's held slots (the executions it claimed that may still hold one) under the store's queue lock; the limit (%d) is never reached, so no claim is refused.",
		queueBenchWorkers, queueBenchPerWorker, queueBenchLimit)
	return row, nil
}

func runQueuePostgres(e *env, st interface {
	eventlog.Log
	eventlog.Queuer
	eventlog.VersionedClaimer
}) (Row, error) {
	if _, err := queueFixture(e.ctx, st); err != nil {
		return Row{}, err
	}
	claimBatch := func(agent string) func(int) (float64, error) {
		agents := []string{agent}
		return func(w int) (float64, error) {
			ls, err := st.ClaimRunnableVersion(e.ctx, fmt.Sprintf("w%d", w), queueBenchTTL, agents, "", queueBenchBatch, time.Now())
			if err != nil {
				return 0, err
			}
			if len(ls) == 0 {
				return 0, fmt.Errorf("%w: a bulk claim of %s found nothing runnable", errCheck, agent)
			}
			for _, l := range ls {
				if err := st.Release(e.ctx, l); err != nil {
					return 0, err
				}
			}
			return float64(len(ls)), nil
		}
	}
	d := e.cfg.Duration
	rates, load, err := e.interleave(
		contestant{"Postgres bulk claim, queued", parallel(queueBenchWorkers, d, claimBatch(queueBenchAgentQueue))},
		contestant{"Postgres bulk claim, no queue", parallel(queueBenchWorkers, d, claimBatch(queueBenchAgentFree))},
	)
	if err != nil {
		return Row{}, err
	}
	f := Figure{What: "claims in a queue of concurrency 64", Value: median(rates[0]), Unit: "claims/s", Rounds: rates[0]}
	base := Figure{What: "claims in no queue", Value: median(rates[1]), Unit: "claims/s", Rounds: rates[1]}
	row := rowOf("12b", "Postgres bulk claim (ClaimRunnable of up to 4 + Release), 4 workers, with a queue limit vs without", "QueueClaim/store=postgres",
		f, base, div, "queued/no queue", "≥ 0.8", func(r float64) bool { return r >= 0.8 }, load)
	row.Note = fmt.Sprintf("%d goroutines on one store's pool, each claiming up to %d of %d runnable executions of its contestant's agent with FOR UPDATE SKIP LOCKED and releasing them (one transaction each). A queued claim also locks the queue's row (claims of one queue wait on each other there) and counts its live slots in the claim's transaction; an unqueued claim takes no queue lock but pays the lock-free count that leaves out full queues. The limit (%d) is never reached.",
		queueBenchWorkers, queueBenchBatch, queueBenchWorkers*queueBenchPerWorker, queueBenchLimit)
	return row, nil
}
