package pebblestore

import (
	"context"
	"time"

	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.Leaser = (*Store)(nil)

// Leases. Pebble admits one process to a store, so a lease is held by a
// kernel of this process: the lease table lives in memory, beside each
// execution's head, under the execution's lock — the same lock every append
// takes, so a claim never interleaves with an admitted append. A process
// that opens the store after a crash finds every execution ownerless, which
// is what DESIGN §9's recovery relies on.

// Claim implements eventlog.Leaser.
func (s *Store) Claim(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration) (eventlog.Lease, error) {
	if err := eventlog.CheckClaim(owner, ttl); err != nil {
		return eventlog.Lease{}, err
	}
	var l eventlog.Lease
	err := s.withLease(ctx, id, func(st *eventlog.LeaseState) (err error) {
		l, err = st.Claim(id, owner, ttl, time.Now())
		return err
	})
	return l, err
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
	return s.withExecution(ctx, id, func(e *execution) error { return f(&e.mu.lease) })
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
