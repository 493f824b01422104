package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

var (
	_ eventlog.Deleter       = (*Store)(nil)
	_ eventlog.UsageReporter = (*Store)(nil)
)

// Delete implements eventlog.Deleter in one transaction: it locks the
// execution's row, refuses a running or leased one, reads its forks, and
// keeps its events and index rows only up to the furthest seq a surviving
// fork reads (eventlog.KeptPrefix); its requests go, its idempotency key
// is freed, and its row stays as a tombstone (deleted_kept), since its
// forks' lineages are built from it. Deleted ancestors whose forks now
// read less shrink in the same transaction.
func (s *Store) Delete(ctx context.Context, id eventlog.ID) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, now, err := s.readRow(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if r.status.Status == eventlog.StatusRunning {
			return fmt.Errorf("%w: %s is running: cancel it, or let it end, before deleting it", eventlog.ErrRunning, id)
		}
		if l, held := r.lease.Holder(id, now); held {
			return fmt.Errorf("%w: %s is owned by %s (epoch %d)", eventlog.ErrRunning, id, l.Owner, l.Epoch)
		}
		kept, err := s.keptPrefix(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := s.dropOwn(ctx, tx, id, r.hdr.At, kept); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.q.requests+` WHERE execution = $1`, id[:]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.q.messageIDs+` WHERE execution = $1`, id[:]); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.q.executions+` SET deleted_kept = $2, idem_key = NULL WHERE id = $1`, id[:], int64(kept)); err != nil {
			return err
		}
		// The deleted ancestors may now keep less.
		for p := r.hdr.Parent; !p.IsZero(); {
			var (
				parent  []byte
				forkSeq int64
				old     *int64
			)
			err := tx.QueryRow(ctx, `SELECT parent, fork_seq, deleted_kept FROM `+s.q.executions+` WHERE id = $1 FOR UPDATE`, p[:]).
				Scan(&parent, &forkSeq, &old)
			if err != nil {
				return err
			}
			if old == nil {
				break
			}
			pk, err := s.keptPrefix(ctx, tx, p)
			if err != nil {
				return err
			}
			if pk >= uint64(*old) {
				break
			}
			if err := s.dropOwn(ctx, tx, p, uint64(forkSeq), pk); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE `+s.q.executions+` SET deleted_kept = $2 WHERE id = $1`, p[:], int64(pk)); err != nil {
				return err
			}
			p = eventlog.ID{}
			if parent != nil {
				p = eventlog.ID(parent)
			}
		}
		return nil
	})
	if err != nil {
		return s.wrap(err, "delete %s", id)
	}
	s.index.Lock()
	delete(s.index.m, id)
	s.index.Unlock()
	return nil
}

// keptPrefix reads id's forks and returns how far id must keep its own
// events for them.
func (s *Store) keptPrefix(ctx context.Context, tx pgx.Tx, id eventlog.ID) (uint64, error) {
	rows, err := tx.Query(ctx, `SELECT fork_seq, deleted_kept FROM `+s.q.executions+` WHERE parent = $1`, id[:])
	if err != nil {
		return 0, err
	}
	forks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventlog.KeptFork, error) {
		var (
			at   int64
			kept *int64
		)
		if err := r.Scan(&at, &kept); err != nil {
			return eventlog.KeptFork{}, err
		}
		f := eventlog.KeptFork{ForkSeq: uint64(at), Deleted: kept != nil}
		if kept != nil {
			f.Kept = uint64(*kept)
		}
		return f, nil
	})
	if err != nil {
		return 0, err
	}
	return eventlog.KeptPrefix(forks), nil
}

// dropOwn deletes id's own events and index rows past kept (and past its
// fork point forkSeq, below which it has none).
func (s *Store) dropOwn(ctx context.Context, tx pgx.Tx, id eventlog.ID, forkSeq, kept uint64) error {
	from := int64(max(kept, forkSeq))
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.q.events+` WHERE execution = $1 AND seq > $2`, id[:], from); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM `+s.q.states+` WHERE execution = $1 AND seq > $2`, id[:], int64(kept))
	return err
}

// Usage implements eventlog.UsageReporter with pg_column_size (a
// Postgres-only function) over each execution's own event and index rows:
// the bytes their values take in their tables, before TOAST compression.
func (s *Store) Usage(ctx context.Context) iter.Seq2[eventlog.Usage, error] {
	return func(yield func(eventlog.Usage, error) bool) {
		if err := s.enter(ctx); err != nil {
			yield(eventlog.Usage{}, err)
			return
		}
		defer s.leave()
		rows, err := s.pool.Query(ctx, `SELECT e.id, e.deleted_kept IS NOT NULL,
				(SELECT count(*) FROM `+s.q.events+` v WHERE v.execution = e.id),
				(SELECT coalesce(sum(pg_column_size(v.*)), 0) FROM `+s.q.events+` v WHERE v.execution = e.id)
				+ (SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM `+s.q.states+` r WHERE r.execution = e.id)
			FROM `+s.q.executions+` e ORDER BY e.id`)
		if err != nil {
			yield(eventlog.Usage{}, s.wrap(err, "usage"))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var (
				b       []byte
				u       eventlog.Usage
				n, size int64
			)
			if err := rows.Scan(&b, &u.Deleted, &n, &size); err != nil {
				yield(eventlog.Usage{}, s.wrap(err, "usage"))
				return
			}
			if len(b) != len(u.ID) {
				yield(eventlog.Usage{}, &eventlog.CorruptionError{What: "execution id", Err: errors.New("not 16 bytes")})
				return
			}
			u.ID, u.Events, u.Bytes = eventlog.ID(b), uint64(n), size
			if !yield(u, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(eventlog.Usage{}, s.wrap(err, "usage"))
		}
	}
}
