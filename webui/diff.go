package webui

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strings"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
)

// Option configures [Handler].
type Option func(*server)

// WithDiffer makes the diff page compare the checkpoints of resources
// bound with driver driverID through d (a nil d is ignored). Without one,
// the page names the checkpoints but does not compare them.
func WithDiffer(driverID string, d driver.Differ) Option {
	return func(s *server) {
		if d != nil {
			s.differs[driverID] = d
		}
	}
}

// ResourceDiff is what the diff page shows of one resource: the two
// checkpoints compared ([fork.ResourceDiff]) and what differs between
// them, or a Note saying why they were not compared.
type ResourceDiff struct {
	fork.ResourceDiff
	// Compared reports that a driver compared the two checkpoints;
	// Difference is then what it found (empty: the same state).
	Compared   bool              `json:"compared"`
	Difference driver.Difference `json:"difference"`
	// Notes say what the comparison is of (a side whose head is not
	// covered is compared at its newest checkpoint, not its live state),
	// or why there is none.
	Notes []string `json:"notes,omitempty"`
}

// DiffResources compares, for every resource of c, the newest checkpoint
// of each side with the Differ that differs holds for the resource's
// DriverID. A resource that only one side bound, that the two sides bound
// with different drivers, that a side has no checkpoint of, or whose
// driver has no Differ gets a note instead; so does a Differ's error
// (such as a checkpoint that is no longer available), which does not stop
// the other resources. It stops only when ctx ends.
func DiffResources(ctx context.Context, c *fork.Comparison, differs map[string]driver.Differ) ([]ResourceDiff, error) {
	out := make([]ResourceDiff, 0, len(c.Resources))
	for _, r := range c.Resources {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rd := ResourceDiff{ResourceDiff: r}
		a, b := r.A, r.B
		switch {
		case a == nil:
			rd.Notes = append(rd.Notes, "only B binds it")
		case b == nil:
			rd.Notes = append(rd.Notes, "only A binds it")
		case a.DriverID != b.DriverID:
			rd.Notes = append(rd.Notes, fmt.Sprintf("bound with different drivers (%s, %s): not compared", a.DriverID, b.DriverID))
		}
		for _, s := range []struct {
			name string
			h    *fork.ResourceHead
		}{{"A", a}, {"B", b}} {
			switch {
			case s.h == nil:
			case s.h.Ref == "":
				rd.Notes = append(rd.Notes, s.name+" has no checkpoint of it (the initial environment as far as the log knows)")
			case !s.h.Covered:
				rd.Notes = append(rd.Notes, fmt.Sprintf("%s's head is not covered: comparing its newest checkpoint (seq %d), not its live state", s.name, s.h.CapturedAt))
			}
		}
		if a != nil && b != nil && a.DriverID == b.DriverID && a.Ref != "" && b.Ref != "" {
			d, ok := differs[a.DriverID]
			switch {
			case a.Ref == b.Ref:
				rd.Compared = true // the same checkpoint holds the same state
			case !ok || d == nil:
				rd.Notes = append(rd.Notes, "no differ for driver "+a.DriverID+": not compared")
			default:
				diff, err := d.Diff(ctx, a.Ref, b.Ref)
				if err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					rd.Notes = append(rd.Notes, "not compared: "+err.Error())
					break
				}
				rd.Compared, rd.Difference = true, diff
			}
		}
		out = append(out, rd)
	}
	return out, nil
}

//go:embed diff.html.tmpl
var diffTemplate string

var diffPageTmpl = template.Must(template.New("diff").Funcs(template.FuncMap{
	"value":   func(v json.RawMessage) string { return clipText(string(v), 160) },
	"full":    func(v json.RawMessage) string { return clipText(string(v), 4000) },
	"args":    stepArgsText,
	"result":  stepResultText,
	"lines":   diffLines,
	"outcome": outcomeText,
	"sign":    changeSign,
}).Parse(diffTemplate))

// diffPage is the data of the diff page.
type diffPage struct {
	Title     string
	C         *fork.Comparison
	Resources []ResourceDiff
	Live      bool           // served by Handler: execution links work
	Counts    map[string]int // steps past the prefix by change
}

// WriteDiff writes the comparison c of two executions, and the difference
// of their resources, as one self-contained HTML page: the two timelines
// aligned by step (changed results highlighted), the shared prefix folded
// away, the two outcomes, then each resource's difference. `forkline diff
// --html` writes it; [Handler] serves it at /diff.
func WriteDiff(w io.Writer, c *fork.Comparison, resources []ResourceDiff) error {
	return writeDiff(w, c, resources, false)
}

func writeDiff(w io.Writer, c *fork.Comparison, resources []ResourceDiff, live bool) error {
	if c == nil {
		return fmt.Errorf("%w: webui: nil comparison", eventlog.ErrInvalid)
	}
	page := diffPage{Title: "forkline diff " + c.A.String() + " " + c.B.String(), C: c, Resources: resources,
		Live: live, Counts: map[string]int{}}
	for _, s := range c.Steps {
		page.Counts[string(s.Change)]++
	}
	var buf bytes.Buffer
	if err := diffPageTmpl.Execute(&buf, page); err != nil {
		return fmt.Errorf("webui: render diff: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// clipText shortens s to n runes, marking the cut.
func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// outcomeText is an execution's outcome in a few words (its seq has a
// column of its own).
func outcomeText(o fork.Outcome) string {
	var b strings.Builder
	b.WriteString(o.Status.String())
	switch {
	case len(o.Output) > 0:
		b.WriteString(": ")
		b.WriteString(clipText(string(o.Output), 200))
	case o.Error != "":
		fmt.Fprintf(&b, ": %s (%s)", clipText(o.Error, 200), o.Code)
	case o.Reason != "":
		b.WriteString(": " + clipText(o.Reason, 200))
	}
	return b.String()
}

// changeSign is the sign of a resource change.
func changeSign(op driver.Op) string {
	switch op {
	case driver.Added:
		return "+"
	case driver.Removed:
		return "−"
	}
	return "~"
}

// diffLine is one line of a change's Detail with its class: "add" and
// "del" for the lines of a unified diff, "hunk" for its @@ lines.
type diffLine struct {
	Class, Text string
}

func diffLines(detail string) []diffLine {
	var out []diffLine
	for line := range strings.Lines(detail) {
		line = strings.TrimSuffix(line, "\n")
		class := ""
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
			class = "file"
		case strings.HasPrefix(line, "@@"):
			class = "hunk"
		case strings.HasPrefix(line, "+"):
			class = "add"
		case strings.HasPrefix(line, "-"):
			class = "del"
		}
		out = append(out, diffLine{class, line})
	}
	return out
}

// diff serves /diff?a=ID&b=ID: the comparison of two executions, their
// resources compared with the handler's differs.
func (s *server) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var ids [2]eventlog.ID
	for i, name := range []string{"a", "b"} {
		v := q.Get(name)
		if v == "" {
			badRequest(w, "diff: parameter %s (an execution ID) is missing: /diff?a=ID&b=ID", name)
			return
		}
		id, err := eventlog.ParseID(v)
		if err != nil {
			badRequest(w, "diff: %s=%q: %v", name, v, err)
			return
		}
		ids[i] = id
	}
	c, err := fork.Diff(r.Context(), s.k.Log(), ids[0], ids[1])
	if err != nil {
		fail(w, err)
		return
	}
	res, err := DiffResources(r.Context(), c, s.differs)
	if err != nil {
		fail(w, err)
		return
	}
	var buf bytes.Buffer
	if err := writeDiff(&buf, c, res, true); err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// stepArgsText summarises a step's args in a cell as forkline diff does:
// a tool's or local step's args as key=value pairs (eventlog.ValueText);
// nothing for an LLM call, whose args are the raw request.
func stepArgsText(kind eventlog.StepKind, args json.RawMessage) string {
	if kind == eventlog.StepLLM || len(args) == 0 || string(args) == "null" {
		return ""
	}
	return eventlog.ValueText(args, 80)
}

// stepResultText summarises a step's result in a cell as forkline diff
// does: an LLM call's response as the tool calls or the text the model
// answered with ("call write_file(greet.go)", eventlog.LLMReplyText),
// never the raw response; any other result as eventlog.ValueText shows it.
func stepResultText(kind eventlog.StepKind, result json.RawMessage) string {
	if kind == eventlog.StepLLM {
		return eventlog.LLMReplyText(result)
	}
	return eventlog.ValueText(result, 80)
}
