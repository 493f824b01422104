package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

var _ eventlog.Limiter = (*Store)(nil)

// takeSQL is one Take: $1 key, $2 max, $3 window in microseconds. The row
// of a key is locked by the INSERT … ON CONFLICT DO UPDATE, which evaluates
// its SET on the newest version of the row, so concurrent Takes of one key
// (from any process) are serialized by the row. Each judges the window by
// the database's clock read once after it holds the row
// (clock_timestamp() in a one-row FROM), so the times of a key's takes
// rise in the order the takes run: a take that waited for the row never
// judges by a time older than one a take before it recorded (now(), the
// statement's start, would, and a take that pruned by a newer time would
// have dropped calls still in the waiting take's window). One pass over the
// row's times keeps those still in the window, appends that time when fewer
// than max remain, and records in ok whether it did: RETURNING reads the
// row this statement wrote. When it refused, retry is the time the oldest
// call that must leave the window leaves it. The first take of a key
// inserts the row with now(); a concurrent first take waits for it on the
// key and then updates.
const takeSQL = `INSERT INTO %[1]s AS l (key, takes, ok) VALUES ($1, ARRAY[now()], true)
ON CONFLICT (key) DO UPDATE SET (takes, ok) = (
	SELECT CASE WHEN count(t) < $2 THEN coalesce(array_agg(t ORDER BY t) FILTER (WHERE t IS NOT NULL), '{}') || c.at
			ELSE coalesce(array_agg(t ORDER BY t) FILTER (WHERE t IS NOT NULL), '{}') END,
		count(t) < $2
	FROM (SELECT clock_timestamp() AS at) c
	LEFT JOIN LATERAL unnest(l.takes) t ON t > c.at - $3::bigint * interval '1 microsecond'
	GROUP BY c.at)
RETURNING ok, CASE WHEN ok THEN NULL ELSE
	(SELECT t FROM unnest(l.takes) t ORDER BY t OFFSET greatest(cardinality(l.takes) - $2, 0) LIMIT 1)
		+ $3::bigint * interval '1 microsecond' END`

// TakeLimit implements eventlog.Limiter in one statement (takeSQL) on the
// limits table. Times are the database's clock, read once per take after
// it holds the key's row, with Postgres's microsecond resolution: a window is rounded
// up to whole microseconds. A Take commits as the store's appends do
// (synchronous unless WithoutSync). The rows of keys no longer used stay
// (a few bytes each).
func (s *Store) TakeLimit(ctx context.Context, key string, max int, window time.Duration) (bool, time.Time, error) {
	if err := eventlog.CheckTake(key, max, window); err != nil {
		return false, time.Time{}, err
	}
	if err := s.enter(ctx); err != nil {
		return false, time.Time{}, err
	}
	defer s.leave()
	micros := (window + time.Microsecond - 1) / time.Microsecond
	var (
		ok    bool
		retry *time.Time
	)
	err := s.pool.QueryRow(ctx, fmt.Sprintf(takeSQL, s.q.schema+".limits"), key, max, int64(micros)).Scan(&ok, &retry)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = &eventlog.CorruptionError{What: fmt.Sprintf("limiter row %q", key), Err: errors.New("the take returned no row")}
		}
		return false, time.Time{}, s.wrap(err, "limiter %q", key)
	}
	if ok {
		return true, time.Time{}, nil
	}
	if retry == nil {
		return false, time.Time{}, &eventlog.CorruptionError{What: fmt.Sprintf("limiter row %q", key), Err: errors.New("a refusal without a retry time")}
	}
	return false, retry.UTC(), nil
}
