package pgstore

import "context"

// FastAppends returns how many appends s tried in one round trip and how
// many of those wrote.
func FastAppends(s *Store) (tried, wrote uint64) { return s.fast.tried.Load(), s.fast.wrote.Load() }

// GroupFlushes returns how many flushes (transactions) s's group commit
// ran and how many appends they held.
func GroupFlushes(s *Store) (flushes, appends uint64) {
	return s.group.flushes.Load(), s.group.flushed.Load()
}

// QueuedAppends returns how many appends of s wait for the next flush.
func QueuedAppends(s *Store) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}

// SetFlushHook makes every flush of s call h first with its context,
// its backend's process ID and its number of appends. Set it before
// appending.
func SetFlushHook(s *Store, h func(ctx context.Context, pid uint32, n int)) { s.group.hook = h }
