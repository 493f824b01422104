package sdk

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
)

// ErrNonDeterministic is wrapped by the error of a call, and of a Run, that
// finds the handler disagreeing with the history it replays under
// [Strict] (DESIGN §15). A *NonDeterministicError says where.
var ErrNonDeterministic = errors.New("sdk: handler diverged from its recorded history")

// Strict makes the kernel check, on every dispatch, that the handler makes
// the calls its lineage recorded (DESIGN §15).
//
// A call's position is its (kind, target) pair and how many calls of that
// pair the dispatch made before it; calls of different pairs may interleave
// in any order (parallel LLM calls in goroutines, say), so goroutines never
// trip the check when the code did not change. Calls of one pair made
// concurrently (two goroutines asking the same model) take their positions
// in the order they reach the kernel: while the history holds them all,
// each replays by its identity and nothing trips, but past the recorded
// history — a crash lost a safe_to_retry intent, or a fork ends between
// them — one of them can take the position of a sibling that has not
// reached the kernel yet, and fail. Under Strict:
//
//   - a call with no record, at a position where the lineage recorded
//     another call (other args) that this dispatch has not consumed, does
//     not run: it returns an error that is ErrNonDeterministic (a
//     *NonDeterministicError naming the recorded call — kind, target, a
//     short form of its args, its seq — and the call made), appends
//     nothing, and the kernel fails the execution when the handler
//     returns: execution.failed{Code: nondeterministic};
//   - a dispatch whose handler returns normally while recorded calls remain
//     unconsumed (a renamed or removed step, an orphan the code no longer
//     reaches) does not complete: it appends execution.failed{Code:
//     nondeterministic} naming them, instead of step.abandoned, completion
//     captures and execution.completed.
//
// Both failures are recorded, so running the execution again returns the
// recorded failure; to carry the history over to changed code, fork it at
// the last event before the divergence (or guard the change with
// [Patched]). Strict is off in edited forks — a fork made with a new input
// or with overridden results, whose prefix was recorded by another input —
// where DESIGN §12's fork.diverged applies instead.
//
// Without Strict, recorded calls the handler does not make again are left as
// they are, except the orphans: a step started on an earlier dispatch and
// never finished that a completing dispatch did not reach again is ended
// with step.abandoned (see [AtMostOnce]).
func Strict() Option {
	return func(k *Kernel) error {
		k.strict = true
		return nil
	}
}

// RecordedCall describes one call, recorded or made, in a
// *NonDeterministicError.
type RecordedCall struct {
	Kind     eventlog.StepKind
	Target   string
	Args     string // a short form of the canonical args
	Position int    // calls of (Kind, Target) the dispatch made before it
	Seq      uint64 // seq of its newest step.started (of step.denied if it was denied); 0 for the call made
	StepID   string
}

// String renders the call as `tool "write_file" {"path":"a"} #2 (seq 7)`.
func (c RecordedCall) String() string {
	s := fmt.Sprintf("%s %q %s #%d", c.Kind, c.Target, c.Args, c.Position)
	if c.Seq != 0 {
		s += fmt.Sprintf(" (seq %d)", c.Seq)
	}
	return s
}

// NonDeterministicError is the error of a handler that diverged from its
// recorded history under [Strict]. Got is the call made (nil when the
// dispatch completed with recorded calls unconsumed); Expected lists the
// recorded calls the dispatch did not consume: the one at Got's position,
// or every unconsumed one.
type NonDeterministicError struct {
	ID       eventlog.ID
	Expected []RecordedCall
	Got      *RecordedCall
}

// Error implements error.
func (e *NonDeterministicError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sdk: execution %s: nondeterministic: ", e.ID)
	if e.Got != nil {
		fmt.Fprintf(&b, "the handler called %s where the lineage recorded %s", e.Got, e.Expected[0])
		if len(e.Expected) > 1 {
			fmt.Fprintf(&b, " (and %d more recorded call(s) not made)", len(e.Expected)-1)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "the handler returned without making %d recorded call(s): ", len(e.Expected))
	for i, c := range e.Expected {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// Is reports whether target is ErrNonDeterministic.
func (e *NonDeterministicError) Is(target error) bool { return target == ErrNonDeterministic }

// position is a call's (kind, target) pair (DESIGN §15).
type position struct {
	kind   eventlog.StepKind
	target string
}

// positions is what a dispatch knows of call positions: under Strict, the
// steps its lineage recorded when it began (their indexes in
// replay.State.At), by pair in lineage order; and how many calls of each
// pair it made. Guarded by the dispatch's mu. Without Strict nothing is
// indexed: a dispatch holds no per-step state beyond the folds.
type positions struct {
	strict   bool // Strict, and not an edited fork
	recorded map[position][]int
	made     map[position]int
	markers  map[string]int // Patched calls per name
	events   map[string]int // SetEvent calls per key
}

// newPositions indexes the steps s recorded, under strict. edited reports
// a fork with a new input or overridden results, where Strict is off (the
// index still serves a ReplayOnly kernel's errors).
func newPositions(s *replay.State, strict, edited bool) *positions {
	p := &positions{
		strict:   strict && !edited && len(s.Overrides()) == 0,
		recorded: make(map[position][]int),
		made:     make(map[position]int),
		markers:  make(map[string]int),
		events:   make(map[string]int),
	}
	if !strict {
		return p
	}
	for i := range s.Len() {
		st := s.At(i)
		pos := position{st.Kind, st.Target}
		p.recorded[pos] = append(p.recorded[pos], i)
	}
	return p
}

// editedFork reports whether ev is a fork.created that edits the fork:
// a new input or overridden results (DESIGN §12).
func editedFork(ev eventlog.Event) (edited, ok bool) {
	fc, ok := ev.Data.(*eventlog.ForkCreated)
	if !ok {
		return false, false
	}
	return len(fc.Input) > 0 || len(fc.Overrides) > 0, true
}

// positionLocked takes the next position of c's pair and, under Strict,
// refuses a call with no record (seen false) where the lineage recorded
// another call that this dispatch has not consumed: it fails the
// execution and returns the error. d.mu is held.
func (d *dispatch) positionLocked(c call, stepID string, seen bool) error {
	p := d.pos
	pos := position{c.kind, c.target}
	n := p.made[pos]
	p.made[pos]++
	if !p.strict || seen {
		return nil
	}
	rec := p.recorded[pos]
	if n >= len(rec) || d.consumedLocked(rec[n]) {
		return nil
	}
	err := &NonDeterministicError{
		ID:       d.id,
		Expected: []RecordedCall{d.recordedCallLocked(d.state.At(rec[n]), n)},
		Got:      &RecordedCall{Kind: c.kind, Target: c.target, Args: shortArgs(c.args), Position: n, StepID: stepID},
	}
	d.failLocked(eventlog.FailNondeterministic, err)
	return err
}

// unreachedLocked returns the steps the lineage recorded when the dispatch
// began that it did not consume, in lineage order, with their current
// state (read-only: their slices are the fold's). d.mu is held.
func (d *dispatch) unreachedLocked() []replay.Step {
	var out []replay.Step
	for i := range d.recorded {
		if !d.consumedLocked(i) {
			out = append(out, d.state.At(i))
		}
	}
	return out
}

// settleLocked runs when the handler returned normally, before the
// completion captures (DESIGN §15). Under Strict, recorded calls the
// dispatch did not consume fail the execution (failed is then true, and
// res and err are Run's). Otherwise every unreached orphan — a step
// started on an earlier dispatch whose attempt never ended — is ended with
// step.abandoned, each in its own append with the steps captures its
// landing makes due. d.mu is held.
func (d *dispatch) settleLocked() (res *Result, err error, failed bool) {
	unreached := d.unreachedLocked()
	if d.pos.strict && len(unreached) > 0 {
		nd := &NonDeterministicError{ID: d.id}
		for _, st := range unreached {
			nd.Expected = append(nd.Expected, d.recordedCallLocked(st, d.recordedPosition(st)))
		}
		fail := &ExecutionError{ID: d.id, Code: eventlog.FailNondeterministic, Message: nd.Error(), cause: nd}
		if err := d.appendLocked(false, &eventlog.ExecutionFailed{Error: fail.Message, Code: fail.Code}); err != nil {
			return nil, err, true
		}
		return nil, fail, true
	}
	for _, st := range unreached {
		if st.Status != replay.StepStarted {
			continue // its attempt ended: cancelled, retrying, or never started (denied)
		}
		payloads := []eventlog.Payload{&eventlog.StepAbandoned{StepID: st.ID}}
		payloads = append(payloads, d.dueCapturesLocked(st.ID, call{kind: st.Kind, target: st.Target})...)
		if err := d.appendLocked(false, payloads...); err != nil {
			return nil, err, true
		}
		d.logCaptures(payloads[1:])
	}
	return nil, nil, false
}

// recordedPosition returns st's position among the recorded calls of its
// pair.
func (d *dispatch) recordedPosition(st replay.Step) int {
	for i, r := range d.pos.recorded[position{st.Kind, st.Target}] {
		if d.state.At(r).ID == st.ID {
			return i
		}
	}
	return 0
}

// recordedCallLocked describes recorded step st at position n. The
// dispatch's fold keeps no args (replay.Options.DropArgs): they are read
// from st's newest step.started in the log. d.mu is held.
func (d *dispatch) recordedCallLocked(st replay.Step, n int) RecordedCall {
	seq := st.StartedAt
	if seq == 0 {
		seq = st.EndedAt // denied: it never started
	}
	args := st.Args
	if args == nil && st.StartedAt != 0 {
		args = d.startedArgs(st.ID, st.StartedAt)
	}
	return RecordedCall{Kind: st.Kind, Target: st.Target, Args: shortArgs(args), Position: n, Seq: seq, StepID: st.ID}
}

// startedArgs returns the Args of the step.started of stepID at seq, nil
// if the log cannot give them (an error quoting args then quotes none).
func (d *dispatch) startedArgs(stepID string, seq uint64) []byte {
	for ev, err := range d.k.log.Events(d.ctx, d.id, seq) {
		if err != nil {
			return nil
		}
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && ev.Seq == seq && p.StepID == stepID {
			return p.Args
		}
		return nil
	}
	return nil
}

// maxShortArgs bounds the args an error quotes.
const maxShortArgs = 80

// shortArgs returns canonical args as text, cut to maxShortArgs bytes on
// a rune boundary.
func shortArgs(args []byte) string {
	if len(args) == 0 {
		return "()"
	}
	if len(args) <= maxShortArgs {
		return string(args)
	}
	cut := maxShortArgs
	for cut > 0 && !utf8.RuneStart(args[cut]) {
		cut--
	}
	return string(args[:cut]) + "…"
}
