package eventtext

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// Format writes events in the text form that [Parse] reads, one line per
// event, each ending in a newline. A line starts with "@N " only when its
// seq is not the one after the previous line's (the first line's is 1), so
// a well-formed lineage has no seq prefixes. Parse(Format(evs)) returns evs
// with zero Times, where an empty byte slice, JSON value or list may come
// back nil.
func Format(events []eventlog.Event) string {
	var b strings.Builder
	var prev uint64
	for _, ev := range events {
		if ev.Seq != prev+1 {
			fmt.Fprintf(&b, "@%d ", ev.Seq)
		}
		prev = ev.Seq
		b.WriteString(FormatEvent(ev))
		b.WriteByte('\n')
	}
	return b.String()
}

// FormatEvent returns the line of one event without seq prefix or newline.
// An event without a payload is written as "invalid", which Parse rejects.
func FormatEvent(ev eventlog.Event) string {
	var l line
	switch p := ev.Data.(type) {
	case *eventlog.ExecutionCreated:
		if p == nil {
			break
		}
		l.word("created")
		l.field("agent", p.Agent)
		l.bytes("input", p.Input)
		l.time("deadline", p.Deadline)
		l.nonEmpty("key", p.Key)
	case *eventlog.DispatchStarted:
		if p == nil {
			break
		}
		l.word("dispatch")
		l.word(strconv.FormatUint(p.Dispatch, 10))
		l.nonEmpty("owner", p.Owner)
		if p.Epoch != 0 {
			l.field("epoch", strconv.FormatUint(p.Epoch, 10))
		}
	case *eventlog.StepStarted:
		if p == nil {
			break
		}
		l.word("started")
		l.pos(p.StepID)
		l.pos(string(p.StepKind))
		l.pos(p.Target)
		l.bytes("args", p.Args)
		l.affects(p.Resources)
		if p.Attempt != 1 {
			l.field("attempt", strconv.FormatUint(uint64(p.Attempt), 10))
		}
		if p.Idempotency != eventlog.SafeToRetry {
			l.field("idem", string(p.Idempotency))
		}
	case *eventlog.StepSucceeded:
		if p == nil {
			break
		}
		l.word("succeeded")
		l.pos(p.StepID)
		l.bytes("result", p.Result)
	case *eventlog.StepFailed:
		if p == nil {
			break
		}
		l.word("failed")
		l.pos(p.StepID)
		l.nonEmpty("err", p.Error)
		if p.Indeterminate {
			l.word("indeterminate")
		}
		l.time("retry_at", p.RetryAt)
	case *eventlog.StepCancelled:
		if p == nil {
			break
		}
		l.word("cancelled")
		l.pos(p.StepID)
	case *eventlog.StepDenied:
		if p == nil {
			break
		}
		l.word("denied")
		l.pos(p.StepID)
		l.pos(string(p.StepKind))
		l.pos(p.Target)
		l.nonEmpty("reason", p.Reason)
	case *eventlog.ResourceBound:
		if p == nil {
			break
		}
		l.word("bound")
		l.pos(p.Key)
		l.field("driver", p.DriverID)
		l.bytes("config", p.Configuration)
		if string(p.Binding) != defaultBinding {
			l.field("binding", string(p.Binding))
		}
		l.nonEmpty("from", p.From)
		if p.EverySteps != 1 {
			l.field("every", strconv.Itoa(p.EverySteps))
		}
		if !p.OnCompletion {
			l.field("completion", "false")
		}
		if p.CoverageReuse {
			l.field("reuse", "true")
		}
	case *eventlog.ResourceCaptured:
		if p == nil {
			break
		}
		l.word("captured")
		l.pos(p.Key)
		l.field("ref", p.Ref)
		l.field("gen", strconv.FormatUint(p.Generation, 10))
		l.field("reason", string(p.Reason))
	case *eventlog.ResourceCaptureFailed:
		if p == nil {
			break
		}
		l.word("capture_failed")
		l.pos(p.Key)
		l.field("reason", string(p.Reason))
		l.nonEmpty("err", p.Error)
	case *eventlog.ExecutionCompleted:
		if p == nil {
			break
		}
		l.word("completed")
		l.bytes("output", p.Output)
	case *eventlog.ExecutionFailed:
		if p == nil {
			break
		}
		l.word("execution_failed")
		l.field("code", string(p.Code))
		l.nonEmpty("err", p.Error)
	case *eventlog.ForkCreated:
		if p == nil {
			break
		}
		l.word("fork")
		l.field("parent", FormatID(p.Parent))
		l.field("at", strconv.FormatUint(p.At, 10))
		for _, s := range p.Selections {
			l.field("select", FormatSelection(s))
		}
		l.bytes("input", p.Input)
		for _, o := range p.Overrides {
			l.field("override", quoteKey(o.StepID)+":"+string(o.Result))
		}
		l.time("deadline", p.Deadline)
	case *eventlog.CancelRequested:
		if p == nil {
			break
		}
		l.word("cancel_requested")
		l.nonEmpty("reason", p.Reason)
		l.nonEmpty("by", p.By)
	case *eventlog.ExecutionCancelled:
		if p == nil {
			break
		}
		l.word("execution_cancelled")
		l.nonEmpty("reason", p.Reason)
	case *eventlog.DispatchParked:
		if p == nil {
			break
		}
		l.word("parked")
		l.pos(string(p.Reason))
		l.time("wake", p.WakeAt)
	case *eventlog.TimerStarted:
		if p == nil {
			break
		}
		l.word("timer_started")
		l.pos(p.TimerID)
		l.time("wake", p.WakeAt)
	case *eventlog.TimerFired:
		if p == nil {
			break
		}
		l.word("timer_fired")
		l.pos(p.TimerID)
	case *eventlog.ApprovalRequested:
		if p == nil {
			break
		}
		l.word("approval_requested")
		l.pos(p.StepID)
		l.pos(string(p.StepKind))
		l.pos(p.Target)
		l.bytes("args", p.Args)
		l.nonEmpty("reason", p.Reason)
	case *eventlog.ApprovalGranted:
		if p == nil {
			break
		}
		l.word("granted")
		l.pos(p.StepID)
		l.nonEmpty("by", p.By)
		l.nonEmpty("note", p.Note)
	case *eventlog.ApprovalRejected:
		if p == nil {
			break
		}
		l.word("rejected")
		l.pos(p.StepID)
		l.nonEmpty("by", p.By)
		l.nonEmpty("note", p.Note)
	case *eventlog.MarkerRecorded:
		if p == nil {
			break
		}
		l.word("marker")
		l.pos(p.Name)
	case *eventlog.StepAbandoned:
		if p == nil {
			break
		}
		l.word("abandoned")
		l.pos(p.StepID)
	case *eventlog.ForkDiverged:
		if p == nil {
			break
		}
		l.word("diverged")
		l.list("unconsumed", p.Unconsumed)
	case *eventlog.MessageReceived:
		if p == nil {
			break
		}
		l.word("message_received")
		l.pos(p.MessageID)
		l.field("topic", p.Topic)
		l.bytes("value", p.Value)
		l.nonEmpty("from", p.From)
	case *eventlog.EventSet:
		if p == nil {
			break
		}
		l.word("event_set")
		l.pos(p.Key)
		l.bytes("value", p.Value)
	case *eventlog.ChildEnded:
		if p == nil {
			break
		}
		l.word("child_ended")
		l.nonEmpty("step", p.StepID)
	}
	if l.b.Len() == 0 {
		return "invalid"
	}
	return l.b.String()
}

// FormatSelection writes a fork selection as KEY:REF@AT/gGEN, with
// "/covered" appended when it is covered (the form of a fork line's
// select=). KEY is Go-quoted when it holds a colon, starts with a double
// quote or is empty.
func FormatSelection(s eventlog.ForkSelection) string {
	out := fmt.Sprintf("%s:%s@%d/g%d", quoteKey(s.Key), s.Ref, s.CapturedAt, s.Generation)
	if s.Covered {
		out += "/covered"
	}
	return out
}

// quoteKey returns key Go-quoted when it is empty, holds a colon or starts
// with a double quote: the form of the key before the colon of select= and
// override=.
func quoteKey(key string) string {
	if key == "" || strings.ContainsRune(key, ':') || strings.HasPrefix(key, `"`) {
		return strconv.Quote(key)
	}
	return key
}

// TimeLayout is the layout of a time value (deadline=, retry_at=, wake=):
// RFC 3339 with nanoseconds; times read back in UTC.
const TimeLayout = time.RFC3339Nano

// line builds one line of words.
type line struct{ b strings.Builder }

// word appends w as it is.
func (l *line) word(w string) {
	if l.b.Len() > 0 {
		l.b.WriteByte(' ')
	}
	l.b.WriteString(w)
}

// pos appends a positional value, quoted when needed.
func (l *line) pos(v string) { l.word(quote(v)) }

// field appends key=value, the value quoted when needed.
func (l *line) field(key, v string) { l.word(key + "=" + quote(v)) }

// nonEmpty appends key=value unless v is empty.
func (l *line) nonEmpty(key, v string) {
	if v != "" {
		l.field(key, v)
	}
}

// bytes appends key=value unless v is empty.
func (l *line) bytes(key string, v []byte) {
	if len(v) > 0 {
		l.field(key, string(v))
	}
}

// time appends key=value in TimeLayout unless t is zero.
func (l *line) time(key string, t time.Time) {
	if !t.IsZero() {
		l.field(key, t.UTC().Format(TimeLayout))
	}
}

// affects appends the resource keys as affects=a,b (see list).
func (l *line) affects(keys []string) { l.list("affects", keys) }

// list appends the values as key=a,b, or, when a value is empty or holds a
// comma or needs quoting, as one quoted key= per value.
func (l *line) list(key string, keys []string) {
	if len(keys) == 0 {
		return
	}
	simple := true
	for _, k := range keys {
		if !bare(k) || strings.ContainsRune(k, ',') {
			simple = false
		}
	}
	if simple {
		l.word(key + "=" + strings.Join(keys, ","))
		return
	}
	for _, k := range keys {
		l.word(key + "=" + quoted(k))
	}
}

// ParseID reads an execution ID written by [FormatID]: the canonical form
// (or 32 hex digits), or a short name of 1 to 16 letters, digits, '_', '-'
// or '.', which stands for the ID whose bytes are the name padded with zero
// bytes. Short names keep test scenarios readable ("parent=P").
func ParseID(s string) (eventlog.ID, error) {
	if len(s) >= 32 {
		return eventlog.ParseID(s)
	}
	var id eventlog.ID
	if !shortName(s) {
		return id, fmt.Errorf("eventtext: id %q is neither an ID nor a short name", s)
	}
	copy(id[:], s)
	return id, nil
}

// FormatID writes id as its short name when it is one (see [ParseID]),
// otherwise in the canonical form.
func FormatID(id eventlog.ID) string {
	n := bytes.IndexByte(id[:], 0)
	if n < 0 {
		n = len(id)
	}
	if n > 0 && shortName(string(id[:n])) && bytes.Count(id[n:], []byte{0}) == len(id)-n {
		return string(id[:n])
	}
	return id.String()
}

// shortName reports whether s is 1 to 16 of the characters a short name may
// hold.
func shortName(s string) bool {
	if len(s) == 0 || len(s) > len(eventlog.ID{}) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
