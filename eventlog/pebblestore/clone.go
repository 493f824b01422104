package pebblestore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

// clones numbers the checkpoints Clone takes, so that each has a folder of
// its own in its source's memory.
var clones atomic.Uint64

// Clone returns a new in-memory store holding a copy of the log of s, an
// in-memory store (Open("")), as it is now: the same executions under the
// same IDs, with what the log holds of them. The two are
// independent from then on: what is written to one is not seen in the
// other. A test harness uses it to run one execution several times apart —
// the same ID, so the same idempotency keys — as proptest.CheckAgent does.
// A store on disk is refused with eventlog.ErrInvalid (copy its closed
// folder instead); a closed one with eventlog.ErrClosed. The clone's
// memory is freed when it is closed. The clone syncs its appends as s
// does (WithoutSync).
func (s *Store) Clone(ctx context.Context) (*Store, error) {
	if s.dir != "" || s.mem == nil {
		return nil, fmt.Errorf("%w: Clone of a store on disk (%s): copy its closed folder instead", eventlog.ErrInvalid, s.dir)
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("clone-%d", clones.Add(1))
	err := s.guard(func() error { return s.db.Checkpoint(name, pebble.WithFlushedWAL()) })
	s.leave()
	if err != nil {
		_ = s.mem.RemoveAll(name)
		return nil, fmt.Errorf("pebblestore: clone: %w", err)
	}
	copts := []Option{func(c *options) { c.mem, c.memName = s.mem, name }}
	if s.write == pebble.NoSync {
		copts = append(copts, WithoutSync())
	}
	return Open("", copts...)
}
