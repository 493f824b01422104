// Package pgblob is the Postgres implementation of blob.Store (DESIGN §11,
// shared checkpoints): hosts that share a Postgres log share checkpoint
// contents through it, so a checkpoint captured on one host restores on
// another.
//
// # Tables
//
// Open creates, in its schema (default [DefaultSchema], the schema of
// eventlog/pgstore, so one database holds the log and its checkpoints), and
// migrates under an advisory lock:
//
//	blob_schema_version (version)                         this package's own version row
//	blobs       (namespace, hash, size, created)          one row per complete blob
//	blob_chunks (namespace, hash, n, data bytea)          its content, in chunks of ChunkSize
//
// # Why chunks
//
// A blob is stored as rows of at most [ChunkSize] (1 MiB) bytea, not as one
// bytea value. One value would be read and written whole in memory on both
// sides and is capped at 1 GB; chunks let Put and Get stream a file of any
// size with bounded memory, and keep each row at a size TOAST handles well.
//
// # Atomicity
//
// Put inserts the chunks and then the blobs row in one transaction, after
// checking that what it read hashes to the name: a blob is visible (Has,
// Get, List read the blobs row) only complete, and content that does not
// match is rolled back. Two hosts putting the same blob at once both
// succeed (ON CONFLICT DO NOTHING). Get reads one chunk per query, outside
// any transaction, and checks the content against its hash as it goes: a
// damaged or missing chunk fails the read with blob.ErrCorrupt naming the
// hash.
//
// # Postgres-only constructs
//
// pg_advisory_xact_lock and hashtext (serializing migrations), ON CONFLICT
// DO NOTHING, bytea.
package pgblob
