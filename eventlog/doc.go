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
// # Wrappers and capabilities
//
// Besides Log, a store may implement optional interfaces: [Leaser] and
// [Claimer] (ownership and fencing), [Inbox] (requests such as a cancel)
// and [Decider] (an approval decided atomically),
// [Deleter], [UsageReporter], [Notifier] (other processes' writes
// announced, for a store many processes share). A Log that wraps another — for metrics,
// tracing, a test recorder — keeps them by exposing the log it wraps with
// a method Unwrap() Log, and callers find them with [As], which walks the
// chain of wrappers as errors.As walks errors (DESIGN §15½.3). A type
// assertion stops at the wrapper: forkline's packages never use one.
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
// A record is its format version, the kind code, a CRC-32C, the time
// in Unix nanoseconds and the payload as a msgpack map keyed by the field tags
// of the payload structs (times in payloads are msgpack timestamps, decoded
// in UTC). Kind codes and field tags are pinned by a test: a
// change to them is a new FormatVersion. The CRC-32C covers all of the
// record but itself and, from format version 3 on, the record's place: the
// execution ID and the seq of an event ([AppendRecord], [DecodeRecord]),
// or the execution ID and the number of an inbox request
// ([AppendRequest], [DecodeRequest]), so a record moved to another seq,
// another execution, or between the log and the inbox fails its check
// (version 1 and 2 records keep their old check, which binds no place).
// [DecodeRecord] rejects an unknown
// version or kind, a checksum mismatch, unknown fields, trailing bytes and a
// payload that breaks its invariants, with an error that wraps [ErrCorrupt];
// stores wrap it in a [CorruptionError] naming the execution and the seq.
// [CheckRecord] checks a record's header and checksum alone, without
// decoding its payload.
//
// One table in kind.go holds, per kind, its code, wire name, the format
// version that introduced it and when an append of it must be durable
// ([MustSync]). Version 1 is DESIGN §3's thirteen kinds; version 2 adds the kinds and fields of
// DESIGN §8½ in one step: execution.cancel_requested, execution.cancelled,
// dispatch.parked, timer.started, timer.fired, approval.requested,
// approval.granted, approval.rejected, marker.recorded, step.abandoned and
// fork.diverged; execution.created Deadline and Key, dispatch.started Owner
// and Epoch, step.failed RetryAt, fork.created Input, Overrides and
// Deadline ([V2Fields]); the step kind child; and the capture reasons park
// and shutdown (DESIGN §15½.8). Version 3
// ([FormatVersion], what this build writes) adds Part III's (DESIGN
// §21½.7): message.received and event.set, and child.ended — an inbox
// request only, which a child's terminal append writes into its caller's
// inbox (DESIGN §15½.6) and no lineage holds; execution.created Version,
// Queue, Priority and Budget; step.started WakeAt (of a recv step);
// step.succeeded Tokens and Truncated; step.denied RuleID and Code
// ([DenialCode]); resource.bound Portable; fork.created Version, Budget
// and Messages; approval.requested RuleID, ExpiresAt, Approvers and
// Message ([V3Fields]); the step kind recv (no body: [StepKind.HasBody])
// and the park reasons rate_limit and message. A record of an older
// version still decodes unchanged (a version 1 or 2 binding reads as not
// Portable), and one that holds anything of a later version is corrupt.
// The failure code resource_unavailable stays readable in old logs; the
// kernel no longer writes it (DESIGN §15½.4).
//
// # Status
//
// [StatusState] is DESIGN §9's status fold (pending, running, waiting,
// completed, failed, cancelled) with what a store keeps beside it: the
// head, the Time of the newest event, the wake time of a parked dispatch
// and the run's deadline. The replay fold and the stores run this one
// function, so that [Info].Status (kept by the store, never folded on
// read) and a replay of the lineage agree. A fork's status is its own from
// its fork.created on. [Info].Approvals (the approvals awaited) tells an
// execution parked for a decision from one parked for a child: only a
// request or its wake time makes the former runnable (DESIGN §15½.6).
// [RetryKeeper] keeps beside an execution the backoff of the Serve that
// runs it (DESIGN §15½.11), shown as [Info].LastError and RetryAt; it is a
// note, not an event.
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
// environment) and no earlier body ever ran against it. Part II's events
// fold by DESIGN §8½: a child step advances like a tool call (under
// CoverageReuse only the resources it affects), step.failed with a RetryAt
// and step.abandoned land the attempt, and the kinds without a body
// (timers, approvals, requests, markers, parking, divergence) change no
// resource.
//
// # Events read by people
//
// Every payload field carries a json tag with the name of its msgpack tag
// (the tags do not change the record format: the codec reads only msgpack
// tags). Payloads and [Event] marshal to JSON with recorded values shown as
// JSON, not base64 ([JSONValue], [PayloadFields]). [Summary] is the
// one-line text of an event that the forkline command prints; [Steps]
// gives the same text with each step named by its kind and target.
package eventlog
