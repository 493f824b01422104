package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

// Leases live in the execution's row, beside its head, and follow
// eventlog.LeaseState's rules. Every claim, renewal and release locks the
// row (SELECT … FOR UPDATE), as every append does, so a claim never
// interleaves with an admitted append. Expiry is judged by the database's
// clock (clock_timestamp()), never a host's: hosts whose clocks disagree
// still agree on who owns what.

// Claim implements eventlog.Leaser.
func (s *Store) Claim(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration) (eventlog.Lease, error) {
	if err := eventlog.CheckClaim(owner, ttl); err != nil {
		return eventlog.Lease{}, err
	}
	var l eventlog.Lease
	err := s.withLease(ctx, id, true, func(st *eventlog.LeaseState, now time.Time) (err error) {
		l, err = st.Claim(id, owner, ttl, now)
		return err
	})
	return l, err
}

// ClaimVersion implements eventlog.VersionClaimer: the row's version is
// read under the row's lock, the one every claim and append takes.
func (s *Store) ClaimVersion(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	if err := eventlog.CheckClaim(owner, ttl); err != nil {
		return eventlog.Lease{}, err
	}
	var l eventlog.Lease
	err := s.withRow(ctx, id, true, func(r *row, now time.Time) (err error) {
		if !eventlog.RunsOn(r.hdr.Version, worker) {
			return &eventlog.VersionError{ID: id, Version: r.hdr.Version, Worker: worker}
		}
		l, err = r.lease.Claim(id, owner, ttl, now)
		return err
	})
	return l, err
}

// Renew implements eventlog.Leaser.
func (s *Store) Renew(ctx context.Context, l eventlog.Lease, ttl time.Duration) (eventlog.Lease, error) {
	var out eventlog.Lease
	err := s.withLease(ctx, l.ID, true, func(st *eventlog.LeaseState, now time.Time) (err error) {
		out, err = st.Renew(l, ttl, now)
		return err
	})
	return out, err
}

// Release implements eventlog.Leaser.
func (s *Store) Release(ctx context.Context, l eventlog.Lease) error {
	return s.withLease(ctx, l.ID, true, func(st *eventlog.LeaseState, _ time.Time) error { return st.Release(l) })
}

// Holder implements eventlog.Leaser.
func (s *Store) Holder(ctx context.Context, id eventlog.ID) (eventlog.Lease, bool, error) {
	var (
		l  eventlog.Lease
		ok bool
	)
	err := s.withLease(ctx, id, false, func(st *eventlog.LeaseState, now time.Time) error {
		l, ok = st.Holder(id, now)
		return nil
	})
	return l, ok, err
}

// withLease runs f on id's lease state and the database's clock; with
// write, under the row's lock, and the state f leaves is written back.
func (s *Store) withLease(ctx context.Context, id eventlog.ID, write bool, f func(*eventlog.LeaseState, time.Time) error) error {
	return s.withRow(ctx, id, write, func(r *row, now time.Time) error { return f(&r.lease, now) })
}

// withRow is withLease with the whole row given to f; only the lease f
// leaves is written back.
func (s *Store) withRow(ctx context.Context, id eventlog.ID, write bool, f func(*row, time.Time) error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	if !write {
		r, now, err := s.readRow(ctx, s.pool, id, false)
		if err != nil {
			return err
		}
		return f(&r, now)
	}
	return s.lockedRowTx(ctx, id, func(_ pgx.Tx, r *row, now time.Time) error { return f(r, now) })
}

// withRowTx is withRow for a write whose f also uses the transaction.
func (s *Store) withRowTx(ctx context.Context, id eventlog.ID, f func(pgx.Tx, *row, time.Time) error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	return s.lockedRowTx(ctx, id, f)
}

// lockedRowTx runs f on id's row, locked, in a transaction, and writes
// back the lease f leaves. The store was entered.
func (s *Store) lockedRowTx(ctx context.Context, id eventlog.ID, f func(pgx.Tx, *row, time.Time) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, now, err := s.readRow(ctx, tx, id, true)
		if err != nil {
			return err
		}
		before := r.lease
		if err := f(tx, &r, now); err != nil {
			return err
		}
		if r.lease == before {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE `+s.q.executions+` SET lease_epoch = $2, lease_owner = $3, lease_expires_ns = $4, lease_released = $5,
			`+clearAwaiting("$3")+` WHERE id = $1`, id[:], int64(r.lease.Epoch), r.lease.Owner, nanos(r.lease.Expires), r.lease.Released)
		if err != nil || !r.lease.Released || before.Released {
			return err
		}
		// Released: another process's Serve may claim it now, and one
		// that was told of the owner's last append found it leased.
		_, err = tx.Exec(ctx, s.notifySQL(), id[:])
		return err
	})
	if err != nil {
		return s.wrap(err, "execution %s: lease", id)
	}
	return nil
}

// clearAwaiting is the SET clause of a lease write by owner (the
// parameter named): when the execution's backoff note says it is left to
// that owner (eventlog.AwaitKeeper), the owner has it now, and the note
// is cleared.
func clearAwaiting(owner string) string {
	is := `await_owner <> '' AND await_owner = ` + owner
	return `last_error = CASE WHEN ` + is + ` THEN '' ELSE last_error END,
		retry_ns = CASE WHEN ` + is + ` THEN 0 ELSE retry_ns END,
		await_owner = CASE WHEN ` + is + ` THEN '' ELSE await_owner END`
}

// ClaimRunnable implements eventlog.Claimer: in one short transaction it
// selects up to n runnable executions of agents with FOR UPDATE SKIP
// LOCKED — rows another worker is claiming or appending to are skipped,
// not waited for — and claims each for owner. An execution is runnable
// when it has no live lease and is pending, running (interrupted), or
// waiting and due for the reason it waits (DESIGN §15½.6): a wake time at
// or before now, a pending request other than child.ended (an approval
// decision, a cancel), or — with no wake time and no approval awaited,
// so parked for a child — a pending child.ended request, which a child's
// end wrote (the children's rows are not read) — and Serve does not back it off
// (SetRetry) until after now; an execution backed off because it is left
// to owner (SetAwaiting) is runnable for owner at once; a quarantined execution (Quarantine) never is. Expiry is judged by the database's clock;
// wake times by now, the caller's.
func (s *Store) ClaimRunnable(ctx context.Context, owner string, ttl time.Duration, agents []string, n int, now time.Time) ([]eventlog.Lease, error) {
	return s.claimRunnable(ctx, owner, ttl, agents, nil, n, now)
}

// ClaimRunnableVersion implements eventlog.VersionedClaimer: it is
// ClaimRunnable whose query also requires the row's version to be ” or
// worker, so a row of another version is neither locked nor claimed.
func (s *Store) ClaimRunnableVersion(ctx context.Context, owner string, ttl time.Duration, agents []string, worker string, n int, now time.Time) ([]eventlog.Lease, error) {
	return s.claimRunnable(ctx, owner, ttl, agents, &worker, n, now)
}

// claimRunnable is ClaimRunnable; a worker version other than nil limits
// it as ClaimRunnableVersion.
func (s *Store) claimRunnable(ctx context.Context, owner string, ttl time.Duration, agents []string, worker *string, n int, now time.Time) ([]eventlog.Lease, error) {
	if err := eventlog.CheckClaim(owner, ttl); err != nil {
		return nil, err
	}
	if n <= 0 || len(agents) == 0 {
		return nil, nil
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	var out []eventlog.Lease
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		dbnow, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		// Queues that look full, by a count that takes no lock, are left
		// out of the selection, so that their executions do not take the
		// places of others; the count that decides comes below, under
		// the queues' locks.
		full, err := s.fullQueues(ctx, tx, dbnow)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT e.id, e.queue, e.status FROM `+s.q.executions+` e
			WHERE e.agent = ANY($1) AND e.status IN ($2, $3, $4) AND e.deleted_kept IS NULL
			AND NOT (e.lease_epoch > 0 AND NOT e.lease_released AND e.lease_expires_ns > $5)
			AND (e.retry_ns <= $6 OR e.await_owner = $9) AND e.quarantine = ''
			AND ($10::text IS NULL OR e.version = '' OR e.version = $10)
			AND NOT (e.queue = ANY($11))
			AND (e.status <> $4
				OR (e.wake_ns <> 0 AND e.wake_ns <= $6)
				OR EXISTS (SELECT 1 FROM `+s.q.requests+` r WHERE r.execution = e.id AND r.kind <> $7)
				OR (e.wake_ns = 0 AND cardinality(e.approvals) = 0
					AND EXISTS (SELECT 1 FROM `+s.q.requests+` r WHERE r.execution = e.id AND r.kind = $7)))
			ORDER BY e.priority, e.created_ns, e.id LIMIT $8
			FOR UPDATE OF e SKIP LOCKED`,
			agents, int16(eventlog.StatusPending), int16(eventlog.StatusRunning), int16(eventlog.StatusWaiting),
			nanos(dbnow), nanos(now), int16(eventlog.KindChildEnded), n, owner, worker, full)
		if err != nil {
			return err
		}
		type candidate struct {
			id     []byte
			queue  string
			status int16
		}
		cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
			var c candidate
			err := r.Scan(&c.id, &c.queue, &c.status)
			return c, err
		})
		if err != nil {
			return err
		}
		// The rows of the candidates' limited queues are locked, in name
		// order, and their slots counted (queue.go): another claim of one
		// of them waits here until this one commits, so none takes a slot
		// this one counted free. A claim of executions in no queue takes
		// no queue's lock.
		var names []string
		for _, c := range cands {
			if len(c.id) != len(eventlog.ID{}) {
				return &eventlog.CorruptionError{What: "execution row", Err: fmt.Errorf("id of %d bytes", len(c.id))}
			}
			if c.queue != "" && !slices.Contains(names, c.queue) {
				names = append(names, c.queue)
			}
		}
		var queues map[string]*queueState
		if len(names) > 0 {
			if queues, err = s.lockQueues(ctx, tx, names, dbnow); err != nil {
				return err
			}
		}
		// In the order selected (priority, then creation), each queued
		// candidate takes a slot of its queue and, if pending, a start of
		// its rate; those its queue refuses stay unclaimed (their row
		// locks end with the transaction).
		ids := make([][]byte, 0, len(cands))
		for _, c := range cands {
			if q := queues[c.queue]; c.queue != "" && q != nil {
				err := s.admit(ctx, tx, q, eventlog.ID(c.id), eventlog.Status(c.status))
				if errors.Is(err, eventlog.ErrQueueFull) {
					continue
				}
				if err != nil {
					return err
				}
			}
			ids = append(ids, c.id)
		}
		if len(ids) == 0 {
			return nil
		}
		expires := dbnow.Add(ttl)
		rows, err = tx.Query(ctx, `UPDATE `+s.q.executions+` SET lease_epoch = lease_epoch + 1, lease_owner = $2,
			lease_expires_ns = $3, lease_released = false, `+clearAwaiting("$2")+` WHERE id = ANY($1) RETURNING id, lease_epoch`,
			ids, owner, nanos(expires))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				b     []byte
				epoch int64
			)
			if err := rows.Scan(&b, &epoch); err != nil {
				return err
			}
			if len(b) != len(eventlog.ID{}) {
				return &eventlog.CorruptionError{What: "execution row", Err: fmt.Errorf("id of %d bytes", len(b))}
			}
			out = append(out, eventlog.Lease{ID: eventlog.ID(b), Owner: owner, Epoch: uint64(epoch), Expires: expires.UTC()})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.wrap(err, "claim runnable executions")
	}
	slices.SortFunc(out, func(a, b eventlog.Lease) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out, nil
}
