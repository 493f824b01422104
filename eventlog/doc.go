// Package eventlog is forkline's system of record: the event types of an
// execution, their on-disk encoding, the Log interface that stores them and
// the checkpoint Index a store keeps beside them.
//
// It imports none of forkline's packages; everything else stands on it. A
// kernel builder who wants another backend implements [Log] (and [Index])
// and reuses the folds in replay, coverage and fork unchanged. The Pebble
// implementation lives in [github.com/forkline/forkline/eventlog/pebblestore]
// so that a program using another backend does not compile Pebble in.
//
// # Events
//
// An execution is a sequence of [Event] values numbered 1, 2, 3, … (Seq).
// Each carries one payload ([ExecutionCreated], [StepStarted], …, one Go type
// per [Kind]); only the pointer types implement [Payload], so a type switch
// over Event.Data has exactly one case per kind. A fork of E at N shares E's
// events 1..N and numbers its own from N+1, with [ForkCreated] first.
//
// # Format
//
// A record is [FormatVersion], the kind code, a CRC-32C of all but itself, the time
// in Unix nanoseconds and the payload as a msgpack map keyed by the field tags
// of the payload structs. Kind codes and field tags are pinned by a test: a
// change to them is a new FormatVersion. [DecodeRecord] rejects an unknown
// version or kind, a checksum mismatch, unknown fields, trailing bytes and a
// payload that breaks its invariants, with an error that wraps [ErrCorrupt];
// stores wrap it in a [CorruptionError] naming the execution and the seq.
//
// # The checkpoint index
//
// Choosing what a fork restores (DESIGN §5) needs, for one resource at one
// seq, its generation, the steps in flight against it and the checkpoints of
// its generation. [IndexState] is the fold that computes those as a
// [ResourceState] per resource per event that changes it; a store runs it on
// every append and writes the states in the same batch as the events, so
// that a fork at seq 1,000,000 is planned with a few index lookups instead of
// a fold over the prefix.
//
// Generations follow DESIGN §5 exactly, with one choice written down here:
// an execution's own resource.bound empties the resource's in-flight set,
// because the new resource was made from a checkpoint (or the initial
// environment) and no earlier body ever ran against it.
package eventlog
