package pebblestore

import (
	"context"
	"time"

	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.RetryKeeper = (*Store)(nil)

// retryNote is the backoff a Serve loop noted for an execution
// (eventlog.RetryKeeper). Like leases it lives in memory, under the
// execution's lock: Pebble admits one process to a store, so the note's
// only writers and readers are that process's kernels, and a process that
// opens the store anew runs every execution again at once.
type retryNote struct {
	lastError string
	at        time.Time
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
