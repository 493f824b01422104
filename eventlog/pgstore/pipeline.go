package pgstore

import (
	"context"
	"math"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

// The one-round-trip append. An append's checks need the execution's
// status and index fold at its expected head; both are a function of the
// events up to that head, which never change, so the fold this store left
// after its own previous write (Create, Fork or an append) at that head is
// the one the row holds. With it, an append is one statement: the row's
// UPDATE, whose WHERE checks the head and the lease epoch (the fence, under
// the row's lock), and, as data-modifying CTEs that read its RETURNING, the
// inserts of the events and index entries. When the row does not match,
// the UPDATE returns nothing, so nothing is inserted and nothing at all is
// written; the append then runs the locking transaction, which reads the
// row and refuses with the error the check names (ErrConflict, ErrLeaseLost,
// ErrLeaseHeld, ErrNotFound) or, when the row matched after all, appends.
// AppendUnsynced sends set_config('synchronous_commit', 'off', true) in
// the same pipeline: the statements of a pipeline up to its Sync are one
// implicit transaction, so the setting holds for that commit only.
//
// Append's statement goes through the group commit (group.go): alone when
// no flush is running, else with the other appends that queued
// meanwhile, in one transaction.

// fastSQL returns the statement of a fast append: leased, under the epoch
// in $15; otherwise admitted only while no lease is live by the database's
// clock. With states, it also inserts the index entries of $16…$27.
func (s *Store) fastSQL(leased, states, notify bool) string {
	lease := ` AND lease_epoch = $15 AND NOT lease_released`
	if !leased {
		// $15 is 0 and unused; it keeps the parameters' numbering.
		lease = ` AND $15::bigint = 0 AND NOT (lease_epoch > 0 AND NOT lease_released
			AND lease_expires_ns > (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint)`
	}
	sql := `WITH upd AS (
			UPDATE ` + s.q.executions + ` SET head = $2, status = $3, updated_ns = $4, wake_ns = $5, deadline_ns = $6,
				dispatched = $7, parked = $8, approvals = $9, tokens_in = $10, tokens_out = $11
			WHERE id = $1 AND head = $12 AND deleted_kept IS NULL` + lease + `
			RETURNING id),
		ev AS (
			INSERT INTO ` + s.q.events + ` (execution, seq, record)
			SELECT upd.id, e.seq, e.record FROM upd, unnest($13::bigint[], $14::bytea[]) AS e (seq, record))`
	if states {
		sql += `,
		st AS (
			INSERT INTO ` + s.q.states + ` (execution, key, seq, generation, in_flight, coverage_reuse, bound,
				latest_ref, latest_at, latest_gen, diverged)
			SELECT upd.id, r.key, r.seq, r.generation, ($16::text[])[r.lo:r.hi], r.coverage_reuse, r.bound,
				r.latest_ref, r.latest_at, r.latest_gen, r.diverged
			FROM upd, unnest($17::text[], $18::bigint[], $19::bigint[], $20::int[], $21::int[], $22::boolean[],
				$23::bigint[], $24::text[], $25::bigint[], $26::bigint[], $27::bigint[])
				AS r (key, seq, generation, lo, hi, coverage_reuse, bound, latest_ref, latest_at, latest_gen, diverged))`
	}
	if !notify {
		return sql + `
		SELECT count(*) FROM upd`
	}
	// The NOTIFY (notify.go) reads upd, so it is sent only when the
	// append wrote; Postgres delivers it at the commit.
	return sql + `
		SELECT count(*) FROM upd, LATERAL (SELECT pg_notify('` + s.q.channel + `', encode(upd.id, 'hex'))) AS n`
}

// stateArrays is the index entries of an append as the fast statement's
// column arrays; in_flight lists are concatenated in flight, entry i's
// being flight[lo[i]-1 : hi[i]] (SQL's 1-based, inclusive slice).
type stateArrays struct {
	key, ref                                     []string
	seq, gen, bound, latestAt, latestGen, diverg []int64
	lo, hi                                       []int32
	reuse                                        []bool
	flight                                       []string
}

func (a *stateArrays) add(st eventlog.ResourceState) {
	a.key = append(a.key, st.Key)
	a.seq = append(a.seq, int64(st.Seq))
	a.gen = append(a.gen, int64(st.Generation))
	a.lo = append(a.lo, int32(len(a.flight)+1))
	a.flight = append(a.flight, st.InFlight...)
	a.hi = append(a.hi, int32(len(a.flight)))
	a.reuse = append(a.reuse, st.CoverageReuse)
	a.bound = append(a.bound, int64(st.Bound))
	a.ref = append(a.ref, st.Latest.Ref)
	a.latestAt = append(a.latestAt, int64(st.Latest.At))
	a.latestGen = append(a.latestGen, int64(st.Latest.Generation))
	a.diverg = append(a.diverg, int64(st.Diverged))
}

// appendFast tries events (checked and encoded by prepare) as one
// round trip from the fold cached at expectedHead. It reports false, having
// written nothing, when there is no such fold, when the fold refuses the
// events (the locking path then reports why, after its own checks of lease
// and head), or when the row's head or lease did not match.
func (s *Store) appendFast(ctx context.Context, id eventlog.ID, expectedHead uint64, unsynced bool,
	events []eventlog.Event, records [][]byte) (*cachedIndex, bool, error) {
	epoch, leased := eventlog.EpochFrom(ctx)
	if leased && (epoch == 0 || epoch > math.MaxInt64) {
		return nil, false, nil // refused by the locking path, which says why
	}
	if ends(events) {
		return nil, false, nil // the locking path wakes a child's caller (wakeCaller)
	}
	c, ok := s.cached(id, expectedHead)
	if !ok {
		return nil, false, nil
	}
	if eventlog.CheckAfterEnd(id, c.status.Status, expectedHead, events) != nil {
		return nil, false, nil
	}
	index := eventlog.NewIndexState(c.state.States())
	status := c.status.Clone()
	seqs := make([]int64, len(events))
	var sa stateArrays
	for i, ev := range events {
		seqs[i] = int64(ev.Seq)
		status.Apply(ev)
		changed, err := index.Apply(ev)
		if err != nil {
			return nil, false, nil
		}
		for _, st := range changed {
			sa.add(st)
		}
	}
	args := []any{id[:], int64(status.Head), int16(status.Status), nanos(status.Updated), nanos(status.WakeAt),
		nanos(status.Deadline), status.Dispatched, status.Parked, approvals(status.Approvals),
		tokenCount(status.Tokens.Input), tokenCount(status.Tokens.Output), int64(expectedHead),
		seqs, records, int64(epoch)}
	states := len(sa.key) > 0
	if states {
		args = append(args, nonNil(sa.flight), sa.key, sa.seq, sa.gen, sa.lo, sa.hi, sa.reuse,
			sa.bound, sa.ref, sa.latestAt, sa.latestGen, sa.diverg)
	}
	sql := s.fastSQL(leased, states, s.notifies(events))
	s.fast.tried.Add(1)
	var n int64
	if unsynced {
		b := &pgx.Batch{}
		b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
		b.Queue(sql, args...).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
		err := s.pool.SendBatch(ctx, b).Close()
		if err != nil {
			return nil, false, err
		}
	} else {
		m := &groupMember{ctx: ctx, id: id[:], sql: sql, args: args}
		s.commitGrouped(m)
		if m.err != nil {
			return nil, false, m.err
		}
		n = m.n
	}
	if n == 0 {
		return nil, false, nil
	}
	s.fast.wrote.Add(1)
	return &cachedIndex{head: status.Head, state: index, status: normalStatus(status)}, true, nil
}

// tokenCount is a token sum as a bigint column's value; a sum past
// math.MaxInt64, which no real usage reaches, is stored as math.MaxInt64.
func tokenCount(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// nonNil is a, never nil, for a NOT NULL array parameter.
func nonNil[T any](a []T) []T {
	if a == nil {
		return []T{}
	}
	return a
}

// normalStatus is st as readRow would read it back from the row: times in
// UTC to the nanosecond, no monotonic clock reading.
func normalStatus(st eventlog.StatusState) eventlog.StatusState {
	st.Updated, st.WakeAt, st.Deadline = normalTime(st.Updated), normalTime(st.WakeAt), normalTime(st.Deadline)
	if len(st.Approvals) == 0 {
		st.Approvals = nil
	}
	return st
}

func normalTime(t time.Time) time.Time { return fromNanos(nanos(t)) }

// cached returns the fold this store cached for id at head.
func (s *Store) cached(id eventlog.ID, head uint64) (*cachedIndex, bool) {
	s.index.Lock()
	c, ok := s.index.m[id]
	s.index.Unlock()
	if !ok || c.head != head {
		return nil, false
	}
	return c, true
}

// remember caches c as id's fold.
func (s *Store) remember(id eventlog.ID, c *cachedIndex) {
	s.index.Lock()
	defer s.index.Unlock()
	if len(s.index.m) >= 4096 {
		clear(s.index.m)
	}
	s.index.m[id] = c
}
