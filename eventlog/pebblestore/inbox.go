package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

// The inbox (DESIGN §8½). Request n of an execution is the key
// 'q' id[16] n[8], whose value is the request's time and payload encoded
// as an inbox record bound to its execution and number
// (eventlog.AppendRequest), so a damaged or moved request fails
// its checksum like a damaged event. Numbers start at 1 and are never
// given twice: the execution's state record keeps the newest number made
// (written by every append, Take included), so removing the newest
// request's key does not free its number.
//
// Every inbox operation runs under the execution's lock, the one appends
// take: a Request waits at most for one append's commit and never makes
// it fail. The numbers of the pending requests are kept in memory once
// read (one key scan per execution per process), so Requests of an
// execution with none pending does no IO: an owner may poll it often.

// inbox is the in-memory inbox state of one execution, under its lock.
type inbox struct {
	loaded  bool     // pending was read from the store
	last    uint64   // the newest request number given (until loaded: the state record's)
	pending []uint64 // numbers not yet taken, ascending; valid when loaded
}

// has reports whether request n is pending.
func (b *inbox) has(n uint64) bool {
	_, found := slices.BinarySearch(b.pending, n)
	return found
}

// remove drops the numbers ns from the pending ones.
func (b *inbox) remove(ns []uint64) {
	if len(ns) == 0 {
		return
	}
	b.pending = slices.DeleteFunc(b.pending, func(n uint64) bool { return slices.Contains(ns, n) })
}

// loadInboxLocked reads the numbers of e's pending requests on first use.
// e.mu is held and loaded.
func (s *Store) loadInboxLocked(e *execution) error {
	if e.mu.inbox.loaded {
		return nil
	}
	prefix := executionPrefix(tagInbox, e.id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("pebblestore: execution %s: %w", e.id, err)
	}
	defer it.Close()
	var pending []uint64
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 25 || eventSeq(k) == 0 {
			return &eventlog.CorruptionError{Execution: e.id, What: "request key", Err: fmt.Errorf("key %x", k)}
		}
		pending = append(pending, eventSeq(k))
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("pebblestore: execution %s: read inbox: %w", e.id, err)
	}
	e.mu.inbox.pending = pending
	if n := len(pending); n > 0 {
		e.mu.inbox.last = max(e.mu.inbox.last, pending[n-1])
	}
	e.mu.inbox.loaded = true
	return nil
}

// withInbox runs f on id's execution under its lock, loaded and with its
// inbox read.
func (s *Store) withInbox(ctx context.Context, id eventlog.ID, f func(*execution) error) error {
	return s.withExecution(ctx, id, func(e *execution) error {
		if err := s.loadLocked(e); err != nil {
			return err
		}
		if err := s.loadInboxLocked(e); err != nil {
			return err
		}
		return f(e)
	})
}

// Request implements eventlog.Inbox. The request is synced (unless the
// store was opened WithoutSync) when it returns. The store takes a
// request for an execution of any status: whether a request still makes
// sense is the requester's question.
func (s *Store) Request(ctx context.Context, id eventlog.ID, p eventlog.Payload, at time.Time) (uint64, error) {
	return s.request(ctx, id, p, at, nil, nil)
}

var _ eventlog.MessageInbox = (*Store)(nil)

// SendMessage implements eventlog.MessageInbox: Request, whose batch also
// writes the key 'n' id[16] MessageID with the message's digest, looked
// up under the execution's lock first; a MessageID recorded already writes
// nothing (0 and nil for the same digest, ErrConflict for another).
func (s *Store) SendMessage(ctx context.Context, id eventlog.ID, m *eventlog.MessageReceived, at time.Time) (uint64, error) {
	if m == nil {
		return 0, fmt.Errorf("%w: message to %s: none", eventlog.ErrInvalid, id)
	}
	return s.request(ctx, id, m, at, nil, m)
}

// sentLocked reports whether e was sent a message of m's MessageID: false
// when not, true when with m's digest, an error wrapping ErrConflict when
// with another. e.mu is held.
func (s *Store) sentLocked(e *execution, m *eventlog.MessageReceived) (bool, error) {
	v, closer, err := s.db.Get(messageKey(e.id, m.MessageID))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pebblestore: execution %s: read message id: %w", e.id, err)
	}
	same := bytes.Equal(v, eventlog.MessageDigest(m))
	closer.Close()
	if !same {
		return false, fmt.Errorf("%w: execution %s: message id %q was sent before with another topic or value", eventlog.ErrConflict, e.id, m.MessageID)
	}
	return true, nil
}

var _ eventlog.Decider = (*Store)(nil)

// Decide implements eventlog.Decider: Request, with the check that p's
// step awaits a decision made under the execution's lock, the lock every
// append, Take and Request of the execution takes, so of two concurrent
// decisions of one step exactly one lands.
func (s *Store) Decide(ctx context.Context, id eventlog.ID, p eventlog.Payload, at time.Time) (uint64, error) {
	if err := eventlog.CheckDecision(id, p); err != nil {
		return 0, err
	}
	stepID := eventlog.DecisionStep(p)
	return s.request(ctx, id, p, at, func(e *execution) error {
		reqs := make([]eventlog.Request, 0, len(e.mu.inbox.pending))
		for _, n := range e.mu.inbox.pending {
			r, err := s.readRequest(id, n)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		return eventlog.Awaits(id, stepID, e.mu.status, reqs)
	}, nil)
}

// request stores p in id's inbox; check, when not nil, runs first under
// the execution's lock and an error from it writes nothing. With msg (p
// itself) the message's ID is looked up and recorded too (SendMessage):
// one recorded already writes nothing and returns 0.
func (s *Store) request(ctx context.Context, id eventlog.ID, p eventlog.Payload, at time.Time, check func(*execution) error, msg *eventlog.MessageReceived) (uint64, error) {
	if p == nil {
		return 0, fmt.Errorf("%w: request to %s with no payload", eventlog.ErrInvalid, id)
	}
	if !eventlog.IsRequest(p.Kind()) {
		return 0, fmt.Errorf("%w: request to %s: %s is not a request kind", eventlog.ErrInvalid, id, p.Kind())
	}
	if at.IsZero() {
		at = time.Now()
	}
	req := eventlog.Event{Time: at, Data: p}
	// Checked before the number is known, so that bad input writes nothing;
	// encoded again below, bound to its number.
	if _, err := eventlog.AppendRequest(nil, id, 0, req); err != nil {
		return 0, fmt.Errorf("request to %s: %w", id, err)
	}
	var n uint64
	err := s.withInbox(ctx, id, func(e *execution) error {
		if check != nil {
			if err := check(e); err != nil {
				return err
			}
		}
		next := e.mu.inbox.last + 1
		rec, err := eventlog.AppendRequest(nil, id, next, req)
		if err != nil {
			return fmt.Errorf("request to %s: %w", id, err)
		}
		if msg == nil {
			err = s.db.Set(requestKey(id, next), rec, s.write)
		} else {
			dup, serr := s.sentLocked(e, msg)
			if serr != nil || dup {
				return serr
			}
			b := s.db.NewBatch()
			_ = b.Set(requestKey(id, next), rec, nil)
			_ = b.Set(messageKey(id, msg.MessageID), eventlog.MessageDigest(msg), nil)
			err = b.Commit(s.write)
			b.Close()
		}
		if err != nil {
			e.mu.loaded = false // whether it landed is unknown: read the inbox again
			return fmt.Errorf("pebblestore: execution %s: request: %w", id, err)
		}
		e.mu.inbox.last = next
		e.mu.inbox.pending = append(e.mu.inbox.pending, next)
		n = next
		return nil
	})
	return n, err
}

// Requests implements eventlog.Inbox. With no request pending it answers
// from memory.
func (s *Store) Requests(ctx context.Context, id eventlog.ID) ([]eventlog.Request, error) {
	var out []eventlog.Request
	err := s.withInbox(ctx, id, func(e *execution) error {
		for _, n := range e.mu.inbox.pending {
			r, err := s.readRequest(id, n)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readRequest reads and decodes request n of id.
func (s *Store) readRequest(id eventlog.ID, n uint64) (eventlog.Request, error) {
	what := fmt.Sprintf("request %d", n)
	v, closer, err := s.db.Get(requestKey(id, n))
	if errors.Is(err, pebble.ErrNotFound) {
		return eventlog.Request{}, &eventlog.CorruptionError{Execution: id, What: what, Err: errors.New("request missing from the inbox")}
	}
	if err != nil {
		return eventlog.Request{}, fmt.Errorf("pebblestore: execution %s: read %s: %w", id, what, err)
	}
	ev, err := eventlog.DecodeRequest(id, n, v)
	closer.Close()
	if err != nil {
		return eventlog.Request{}, &eventlog.CorruptionError{Execution: id, What: what, Err: err}
	}
	if !eventlog.IsRequest(ev.Kind()) {
		return eventlog.Request{}, &eventlog.CorruptionError{Execution: id, What: what,
			Err: fmt.Errorf("%s is not a request kind", ev.Kind())}
	}
	return eventlog.Request{Execution: id, N: n, Time: ev.Time, Data: ev.Data}, nil
}

// Take implements eventlog.Inbox: it is Append (synced, the same checks
// of head, seqs and epoch) whose batch also deletes the requests ns.
func (s *Store) Take(ctx context.Context, id eventlog.ID, expectedHead uint64, ns []uint64, events ...eventlog.Event) (uint64, error) {
	for i, n := range ns {
		if slices.Contains(ns[:i], n) {
			return 0, fmt.Errorf("%w: take from %s names request %d twice", eventlog.ErrInvalid, id, n)
		}
	}
	return s.append(ctx, id, expectedHead, s.write, events, ns)
}

// checkTakeLocked checks that every request in take is pending. e.mu is
// held and loaded.
func (s *Store) checkTakeLocked(e *execution, take []uint64) error {
	if len(take) == 0 {
		return nil
	}
	if err := s.loadInboxLocked(e); err != nil {
		return err
	}
	for _, n := range take {
		if !e.mu.inbox.has(n) {
			return fmt.Errorf("%w: execution %s: request %d is not pending", eventlog.ErrConflict, e.id, n)
		}
	}
	return nil
}
