package webui

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
)

//go:embed timeline.html.tmpl
var timelineTemplate string

var timelinePageTmpl = template.Must(template.New("timeline").Parse(timelineTemplate))

// kindColors are the colors of the event kinds in the timeline.
var kindColors = map[eventlog.Kind]string{
	eventlog.KindExecutionCreated:      "#4d4d4d",
	eventlog.KindDispatchStarted:       "#8c564b",
	eventlog.KindStepStarted:           "#1f77b4",
	eventlog.KindStepSucceeded:         "#2ca02c",
	eventlog.KindStepFailed:            "#d62728",
	eventlog.KindStepCancelled:         "#ff7f0e",
	eventlog.KindStepDenied:            "#9467bd",
	eventlog.KindResourceBound:         "#17becf",
	eventlog.KindResourceCaptured:      "#e6a700",
	eventlog.KindResourceCaptureFailed: "#a0522d",
	eventlog.KindExecutionCompleted:    "#000000",
	eventlog.KindExecutionFailed:       "#b00020",
	eventlog.KindForkCreated:           "#e377c2",
	eventlog.KindCancelRequested:       "#ff9896",
	eventlog.KindExecutionCancelled:    "#7f7f7f",
	eventlog.KindDispatchParked:        "#c49c94",
	eventlog.KindTimerStarted:          "#aec7e8",
	eventlog.KindTimerFired:            "#6baed6",
	eventlog.KindApprovalRequested:     "#c5b0d5",
	eventlog.KindApprovalGranted:       "#98df8a",
	eventlog.KindApprovalRejected:      "#e7969c",
	eventlog.KindMarkerRecorded:        "#bcbd22",
	eventlog.KindStepAbandoned:         "#f7b6d2",
	eventlog.KindForkDiverged:          "#dbdb8d",
}

// Geometry of the picture, in pixels.
const (
	tlLeft      = 150 // room for lane labels
	tlTop       = 24
	tlForkRow   = 36 // height of one fork's branch row
	tlLaneH     = 22
	tlLaneGap   = 44  // below a lane: two rows of window labels
	tlCharWidth = 7.6 // of the 12px monospace labels (a little over), for fitting them
)

// The template's data: every coordinate is computed here, so that the
// template only places elements.
type (
	tlPage struct {
		Title     string
		Summary   []string
		Width     int
		Height    int
		AxisY     int
		AxisX1    int
		AxisX2    int
		Inherited *tlRect // the part of a fork's lineage it shares with its parent
		Events    []tlEvent
		SeqLabels []tlText
		Lanes     []tlLane
		Forks     []tlFork
		Legend    []tlLegend
		LegendY   int
		Rows      []tlRow
	}
	tlEvent struct {
		X, Y, R     float64
		Fill, Color string
		Opacity     string
		Title       string
	}
	tlText struct {
		X, Y float64
		Text string
	}
	tlRect struct {
		X, Y, W, H float64
		Title      string
		Label      string
		LabelX     float64
		LabelY     float64
	}
	tlLane struct {
		Key     string
		Y, H    float64
		LabelY  float64
		X, W    float64 // the lane's span (bound to head)
		Title   string
		Windows []tlRect
		Under   []tlText // window labels under the lane
		Marks   []tlMark
	}
	tlMark struct {
		Points string // polygon points
		Title  string
		Color  string
	}
	tlFork struct {
		Path           string
		Marker         string // polygon points of the marker on the axis
		X1, X2, Y      float64
		Dots           []tlEvent
		Label          string
		LabelX, LabelY float64
		Title          string
	}
	tlLegend struct {
		X, Y    float64
		Color   string
		Hollow  bool
		Text    string
		TextX   float64
		IsBar   bool
		BarFill string
	}
	tlRow struct {
		Seq, Kind, Covered, Restores, Detail string
		Color                                string
		CoveredClass                         string
	}
)

// Fork is a fork of the execution a timeline shows, with the events it has
// of its own (from its fork.created on).
type Fork struct {
	Info eventlog.Info
	Own  []eventlog.Event
}

// lineage is an execution's events with their coverage fold and steps.
type lineage struct {
	info   eventlog.Info
	events []eventlog.Event
	cov    *coverage.Fold
	steps  eventlog.Steps
}

func (l *lineage) status() string { return l.info.Status.String() }

// newLineage folds events, the lineage of info.
func newLineage(info eventlog.Info, events []eventlog.Event) (*lineage, error) {
	l := &lineage{info: info, events: events, cov: coverage.New(), steps: eventlog.Steps{}}
	for _, ev := range events {
		if err := l.cov.Apply(ev); err != nil {
			return nil, fmt.Errorf("webui: execution %s: %w", info.ID, err)
		}
		l.steps.Add(ev)
	}
	return l, nil
}

// WriteTimeline writes the timeline page of an execution — info and its
// lineage events, with the forks made of it — as a standalone HTML file:
// its events along a line on a seq scale, a lane of coverage windows per
// resource, each fork branching off at its fork point, and a table of
// every event with its coverage. forkline timeline --html writes it, and
// the live page of Handler shows the same picture.
func WriteTimeline(w io.Writer, info eventlog.Info, events []eventlog.Event, forks []Fork) error {
	l, err := newLineage(info, events)
	if err != nil {
		return err
	}
	page, err := timelineData(l, forks)
	if err != nil {
		return err
	}
	if err := timelinePageTmpl.Execute(w, page); err != nil {
		return fmt.Errorf("webui: render timeline: %w", err)
	}
	return nil
}

// eventTitle is an event's tooltip.
func eventTitle(ev eventlog.Event, steps eventlog.Steps, p *coverage.Point) string {
	s := fmt.Sprintf("seq %d · %s\n%s", ev.Seq, ev.Kind(), steps.Summary(ev))
	if !ev.Time.IsZero() {
		s += "\n" + timeText(ev.Time)
	}
	if p != nil {
		s += fmt.Sprintf("\nfork here: %s — restores %s", CoveredText(p.Covered), RestoresText(*p))
	}
	return s
}

// isLLM reports whether ev is an LLM call's step event.
func isLLM(ev eventlog.Event, steps eventlog.Steps) bool {
	var id string
	switch p := ev.Data.(type) {
	case *eventlog.StepStarted:
		return p.StepKind == eventlog.StepLLM
	case *eventlog.StepSucceeded:
		id = p.StepID
	case *eventlog.StepFailed:
		id = p.StepID
	case *eventlog.StepCancelled:
		id = p.StepID
	default:
		return false
	}
	s := steps[id]
	return s != nil && s.StepKind == eventlog.StepLLM
}

// timelineData lays out the page of lineage l: its events along a line on
// a seq scale, a lane of coverage windows per resource, and forks (the
// executions forked from it) branching off above at their fork points,
// their own events on the same scale.
func timelineData(l *lineage, forks []Fork) (*tlPage, error) {
	n := uint64(len(l.events))
	maxSeq := n
	for _, f := range forks {
		maxSeq = max(maxSeq, f.Info.Head)
	}
	dx := 1100.0 / float64(max(maxSeq, 1))
	dx = min(max(dx, 6), 28)
	r := min(max(dx*0.32, 2.5), 6)
	x := func(seq uint64) float64 { return tlLeft + (float64(seq)-0.5)*dx }

	page := &tlPage{Title: fmt.Sprintf("forkline timeline · %s", l.info.ID)}
	page.Summary = append(page.Summary, fmt.Sprintf("execution %s · agent %s · %d events · %s",
		l.info.ID, l.info.Agent, l.info.Head, l.status()))
	if !l.info.Parent.IsZero() {
		page.Summary = append(page.Summary, fmt.Sprintf("fork of %s at seq %d: events 1–%d are the parent's, replayed",
			l.info.Parent, l.info.ForkSeq, l.info.ForkSeq))
	}

	// Forks branch off above the axis, one row each, on the same seq scale:
	// a fork's own events continue the parent's numbering.
	axisY := float64(tlTop + len(forks)*tlForkRow + 20)
	width := max(x(maxSeq)+dx+40, 1000)
	for i, f := range forks {
		rowY := axisY - float64((len(forks)-i)*tlForkRow)
		x1, x2 := x(f.Info.ForkSeq), x(max(f.Info.Head, f.Info.ForkSeq+1))
		tf := tlFork{X1: x1, X2: x2, Y: rowY}
		bend := min(12.0, axisY-rowY)
		tf.Path = fmt.Sprintf("M %.1f %.1f L %.1f %.1f Q %.1f %.1f %.1f %.1f L %.1f %.1f",
			x1, axisY, x1, rowY+bend, x1, rowY, x1+bend, rowY, max(x2, x1+bend), rowY)
		tf.Marker = fmt.Sprintf("%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f", x1, axisY-7, x1+5, axisY, x1, axisY+7, x1-5, axisY)
		fsteps := eventlog.Steps{}
		for k, v := range l.steps {
			fsteps[k] = v
		}
		for _, ev := range f.Own {
			fsteps.Add(ev)
			c := kindColors[ev.Kind()]
			d := tlEvent{X: x(ev.Seq), Y: rowY, R: r * 0.8, Fill: c, Color: c, Opacity: "1", Title: eventTitle(ev, fsteps, nil)}
			if isLLM(ev, fsteps) {
				d.Fill = "#ffffff"
			}
			tf.Dots = append(tf.Dots, d)
		}
		cov := "uncovered"
		if len(f.Own) > 0 {
			if fc, ok := f.Own[0].Data.(*eventlog.ForkCreated); ok {
				cov = "covered"
				for _, s := range fc.Selections {
					if !s.Covered {
						cov = "uncovered"
					}
				}
			}
		}
		own := int(f.Info.Head - f.Info.ForkSeq)
		tf.Label = fmt.Sprintf("fork %s at %d · %s · %s · %d own event%s", f.Info.ID, f.Info.ForkSeq, cov, f.Info.Status.String(), own, plural(own))
		tf.LabelX, tf.LabelY = x1+bend+4, rowY-8
		// A label that would leave the picture ends at its right edge.
		tf.LabelX = max(tlLeft, min(tf.LabelX, width-float64(len([]rune(tf.Label)))*tlCharWidth-10))
		tf.Title = fmt.Sprintf("fork %s of this execution at seq %d (%s)\nstatus %s, head %d", f.Info.ID, f.Info.ForkSeq, cov, f.Info.Status.String(), f.Info.Head)
		page.Forks = append(page.Forks, tf)
	}

	page.AxisY, page.AxisX1, page.AxisX2 = int(axisY), tlLeft, int(x(max(n, 1))+dx/2)
	if !l.info.Parent.IsZero() && l.info.ForkSeq > 0 {
		fx := x(l.info.ForkSeq) + dx/2
		page.Inherited = &tlRect{X: tlLeft, Y: axisY - 14, W: fx - tlLeft, H: 28,
			Title:  fmt.Sprintf("events 1–%d: the parent's (%s), replayed by this fork", l.info.ForkSeq, l.info.Parent),
			Label:  fmt.Sprintf("inherited from %s", l.info.Parent),
			LabelX: tlLeft + 4, LabelY: axisY - 18}
	}

	points := make([]coverage.Point, n)
	for i, ev := range l.events {
		p, err := l.cov.Point(ev.Seq)
		if err != nil {
			return nil, err
		}
		points[i] = p
		c := kindColors[ev.Kind()]
		d := tlEvent{X: x(ev.Seq), Y: axisY, R: r, Fill: c, Color: c, Opacity: "1", Title: eventTitle(ev, l.steps, &p)}
		if isLLM(ev, l.steps) {
			d.Fill = "#ffffff"
		}
		if ev.Seq <= l.info.ForkSeq {
			d.Opacity = "0.45"
		}
		page.Events = append(page.Events, d)
	}
	step := uint64(1)
	for _, s := range []uint64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000} {
		step = s
		if float64(s)*dx >= 26 {
			break
		}
	}
	for seq := uint64(1); seq <= n; seq++ {
		if seq == 1 || seq%step == 0 || (seq == n && float64(n%step)*dx >= 26) {
			page.SeqLabels = append(page.SeqLabels, tlText{X: x(seq), Y: axisY + 22, Text: fmt.Sprint(seq)})
		}
	}

	// One lane per resource: the coverage windows as bars over an uncovered
	// background, captures marked above the lane.
	laneY := axisY + 44
	windows := l.cov.Windows()
	for _, key := range resourceKeys(l) {
		lane := tlLane{Key: key, Y: laneY, H: tlLaneH, LabelY: laneY + tlLaneH/2 + 4}
		underEnd := [2]float64{-1000, -1000}
		first := uint64(0)
		for i, p := range points {
			for _, s := range p.Resources {
				if s.Key == key && first == 0 {
					first = uint64(i + 1)
				}
			}
		}
		lane.X = x(max(first, 1)) - dx/2
		lane.W = x(n) + dx/2 - lane.X
		lane.Title = fmt.Sprintf("%s: uncovered from seq %d except inside the bars — a fork there restores an earlier checkpoint", key, first)
		for _, w := range windows {
			if w.Key != key {
				continue
			}
			bx := x(w.From) - dx/2
			bw := float64(w.To-w.From+1) * dx
			// The bar holds its generation if it fits; the checkpoint and
			// generation are written under the lane, on a second row when
			// the first is taken.
			label := fmt.Sprintf("g%d", w.Generation)
			if float64(len(label))*tlCharWidth > bw-4 {
				label = ""
			}
			under := fmt.Sprintf("%s · g%d · @%d", eventlog.ShortRef(w.Ref), w.Generation, w.CapturedAt)
			ux := bx
			row := 0
			if ux < underEnd[0]+8 {
				row = 1
				if ux < underEnd[1]+8 {
					ux = max(underEnd[0], underEnd[1]) + 8
					row = 0
				}
			}
			underEnd[row] = ux + float64(len([]rune(under)))*tlCharWidth
			width = max(width, underEnd[row]+20)
			lane.Under = append(lane.Under, tlText{X: ux, Y: laneY + tlLaneH + 14 + float64(row)*14, Text: under})
			seqs := fmt.Sprintf("seqs %d–%d", w.From, w.To)
			if w.From == w.To {
				seqs = fmt.Sprintf("seq %d", w.From)
			}
			lane.Windows = append(lane.Windows, tlRect{X: bx, Y: laneY, W: bw, H: tlLaneH, Label: label,
				LabelX: bx + 4, LabelY: laneY + tlLaneH/2 + 4,
				Title: fmt.Sprintf("%s covered at %s by checkpoint %s\ncaptured at seq %d, generation %d", key, seqs, w.Ref, w.CapturedAt, w.Generation)})
		}
		for _, ev := range l.events {
			var title, color string
			switch p := ev.Data.(type) {
			case *eventlog.ResourceCaptured:
				if p.Key == key {
					title = fmt.Sprintf("seq %d: captured %s, generation %d (%s)", ev.Seq, p.Ref, p.Generation, p.Reason)
					color = kindColors[eventlog.KindResourceCaptured]
				}
			case *eventlog.ResourceCaptureFailed:
				if p.Key == key {
					title = fmt.Sprintf("seq %d: capture failed (%s): %s", ev.Seq, p.Reason, p.Error)
					color = kindColors[eventlog.KindResourceCaptureFailed]
				}
			case *eventlog.ResourceBound:
				if p.Key == key {
					from := "the initial environment"
					if p.From != "" {
						from = p.From
					}
					title = fmt.Sprintf("seq %d: bound from %s", ev.Seq, from)
					color = kindColors[eventlog.KindResourceBound]
				}
			}
			if title == "" {
				continue
			}
			cx := x(ev.Seq)
			lane.Marks = append(lane.Marks, tlMark{Color: color, Title: title,
				Points: fmt.Sprintf("%.1f,%.1f %.1f,%.1f %.1f,%.1f", cx-5, laneY-9, cx+5, laneY-9, cx, laneY-1)})
		}
		page.Lanes = append(page.Lanes, lane)
		laneY += tlLaneH + tlLaneGap
	}

	// The legend.
	ly := laneY + 10
	lx := float64(tlLeft)
	width = max(width, 1000)
	add := func(color, text string, hollow, bar bool) {
		w := 10 + float64(len([]rune(text)))*tlCharWidth
		if bar {
			w += 12
		}
		if lx+w > width-20 && lx > tlLeft {
			lx = tlLeft
			ly += 20
		}
		item := tlLegend{X: lx, Y: ly, Color: color, Hollow: hollow, Text: text, TextX: lx + 10, IsBar: bar}
		if bar {
			item.TextX = lx + 22
		}
		page.Legend = append(page.Legend, item)
		lx += w + 18
	}
	// The kinds of format 1 are always in the legend; the later ones
	// only when the lineage holds them.
	present := map[eventlog.Kind]bool{}
	for _, ev := range l.events {
		present[ev.Kind()] = true
	}
	for _, k := range eventlog.Kinds() {
		if k.Since() > 1 && !present[k] {
			continue
		}
		add(kindColors[k], k.String(), false, false)
	}
	add(kindColors[eventlog.KindStepStarted], "hollow: an llm call", true, false)
	add("#b7e4b0", "covered: a fork restores this checkpoint exactly", false, true)
	add("#f6d3d3", "uncovered: a fork restores an earlier state", false, true)
	page.LegendY = int(ly)
	page.Width = int(width)
	page.Height = int(ly + 24)

	for i, ev := range l.events {
		row := tlRow{Seq: fmt.Sprint(ev.Seq), Kind: ev.Kind().String(), Covered: CoveredText(points[i].Covered),
			Restores: RestoresText(points[i]), Detail: l.steps.Summary(ev), Color: kindColors[ev.Kind()], CoveredClass: CoveredText(points[i].Covered)}
		page.Rows = append(page.Rows, row)
	}
	return page, nil
}

// resourceKeys lists the keys bound in the lineage, sorted.
func resourceKeys(l *lineage) []string {
	seen := map[string]bool{}
	var keys []string
	for _, ev := range l.events {
		var k string
		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			k = p.Key
		case *eventlog.ForkCreated:
			for _, s := range p.Selections {
				if !seen[s.Key] {
					seen[s.Key] = true
					keys = append(keys, s.Key)
				}
			}
		}
		if k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
