package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.AwaitKeeper = (*Store)(nil)

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
