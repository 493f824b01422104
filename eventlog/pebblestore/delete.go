package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.Deleter = (*Store)(nil)

// Tombstones (store format 3). Delete writes a tombstone record under
// 't' id — how far the execution still keeps its own lineage for its forks,
// and when it was deleted — and removes, in the same synced batch, its
// events and index entries past that point, its state record, its inbox
// and its idempotency key. The header stays: a fork's lineage is built
// from its ancestors' headers. An execution with a tombstone is not found
// by any operation, and List skips it; the forks of it read its kept
// prefix as before, since lineage reads go by key, not through those
// operations.

// tombstoneValue is the record of a deleted execution.
type tombstoneValue struct {
	Kept    uint64 `msgpack:"kept"`    // own events 1..Kept (of the lineage's seqs) stay for forks
	Deleted int64  `msgpack:"deleted"` // Unix nanoseconds
}

// tombstoneKey is the key of id's tombstone.
func tombstoneKey(id eventlog.ID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, tagTombstone)
	return append(k, id[:]...)
}

// readTombstone reads id's tombstone; ok is false when id is not deleted.
func (s *Store) readTombstone(id eventlog.ID) (tombstoneValue, bool, error) {
	v, closer, err := s.db.Get(tombstoneKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return tombstoneValue{}, false, nil
	}
	if err != nil {
		return tombstoneValue{}, false, s.readErr(id, "tombstone", err)
	}
	defer closer.Close()
	var t tombstoneValue
	if err := decodeValue(v, &t); err != nil {
		return tombstoneValue{}, false, &eventlog.CorruptionError{Execution: id, What: "tombstone", Err: err}
	}
	return t, true, nil
}

// Delete implements eventlog.Deleter. It reads every header to find the
// forks of id and of its deleted ancestors (deletion is rare; the store
// keeps no index of forks), under a lock that Fork also takes, so a fork
// made while Delete runs is either seen or refused.
func (s *Store) Delete(ctx context.Context, id eventlog.ID) error {
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	s.tree.Lock()
	defer s.tree.Unlock()
	e, err := s.execution(id)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.loadLocked(e); err != nil {
		return err
	}
	if e.mu.status.Status == eventlog.StatusRunning {
		return fmt.Errorf("%w: %s is running: cancel it, or let it end, before deleting it", eventlog.ErrRunning, id)
	}
	if l, held := e.mu.lease.Holder(id, time.Now()); held {
		return fmt.Errorf("%w: %s is owned by %s (epoch %d)", eventlog.ErrRunning, id, l.Owner, l.Epoch)
	}
	forks, err := s.forksOf()
	if err != nil {
		return err
	}

	b := s.db.NewBatch()
	defer b.Close()
	now := time.Now()
	// Tombstones this batch writes, so that an ancestor's prefix is
	// computed from its forks' new state.
	stones := map[eventlog.ID]tombstoneValue{}
	kept, err := s.keptPrefix(forks[id], stones)
	if err != nil {
		return err
	}
	if err := s.dropOwn(b, e, kept, e.mu.head); err != nil {
		return err
	}
	_ = b.Delete(stateKey(id), nil)
	_ = b.Delete(quarantineKey(id), nil)
	q := executionPrefix(tagInbox, id)
	_ = b.DeleteRange(q, prefixEnd(q), nil)
	mq := executionPrefix(tagMessage, id)
	_ = b.DeleteRange(mq, prefixEnd(mq), nil)
	if err := s.dropKey(b, e); err != nil {
		return err
	}
	stones[id] = tombstoneValue{Kept: kept, Deleted: nanos(now)}

	// The deleted ancestors may now keep less. Their cached lineages stay
	// right: only what no fork reads goes.
	for p := e.hdr.Parent; !p.IsZero(); {
		pe, err := s.executionBelow(p, nil)
		if err != nil {
			return err
		}
		old, deleted, err := s.readTombstone(p)
		if err != nil {
			return err
		}
		if !deleted {
			break
		}
		pk, err := s.keptPrefix(forks[p], stones)
		if err != nil {
			return err
		}
		if pk >= old.Kept {
			break
		}
		if err := s.dropOwn(b, pe, pk, old.Kept); err != nil {
			return err
		}
		stones[p] = tombstoneValue{Kept: pk, Deleted: old.Deleted}
		p = pe.hdr.Parent
	}
	for sid, t := range stones {
		v, err := encodeValue(&t)
		if err != nil {
			return fmt.Errorf("pebblestore: encode tombstone: %w", err)
		}
		_ = b.Set(tombstoneKey(sid), v, nil)
	}
	if err := s.commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: delete %s: %w", id, err)
	}
	e.deleted.Store(true)
	e.mu.loaded, e.mu.index, e.mu.inbox = false, nil, inbox{}
	return nil
}

// forksOf reads every header and returns the direct forks of each
// execution that has any.
func (s *Store) forksOf() (map[eventlog.ID][]eventlog.ID, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagHeader}, UpperBound: []byte{tagHeader + 1}})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: read headers: %w", err)
	}
	defer it.Close()
	out := map[eventlog.ID][]eventlog.ID{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 17 {
			return nil, &eventlog.CorruptionError{What: "header key", Err: fmt.Errorf("key %x", k)}
		}
		id := eventlog.ID(k[1:17])
		var h header
		if err := decodeValue(it.Value(), &h); err != nil {
			return nil, &eventlog.CorruptionError{Execution: id, What: "header", Err: err}
		}
		if !h.Parent.IsZero() {
			out[h.Parent] = append(out[h.Parent], id)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pebblestore: read headers: %w", err)
	}
	return out, nil
}

// keptPrefix is eventlog.KeptPrefix over forks, each read from stones
// (this batch's tombstones) or the store.
func (s *Store) keptPrefix(forks []eventlog.ID, stones map[eventlog.ID]tombstoneValue) (uint64, error) {
	kf := make([]eventlog.KeptFork, 0, len(forks))
	for _, f := range forks {
		fe, err := s.executionBelow(f, nil)
		if err != nil {
			return 0, err
		}
		t, deleted := stones[f]
		if !deleted {
			if t, deleted, err = s.readTombstone(f); err != nil {
				return 0, err
			}
		}
		kf = append(kf, eventlog.KeptFork{ForkSeq: fe.hdr.At, Deleted: deleted, Kept: t.Kept})
	}
	return eventlog.KeptPrefix(kf), nil
}

// dropOwn deletes, in b, e's own events and index entries with seqs in
// (kept, upTo].
func (s *Store) dropOwn(b *pebble.Batch, e *execution, kept, upTo uint64) error {
	from := max(kept, e.hdr.At) + 1
	if from > upTo {
		return nil
	}
	_ = b.DeleteRange(eventKey(e.id, from), eventKey(e.id, seqEnd(upTo)), nil)
	p := executionPrefix(tagIndex, e.id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return s.readErr(e.id, "index", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		_, seq, ok := parseIndexKey(it.Key())
		if !ok {
			return &eventlog.CorruptionError{Execution: e.id, What: "index key", Err: fmt.Errorf("key %x", it.Key())}
		}
		if seq >= from && seq <= upTo {
			_ = b.Delete(it.Key(), nil)
		}
	}
	if err := it.Error(); err != nil {
		return s.readErr(e.id, "index", err)
	}
	return nil
}

// dropKey deletes, in b, the idempotency key of e (a root: its
// execution.created holds it) if it still names e.
func (s *Store) dropKey(b *pebble.Batch, e *execution) error {
	if !e.hdr.Parent.IsZero() {
		return nil
	}
	v, closer, err := s.db.Get(eventKey(e.id, 1))
	if err != nil {
		return s.readErr(e.id, "events", err)
	}
	ev, err := s.decodeEvent(e.id, 1, v)
	closer.Close()
	if err != nil {
		return &eventlog.CorruptionError{Execution: e.id, Seq: 1, What: "event", Err: err}
	}
	created, ok := ev.Data.(*eventlog.ExecutionCreated)
	if !ok || created.Key == "" {
		return nil
	}
	k := idemKey(created.Key)
	owner, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return s.readErr(e.id, "idempotency key", err)
	}
	names := string(owner) == string(e.id[:])
	closer.Close()
	if names {
		_ = b.Delete(k, nil)
	}
	return nil
}

var _ eventlog.UsageReporter = (*Store)(nil)

// Usage implements eventlog.UsageReporter: for every execution, tombstones
// included, it sums the lengths of the keys and values of its own events
// and index entries, as stored (before Pebble's compression, and before a
// compaction reclaims what Delete removed).
func (s *Store) Usage(ctx context.Context) iter.Seq2[eventlog.Usage, error] {
	return func(yield func(eventlog.Usage, error) bool) {
		if err := s.enter(ctx); err != nil {
			yield(eventlog.Usage{}, err)
			return
		}
		defer s.leave()
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagHeader}, UpperBound: []byte{tagHeader + 1}})
		if err != nil {
			yield(eventlog.Usage{}, fmt.Errorf("pebblestore: read headers: %w", err))
			return
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if len(k) != 17 {
				yield(eventlog.Usage{}, &eventlog.CorruptionError{What: "header key", Err: fmt.Errorf("key %x", k)})
				return
			}
			u := eventlog.Usage{ID: eventlog.ID(k[1:17])}
			_, u.Deleted, err = s.readTombstone(u.ID)
			if err == nil {
				err = s.sizeOf(ctx, &u)
			}
			if !yield(u, err) || err != nil {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(eventlog.Usage{}, fmt.Errorf("pebblestore: read headers: %w", err))
		}
	}
}

// sizeOf adds to u the events and bytes of u.ID's own event and index
// tables.
func (s *Store) sizeOf(ctx context.Context, u *eventlog.Usage) error {
	for _, tag := range []byte{tagEvent, tagIndex} {
		p := executionPrefix(tag, u.ID)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return s.readErr(u.ID, "usage", err)
		}
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if n++; n&1023 == 0 && ctx.Err() != nil {
				it.Close()
				return ctx.Err()
			}
			if tag == tagEvent {
				u.Events++
			}
			u.Bytes += int64(len(it.Key()) + len(it.Value()))
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return s.readErr(u.ID, "usage", err)
		}
	}
	return nil
}
