package eventlog

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Summary is the one-line text of an event that the forkline command
// prints: the kind's key facts, recorded values shown as compact JSON (or
// key=value pairs for an object of arguments), long text clipped with "…".
// A terminal step event names its step by StepID; [Steps.Summary] names it
// by kind and target when it has seen the step's step.started.
func Summary(ev Event) string { return Steps(nil).Summary(ev) }

// Steps remembers the step.started event of each step of a lineage, so that
// the summary of a step's later events can say what the step was. The zero
// value (nil) is usable for reading; Add needs a made map.
type Steps map[string]*StepStarted

// Add remembers ev if it is a step.started.
func (s Steps) Add(ev Event) {
	if p, ok := ev.Data.(*StepStarted); ok {
		s[p.StepID] = p
	}
}

// Name is how summaries name a step: "tool write_file" when its
// step.started is known, "step 1a2b…" otherwise.
func (s Steps) Name(stepID string) string {
	if st := s[stepID]; st != nil {
		return string(st.StepKind) + " " + st.Target
	}
	return "step " + clip(stepID, 12)
}

// Summary is [Summary] with the steps that s has seen named.
func (s Steps) Summary(ev Event) string {
	switch p := ev.Data.(type) {
	case *ExecutionCreated:
		t := p.Agent + " " + ValueText(p.Input, 60)
		if p.Key != "" {
			t += " key " + strconv.Quote(p.Key)
		}
		if !p.Deadline.IsZero() {
			t += " deadline " + timeText(p.Deadline)
		}
		if p.Version != "" {
			t += " version " + strconv.Quote(p.Version)
		}
		if p.Queue != "" {
			t += fmt.Sprintf(" queue %q priority %d", p.Queue, p.Priority)
		}
		if b := limitsText(p.Budget); b != "" {
			t += " " + b
		}
		if id := traceIDText(p.TraceParent); id != "" {
			t += " trace " + id
		}
		return t
	case *DispatchStarted:
		return fmt.Sprintf("dispatch %d", p.Dispatch)
	case *StepStarted:
		t := string(p.StepKind) + " " + p.Target
		if p.StepKind == StepLLM {
			var req llmRequest
			if json.Unmarshal(p.Args, &req) == nil && len(req.Body.Messages) > 0 {
				t += fmt.Sprintf(" (%d message%s)", len(req.Body.Messages), plural(len(req.Body.Messages)))
			}
		} else if len(p.Args) > 0 {
			t += " " + ValueText(p.Args, 60)
		}
		if len(p.Resources) > 0 {
			t += " affects " + strings.Join(p.Resources, ",")
		}
		if p.Idempotency == AtMostOnce {
			t += " at_most_once"
		}
		if p.Attempt > 1 {
			t += fmt.Sprintf(" attempt %d", p.Attempt)
		}
		if !p.WakeAt.IsZero() {
			t += " until " + timeText(p.WakeAt)
		}
		return t
	case *StepSucceeded:
		var t string
		if st := s[p.StepID]; st != nil && st.StepKind == StepLLM {
			t = s.Name(p.StepID) + " → " + llmResultText(p.Result)
		} else {
			t = s.Name(p.StepID) + " → " + ValueText(p.Result, 50)
		}
		if p.Tokens != (Tokens{}) {
			t += fmt.Sprintf(" (%d+%d tokens)", p.Tokens.Input, p.Tokens.Output)
		}
		if p.Truncated {
			t += " (truncated)"
		}
		return t
	case *StepFailed:
		t := s.Name(p.StepID) + ": " + clip(oneLine(p.Error), 60)
		if p.Indeterminate {
			t += " (indeterminate)"
		}
		if !p.RetryAt.IsZero() {
			t += " (retry at " + timeText(p.RetryAt) + ")"
		}
		if p.Tokens != (Tokens{}) {
			t += fmt.Sprintf(" (%d+%d tokens)", p.Tokens.Input, p.Tokens.Output)
		}
		return t
	case *StepCancelled:
		return s.Name(p.StepID) + " cancelled"
	case *StepDenied:
		t := string(p.StepKind) + " " + p.Target + " denied"
		if p.Code != "" && p.Code != DenyPolicy {
			t += " (" + string(p.Code) + ")"
		}
		if p.RuleID != "" {
			t += " by rule " + strconv.Quote(p.RuleID)
		}
		return t + ": " + clip(oneLine(p.Reason), 50)
	case *ResourceBound:
		from := "from the initial environment"
		if p.From != "" {
			from = "from " + ShortRef(p.From)
		}
		every := fmt.Sprintf("every %d steps", p.EverySteps)
		if p.EverySteps == 1 {
			every = "every step"
		}
		t := fmt.Sprintf("%s %s %s, %s", p.Key, p.DriverID, from, every)
		if !p.OnCompletion {
			t += ", no completion capture"
		}
		if p.CoverageReuse {
			t += ", coverage reuse"
		}
		if p.Portable {
			t += ", portable"
		}
		return t
	case *ResourceCaptured:
		return fmt.Sprintf("%s %s gen %d (%s)", p.Key, ShortRef(p.Ref), p.Generation, p.Reason)
	case *ResourceCaptureFailed:
		return fmt.Sprintf("%s (%s): %s", p.Key, p.Reason, clip(oneLine(p.Error), 50))
	case *ExecutionCompleted:
		return ValueText(p.Output, 70)
	case *ExecutionFailed:
		return string(p.Code) + ": " + clip(oneLine(p.Error), 60)
	case *ForkCreated:
		t := fmt.Sprintf("fork of %s at %d", p.Parent, p.At)
		if len(p.Input) > 0 {
			t += "; input " + ValueText(p.Input, 40)
		}
		for _, o := range p.Overrides {
			if st := s[o.StepID]; st != nil && st.StepKind == StepLLM {
				t += "; " + s.Name(o.StepID) + " ← " + llmResultText(o.Result)
				continue
			}
			t += "; " + s.Name(o.StepID) + " ← " + ValueText(o.Result, 30)
		}
		for _, sel := range p.Selections {
			t += "; " + SelectionText(sel.Key, sel.Ref, sel.CapturedAt, sel.Covered)
		}
		if p.Version != "" {
			t += "; version " + strconv.Quote(p.Version)
		}
		if len(p.Messages) > 0 {
			t += fmt.Sprintf("; %d message%s", len(p.Messages), plural(len(p.Messages)))
		}
		if b := limitsText(p.Budget); b != "" {
			t += "; " + b
		}
		if id := traceIDText(p.TraceParent); id != "" {
			t += "; trace " + id
		}
		return t
	case *CancelRequested:
		return withBy(nonEmpty(clip(oneLine(p.Reason), 60), "no reason"), p.By)
	case *ExecutionCancelled:
		return nonEmpty(clip(oneLine(p.Reason), 60), "no reason")
	case *DispatchParked:
		t := "waiting for " + string(p.Reason)
		if !p.WakeAt.IsZero() {
			t += " until " + timeText(p.WakeAt)
		}
		return t
	case *TimerStarted:
		return "timer " + clip(p.TimerID, 12) + " until " + timeText(p.WakeAt)
	case *TimerFired:
		return "timer " + clip(p.TimerID, 12) + " fired"
	case *ApprovalRequested:
		t := string(p.StepKind) + " " + p.Target
		if len(p.Args) > 0 {
			t += " " + ValueText(p.Args, 40)
		}
		if p.Reason != "" {
			t += ": " + clip(oneLine(p.Reason), 40)
		}
		if len(p.Approvers) > 0 {
			t += " (approvers " + strings.Join(p.Approvers, ",") + ")"
		}
		if !p.ExpiresAt.IsZero() {
			t += " expires " + timeText(p.ExpiresAt)
		}
		return t
	case *ApprovalGranted:
		return withBy(s.Name(p.StepID)+" approved", p.By) + note(p.Note)
	case *ApprovalRejected:
		return withBy(s.Name(p.StepID)+" rejected", p.By) + note(p.Note)
	case *MarkerRecorded:
		return strconv.Quote(p.Name)
	case *StepAbandoned:
		return s.Name(p.StepID) + " abandoned"
	case *ForkDiverged:
		names := make([]string, len(p.Unconsumed))
		for i, id := range p.Unconsumed {
			names[i] = s.Name(id)
		}
		return clip("unconsumed: "+strings.Join(names, ", "), 80)
	case *MessageReceived:
		t := p.Topic + " " + ValueText(p.Value, 50)
		if p.From != "" {
			t += " from " + p.From
		}
		return t
	case *EventSet:
		return p.Key + " = " + ValueText(p.Value, 60)
	case *ChildEnded:
		if p.StepID == "" {
			return "a child ended"
		}
		return s.Name(p.StepID) + " ended"
	}
	return ev.Kind().String()
}

// limitsText is "budget 5000 tokens 3 llm calls" for a budget with a
// limit, "" for none.
func limitsText(l Limits) string {
	if l == (Limits{}) {
		return ""
	}
	var parts []string
	for _, f := range []struct {
		n    uint64
		what string
	}{{l.MaxTokens, "tokens"}, {l.MaxLLMCalls, "llm calls"}, {l.MaxToolCalls, "tool calls"}} {
		if f.n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", f.n, f.what))
		}
	}
	return "budget " + strings.Join(parts, ", ")
}

func withBy(s, by string) string {
	if by == "" {
		return s
	}
	return s + " by " + by
}

func note(n string) string {
	if n == "" {
		return ""
	}
	return ": " + clip(oneLine(n), 40)
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// SelectionText describes what one resource of a fork restores from:
// "ws ← 1a2b3c4d5e6f@7 (covered)".
func SelectionText(key, ref string, capturedAt uint64, covered bool) string {
	s := key + " ← " + ShortRef(ref)
	if ref != "" {
		s += fmt.Sprintf("@%d", capturedAt)
	}
	if covered {
		return s + " (covered)"
	}
	return s + " (uncovered)"
}

// ShortRef is how summaries show a checkpoint ref: its first 12
// characters, or "initial" for the initial environment ("").
func ShortRef(ref string) string {
	if ref == "" {
		return "initial"
	}
	if len(ref) > 12 {
		return ref[:12]
	}
	return ref
}

// clip shortens s to at most n runes, marking the cut with "…".
// traceIDText is the trace ID of a recorded traceparent — what a tracing
// backend is searched by — or "" for none (or a malformed one, which does
// not decode).
func traceIDText(traceparent string) string {
	tp, err := ParseTraceParent(traceparent)
	if err != nil {
		return ""
	}
	return hex.EncodeToString(tp.TraceID[:])
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// oneLine turns s into one line: newlines and tabs become escapes.
func oneLine(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// timeText is how summaries show a time.
func timeText(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ValueText renders a recorded value (JSON as the SDK stores it, or bytes)
// compactly on one line of at most width runes: an object as key=value
// pairs in key order, a string quoted, other JSON compacted, other text
// quoted, anything else as its size; "-" when empty.
func ValueText(b []byte, width int) string {
	if len(b) == 0 {
		return "-"
	}
	if json.Valid(b) {
		var v any
		if json.Unmarshal(b, &v) == nil {
			if obj, ok := v.(map[string]any); ok {
				return clip(objectText(obj), width)
			}
			if s, ok := v.(string); ok {
				return clip(strconv.Quote(s), width)
			}
		}
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return clip(buf.String(), width)
		}
	}
	if utf8.Valid(b) {
		return clip(strconv.Quote(string(b)), width)
	}
	return fmt.Sprintf("%d bytes", len(b))
}

// objectText renders a JSON object as key=value pairs in key order, each
// value clipped, so that every argument shows.
func objectText(obj map[string]any) string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		var v string
		switch x := obj[k].(type) {
		case string:
			v = strconv.Quote(clip(x, 24))
		default:
			b, _ := json.Marshal(x)
			v = clip(string(b), 24)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// llmRequest is the part of a recorded LLM request (sdk.Transport's args)
// that summaries show.
type llmRequest struct {
	Body struct {
		Messages []json.RawMessage `json:"messages"`
	} `json:"body"`
}

// llmResponse is the recorded result of an LLM call (sdk.Transport's
// step result): the HTTP status and body (base64 in the JSON).
type llmResponse struct {
	Status int    `json:"status"`
	Body   []byte `json:"body"`
}

// LLMResponseBody returns the HTTP body of a recorded LLM call's result as
// JSON for show ([JSONValue]), and false if result is not one.
func LLMResponseBody(result []byte) (json.RawMessage, bool) {
	var r llmResponse
	if json.Unmarshal(result, &r) != nil || r.Status == 0 || len(r.Body) == 0 {
		return nil, false
	}
	return JSONValue(r.Body), true
}

// chatCompletion is the part of an OpenAI-compatible response summaries show.
type chatCompletion struct {
	Choices []struct {
		Message struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

// llmResultText describes a recorded LLM response: status, then the tool
// calls or the text the model answered with.
func llmResultText(result []byte) string {
	var r llmResponse
	if json.Unmarshal(result, &r) != nil || r.Status == 0 {
		return ValueText(result, 60)
	}
	if t, ok := llmReplyText(r.Body); ok {
		return fmt.Sprintf("%d: %s", r.Status, t)
	}
	return fmt.Sprintf("%d, %d bytes", r.Status, len(r.Body))
}

// LLMReplyText describes the body of an LLM response in a few words: the
// tool calls the model asked for ("call write_file(a.go)") or the text it
// answered with, quoted and clipped; for a streamed reply (server-sent
// events of OpenAI's or Anthropic's), the same of its pieces joined,
// marked "(streamed)". A body that is none of these is shown as
// [ValueText] shows a value.
func LLMReplyText(body []byte) string {
	if t, ok := llmReplyText(body); ok {
		return t
	}
	// A body that is not JSON comes as LLMResponseBody gives it: a JSON
	// string of its text (a stream's, say).
	var text string
	if json.Unmarshal(body, &text) == nil {
		if t, ok := llmReplyText([]byte(text)); ok {
			return t
		}
	}
	return ValueText(body, 50)
}

// streamEvent is the part of one server-sent event of a streamed reply
// that summaries show: an OpenAI chunk's choices[0].delta (its text and
// tool calls), an Anthropic content_block_delta's delta.text.
type streamEvent struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int `json:"index"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Delta struct {
		Text string `json:"text"`
	} `json:"delta"`
}

// streamedReplyText is the text of a streamed reply (server-sent events,
// DESIGN §16), its pieces joined, or the tool calls it names; false for a
// body with no such event.
func streamedReplyText(body []byte) (string, bool) {
	var text strings.Builder
	type call struct{ name, args string }
	var calls []*call
	byIndex := map[int]*call{}
	found := false
	for line := range strings.SplitSeq(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		var ev streamEvent
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &ev) != nil {
			continue
		}
		if len(ev.Choices) > 0 {
			found = true
			text.WriteString(ev.Choices[0].Delta.Content)
			for _, tc := range ev.Choices[0].Delta.ToolCalls {
				c := byIndex[tc.Index]
				if c == nil {
					c = &call{}
					byIndex[tc.Index] = c
					calls = append(calls, c)
				}
				if tc.Function.Name != "" {
					c.name = tc.Function.Name
				}
				c.args += tc.Function.Arguments
			}
		} else if ev.Delta.Text != "" {
			found = true
			text.WriteString(ev.Delta.Text)
		}
	}
	switch {
	case !found:
		return "", false
	case len(calls) > 0:
		out := make([]string, len(calls))
		for i, c := range calls {
			out[i] = callText(c.name, c.args)
		}
		return "call " + strings.Join(out, ", ") + " (streamed)", true
	}
	return clip(strconv.Quote(text.String()), 50) + " (streamed)", true
}

// llmReplyText is LLMReplyText, and false for a body it does not know.
func llmReplyText(body []byte) (string, bool) {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("data:")) || bytes.HasPrefix(bytes.TrimSpace(body), []byte("event:")) {
		return streamedReplyText(body)
	}
	var cc chatCompletion
	if json.Unmarshal(body, &cc) != nil || len(cc.Choices) == 0 {
		return "", false
	}
	m := cc.Choices[0].Message
	if len(m.ToolCalls) == 0 {
		return clip(strconv.Quote(m.Content), 50), true
	}
	calls := make([]string, 0, len(m.ToolCalls))
	for _, tc := range m.ToolCalls {
		calls = append(calls, callText(tc.Function.Name, tc.Function.Arguments))
	}
	return "call " + strings.Join(calls, ", "), true
}

// callText names a tool call, with its path argument when it has one:
// write_file(a.go).
func callText(name, arguments string) string {
	var args map[string]any
	if json.Unmarshal([]byte(arguments), &args) == nil {
		if p, ok := args["path"].(string); ok {
			return name + "(" + p + ")"
		}
	}
	return name
}
