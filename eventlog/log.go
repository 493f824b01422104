package eventlog

import (
	"context"
	"iter"
	"time"
)

// Info describes one execution.
type Info struct {
	ID      ID
	Agent   string
	Parent  ID        // zero for a root execution
	ForkSeq uint64    // the parent's seq this execution forked at; 0 for a root
	Head    uint64    // seq of the newest event of the lineage
	Created time.Time // when the execution (or fork) was created

	// Status, Updated, WakeAt and Deadline are the execution's
	// [StatusState] after its newest event, which a store keeps beside the
	// events (written in the same batch), so that Info and List never fold
	// a lineage. Updated is the Time of the newest event.
	Status   Status
	Updated  time.Time
	WakeAt   time.Time // when a parked execution is to run again; zero if none
	Deadline time.Time // zero if none

	// Tokens is the token usage of the execution's own run: the sum of
	// the Tokens of its step.succeeded and step.failed events (TokensOf)
	// since its execution.created
	// or, for a fork, its fork.created (the StatusState's, DESIGN §16). A
	// fork's prefix is not included; the replay fold's State.Tokens sums
	// the whole lineage. Both stores of this module keep it (storetest's
	// TestTokens); an execution last written before its store kept it
	// (a Pebble state record without the fields, a Postgres schema before
	// version 8) counts only the events appended since.
	Tokens Tokens

	// Caller is the execution that started this one as its child (DESIGN
	// §9); zero for an execution started from outside a handler. It comes
	// from the header, so forks of a child have none.
	Caller ID

	// Approvals lists, sorted, the StepIDs that await an approval decision
	// (the StatusState's). While it is not empty the execution is runnable
	// only by a request in its inbox or its wake time, never because its
	// children ended (DESIGN §15½.6): it parked for the decision.
	Approvals []string

	// LastError and RetryAt say that Serve backs this execution off
	// (DESIGN §15½.11): the error its last run failed with, which the log
	// does not record, and when Serve runs it again; empty and zero when
	// it does not (kept by a store that implements RetryKeeper).
	LastError string
	RetryAt   time.Time

	// AwaitedOwner, with LastError and RetryAt, says that a kernel backs
	// this execution off because it is left to that owner (DESIGN §15½.4,
	// AwaitKeeper): its head is uncovered for a resource only that owner
	// may open. Empty otherwise.
	AwaitedOwner string

	// Quarantined says that a run of this execution failed with
	// ErrCorrupt and that no Serve runs it until a person lifts the
	// quarantine (Quarantiner); QuarantineError is that run's error. False
	// and "" when it is not quarantined (or its store keeps no
	// quarantine).
	Quarantined     bool
	QuarantineError string

	// Key is the execution's start key (execution.created Key, DESIGN
	// §9): "" for none and for a fork. A Pebble store keeps it in the
	// header of executions created since Info had it; older ones show "",
	// though LookupKey still finds them.
	Key string

	// Version is the code version the execution runs on (DESIGN §19,
	// §21½.5): its execution.created Version, or for a fork its
	// fork.created Version; "" for an unversioned execution, which runs
	// on any worker. Kept in the header, as the fold of those events
	// (replay.State.Version) says it.
	Version string

	// Queue and Priority are the execution's execution.created Queue and
	// Priority (DESIGN §19): the queue whose concurrency and rate its
	// claims to run count against, and its place in that queue (lower
	// first). "" and 0 for an execution in no queue, and for every fork
	// (§21½.13: forks join no queue).
	Queue    string
	Priority int
}

// KeyLookup is implemented by a Log that finds an execution by its start
// key without creating one (sdk's Kernel.Lookup). Both stores of this
// module implement it; storetest checks it.
type KeyLookup interface {
	// LookupKey returns the ID of the execution whose execution.created
	// has Key key; an error wrapping ErrNotFound when none has (never
	// created, or deleted: deleting frees the key). An empty key is
	// ErrInvalid.
	LookupKey(ctx context.Context, key string) (ID, error)
}

// Log is an append-only store of executions and their events. A kernel
// builder may implement it on any backend; nothing in it is specific to one.
//
// Seqs are 1-based and dense within a lineage. A fork of E at N has no events
// of its own for 1..N: reading it yields E's first N events, then its own.
// Every method is safe for concurrent use. After Close every method returns an
// error that wraps ErrClosed.
//
// A Log that wraps another exposes it with a method Unwrap() Log, and
// callers find optional capabilities (Leaser, Inbox, Deleter, Claimer, …)
// with As, which walks that chain as errors.As does (DESIGN §15½.3).
type Log interface {
	// Create starts a root execution: a new time-ordered ID and its first
	// event, execution.created at seq 1, written durably.
	//
	// A created.Key that is not empty is an idempotency key (DESIGN §9),
	// indexed in the same write: when an execution with that key exists,
	// Create writes nothing and returns that execution's ID if its Agent
	// and Input equal created's, and an error wrapping ErrConflict if not.
	// Concurrent Creates with one key create one execution.
	Create(ctx context.Context, created *ExecutionCreated, at time.Time, opts ...CreateOption) (ID, error)

	// Append writes events as seqs expectedHead+1, expectedHead+2, … in one
	// atomic write. An event's Seq must be 0 (assigned) or its position. If the
	// execution's head is not expectedHead, nothing is written and the error
	// wraps ErrConflict. An invalid event wraps ErrInvalid and nothing is
	// written. It returns the new head.
	Append(ctx context.Context, id ID, expectedHead uint64, events ...Event) (uint64, error)

	// AppendUnsynced is Append without waiting for the disk: it returns once
	// the events are written in order, and they become durable no later than
	// the next synced write of the log (of any execution). A crash may lose
	// them, and then everything after them, never a part of a later group.
	// DESIGN §4 uses it for a safe_to_retry step.started, whose loss only
	// means the step runs again.
	AppendUnsynced(ctx context.Context, id ID, expectedHead uint64, events ...Event) (uint64, error)

	// Events yields the lineage of id from seq from (1 = all) up to the head
	// at the time of the call. The error is yielded at most once, and last.
	// Breaking out of the loop releases what the read holds. The events are
	// the caller's to keep.
	Events(ctx context.Context, id ID, from uint64) iter.Seq2[Event, error]

	// Head returns the seq of the newest event of id's lineage.
	Head(ctx context.Context, id ID) (uint64, error)

	// Info describes id.
	Info(ctx context.Context, id ID) (Info, error)

	// List yields the executions f selects in ID order (so, creation
	// order), at most f.Limit of them when it is positive. An invalid f
	// (Filter.Validate) yields only an error wrapping ErrInvalid. A store
	// keeps what the filter reads (header, status) beside the events, so
	// List never folds a lineage.
	List(ctx context.Context, f Filter) iter.Seq2[Info, error]

	// Fork creates an execution whose events 1..at are parent's, without
	// copying any, and writes fc as its event at+1. fc.Parent and fc.At are
	// set by Fork (given values must be zero or equal). at must be in
	// 1..Head(parent); otherwise the error wraps ErrInvalid. Fork reads
	// no record of the prefix, so its cost does not grow with at (DESIGN
	// §5): a damaged prefix is found when the fork's lineage is read (a
	// *CorruptionError naming the damaged execution and seq), or before
	// the fork, at a cost that grows with at, by PrefixVerifier.
	Fork(ctx context.Context, parent ID, at uint64, fc *ForkCreated, t time.Time) (ID, error)

	// Close releases the log. Appends that returned before it are durable.
	Close() error
}

// PrefixVerifier checks a lineage's stored records without decoding
// them: every record of 1..at present, and whole where it belongs
// (CheckRecord: its checksum binds the execution and seq in format 3).
// Its cost grows with at, which is why Fork does not call it (DESIGN §5);
// sdk.VerifyPrefix and the forkline fork command do, before forking.
// Both stores implement it; find it through As.
type PrefixVerifier interface {
	// VerifyPrefix checks the records 1..at of id's lineage. Damage is a
	// *CorruptionError (wrapping ErrCorrupt) naming the execution and the
	// first damaged seq; at outside 1..Head(id) wraps ErrInvalid; an
	// unknown id wraps ErrNotFound.
	VerifyPrefix(ctx context.Context, id ID, at uint64) error
}

// Index answers the checkpoint questions of DESIGN §5 for any seq of any
// lineage without folding the lineage: a store keeps one ResourceState per
// resource per event that changes it, written in the same batch as the event.
// The coverage and fork packages compute points and selections from it.
type Index interface {
	// ResourceStates returns, for every resource bound in id's lineage at or
	// before seq at, its state after event at, sorted by Key.
	ResourceStates(ctx context.Context, id ID, at uint64) ([]ResourceState, error)

	// ResourceHistory yields the states of resource key in id's lineage that
	// were written after seq after, in seq order. The error is yielded at
	// most once, and last.
	ResourceHistory(ctx context.Context, id ID, key string, after uint64) iter.Seq2[ResourceState, error]
}

// IndexedLog is a Log that keeps the checkpoint Index.
type IndexedLog interface {
	Log
	Index
}
