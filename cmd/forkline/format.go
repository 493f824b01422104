package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
)

// shortRef is how tables show a checkpoint ref.
func shortRef(ref string) string {
	if ref == "" {
		return "initial"
	}
	if len(ref) > 12 {
		return ref[:12]
	}
	return ref
}

// clip shortens s to at most n runes, marking the cut with "…".
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

// timeText is how tables show an event's time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// valueText renders a recorded value (JSON as the SDK stores it, or bytes)
// compactly on one line.
func valueText(b []byte, n int) string {
	if len(b) == 0 {
		return "-"
	}
	if json.Valid(b) {
		var v any
		if json.Unmarshal(b, &v) == nil {
			if obj, ok := v.(map[string]any); ok {
				return clip(objectText(obj), n)
			}
			if s, ok := v.(string); ok {
				return clip(strconv.Quote(s), n)
			}
		}
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return clip(buf.String(), n)
		}
	}
	if utf8.Valid(b) {
		return clip(strconv.Quote(string(b)), n)
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

// stepIndex remembers each step's step.started, so that terminal events can
// be described by what the step was.
type stepIndex map[string]*eventlog.StepStarted

func (x stepIndex) add(ev eventlog.Event) {
	if p, ok := ev.Data.(*eventlog.StepStarted); ok {
		x[p.StepID] = p
	}
}

func (x stepIndex) name(stepID string) string {
	if s := x[stepID]; s != nil {
		return string(s.StepKind) + " " + s.Target
	}
	return "step " + clip(stepID, 12)
}

// llmRequest is the part of a recorded LLM request the tables show.
type llmRequest struct {
	Body struct {
		Messages []json.RawMessage `json:"messages"`
	} `json:"body"`
}

// llmResponse is a recorded LLM response (sdk.Transport's result).
type llmResponse struct {
	Status int    `json:"status"`
	Body   []byte `json:"body"`
}

// chatCompletion is the part of an OpenAI-compatible response the tables show.
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
		return valueText(result, 60)
	}
	var cc chatCompletion
	if json.Unmarshal(r.Body, &cc) != nil || len(cc.Choices) == 0 {
		return fmt.Sprintf("%d, %d bytes", r.Status, len(r.Body))
	}
	m := cc.Choices[0].Message
	if len(m.ToolCalls) == 0 {
		return fmt.Sprintf("%d: %s", r.Status, clip(strconv.Quote(m.Content), 50))
	}
	calls := make([]string, 0, len(m.ToolCalls))
	for _, tc := range m.ToolCalls {
		c := tc.Function.Name
		var args map[string]any
		if json.Unmarshal([]byte(tc.Function.Arguments), &args) == nil {
			if p, ok := args["path"].(string); ok {
				c += "(" + p + ")"
			}
		}
		calls = append(calls, c)
	}
	return fmt.Sprintf("%d: call %s", r.Status, strings.Join(calls, ", "))
}

// llmBody returns the HTTP body of a recorded LLM response, for show.
func llmBody(result []byte) (json.RawMessage, bool) {
	var r llmResponse
	if json.Unmarshal(result, &r) != nil || r.Status == 0 || len(r.Body) == 0 {
		return nil, false
	}
	return jsonValue(r.Body), true
}

// detail is the one-line description of an event in tables.
func detail(ev eventlog.Event, steps stepIndex) string {
	switch p := ev.Data.(type) {
	case *eventlog.ExecutionCreated:
		return p.Agent + " " + valueText(p.Input, 60)
	case *eventlog.DispatchStarted:
		return fmt.Sprintf("dispatch %d", p.Dispatch)
	case *eventlog.StepStarted:
		s := string(p.StepKind) + " " + p.Target
		if p.StepKind == eventlog.StepLLM {
			var req llmRequest
			if json.Unmarshal(p.Args, &req) == nil && len(req.Body.Messages) > 0 {
				s += fmt.Sprintf(" (%d message%s)", len(req.Body.Messages), plural(len(req.Body.Messages)))
			}
		} else if len(p.Args) > 0 {
			s += " " + valueText(p.Args, 60)
		}
		if len(p.Resources) > 0 {
			s += " affects " + strings.Join(p.Resources, ",")
		}
		if p.Idempotency == eventlog.AtMostOnce {
			s += " at_most_once"
		}
		if p.Attempt > 1 {
			s += fmt.Sprintf(" attempt %d", p.Attempt)
		}
		return s
	case *eventlog.StepSucceeded:
		if s := steps[p.StepID]; s != nil && s.StepKind == eventlog.StepLLM {
			return steps.name(p.StepID) + " → " + llmResultText(p.Result)
		}
		return steps.name(p.StepID) + " → " + valueText(p.Result, 50)
	case *eventlog.StepFailed:
		s := steps.name(p.StepID) + ": " + clip(oneLine(p.Error), 60)
		if p.Indeterminate {
			s += " (indeterminate)"
		}
		return s
	case *eventlog.StepCancelled:
		return steps.name(p.StepID) + " cancelled"
	case *eventlog.StepDenied:
		return string(p.StepKind) + " " + p.Target + " denied: " + clip(oneLine(p.Reason), 50)
	case *eventlog.ResourceBound:
		from := "from the initial environment"
		if p.From != "" {
			from = "from " + shortRef(p.From)
		}
		every := fmt.Sprintf("every %d steps", p.EverySteps)
		if p.EverySteps == 1 {
			every = "every step"
		}
		s := fmt.Sprintf("%s %s %s, %s", p.Key, p.DriverID, from, every)
		if !p.OnCompletion {
			s += ", no completion capture"
		}
		if p.CoverageReuse {
			s += ", coverage reuse"
		}
		return s
	case *eventlog.ResourceCaptured:
		return fmt.Sprintf("%s %s gen %d (%s)", p.Key, shortRef(p.Ref), p.Generation, p.Reason)
	case *eventlog.ResourceCaptureFailed:
		return fmt.Sprintf("%s (%s): %s", p.Key, p.Reason, clip(oneLine(p.Error), 50))
	case *eventlog.ExecutionCompleted:
		return valueText(p.Output, 70)
	case *eventlog.ExecutionFailed:
		return string(p.Code) + ": " + clip(oneLine(p.Error), 60)
	case *eventlog.ForkCreated:
		s := fmt.Sprintf("fork of %s at %d", p.Parent, p.At)
		for _, sel := range p.Selections {
			s += "; " + selectionText(sel.Key, sel.Ref, sel.CapturedAt, sel.Covered)
		}
		return s
	}
	return ev.Kind().String()
}

// selectionText describes what one resource restores from.
func selectionText(key, ref string, capturedAt uint64, covered bool) string {
	s := key + " ← " + shortRef(ref)
	if ref != "" {
		s += fmt.Sprintf("@%d", capturedAt)
	}
	if covered {
		return s + " (covered)"
	}
	return s + " (uncovered)"
}

// restoresText describes a point's selections compactly.
func restoresText(p coverage.Point) string {
	if len(p.Resources) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(p.Resources))
	for _, s := range p.Resources {
		t := s.Key + "←" + shortRef(s.Ref)
		if s.Ref != "" {
			t += fmt.Sprintf("@%d", s.CapturedAt)
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, " ")
}

func coveredText(covered bool) string {
	if covered {
		return "covered"
	}
	return "uncovered"
}

// jsonValue turns a recorded value into JSON: itself if it is JSON, a
// string if it is text, {"base64": …} otherwise; null when empty.
func jsonValue(b []byte) json.RawMessage {
	switch {
	case len(b) == 0:
		return json.RawMessage("null")
	case json.Valid(b):
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return buf.Bytes()
		}
	case utf8.Valid(b):
		out, _ := json.Marshal(string(b))
		return out
	}
	out, _ := json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
	return out
}

// field is one field of a payload, named by its wire (msgpack) tag.
type field struct {
	Name  string
	Value any // string, bool, number, []string, json.RawMessage, []fieldList
}

type fieldList []field

// MarshalJSON writes the fields as an object in their order.
func (l fieldList) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range l {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		buf.Write(k)
		buf.WriteByte(':')
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

var (
	bytesType = reflect.TypeFor[[]byte]()
	rawType   = reflect.TypeFor[json.RawMessage]()
	idType    = reflect.TypeFor[eventlog.ID]()
	timeType  = reflect.TypeFor[time.Time]()
)

// fields lists a payload's fields by their wire names, values decoded for
// reading: recorded JSON stays JSON, IDs and times are text. A field that
// format version 2 added to a kind of version 1 (eventlog.V2Fields) is
// left out while it is zero, so events that do not use it read as before.
func fields(v any) fieldList {
	var later []string
	if p, ok := v.(eventlog.Payload); ok {
		later = eventlog.V2Fields[p.Kind()]
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	rt := rv.Type()
	var out fieldList
	for i := range rt.NumField() {
		sf := rt.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("msgpack"), ",")
		if name == "" || name == "-" {
			name = sf.Name
		}
		if slices.Contains(later, name) && rv.Field(i).IsZero() {
			continue
		}
		out = append(out, field{Name: name, Value: fieldValue(rv.Field(i))})
	}
	return out
}

func fieldValue(v reflect.Value) any {
	switch {
	case v.Type() == bytesType || v.Type() == rawType:
		return jsonValue(v.Bytes())
	case v.Type() == timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	case v.Type() == idType:
		id := v.Interface().(eventlog.ID)
		if id.IsZero() {
			return ""
		}
		return id.String()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			out := make([]string, v.Len())
			for i := range out {
				out[i] = v.Index(i).String()
			}
			return out
		}
		out := make([]fieldList, v.Len())
		for i := range out {
			out[i] = fields(v.Index(i).Interface())
		}
		return out
	case reflect.Struct:
		return fields(v.Interface())
	}
	return fmt.Sprint(v.Interface())
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
