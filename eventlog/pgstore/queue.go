package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

var _ eventlog.Queuer = (*Store)(nil)

// migrateQueues adds the executions' queue and priority and the queues'
// table (DESIGN §19, §21½.13). The partial index serves the count of a
// queue's slots that every claim of one of its executions takes.
func migrateQueues(sc string) []string {
	return []string{
		`ALTER TABLE ` + sc + `.executions ADD COLUMN queue text NOT NULL DEFAULT '', ADD COLUMN priority integer NOT NULL DEFAULT 0`,
		`CREATE INDEX executions_queue ON ` + sc + `.executions (queue, priority, created_ns) WHERE queue <> ''`,
		`CREATE TABLE ` + sc + `.queues (
		name        text PRIMARY KEY,
		concurrency integer NOT NULL,
		rate        integer NOT NULL,
		per_us      bigint NOT NULL,
		priority    boolean NOT NULL
	)`,
	}
}

// PutQueue implements eventlog.Queuer in one INSERT … ON CONFLICT DO
// UPDATE: the newest record of a name wins. Per is kept in microseconds,
// rounded up.
func (s *Store) PutQueue(ctx context.Context, q eventlog.Queue) error {
	if err := eventlog.CheckQueue(q); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.queues (name, concurrency, rate, per_us, priority) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET concurrency = $2, rate = $3, per_us = $4, priority = $5`,
		q.Name, q.Concurrency, q.Rate, micros(q.Per), q.Priority)
	if err != nil {
		return s.wrap(err, "queue %q: put", q.Name)
	}
	return nil
}

func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

// Queues implements eventlog.Queuer.
func (s *Store) Queues(ctx context.Context) ([]eventlog.Queue, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	rows, err := s.pool.Query(ctx, `SELECT name, concurrency, rate, per_us, priority FROM `+s.q.schema+`.queues ORDER BY name`)
	if err != nil {
		return nil, s.wrap(err, "queues")
	}
	out, err := pgx.CollectRows(rows, scanQueue)
	if err != nil {
		return nil, s.wrap(err, "queues")
	}
	return out, nil
}

func scanQueue(r pgx.CollectableRow) (eventlog.Queue, error) {
	var (
		q   eventlog.Queue
		per int64
	)
	if err := r.Scan(&q.Name, &q.Concurrency, &q.Rate, &per, &q.Priority); err != nil {
		return q, err
	}
	q.Per = time.Duration(per) * time.Microsecond
	if err := eventlog.CheckQueue(q); err != nil {
		return q, &eventlog.CorruptionError{What: fmt.Sprintf("queue row %q", q.Name), Err: err}
	}
	return q, nil
}

// liveSlot is the condition of an execution row e that holds a slot of
// its queue (eventlog.SlotHeld): not ended, with a lease live at the
// database time given as the parameter named.
func liveSlot(now string) string {
	return fmt.Sprintf(`e.status IN (%d, %d, %d)`, eventlog.StatusPending, eventlog.StatusRunning, eventlog.StatusWaiting) + ` AND e.lease_epoch > 0 AND NOT e.lease_released AND e.lease_expires_ns > ` + now
}

// QueueCounts implements eventlog.Queuer from the executions' rows, by the
// database's clock.
func (s *Store) QueueCounts(ctx context.Context) (map[string]eventlog.QueueCount, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	out := map[string]eventlog.QueueCount{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		dbnow, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT e.queue, count(*) FILTER (WHERE `+liveSlot("$4")+`), count(*)
			FROM `+s.q.executions+` e WHERE e.queue <> '' AND e.status IN ($1, $2, $3) AND e.deleted_kept IS NULL GROUP BY e.queue`,
			int16(eventlog.StatusPending), int16(eventlog.StatusRunning), int16(eventlog.StatusWaiting), nanos(dbnow))
		if err != nil {
			return err
		}
		var (
			name         string
			running, all int
		)
		_, err = pgx.ForEachRow(rows, []any{&name, &running, &all}, func() error {
			out[name] = eventlog.QueueCount{Running: running, Waiting: all - running}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, s.wrap(err, "queue counts")
	}
	return out, nil
}

// fullQueues names the queues whose slots are all held at dbnow, by a
// count that takes no lock (a hint: lockQueues's count decides).
func (s *Store) fullQueues(ctx context.Context, tx pgx.Tx, dbnow time.Time) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT q.name FROM `+s.q.schema+`.queues q WHERE q.concurrency > 0
		AND (SELECT count(*) FROM `+s.q.executions+` e WHERE e.queue = q.name AND `+liveSlot("$1")+`) >= q.concurrency`, nanos(dbnow))
	if err != nil {
		return nil, err
	}
	full, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if full == nil {
		full = []string{}
	}
	return full, err
}

// queueState is a queue's record and its slots held, read under the lock
// of its row.
type queueState struct {
	eventlog.Queue
	running int
}

// lockQueues locks the rows of the named queues that limit anything, in
// name order (so two claims never wait on each other in a cycle), and
// counts each one's slots held at the database time dbnow. A name without
// a record is absent from the result: its executions run unlimited.
func (s *Store) lockQueues(ctx context.Context, tx pgx.Tx, names []string, dbnow time.Time) (map[string]*queueState, error) {
	rows, err := tx.Query(ctx, `SELECT name, concurrency, rate, per_us, priority FROM `+s.q.schema+`.queues
		WHERE ($1::text[] IS NULL OR name = ANY($1)) AND (concurrency > 0 OR rate > 0) ORDER BY name FOR UPDATE`, names)
	if err != nil {
		return nil, err
	}
	qs, err := pgx.CollectRows(rows, scanQueue)
	if err != nil || len(qs) == 0 {
		return nil, err
	}
	out := make(map[string]*queueState, len(qs))
	limited := make([]string, 0, len(qs))
	for _, q := range qs {
		out[q.Name] = &queueState{Queue: q}
		limited = append(limited, q.Name)
	}
	rows, err = tx.Query(ctx, `SELECT e.queue, count(*) FROM `+s.q.executions+` e WHERE e.queue = ANY($1) AND `+liveSlot("$2")+` GROUP BY e.queue`,
		limited, nanos(dbnow))
	if err != nil {
		return nil, err
	}
	var (
		name string
		n    int
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &n}, func() error {
		if q := out[name]; q != nil {
			q.running = n
		}
		return nil
	})
	return out, err
}

// admit decides, under the queue's lock, whether one more execution of q
// in status st may be claimed to run; it counts it (and takes a start of
// the queue's rate for a pending one) when so, and returns a
// *QueueFullError when not.
func (s *Store) admit(ctx context.Context, tx pgx.Tx, q *queueState, id eventlog.ID, st eventlog.Status) error {
	if q.Concurrency > 0 && q.running >= q.Concurrency {
		return &eventlog.QueueFullError{ID: id, Queue: q.Name, Running: q.running, Concurrency: q.Concurrency}
	}
	if q.Rate > 0 && st == eventlog.StatusPending {
		var (
			ok    bool
			retry *time.Time
		)
		err := tx.QueryRow(ctx, fmt.Sprintf(takeSQL, s.q.schema+".limits"), eventlog.RateKey(q.Name), q.Rate, micros(q.Per)).Scan(&ok, &retry)
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				err = &eventlog.CorruptionError{What: fmt.Sprintf("limiter row of queue %q", q.Name), Err: errors.New("the take returned no row")}
			}
			return err
		}
		if !ok {
			e := &eventlog.QueueFullError{ID: id, Queue: q.Name}
			if retry != nil {
				e.RetryAt = retry.UTC()
			}
			return e
		}
	}
	q.running++
	return nil
}

// ClaimToRun implements eventlog.Queuer: ClaimVersion, and for an
// execution in a limited queue the queue's row is locked after the
// execution's, its slots counted and its rate taken in the claim's
// transaction.
func (s *Store) ClaimToRun(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	if err := eventlog.CheckClaim(owner, ttl); err != nil {
		return eventlog.Lease{}, err
	}
	var l eventlog.Lease
	err := s.withRowTx(ctx, id, func(tx pgx.Tx, r *row, now time.Time) (err error) {
		if !eventlog.RunsOn(r.hdr.Version, worker) {
			return &eventlog.VersionError{ID: id, Version: r.hdr.Version, Worker: worker}
		}
		if r.hdr.Queue != "" {
			if _, live := r.lease.Holder(id, now); !live {
				qs, err := s.lockQueues(ctx, tx, []string{r.hdr.Queue}, now)
				if err != nil {
					return err
				}
				if q := qs[r.hdr.Queue]; q != nil {
					if err := s.admit(ctx, tx, q, id, r.status.Status); err != nil {
						return err
					}
				}
			}
		}
		l, err = r.lease.Claim(id, owner, ttl, now)
		return err
	})
	return l, err
}
