package pebblestore

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

var (
	_ eventlog.Leaser         = (*Store)(nil)
	_ eventlog.VersionClaimer = (*Store)(nil)
)

// Leases. Pebble admits one process to a store, so a lease is held by a
// kernel of this process: the lease table lives in memory, beside each
// execution's head, under the execution's lock — the same lock every append
// takes, so a claim never interleaves with an admitted append. A process
// that opens the store after a crash finds every execution ownerless, which
// is what DESIGN §9's recovery relies on.
//
// Epochs, though, are kept (DESIGN §15½.5): a claim writes its epoch into
// the execution's state record before it returns (durable with the next
// synced write, see writeEpochLocked), and every append rewrites the
// record with it, so that the epochs of one execution
// rise across releases, expiries and reopens of the folder.

// Claim implements eventlog.Leaser.
func (s *Store) Claim(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration) (eventlog.Lease, error) {
	return s.claim(ctx, id, owner, ttl, nil)
}

// ClaimVersion implements eventlog.VersionClaimer: the execution's
// version, in its header, is checked under the execution's lock, the one
// every claim and append takes.
func (s *Store) ClaimVersion(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	return s.claim(ctx, id, owner, ttl, &worker)
}

// claim is Claim, and with a worker version ClaimVersion.
func (s *Store) claim(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker *string) (eventlog.Lease, error) {
	if err := eventlog.CheckClaim(owner, ttl); err != nil {
		return eventlog.Lease{}, err
	}
	var l eventlog.Lease
	err := s.withExecution(ctx, id, func(e *execution) (err error) {
		if err := s.loadLocked(e); err != nil {
			return err
		}
		if worker != nil && !eventlog.RunsOn(e.hdr.Version, *worker) {
			return &eventlog.VersionError{ID: id, Version: e.hdr.Version, Worker: *worker}
		}
		before := e.mu.lease
		if l, err = e.mu.lease.Claim(id, owner, ttl, time.Now()); err != nil {
			return err
		}
		if err := s.writeEpochLocked(e); err != nil {
			e.mu.lease = before
			return err
		}
		e.syncSlotLocked()
		if e.mu.retry.owner == owner {
			e.mu.retry = retryNote{} // it was left to this owner, which has it now
		}
		return nil
	})
	return l, err
}

// writeEpochLocked rewrites e's state record with its lease's epoch. The
// write is not synced, so a claim costs no fsync: Pebble's log is written
// in order, so the epoch is durable no later than the first synced write
// after it — the dispatch.started every dispatch appends (synced) before
// anything else it does under the epoch. A crash that loses the record
// lost every write under that epoch too, so giving the epoch again after
// the reopen fences nothing that reached the disk. A read-only store
// writes nothing: nobody appends through it, and the next writable open
// starts from the epochs on disk. e.mu is held and loaded.
func (s *Store) writeEpochLocked(e *execution) error {
	if s.readOnly {
		return nil
	}
	sv, err := encodeStateValue(e.mu.status, e.mu.inbox.last, e.mu.lease.Epoch)
	if err != nil {
		return fmt.Errorf("pebblestore: execution %s: encode state: %w", e.id, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(stateKey(e.id), sv, nil)
	if err := s.commit(b, pebble.NoSync); err != nil {
		e.mu.loaded = false // whether it landed is unknown: read the record again
		return fmt.Errorf("pebblestore: execution %s: claim: %w", e.id, err)
	}
	return nil
}

// Renew implements eventlog.Leaser.
func (s *Store) Renew(ctx context.Context, l eventlog.Lease, ttl time.Duration) (eventlog.Lease, error) {
	var out eventlog.Lease
	err := s.withLease(ctx, l.ID, func(st *eventlog.LeaseState) (err error) {
		out, err = st.Renew(l, ttl, time.Now())
		return err
	})
	return out, err
}

// Release implements eventlog.Leaser.
func (s *Store) Release(ctx context.Context, l eventlog.Lease) error {
	return s.withLease(ctx, l.ID, func(st *eventlog.LeaseState) error { return st.Release(l) })
}

// Holder implements eventlog.Leaser.
func (s *Store) Holder(ctx context.Context, id eventlog.ID) (eventlog.Lease, bool, error) {
	var (
		l  eventlog.Lease
		ok bool
	)
	err := s.withLease(ctx, id, func(st *eventlog.LeaseState) error {
		l, ok = st.Holder(id, time.Now())
		return nil
	})
	return l, ok, err
}

// withLease runs f on id's lease state under the execution's lock.
func (s *Store) withLease(ctx context.Context, id eventlog.ID, f func(*eventlog.LeaseState) error) error {
	return s.withExecution(ctx, id, func(e *execution) error {
		defer e.syncSlotLocked()
		return f(&e.mu.lease)
	})
}

// withExecution runs f on id's execution under its lock.
func (s *Store) withExecution(ctx context.Context, id eventlog.ID, f func(*execution) error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	e, err := s.execution(id)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted.Load() {
		return errDeleted(id)
	}
	return f(e)
}
