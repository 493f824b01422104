package pebblestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.Queuer = (*Store)(nil)

// Queues. One process owns a Pebble store, so every kernel that claims
// from it claims through this process: ClaimToRun runs under the store's
// queue lock (s.queues), which orders every claim to run of a queued
// execution, and counts the slots held from the executions it claimed
// before (s.queues.held), each of which says in its slot field until when
// its lease holds one. Leases live in memory, so only claims of this
// process can hold a slot.

// queueVersion is the first byte of a queue record; its JSON
// (queueRecord) follows.
const queueVersion = 1

// queueRecord is a queue record's value: the queue without its name,
// which is the key's.
type queueRecord struct {
	Concurrency int   `json:"concurrency"`
	Rate        int   `json:"rate"`
	Per         int64 `json:"per_ns"`
	Priority    bool  `json:"priority"`
}

// queueKey is the key of the queue record name.
func queueKey(name string) []byte {
	k := make([]byte, 0, 1+len(name))
	k = append(k, tagQueue)
	return append(k, name...)
}

// syncSlotLocked sets e.slot from e's lease and status
// (eventlog.SlotHeld): the lease's expiry while it is not released and
// the execution has not ended, else 0. e.mu is held.
func (e *execution) syncSlotLocked() {
	l := e.mu.lease
	if e.hdr.Queue == "" || l.Epoch == 0 || l.Released || (e.mu.loaded && e.mu.status.Status.Terminal()) {
		e.slot.Store(0)
		return
	}
	e.slot.Store(l.Expires.UnixNano())
}

// PutQueue implements eventlog.Queuer. The record is committed as an
// append is: synced, unless the store was opened WithoutSync, before it
// returns.
func (s *Store) PutQueue(ctx context.Context, q eventlog.Queue) error {
	if err := eventlog.CheckQueue(q); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	v, err := json.Marshal(queueRecord{Concurrency: q.Concurrency, Rate: q.Rate, Per: int64(q.Per), Priority: q.Priority})
	if err != nil {
		return fmt.Errorf("pebblestore: queue %q: encode: %w", q.Name, err)
	}
	s.queues.Lock()
	defer s.queues.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(queueKey(q.Name), append([]byte{queueVersion}, v...), nil)
	if err := s.commit(b, s.write); err != nil {
		delete(s.queues.recs, q.Name) // whether it landed is unknown: read it again
		return fmt.Errorf("pebblestore: put queue %q: %w", q.Name, err)
	}
	if s.queues.recs != nil {
		s.queues.recs[q.Name] = &q
	}
	return nil
}

// decodeQueue decodes the record of queue name.
func decodeQueue(name string, v []byte) (eventlog.Queue, error) {
	bad := func(err error) (eventlog.Queue, error) {
		return eventlog.Queue{}, &eventlog.CorruptionError{What: "queue record " + strconv.Quote(name), Err: err}
	}
	if len(v) == 0 || v[0] != queueVersion {
		return bad(errors.New("unknown record version"))
	}
	var r queueRecord
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return bad(err)
	}
	q := eventlog.Queue{Name: name, Concurrency: r.Concurrency, Rate: r.Rate, Per: time.Duration(r.Per), Priority: r.Priority}
	if err := eventlog.CheckQueue(q); err != nil {
		return bad(err)
	}
	return q, nil
}

// cachedQueueLocked returns the record of queue name, read once and then
// kept (one process owns the store, and PutQueue keeps the cache).
// s.queues is held.
func (s *Store) cachedQueueLocked(name string) (eventlog.Queue, bool, error) {
	if q, ok := s.queues.recs[name]; ok {
		if q == nil {
			return eventlog.Queue{}, false, nil
		}
		return *q, true, nil
	}
	q, found, err := s.readQueue(name)
	if err != nil {
		return q, false, err
	}
	if s.queues.recs == nil {
		s.queues.recs = map[string]*eventlog.Queue{}
	}
	s.queues.recs[name] = nil
	if found {
		s.queues.recs[name] = &q
	}
	return q, found, nil
}

// readQueue reads the record of queue name.
func (s *Store) readQueue(name string) (eventlog.Queue, bool, error) {
	v, closer, err := s.db.Get(queueKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return eventlog.Queue{}, false, nil
	}
	if err != nil {
		return eventlog.Queue{}, false, s.readErr(eventlog.ID{}, "queue record "+strconv.Quote(name), err)
	}
	defer closer.Close()
	q, err := decodeQueue(name, v)
	return q, err == nil, err
}

// Queues implements eventlog.Queuer.
func (s *Store) Queues(ctx context.Context) ([]eventlog.Queue, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagQueue}, UpperBound: []byte{tagQueue + 1}})
	if err != nil {
		return nil, s.readErr(eventlog.ID{}, "queues", err)
	}
	defer it.Close()
	var out []eventlog.Queue
	for ok := it.First(); ok; ok = it.Next() {
		q, err := decodeQueue(string(it.Key()[1:]), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	if err := it.Error(); err != nil {
		return nil, s.readErr(eventlog.ID{}, "queues", err)
	}
	return out, nil
}

// QueueCounts implements eventlog.Queuer from the executions not yet
// ended, by the process's clock.
func (s *Store) QueueCounts(ctx context.Context) (map[string]eventlog.QueueCount, error) {
	out := map[string]eventlog.QueueCount{}
	for info, err := range s.List(ctx, eventlog.Filter{Status: []eventlog.Status{eventlog.StatusPending, eventlog.StatusRunning, eventlog.StatusWaiting}}) {
		if err != nil {
			return nil, err
		}
		if info.Queue == "" {
			continue
		}
		e, err := s.execution(info.ID)
		if errors.Is(err, eventlog.ErrNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, err
		}
		c := out[info.Queue]
		if e.slot.Load() > time.Now().UnixNano() {
			c.Running++
		} else {
			c.Waiting++
		}
		out[info.Queue] = c
	}
	return out, nil
}

// runningLocked counts the slots of queue held now, forgetting the
// executions that hold none and can hold none again without a
// ClaimToRun (released, or ended). s.queues is held.
func (s *Store) runningLocked(queue string, now time.Time) int {
	n := 0
	for e := range s.queues.held[queue] {
		switch until := e.slot.Load(); {
		case until == 0:
			delete(s.queues.held[queue], e)
		case until > now.UnixNano():
			n++
		}
	}
	return n
}

// ClaimToRun implements eventlog.Queuer: ClaimVersion, and for an
// execution in a limited queue, under the store's queue lock, the
// queue's slots counted and its rate taken before the claim.
func (s *Store) ClaimToRun(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	if err := eventlog.CheckClaim(owner, ttl); err != nil {
		return eventlog.Lease{}, err
	}
	s.queues.Lock()
	defer s.queues.Unlock()
	var l eventlog.Lease
	err := s.withExecution(ctx, id, func(e *execution) (err error) {
		if err := s.loadLocked(e); err != nil {
			return err
		}
		if !eventlog.RunsOn(e.hdr.Version, worker) {
			return &eventlog.VersionError{ID: id, Version: e.hdr.Version, Worker: worker}
		}
		now := time.Now()
		if h, live := e.mu.lease.Holder(id, now); live {
			return &eventlog.HeldError{Lease: h} // before a start of the rate is taken
		}
		var q eventlog.Queue
		if e.hdr.Queue != "" {
			var found bool
			if q, found, err = s.cachedQueueLocked(e.hdr.Queue); err != nil {
				return err
			}
			if found {
				if err := s.admitLocked(q, id, e.mu.status.Status, now); err != nil {
					return err
				}
			}
		}
		before := e.mu.lease
		if l, err = e.mu.lease.Claim(id, owner, ttl, now); err != nil {
			return err
		}
		if err := s.writeEpochLocked(e); err != nil {
			e.mu.lease = before
			return err
		}
		if e.mu.retry.owner == owner {
			e.mu.retry = retryNote{}
		}
		e.syncSlotLocked()
		if e.hdr.Queue != "" {
			if s.queues.held == nil {
				s.queues.held = map[string]map[*execution]struct{}{}
			}
			if s.queues.held[e.hdr.Queue] == nil {
				s.queues.held[e.hdr.Queue] = map[*execution]struct{}{}
			}
			s.queues.held[e.hdr.Queue][e] = struct{}{}
		}
		return nil
	})
	return l, err
}

// admitLocked decides whether one more execution of q, in status st, may
// be claimed to run at now: a free slot, and for a pending one a start of
// the queue's rate, which it takes. s.queues is held.
func (s *Store) admitLocked(q eventlog.Queue, id eventlog.ID, st eventlog.Status, now time.Time) error {
	if q.Concurrency > 0 {
		if n := s.runningLocked(q.Name, now); n >= q.Concurrency {
			return &eventlog.QueueFullError{ID: id, Queue: q.Name, Running: n, Concurrency: q.Concurrency}
		}
	}
	if q.Rate > 0 && st == eventlog.StatusPending {
		if err := s.writable(); err != nil {
			return err
		}
		ok, retryAt, err := s.takeLimit(eventlog.RateKey(q.Name), q.Rate, q.Per)
		if err != nil {
			return err
		}
		if !ok {
			return &eventlog.QueueFullError{ID: id, Queue: q.Name, RetryAt: retryAt}
		}
	}
	return nil
}
