package webui

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// writesLineage is a lineage of n events: a resource bound with a baseline,
// then tool calls that affect it, captured every fifth call.
func writesLineage(t *testing.T, n int) *lineage {
	t.Helper()
	ps := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "coder"},
		&eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.ResourceBound{Key: "workspace", DriverID: "d", Binding: []byte(`{}`), EverySteps: 5, OnCompletion: true},
		&eventlog.ResourceCaptured{Key: "workspace", Ref: "r0", Generation: 1, Reason: eventlog.CaptureBaseline},
	}
	gen, calls := uint64(1), 0
	for len(ps) < n-1 {
		calls++
		gen++
		id := fmt.Sprintf("s%d", calls)
		ps = append(ps, &eventlog.StepStarted{StepID: id, StepKind: eventlog.StepTool, Target: "write_file",
			Resources: []string{"workspace"}, Idempotency: eventlog.SafeToRetry, Attempt: 1},
			&eventlog.StepSucceeded{StepID: id})
		if calls%5 == 0 {
			ps = append(ps, &eventlog.ResourceCaptured{Key: "workspace", Ref: "r" + id, Generation: gen, Reason: eventlog.CaptureSteps})
		}
	}
	ps = append(ps[:n-1], &eventlog.ExecutionCompleted{})
	evs := make([]eventlog.Event, len(ps))
	for i, p := range ps {
		evs[i] = eventlog.Event{Seq: uint64(i + 1), Data: p}
	}
	l, err := newLineage(eventlog.Info{Agent: "coder", Head: uint64(n)}, evs)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTimelineScales: a long lineage gets a wider picture, not a cramped
// one, with one circle per event and seq labels that do not collide.
func TestTimelineScales(t *testing.T) {
	var widths []int
	for _, n := range []int{30, 100, 1000} {
		l := writesLineage(t, n)
		page, err := timelineData(l, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) != len(l.events) {
			t.Fatalf("%d events: %d circles", len(l.events), len(page.Events))
		}
		if gap := page.Events[1].X - page.Events[0].X; gap < 6 {
			t.Fatalf("%d events drawn %.1f px apart; want at least 6", len(l.events), gap)
		}
		for k := 1; k < len(page.SeqLabels); k++ {
			if d := page.SeqLabels[k].X - page.SeqLabels[k-1].X; d < 24 {
				t.Fatalf("%d events: seq labels %s and %s are %.1f px apart", len(l.events), page.SeqLabels[k-1].Text, page.SeqLabels[k].Text, d)
			}
		}
		if want := len(l.events)/16 + 1; len(page.Lanes) != 1 || len(page.Lanes[0].Windows) < want {
			t.Fatalf("%d events: lanes %+v; want one lane with at least %d windows", len(l.events), page.Lanes, want)
		}
		widths = append(widths, page.Width)
	}
	if !(widths[0] <= widths[1] && widths[1] < widths[2]) {
		t.Fatalf("widths %v for 30, 100 and 1,000 events; want them to grow", widths)
	}
	var buf bytes.Buffer
	l := writesLineage(t, 30)
	if err := WriteTimeline(&buf, l.info, l.events, nil); err != nil || !strings.Contains(buf.String(), "<svg") {
		t.Fatalf("WriteTimeline = %v", err)
	}
}
