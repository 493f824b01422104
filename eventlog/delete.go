package eventlog

import (
	"context"
	"errors"
	"iter"
)

// ErrRunning is returned by Deleter.Delete for an execution that is
// running (a dispatch started and nothing terminal yet) or owned by a live
// lease: cancel it, or wait for it to end, first (DESIGN §14).
var ErrRunning = errors.New("eventlog: execution is running")

// Deleter is implemented by a Log that can delete executions (DESIGN §14).
//
// Delete turns an execution into a tombstone. Afterwards every operation of
// the Log on its ID — Head, Info, Events, Append, Fork, the Index, the
// Inbox and the Leaser — returns an error wrapping ErrNotFound, and List
// never yields it. Its header, events and index entries are kept only up to
// the furthest seq that a surviving fork (or a tombstone that still keeps a
// prefix for one) reads through it, so every surviving fork reads exactly
// the events and index answers it read before; the rest is removed in the
// same batch or transaction. Deleting a fork later lets its tombstoned
// ancestors shrink again. Its inbox requests and its idempotency key go
// with it: a Create with the same key makes a new execution.
//
// Delete refuses, with an error wrapping ErrRunning and nothing changed,
// an execution whose status is running or whose lease is held. An unknown
// or already deleted execution is ErrNotFound.
type Deleter interface {
	Delete(ctx context.Context, id ID) error
}

// KeptPrefix returns how far a tombstone must keep its own events: the
// largest seq that any of its forks still reads through it. forks lists
// the direct forks of the deleted execution, each with its fork point
// (ForkSeq), whether it is itself deleted, and — when it is — the prefix
// it keeps (its own KeptPrefix). A live fork reads its parent up to its
// fork point; a tombstoned fork reads it only up to what it keeps. The
// result is 0 when no fork reads the execution at all.
func KeptPrefix(forks []KeptFork) uint64 {
	var kept uint64
	for _, f := range forks {
		reads := f.ForkSeq
		if f.Deleted {
			reads = min(reads, f.Kept)
		}
		kept = max(kept, reads)
	}
	return kept
}

// KeptFork describes one direct fork of a deleted execution, for
// KeptPrefix.
type KeptFork struct {
	ForkSeq uint64 // the fork point: the last seq it reads from its parent
	Deleted bool   // the fork is a tombstone too
	Kept    uint64 // for a tombstone: how far it keeps its own lineage
}

// Usage is what one execution takes in a store, for people deciding what
// to delete (forkline du). Bytes count the stored keys and values of its
// own events and index entries (not its ancestors', which its lineage
// shares); a tombstone counts what it keeps for its forks.
type Usage struct {
	ID      ID
	Deleted bool   // a tombstone kept for its forks
	Events  uint64 // own events stored
	Bytes   int64  // stored bytes of its own events and index entries
}

// UsageReporter is implemented by a store that can say what each
// execution takes, tombstones included, in ID order.
type UsageReporter interface {
	Usage(ctx context.Context) iter.Seq2[Usage, error]
}
