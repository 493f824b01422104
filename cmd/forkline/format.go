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
