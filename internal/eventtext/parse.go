package eventtext

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// Parse reads events in the text form described in the package
// documentation. Seqs are implicit (1, 2, 3, … by line, or continuing from
// an "@N" prefix). It checks the syntax, not the payloads' invariants: call
// [eventlog.Event.Validate] for those. An error names the line and wraps
// [eventlog.ErrInvalid].
func Parse(text string) ([]eventlog.Event, error) {
	var events []eventlog.Event
	var seq uint64
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		toks, err := lex(trimmed)
		if err != nil {
			return nil, fmt.Errorf("eventtext: line %d: %s: %w", i+1, err, eventlog.ErrInvalid)
		}
		seq++
		if t := toks[0]; t.key == "" && !t.quoted && strings.HasPrefix(t.val, "@") {
			n, err := strconv.ParseUint(t.val[1:], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("eventtext: line %d: bad seq prefix %q: %w", i+1, t.val, eventlog.ErrInvalid)
			}
			seq = n
			toks = toks[1:]
		}
		p, err := parseEvent(toks)
		if err != nil {
			return nil, fmt.Errorf("eventtext: line %d: %s: %w", i+1, err, eventlog.ErrInvalid)
		}
		events = append(events, eventlog.Event{Seq: seq, Data: p})
	}
	return events, nil
}

// parseEvent reads the payload of one line from its tokens (after any seq
// prefix).
func parseEvent(toks []token) (eventlog.Payload, error) {
	if len(toks) == 0 {
		return nil, fmt.Errorf("no event after the seq prefix")
	}
	verb := toks[0]
	if verb.key != "" || verb.quoted {
		return nil, fmt.Errorf("line does not start with an event name")
	}
	a := &args{verb: verb.val, toks: toks[1:], used: make([]bool, len(toks)-1)}
	var p eventlog.Payload
	switch verb.val {
	case "created":
		p = &eventlog.ExecutionCreated{
			Agent:    a.required("agent"),
			Input:    a.bytes("input"),
			Deadline: a.time("deadline"),
			Key:      a.optional("key", ""),
		}
	case "dispatch":
		p = &eventlog.DispatchStarted{
			Dispatch: a.uint(a.pos("dispatch count"), 64),
			Owner:    a.optional("owner", ""),
			Epoch:    a.uint(a.optional("epoch", "0"), 64),
		}
	case "started":
		s := &eventlog.StepStarted{
			StepID:   a.pos("step id"),
			StepKind: eventlog.StepKind(a.pos("step kind")),
			Target:   a.pos("target"),
			Args:     a.bytes("args"),
		}
		s.Resources = a.list("affects")
		s.Attempt = uint32(a.uint(a.optional("attempt", "1"), 32))
		s.Idempotency = eventlog.Idempotency(a.optional("idem", string(eventlog.SafeToRetry)))
		p = s
	case "succeeded":
		p = &eventlog.StepSucceeded{StepID: a.pos("step id"), Result: a.bytes("result")}
	case "failed":
		p = &eventlog.StepFailed{
			StepID:        a.pos("step id"),
			Error:         a.optional("err", ""),
			Indeterminate: a.flag("indeterminate"),
			RetryAt:       a.time("retry_at"),
		}
	case "cancelled":
		p = &eventlog.StepCancelled{StepID: a.pos("step id")}
	case "denied":
		p = &eventlog.StepDenied{
			StepID:   a.pos("step id"),
			StepKind: eventlog.StepKind(a.pos("step kind")),
			Target:   a.pos("target"),
			Reason:   a.optional("reason", ""),
		}
	case "bound":
		b := &eventlog.ResourceBound{
			Key:           a.pos("key"),
			DriverID:      a.required("driver"),
			Configuration: json.RawMessage(a.bytes("config")),
			Binding:       json.RawMessage(a.optional("binding", defaultBinding)),
			From:          a.optional("from", ""),
			OnCompletion:  a.bool(a.optional("completion", "true")),
			CoverageReuse: a.bool(a.optional("reuse", "false")),
		}
		b.EverySteps = a.int(a.optional("every", "1"))
		p = b
	case "captured":
		p = &eventlog.ResourceCaptured{
			Key:        a.pos("key"),
			Ref:        a.required("ref"),
			Generation: a.uint(a.required("gen"), 64),
			Reason:     eventlog.CaptureReason(a.required("reason")),
		}
	case "capture_failed":
		p = &eventlog.ResourceCaptureFailed{
			Key:    a.pos("key"),
			Reason: eventlog.CaptureReason(a.required("reason")),
			Error:  a.optional("err", ""),
		}
	case "completed":
		p = &eventlog.ExecutionCompleted{Output: a.bytes("output")}
	case "execution_failed":
		p = &eventlog.ExecutionFailed{
			Code:  eventlog.FailureCode(a.required("code")),
			Error: a.optional("err", ""),
		}
	case "fork":
		f := &eventlog.ForkCreated{}
		if s := a.required("parent"); a.err == nil {
			f.Parent, a.err = ParseID(s)
		}
		f.At = a.uint(a.required("at"), 64)
		for _, v := range a.all("select") {
			if a.err != nil {
				break
			}
			var sel eventlog.ForkSelection
			sel, a.err = parseSelection(v.val)
			f.Selections = append(f.Selections, sel)
		}
		f.Input = a.bytes("input")
		for _, v := range a.all("override") {
			if a.err != nil {
				break
			}
			var o eventlog.StepOverride
			o, a.err = parseOverride(v.val)
			f.Overrides = append(f.Overrides, o)
		}
		f.Deadline = a.time("deadline")
		p = f
	case "cancel_requested":
		p = &eventlog.CancelRequested{Reason: a.optional("reason", ""), By: a.optional("by", "")}
	case "execution_cancelled":
		p = &eventlog.ExecutionCancelled{Reason: a.optional("reason", "")}
	case "parked":
		p = &eventlog.DispatchParked{Reason: eventlog.ParkReason(a.pos("reason")), WakeAt: a.time("wake")}
	case "timer_started":
		p = &eventlog.TimerStarted{TimerID: a.pos("timer id"), WakeAt: a.time("wake")}
	case "timer_fired":
		p = &eventlog.TimerFired{TimerID: a.pos("timer id")}
	case "approval_requested":
		p = &eventlog.ApprovalRequested{
			StepID:   a.pos("step id"),
			StepKind: eventlog.StepKind(a.pos("step kind")),
			Target:   a.pos("target"),
			Args:     a.bytes("args"),
			Reason:   a.optional("reason", ""),
		}
	case "granted":
		p = &eventlog.ApprovalGranted{StepID: a.pos("step id"), By: a.optional("by", ""), Note: a.optional("note", "")}
	case "rejected":
		p = &eventlog.ApprovalRejected{StepID: a.pos("step id"), By: a.optional("by", ""), Note: a.optional("note", "")}
	case "marker":
		p = &eventlog.MarkerRecorded{Name: a.pos("name")}
	case "abandoned":
		p = &eventlog.StepAbandoned{StepID: a.pos("step id")}
	case "diverged":
		p = &eventlog.ForkDiverged{Unconsumed: a.list("unconsumed")}
	case "message_received":
		p = &eventlog.MessageReceived{
			MessageID: a.pos("message id"),
			Topic:     a.required("topic"),
			Value:     a.bytes("value"),
			From:      a.optional("from", ""),
		}
	case "event_set":
		p = &eventlog.EventSet{Key: a.pos("key"), Value: a.bytes("value")}
	case "child_ended":
		p = &eventlog.ChildEnded{StepID: a.optional("step", "")}
	default:
		return nil, fmt.Errorf("unknown event %q", verb.val)
	}
	if err := a.done(); err != nil {
		return nil, err
	}
	return p, nil
}

// defaultBinding is the binding of a bound line without binding=.
const defaultBinding = "{}"

// args hands out the tokens of one line, remembering the first error.
type args struct {
	verb string
	toks []token
	used []bool
	err  error
}

// pos returns the next unused positional value.
func (a *args) pos(what string) string {
	for i, t := range a.toks {
		if !a.used[i] && t.key == "" {
			a.used[i] = true
			return t.val
		}
	}
	a.fail(fmt.Errorf("%s: missing %s", a.verb, what))
	return ""
}

// flag reports whether the bare word name is among the positional values.
func (a *args) flag(name string) bool {
	for i, t := range a.toks {
		if !a.used[i] && t.key == "" && !t.quoted && t.val == name {
			a.used[i] = true
			return true
		}
	}
	return false
}

// all returns every value of key, in order.
func (a *args) all(key string) []token {
	var out []token
	for i, t := range a.toks {
		if t.key == key {
			a.used[i] = true
			out = append(out, t)
		}
	}
	return out
}

// value returns the value of key, and whether it was given; a key given
// twice is an error.
func (a *args) value(key string) (string, bool) {
	vs := a.all(key)
	if len(vs) > 1 {
		a.fail(fmt.Errorf("%s: %s= given %d times", a.verb, key, len(vs)))
	}
	if len(vs) == 0 {
		return "", false
	}
	return vs[0].val, true
}

func (a *args) required(key string) string {
	v, ok := a.value(key)
	if !ok {
		a.fail(fmt.Errorf("%s: missing %s=", a.verb, key))
	}
	return v
}

func (a *args) optional(key, def string) string {
	if v, ok := a.value(key); ok {
		return v
	}
	return def
}

// bytes returns the value of key as bytes, nil when absent.
func (a *args) bytes(key string) []byte {
	if v, ok := a.value(key); ok {
		return []byte(v)
	}
	return nil
}

// list returns the values of every key=, each split at commas unless it
// was quoted.
func (a *args) list(key string) []string {
	var out []string
	for _, v := range a.all(key) {
		if v.quoted {
			out = append(out, v.val)
		} else {
			out = append(out, strings.Split(v.val, ",")...)
		}
	}
	return out
}

// time returns the value of key in TimeLayout, in UTC; zero when absent.
func (a *args) time(key string) time.Time {
	v, ok := a.value(key)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(TimeLayout, v)
	if err != nil {
		a.fail(fmt.Errorf("%s: %s=%q is not an RFC 3339 time", a.verb, key, v))
		return time.Time{}
	}
	return t.UTC()
}

func (a *args) uint(s string, bits int) uint64 {
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		a.fail(fmt.Errorf("%s: %q is not a %d-bit unsigned number", a.verb, s, bits))
	}
	return n
}

func (a *args) int(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		a.fail(fmt.Errorf("%s: %q is not a number", a.verb, s))
	}
	return n
}

func (a *args) bool(s string) bool {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	a.fail(fmt.Errorf("%s: %q is not true or false", a.verb, s))
	return false
}

func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// done returns the first error, or an error naming a token no field took.
func (a *args) done() error {
	if a.err != nil {
		return a.err
	}
	for i, t := range a.toks {
		if a.used[i] {
			continue
		}
		if t.key != "" {
			return fmt.Errorf("%s: unknown field %s=", a.verb, t.key)
		}
		return fmt.Errorf("%s: unexpected word %q", a.verb, t.val)
	}
	return nil
}

// parseOverride reads STEPID:RESULT, where STEPID is Go-quoted when it
// holds a colon or starts with a double quote.
func parseOverride(s string) (eventlog.StepOverride, error) {
	var o eventlog.StepOverride
	rest := s
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return o, fmt.Errorf("fork: override=%q: bad quoted step id", s)
		}
		o.StepID, _ = strconv.Unquote(q)
		rest = s[len(q):]
		if !strings.HasPrefix(rest, ":") {
			return o, fmt.Errorf("fork: override=%q: no colon after the step id (want STEPID:RESULT)", s)
		}
		rest = rest[1:]
	} else {
		var ok bool
		o.StepID, rest, ok = strings.Cut(s, ":")
		if !ok {
			return o, fmt.Errorf("fork: override=%q: no colon after the step id (want STEPID:RESULT)", s)
		}
	}
	if rest != "" {
		o.Result = []byte(rest)
	}
	return o, nil
}

// parseSelection reads KEY:REF@AT/gGEN[/covered], where KEY is Go-quoted
// when it holds a colon or starts with a double quote.
func parseSelection(s string) (eventlog.ForkSelection, error) {
	var sel eventlog.ForkSelection
	bad := func(why string) (eventlog.ForkSelection, error) {
		return eventlog.ForkSelection{}, fmt.Errorf("fork: select=%q: %s (want KEY:REF@AT/gGEN or KEY:REF@AT/gGEN/covered)", s, why)
	}
	var rest string
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return bad("bad quoted key")
		}
		sel.Key, _ = strconv.Unquote(q)
		rest = s[len(q):]
		if !strings.HasPrefix(rest, ":") {
			return bad("no colon after the key")
		}
		rest = rest[1:]
	} else {
		var ok bool
		sel.Key, rest, ok = strings.Cut(s, ":")
		if !ok {
			return bad("no colon after the key")
		}
	}
	rest, sel.Covered = strings.CutSuffix(rest, "/covered")
	i := strings.LastIndex(rest, "/g")
	if i < 0 {
		return bad("no /gGEN")
	}
	gen, err := strconv.ParseUint(rest[i+2:], 10, 64)
	if err != nil {
		return bad("bad generation")
	}
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '@')
	if j < 0 {
		return bad("no @AT")
	}
	at, err := strconv.ParseUint(rest[j+1:], 10, 64)
	if err != nil {
		return bad("bad captured-at seq")
	}
	sel.Ref, sel.CapturedAt, sel.Generation = rest[:j], at, gen
	return sel, nil
}
