package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

var (
	_ eventlog.AwaitKeeper = (*Store)(nil)
	_ eventlog.Quarantiner = (*Store)(nil)
)

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

// Quarantine implements eventlog.Quarantiner. Unlike the backoff note, a
// quarantine is written (synced unless the store was opened WithoutSync)
// under the execution's quarantine key, so that it survives a restart:
// a person lifts it, not a new process.
func (s *Store) Quarantine(ctx context.Context, id eventlog.ID, why string) (bool, error) {
	if why == "" {
		return false, fmt.Errorf("%w: quarantine of %s without an error", eventlog.ErrInvalid, id)
	}
	if err := s.writable(); err != nil {
		return false, err
	}
	newly := false
	err := s.withExecution(ctx, id, func(e *execution) error {
		// Read from the store, not the cache: a damaged execution may not
		// load (loadLocked), and it is the one to quarantine.
		if cur, err := s.readQuarantine(id); err != nil || cur != "" {
			return err
		}
		if err := s.setQuarantine(id, why); err != nil {
			return err
		}
		e.mu.quarantine, newly = why, true
		return nil
	})
	return newly, err
}

// Unquarantine implements eventlog.Quarantiner.
func (s *Store) Unquarantine(ctx context.Context, id eventlog.ID) (bool, error) {
	if err := s.writable(); err != nil {
		return false, err
	}
	was := false
	err := s.withExecution(ctx, id, func(e *execution) error {
		if cur, err := s.readQuarantine(id); err != nil || cur == "" {
			return err
		}
		if err := s.setQuarantine(id, ""); err != nil {
			return err
		}
		e.mu.quarantine, was = "", true
		return nil
	})
	return was, err
}

// setQuarantine writes id's quarantine key (why), or deletes it ("").
func (s *Store) setQuarantine(id eventlog.ID, why string) error {
	b := s.db.NewBatch()
	defer b.Close()
	if why == "" {
		_ = b.Delete(quarantineKey(id), nil)
	} else {
		_ = b.Set(quarantineKey(id), []byte(why), nil)
	}
	if err := s.commit(b, s.write); err != nil {
		return fmt.Errorf("pebblestore: execution %s: quarantine: %w", id, err)
	}
	return nil
}

// readQuarantine reads id's quarantine key: the error, "" for none.
func (s *Store) readQuarantine(id eventlog.ID) (string, error) {
	v, closer, err := s.db.Get(quarantineKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pebblestore: execution %s: read quarantine: %w", id, err)
	}
	defer closer.Close()
	return string(v), nil
}
