// Package pebblestore is the [eventlog.Log] and [eventlog.Index] of forkline
// on Pebble, on disk or (dir "") in Pebble's in-memory filesystem.
//
// # Durability
//
// Create, Append and Fork return after their one batch is committed with
// pebble.Sync, unless the store was opened [WithoutSync]. Appends to
// different executions never wait on each other's lock: each execution has
// its own, and Pebble groups concurrent synced commits into one fsync.
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
// # Key layout
//
// See keys.go: one-byte table tags, then the execution ID, then big-endian
// seqs, so that every per-execution range is contiguous and ordered by seq.
package pebblestore
