package webui

import (
	"fmt"
	"strings"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
)

// RestoresText describes compactly what a fork at point p restores each
// resource from: "workspace←1a2b3c4d5e6f@15 db←initial"; "-" without
// resources.
func RestoresText(p coverage.Point) string {
	if len(p.Resources) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(p.Resources))
	for _, s := range p.Resources {
		t := s.Key + "←" + eventlog.ShortRef(s.Ref)
		if s.Ref != "" {
			t += fmt.Sprintf("@%d", s.CapturedAt)
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, " ")
}

// InFlightText says, for each at_most_once call in flight at p, that a
// fork there sees it as indeterminate: "at_most_once tool "pay" in flight
// (started at seq 7): a fork here sees it as indeterminate"; "" for none.
func InFlightText(p coverage.Point) string {
	parts := make([]string, 0, len(p.InFlight))
	for _, f := range p.InFlight {
		parts = append(parts, fmt.Sprintf("at_most_once %s %q in flight (started at seq %d)", f.Kind, f.Target, f.StartedAt))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + ": a fork here sees it as indeterminate (sdk.ErrIndeterminate) and does not run it again"
}

// CoveredText is "covered" or "uncovered".
func CoveredText(covered bool) string {
	if covered {
		return "covered"
	}
	return "uncovered"
}

// timeText is how the pages show an event's time.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
