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
// Times are not written: events read back have zero Times.
package eventtext
