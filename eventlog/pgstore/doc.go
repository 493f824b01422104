// Package pgstore is the PostgreSQL implementation of the forkline event
// log (DESIGN §11): eventlog.IndexedLog, eventlog.Leaser, eventlog.Inbox,
// eventlog.Claimer and eventlog.Notifier on github.com/jackc/pgx/v5, for many processes and
// hosts sharing one log. Pebble (eventlog/pebblestore) stays the embedded
// default; both pass the conformance kit eventlog/storetest.
//
// # Tables
//
// Open creates the store's tables in their own schema (DefaultSchema
// "forkline", or WithSchema) and migrates them, versioned by the
// schema_version table; a schema newer than this build is refused
// (ErrSchemaTooNew). Open with ReadOnly runs no DDL: it opens an existing
// schema at SchemaVersion (ErrNoSchema when there is none, ErrSchemaTooOld
// before a writer migrated it), needs only USAGE on the schema and SELECT
// on its tables, and its sessions are read-only, so its writes wrap
// ErrReadOnly. The tables are:
//
//   - executions: one row per execution — its header (agent, parent and
//     fork point, caller, creation time, idempotency key), its status
//     (eventlog.StatusState), its head, its lease (epoch, owner, expiry,
//     released), the inbox's newest request number, Serve's backoff
//     note (last_error, retry_ns; schema version 4, eventlog.RetryKeeper)
//     and the owner it awaits (await_owner; schema version 6,
//     eventlog.AwaitKeeper), and, for a child, its caller's StepID
//     (caller_step, schema version 6), and its quarantine (quarantine;
//     schema version 7, eventlog.Quarantiner). Every write to an
//     execution locks this row (SELECT … FOR UPDATE) for its transaction.
//   - events: (execution, seq) → the encoded record (eventlog.AppendRecord).
//     A fork's own events start at its fork point + 1: a fork is a row
//     naming its parent and fork point, and reading its lineage walks the
//     headers; no event is ever copied.
//   - resource_states: the checkpoint index, one row per resource per event
//     that changed it, written in the transaction of the event.
//   - requests: the inbox (DESIGN §8½), requests not yet taken, each with
//     its kind code (schema version 6). A child's terminal append inserts
//     the child.ended request into its caller's inbox in its own
//     transaction (DESIGN §15½.6), so ClaimRunnable finds a parent parked
//     for a child due without reading its children. Decide
//     (eventlog.Decider) checks and writes an approval decision in one
//     transaction under the execution row's lock, so of concurrent
//     decisions of one step exactly one is stored.
//   - message_ids: (execution, message_id) → the message's
//     eventlog.MessageDigest (schema version 9, eventlog.MessageInbox):
//     SendMessage inserts it in the transaction of the message's request,
//     so of concurrent sends of one MessageID the primary key lets one in.
//   - limits: eventlog.Limiter's windows (schema version 5), one row per
//     key with the times (timestamptz[]) of the calls it admitted still in
//     the window; each Take is one INSERT … ON CONFLICT DO UPDATE
//     statement (limiter.go).
//
// # Transactions
//
// Append, AppendUnsynced and Take each run one transaction: lock the row,
// check the lease epoch the context carries (eventlog.WithEpoch;
// ErrLeaseLost on a stale one, ErrLeaseHeld for an unleased append while
// a lease is live), check expectedHead (ErrConflict), then write the
// events, their index rows, the removed requests and the new head and
// status. AppendUnsynced sets synchronous_commit = off for its
// transaction only. When the store made the execution's previous write
// itself (the usual case: the lease holder appends step after step), it
// knows the status and index folds at the expected head, and the whole
// transaction is one statement and one round trip: the row's UPDATE, whose
// WHERE checks head and epoch under the row lock, with the inserts as
// data-modifying CTEs on its RETURNING (AppendUnsynced pipelines a
// set_config before it, in the same implicit transaction). A row that does
// not match writes nothing, and the append runs the locking transaction,
// which says why. Such synced one-statement appends of different
// executions that run concurrently in one process share a transaction
// (group commit, DESIGN §21; WithGroupCommit turns it off): the first
// flushes at once, alone, and those that arrive meanwhile queue and go
// together in the next flush, their statements pipelined up to one Sync —
// one round trip, one commit. A refused statement writes nothing, so the
// group's others are unaffected; a statement's error rolls the group back
// and each is flushed again alone; a failed transaction fails them all.
// AppendUnsynced and Take are not grouped. Lease expiry is judged by the
// database's clock. The
// store's connections carry idle_in_transaction_session_timeout
// (IdleInTransactionTimeout, unless the URL sets it), so that a process
// paused inside a transaction does not keep its execution's row locked,
// and unclaimable by other workers, after its lease expired. An
// event row that does not decode — one damaged, or moved to another seq
// or execution: a record's checksum binds both — or a seq missing from a
// lineage, is a *eventlog.CorruptionError naming the execution and seq;
// VerifyPrefix (eventlog.PrefixVerifier) checks a prefix's rows up to a
// seq without decoding them, and Fork, which reads none (DESIGN §5),
// leaves that check to its caller (sdk.VerifyPrefix, forkline fork).
//
// # Notifications
//
// The store implements eventlog.Notifier (DESIGN §15½.6, §15½.14): every
// append that ends an execution (execution.completed, .failed, .cancelled;
// with NotifyEveryAppend every append — Append, AppendUnsynced, Take, on
// the one-statement path too), every Request — a child.ended included,
// which announces the caller — and every Release of a lease runs
// pg_notify on the channel
// forkline_<schema> (cut to 63 bytes) in its own transaction, so the
// notification is delivered at the commit and never for a write that
// rolled back; the payload is the execution's ID in hex. The first
// Changes opens one dedicated connection (outside the pool) that LISTENs
// on the channel and feeds every Changes channel; it reconnects after an
// error, from 50 ms doubling to 5 s, sends the zero ID once it listens
// again, and is closed by Close. sdk's Serve and Watch wake on it, so
// another process's write reaches them in milliseconds rather than at
// their poll. Other appends NOTIFY only with NotifyEveryAppend, because
// Postgres serializes the commits of notifying transactions in a
// database: with 64 concurrent writers that halved append throughput here.
//
// A read (Events, ResourceHistory, List) fetches a page of rows at a time
// and holds no connection while its caller's loop body runs; no call holds
// one connection while it waits for another. The pool is pgxpool's: its
// size is the URL's pool_max_conns (default the larger of 4 and the
// number of CPUs).
//
// # Postgres-only constructs
//
// The SQL is standard where that costs nothing. What is not (CockroachDB
// accepts every item but the last three; it is not tested here):
//
//   - the types bytea and text[], and array parameters compared with
//     = ANY($n);
//   - INSERT … ON CONFLICT (idem_key) DO NOTHING, for idempotency keys;
//   - UPDATE … RETURNING, for a request's number and ClaimRunnable's
//     epochs, and data-modifying CTEs on it (WITH upd AS (UPDATE …
//     RETURNING) INSERT … SELECT … FROM upd), for the one-statement append;
//   - unnest of several arrays in FROM and array slices (a[lo:hi]), for
//     that append's rows;
//   - SELECT … FOR UPDATE OF e SKIP LOCKED, in ClaimRunnable;
//   - clock_timestamp(), the database's clock for lease expiry;
//   - CREATE SCHEMA / TABLE IF NOT EXISTS;
//   - the session setting idle_in_transaction_session_timeout;
//   - several statements pipelined up to one Sync as one implicit
//     transaction, for group commit;
//   - SET LOCAL synchronous_commit = off, or set_config with is_local in
//     a pipeline's implicit transaction, in AppendUnsynced (Postgres
//     only: CockroachDB has no asynchronous commit, and AppendUnsynced
//     would have to be Append there);
//   - pg_advisory_xact_lock(hashtext(…)), which serializes concurrent
//     migrations of one schema (Postgres only);
//   - LISTEN and pg_notify (NOTIFY), for Changes (Postgres only:
//     CockroachDB has no LISTEN/NOTIFY; a port would poll).
package pgstore
