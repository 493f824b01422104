// Package eventtext is a compact, readable text form of a lineage's events,
// for test scenarios and golden files: [Parse] reads it, [Format] writes it,
// and the two round-trip.
//
// # Lines
//
// One event per line; blank lines and lines starting with # are ignored.
// Seqs are implicit: the first event is seq 1 and each line is the next
// seq, unless the line starts with "@N ", which sets its seq to N (later
// lines continue from there). A line is an event name followed by
// positional words and key=value fields, in any order after the positional
// words:
//
//	created agent=coder input="{\"task\":\"x\"}"
//	dispatch 1
//	started s1 tool write_file args=`{"path":"a"}` affects=ws attempt=1 idem=safe_to_retry
//	succeeded s1 result="wrote a"
//	failed s2 err=boom indeterminate
//	cancelled s3
//	denied s4 tool rm reason=no
//	bound ws driver=dirfs config=`{"root":"/x"}` binding=`{"id":1}` from=ref3 every=5 completion=true reuse=false
//	captured ws ref=r1 gen=2 reason=steps
//	capture_failed ws reason=steps err="disk full"
//	completed output=done
//	execution_failed code=handler err=x
//	fork parent=P at=12 select=db:@0/g1 select=ws:r1@7/g3/covered
//
// and the kinds and fields of format version 2:
//
//	created agent=coder deadline=2025-01-02T03:04:05Z key=order-1
//	dispatch 2 owner=host-a epoch=7
//	failed s2 err="rate limited" retry_at=2025-01-02T03:04:05Z
//	fork parent=P at=12 input=x override=s1:edited deadline=2025-01-02T03:04:05Z
//	cancel_requested reason="user asked" by=alice
//	execution_cancelled reason="user asked"
//	parked timer wake=2025-01-02T03:04:05Z
//	timer_started t1 wake=2025-01-02T03:04:05Z
//	timer_fired t1
//	approval_requested s5 tool rm args=x reason="at_most_once in a fork"
//	granted s5 by=bob note=ok
//	rejected s5 by=bob
//	marker use-v2
//	abandoned s7
//	diverged unconsumed=s8,s9
//
// and the three kinds of format version 3 (its new fields of older kinds
// have no text form yet: Format leaves them out; child.ended is an inbox
// request, never in a lineage, written here as a request reads):
//
//	message_received m1 topic=chat value=`"hi"` from=alice
//	event_set progress value=`{"done":3}`
//	child_ended step=s6
//
// # Values
//
// A value is a bare word (no spaces, quotes or '=', not starting with @ or
// #) or a Go string literal, double-quoted or (handy for JSON) backquoted.
// Byte values (input, args, result, output) and JSON values (config,
// binding) are the bytes of the string. An absent field takes its default:
// empty, except attempt=1, idem=safe_to_retry, binding={}, every=1,
// completion=true, reuse=false; Format leaves out every field that has its
// default value, so an empty byte slice reads back as nil. agent=,
// driver=, ref=, gen=, reason= (of captured and capture_failed), code=,
// parent= and at= are required.
//
// affects= takes comma-separated keys and may be repeated; a quoted value
// is one key, whatever it holds. A fork's select= is one selection,
// KEY:REF@CAPTUREDAT/gGENERATION with "/covered" appended when covered, and
// is repeated in order; REF is empty for the initial environment, and a KEY
// holding a colon is Go-quoted. parent= is a full ID or a short name such
// as P (see [ParseID]).
//
// An override= is STEPID:RESULT, repeated in order (STEPID quoted like a
// selection's KEY); unconsumed= is a list like affects=. Times in payloads
// (deadline=, retry_at=, wake=) are RFC 3339 with nanoseconds and read back
// in UTC. Event Times are not written: events read back have zero Times.
package eventtext
