package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

var (
	_ eventlog.AwaitKeeper = (*Store)(nil)
	_ eventlog.Quarantiner = (*Store)(nil)
)

// SetRetry implements eventlog.RetryKeeper: one UPDATE of the execution's
// row (schema version 4), which ClaimRunnable reads.
func (s *Store) SetRetry(ctx context.Context, id eventlog.ID, lastError string, retryAt time.Time) error {
	return s.setRetry(ctx, id, "", lastError, retryAt)
}

// SetAwaiting implements eventlog.AwaitKeeper: SetRetry that also keeps
// the awaited owner (schema version 5), whom ClaimRunnable lets claim the
// execution before retryAt.
func (s *Store) SetAwaiting(ctx context.Context, id eventlog.ID, owner, lastError string, retryAt time.Time) error {
	if err := eventlog.CheckAwaiting(owner, lastError); err != nil {
		return err
	}
	return s.setRetry(ctx, id, owner, lastError, retryAt)
}

// setRetry writes the note of SetRetry and SetAwaiting.
func (s *Store) setRetry(ctx context.Context, id eventlog.ID, owner, lastError string, retryAt time.Time) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	if lastError == "" {
		retryAt, owner = time.Time{}, ""
	}
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.q.executions+` SET last_error = $2, retry_ns = $3, await_owner = $4
		WHERE id = $1 AND deleted_kept IS NULL`, id[:], lastError, nanos(retryAt), owner)
	if err != nil {
		return s.wrap(err, "execution %s: note its retry", id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, id)
	}
	return nil
}

// Quarantine implements eventlog.Quarantiner: the row's quarantine column
// (schema version 5), which ClaimRunnable reads. The row is locked while
// it is read and written, so of two kernels quarantining one execution
// one alone is told newly.
func (s *Store) Quarantine(ctx context.Context, id eventlog.ID, why string) (bool, error) {
	if why == "" {
		return false, fmt.Errorf("%w: quarantine of %s without an error", eventlog.ErrInvalid, id)
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.leave()
	newly := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var old string
		err := tx.QueryRow(ctx, `SELECT quarantine FROM `+s.q.executions+` WHERE id = $1 AND deleted_kept IS NULL FOR UPDATE`, id[:]).Scan(&old)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, id)
		}
		if err != nil || old != "" {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.q.executions+` SET quarantine = $2 WHERE id = $1`, id[:], why); err != nil {
			return err
		}
		newly = true
		return nil
	})
	if err != nil {
		return false, s.wrap(err, "execution %s: quarantine", id)
	}
	return newly, nil
}

// Unquarantine implements eventlog.Quarantiner.
func (s *Store) Unquarantine(ctx context.Context, id eventlog.ID) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.leave()
	var was bool
	err := s.pool.QueryRow(ctx, `UPDATE `+s.q.executions+` e SET quarantine = ''
		FROM (SELECT id, quarantine FROM `+s.q.executions+` WHERE id = $1 AND deleted_kept IS NULL FOR UPDATE) o
		WHERE e.id = o.id RETURNING o.quarantine <> ''`, id[:]).Scan(&was)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, id)
	}
	if err != nil {
		return false, s.wrap(err, "execution %s: lift its quarantine", id)
	}
	return was, nil
}
