// Package pebblestore is the [eventlog.Log] and [eventlog.Index] of forkline
// on Pebble, on disk or (dir "") in Pebble's in-memory filesystem.
//
// # Durability
//
// Create, Append and Fork return after their one batch is committed with
// pebble.Sync, unless the store was opened [WithoutSync]. The write-ahead
// log rebuilds what a crash left unflushed; Close flushes it all to tables. Appends to
// different executions never wait on each other's lock: each execution has
// its own, and Pebble groups concurrent synced commits into one fsync.
//
// # Faults of the files and the disk
//
// What Pebble v2 offers, and what this package adds where it falls short:
//
//   - Write-ahead log damage. Pebble replays a log up to its first bad
//     record and takes the rest for the torn tail of a crash; it has no
//     strict recovery mode. From FormatWALSyncChunks on (Open upgrades every
//     log to pebbleFormat, and flushes once so that the log it writes to is
//     of that format) each chunk records how far the log was synced, but
//     Pebble only looks for such proof from the next 32 KiB block on. Open
//     does the same check over the whole rest of every log Pebble replays
//     (walcheck.go): damage that a later record proves synced is corruption.
//     A log cut short or deleted is seen through a side record,
//     FORKLINE-WAL (walmark.go): the newest (log number, offset) the log was
//     synced to, written and fsynced by a goroutine the sync path wakes, at
//     most every 100 ms (a position is recorded at most 100 ms plus one
//     write of the file after its sync). Open fails with an error wrapping eventlog.ErrCorrupt
//     when the log it names is missing or its records end before that
//     offset; AcceptWALLoss (forkline --accept-wal-loss) opens with what is
//     left. Appends acknowledged in the last 100 ms (plus one write of the
//     side file) before a crash are past the record, and their loss stays
//     indistinguishable from a torn write.
//   - Clean shutdown. Close flushes, so that a reopen needs nothing from the
//     write-ahead logs, then writes FORKLINE-CLOSED, the list of live tables
//     and their sizes. Open compares the MANIFEST with it: damage to the
//     MANIFEST that Pebble would take for a torn tail (opening an older log)
//     is seen. Open for writing deletes the record before Pebble may change
//     a table; without it (a crash), Pebble's recovery rules above apply.
//     A record that fails its check (it does not parse, or it disagrees
//     with the MANIFEST) is corruption naming the check; when the record
//     is what was damaged, Reclose (`forkline reclose`) re-verifies the
//     log without it and writes a new one.
//     Every Open also checks each live table's size on disk.
//   - A lost MANIFEST. Pebble would create a new database and delete the
//     old tables. A folder with forkline's marker file (FORKLINE, written
//     once the log exists) or Pebble's files is opened with
//     ErrorIfNotExists, so a missing MANIFEST is corruption, files untouched.
//   - Pebble's Fatalf. Its default DataCorruption handler and its failed
//     commits call Logger.Fatalf, whose default exits. The store's
//     EventListener records corruption (the read, and every later write,
//     returns an error wrapping eventlog.ErrCorrupt naming the file), and its
//     Logger never exits: a Fatalf on the caller's goroutine becomes an error
//     wrapping ErrFailed, one on a Pebble goroutine parks that goroutine.
//   - A full disk. Pebble meets ENOSPC with a fatal commit error or stalls
//     writes forever. Writes are refused with eventlog.ErrDiskFull while the
//     free space is under a reserve (WithDiskReserve), and a ballast file is
//     kept: dropped when Pebble's own flush meets a full disk, and by Close
//     and Open on a nearly full disk, to give them room.
//   - Read-only inspection. ReadOnly opens with Pebble's ReadOnly (no
//     flush, compaction or deletion) on a filesystem that refuses every
//     write, with a shared lock: readers exclude writers, not each other.
//
// Every Open that finds damage reads the folder read-only first: nothing is
// rewritten.
//
// # Forks copy nothing
//
// A fork is a header naming (parent, at) plus its fork.created event. Reading
// it reads the parent's range 1..at (recursively, so a fork whose point lies
// in its grandparent's part reads the grandparent directly) and then its own
// events. Index entries for every inherited resource are written with
// fork.created, so index queries past the fork point never leave the fork's
// own key range.
//
// # Status and a head that can be checked
//
// Each execution has a state record beside its immutable header: the seq of
// its newest event and the [eventlog.StatusState] after it (status,
// updated, wake time, deadline), rewritten in the same batch as every
// event of its own. Info and List read it and never fold a lineage; a
// fork's record starts from its own fork.created (pending). The first read
// of an execution checks the recorded head against its event keys: a lost
// newest event, or an event past the head, is a [eventlog.CorruptionError]
// naming the execution and the seq.
//
// # The inbox
//
// The store implements [eventlog.Inbox] (DESIGN §8½): a request of
// someone who does not own an execution (a cancel, an approval decision)
// is stored under its own key, numbered 1, 2, 3… per execution, as a
// request record (time and payload, checksummed like an event and bound
// to its execution and number: eventlog.AppendRequest), synced when
// Request returns. Take is Append — the same code path, checks of head,
// seqs and lease epoch, status and index updates — whose batch also
// deletes the requests it names. A number is never given twice: the
// state record keeps the newest number, so deleting the newest request
// does not free it. Requests and Take run under the execution's lock, the
// one appends take, so a request never makes an append conflict. The
// numbers of an execution's pending requests stay in memory once read, so
// an owner can poll Requests (say every 50 ms) at no IO cost while none is
// pending. A fork has its own, empty inbox. Requests of an execution that
// has ended stay readable; nobody takes them. Decide ([eventlog.Decider])
// is Request with the check that the step awaits a decision (the state
// record's status and the pending requests) made under that same lock, so
// of concurrent decisions of one step exactly one is stored.
//
// # Leases, epochs and the folder's identity
//
// Leases live in memory (one process holds a store), so a reopened store
// finds every execution ownerless; their epochs do not: a claim writes its
// epoch into the execution's state record and appends keep it there, so the
// epochs of an execution rise across releases, expiries and reopens
// (DESIGN §15½.5). A record written before epochs were kept reads as epoch 0.
//
// A writable open gives the folder an identity when it has none: a file
// FORKLINE-ID beside the log, written synced through a rename, holding a
// random ID ([ReadIdentity]). It names the folder wherever it is moved on
// its host: sdk.LocalOwner is the host and this ID (DESIGN §15½.2). A
// folder made before identities gets one at its first writable open, which
// also records the folder's absolute path then, the name its older
// executions' owner was made of. A read-only open never writes it.
//
// Serve's backoff note (eventlog.RetryKeeper) lives in memory beside the
// lease, as leases do: one process owns the store, and a process that
// opens it anew runs every execution again at once.
//
// # Rate limits
//
// The store implements [eventlog.Limiter]: each key's record (tag 'l',
// keys.go) holds the times of the calls its window admitted, Unix
// nanoseconds by the process's clock. Every TakeLimit runs under one lock
// of the store, reads the record, and writes it back, synced as an append
// is, only when it admits a call, so a crash never hands a window's calls
// out twice. The records are new keys beside the others: no store format
// step, and a build without the limiter never reads them.
//
// # Store formats
//
// Store format 2 added the state records, the idempotency keys and the
// inbox. A store of format 1 is migrated
// when opened: every execution's own events are folded into its state
// record (one pass over the events, no event rewritten; version 1 event
// records keep reading), and the records and the new format byte are
// written in one synced batch, so a crash during the migration leaves a
// format 1 store that the next Open migrates again. An execution whose own
// events cannot be read gets no record, and reading it reports a
// corruption. A build that reads only format 1 refuses a format 2 store.
//
// An execution header written since Info had Key carries the optional
// field key (the execution.created Key); headers without it read as before,
// with an empty Info.Key (the key index still finds such an execution, by
// LookupKey). A build older than the field refuses such a header as
// corrupt, as it refuses any unknown field.
//
// A checkpoint index value of a resource a fork.diverged marked (DESIGN
// §12) carries the optional field diverged; values without it read as
// before. A build older than fork.diverged refuses such a value as
// corrupt rather than misreading the resource as covered.
//
// # Key layout
//
// See keys.go: one-byte table tags, then the execution ID, then big-endian
// seqs, so that every per-execution range is contiguous and ordered by seq.
package pebblestore
