package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.Limiter = (*Store)(nil)

// limitVersion is the first byte of a limiter record; the times follow,
// each as 8 big-endian bytes of Unix nanoseconds.
const limitVersion = 1

// limitKey is the key of key's limiter record.
func limitKey(key string) []byte {
	k := make([]byte, 0, 1+len(key))
	k = append(k, tagLimit)
	return append(k, key...)
}

// TakeLimit implements eventlog.Limiter. Every Take of the store runs under one
// lock (one process owns a Pebble store, so that lock orders every kernel's
// Takes) and judges the window by the process's clock. An admitted call's
// record — the times of the calls of key still in the window, its own
// included — is committed as an append is: synced, unless the store was
// opened WithoutSync, before Take returns, so a crash right after an
// admission never hands the same window's calls out again. A refusal
// writes nothing. The records of keys no longer used stay (a few bytes
// each, never read again).
func (s *Store) TakeLimit(ctx context.Context, key string, max int, window time.Duration) (bool, time.Time, error) {
	if err := eventlog.CheckTake(key, max, window); err != nil {
		return false, time.Time{}, err
	}
	if err := s.writable(); err != nil {
		return false, time.Time{}, err
	}
	if err := s.enter(ctx); err != nil {
		return false, time.Time{}, err
	}
	defer s.leave()
	return s.takeLimit(key, max, window)
}

// takeLimit is TakeLimit once the store was entered and its arguments
// checked.
func (s *Store) takeLimit(key string, max int, window time.Duration) (bool, time.Time, error) {
	s.limits.Lock()
	defer s.limits.Unlock()
	times, err := s.readLimit(key)
	if err != nil {
		return false, time.Time{}, err
	}
	kept, ok, retryAt := eventlog.SlideWindow(times, time.Now(), max, window)
	if !ok {
		return false, retryAt, nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(limitKey(key), encodeLimit(kept), nil)
	if err := s.commit(b, s.write); err != nil {
		return false, time.Time{}, fmt.Errorf("pebblestore: limiter %q: %w", key, err)
	}
	return true, time.Time{}, nil
}

// readLimit returns key's admitted times as its record holds them. The
// record is read at every take, never cached: a process may take under
// many keys (one per execution), and a read is a lookup in Pebble's
// memtable or block cache.
func (s *Store) readLimit(key string) ([]time.Time, error) {
	v, closer, err := s.db.Get(limitKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.readErr(eventlog.ID{}, "limiter record "+strconv.Quote(key), err)
	}
	defer closer.Close()
	times, err := decodeLimit(v)
	if err != nil {
		return nil, &eventlog.CorruptionError{What: "limiter record " + strconv.Quote(key), Err: err}
	}
	return times, nil
}

// encodeLimit encodes a limiter record.
func encodeLimit(times []time.Time) []byte {
	b := make([]byte, 0, 1+8*len(times))
	b = append(b, limitVersion)
	for _, t := range times {
		b = binary.BigEndian.AppendUint64(b, uint64(t.UnixNano()))
	}
	return b
}

// decodeLimit decodes a limiter record.
func decodeLimit(v []byte) ([]time.Time, error) {
	if len(v) == 0 || v[0] != limitVersion {
		return nil, fmt.Errorf("limiter record of %d bytes without version %d", len(v), limitVersion)
	}
	if (len(v)-1)%8 != 0 {
		return nil, fmt.Errorf("limiter record of %d bytes: not a whole number of times", len(v))
	}
	times := make([]time.Time, 0, (len(v)-1)/8)
	for i := 1; i < len(v); i += 8 {
		times = append(times, time.Unix(0, int64(binary.BigEndian.Uint64(v[i:]))))
	}
	return times, nil
}
