package main

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/webui"
)

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

// restoresText describes a point's selections compactly.
func restoresText(p coverage.Point) string { return webui.RestoresText(p) }

func coveredText(covered bool) string { return webui.CoveredText(covered) }

// stepIndex remembers each step's step.started, so that terminal events can
// be described by what the step was.
type stepIndex = eventlog.Steps

// detail is the one-line description of an event in tables.
func detail(ev eventlog.Event, steps stepIndex) string { return steps.Summary(ev) }

// shortRef is how tables show a checkpoint ref.
func shortRef(ref string) string { return eventlog.ShortRef(ref) }

// llmBody returns the HTTP body of a recorded LLM response, for show.
func llmBody(result []byte) (json.RawMessage, bool) { return eventlog.LLMResponseBody(result) }

// eventData is an event's payload fields for events --json. An LLM step's
// recorded response shows its body as the JSON it is, not as the base64
// that Go gives bytes; a body that is not JSON stays base64.
func eventData(ev eventlog.Event, steps stepIndex) eventlog.Fields {
	f := eventlog.PayloadFields(ev.Data)
	p, ok := ev.Data.(*eventlog.StepSucceeded)
	if !ok {
		return f
	}
	if st := steps[p.StepID]; st == nil || st.StepKind != eventlog.StepLLM {
		return f
	}
	r, ok := readableLLMResult(p.Result)
	if !ok {
		return f
	}
	for i := range f {
		if f[i].Name == "result" {
			f[i].Value = r
		}
	}
	return f
}

// readableLLMResult is a recorded LLM response (sdk.Transport's result:
// status, header, body) with its body as JSON; false when it is not one
// or its body is not JSON.
func readableLLMResult(result []byte) (json.RawMessage, bool) {
	var r struct {
		Status int             `json:"status"`
		Header json.RawMessage `json:"header,omitempty"`
		Body   []byte          `json:"body,omitempty"`
	}
	if json.Unmarshal(result, &r) != nil || r.Status == 0 || len(r.Body) == 0 || !json.Valid(r.Body) {
		return nil, false
	}
	out, err := json.Marshal(struct {
		Status int             `json:"status"`
		Header json.RawMessage `json:"header,omitempty"`
		Body   json.RawMessage `json:"body"`
	}{r.Status, r.Header, eventlog.JSONValue(r.Body)})
	if err != nil {
		return nil, false
	}
	return out, true
}
