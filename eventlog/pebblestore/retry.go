package pebblestore

import (
	"context"
	"time"

	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.AwaitKeeper = (*Store)(nil)

// retryNote is the backoff a Serve loop noted for an execution
// (eventlog.RetryKeeper). Like leases it lives in memory, under the
// execution's lock: Pebble admits one process to a store, so the note's
// only writers and readers are that process's kernels, and a process that
// opens the store anew runs every execution again at once.
type retryNote struct {
	lastError string
	at        time.Time
	owner     string // the owner it is left to (SetAwaiting); "" for none
}

// SetRetry implements eventlog.RetryKeeper.
func (s *Store) SetRetry(ctx context.Context, id eventlog.ID, lastError string, retryAt time.Time) error {
	return s.withExecution(ctx, id, func(e *execution) error {
		if lastError == "" {
			e.mu.retry = retryNote{}
		} else {
			e.mu.retry = retryNote{lastError: lastError, at: retryAt.UTC()}
		}
		return nil
	})
}

// SetAwaiting implements eventlog.AwaitKeeper.
func (s *Store) SetAwaiting(ctx context.Context, id eventlog.ID, owner, lastError string, retryAt time.Time) error {
	if err := eventlog.CheckAwaiting(owner, lastError); err != nil {
		return err
	}
	return s.withExecution(ctx, id, func(e *execution) error {
		e.mu.retry = retryNote{lastError: lastError, at: retryAt.UTC(), owner: owner}
		return nil
	})
}
