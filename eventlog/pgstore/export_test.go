package pgstore

// FastAppends returns how many appends s tried in one round trip and how
// many of those wrote.
func FastAppends(s *Store) (tried, wrote uint64) { return s.fast.tried.Load(), s.fast.wrote.Load() }
