package replay

import (
	"flag"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/eventtext"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the golden files in testdata")

// goldenCase is one case of a golden file: comment and event lines, then
// "----", then the folded state, up to a blank line.
type goldenCase struct {
	line   int      // line number of the case's first line
	input  []string // comment and event lines, verbatim
	output []string // expected output lines
}

// readGolden splits a golden file into its cases.
func readGolden(t *testing.T, path string) []goldenCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var cases []goldenCase
	for i := 0; i < len(lines); {
		if strings.TrimSpace(lines[i]) == "" {
			i++
			continue
		}
		c := goldenCase{line: i + 1}
		for ; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: case without ----", path, c.line)
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			c.output = append(c.output, lines[i])
		}
		cases = append(cases, c)
	}
	return cases
}

// TestGolden folds the event lists of testdata/*.txt and compares the state
// with the expected output; -rewrite regenerates it. Every case is also
// folded split at every seq (DESIGN §8.3) and, where Apply fails, checked
// to leave the state unchanged.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cases := readGolden(t, path)
			var out strings.Builder
			for _, c := range cases {
				got := runGolden(t, fmt.Sprintf("%s:%d", path, c.line), strings.Join(c.input, "\n"))
				if !*rewrite && got != strings.Join(c.output, "\n") {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.input[0], got, strings.Join(c.output, "\n"))
				}
				out.WriteString(strings.Join(c.input, "\n") + "\n----\n" + got + "\n\n")
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// runGolden folds the events of one case and returns its output: the state,
// preceded by "error: …" when an event was rejected.
func runGolden(t *testing.T, where, input string) string {
	t.Helper()
	evs, err := eventtext.Parse(input)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	// The text form of the case reads back as the same events.
	if again, err := eventtext.Parse(eventtext.Format(evs)); err != nil || eventtext.Format(again) != eventtext.Format(evs) {
		t.Fatalf("%s: events do not round-trip through eventtext: %v", where, err)
	}
	s := New()
	var applyErr error
	for i, ev := range evs {
		before := dump(s)
		if applyErr = s.Apply(ev); applyErr != nil {
			if after := dump(s); after != before {
				t.Errorf("%s: failed Apply of seq %d changed the state:\n%s\nto:\n%s", where, ev.Seq, before, after)
			}
			evs = evs[:i]
			break
		}
	}
	// DESIGN §8.3: Fold of a prefix, then Apply of the rest, at every split.
	for k := 0; k <= len(evs); k++ {
		split, err := Fold(seqOf(evs[:k]))
		if err != nil {
			t.Fatalf("%s: Fold of the first %d events: %v", where, k, err)
		}
		for _, ev := range evs[k:] {
			if err := split.Apply(ev); err != nil {
				t.Fatalf("%s: Apply of seq %d after Fold of %d events: %v", where, ev.Seq, k, err)
			}
		}
		if a, b := dump(split), dump(s); a != b {
			t.Errorf("%s: split at %d gives\n%s\none by one gives\n%s", where, k, a, b)
		}
	}
	if applyErr != nil {
		return "error: " + applyErr.Error() + "\n" + dump(s)
	}
	return dump(s)
}

// seqOf yields evs without error, as a Log's Events would.
func seqOf(evs []eventlog.Event) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// dump prints everything a State exposes, one line per item, no blank line.
func dump(s *State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status=%s agent=%s head=%d dispatches=%d", orNone(s.Status.String()), orNone(s.Agent), s.Head, s.Dispatches)
	bytesField(&b, "input", s.Input)
	bytesField(&b, "output", s.Output)
	strField(&b, "error", s.Error)
	strField(&b, "code", string(s.Code))
	timeField(&b, "deadline", s.Deadline)
	timeField(&b, "wake", s.WakeAt)
	if s.CancelRequested {
		b.WriteString(" cancel_requested")
	}
	strField(&b, "cancel_reason", s.CancelReason)
	strField(&b, "cancel_by", s.CancelBy)
	if !s.Parent.IsZero() || s.ForkAt != 0 || len(s.Selections) > 0 {
		fmt.Fprintf(&b, "\nfork parent=%s at=%d", eventtext.FormatID(s.Parent), s.ForkAt)
		for _, sel := range s.Selections {
			b.WriteString(" select=" + eventtext.FormatSelection(sel))
		}
	}
	for _, st := range s.Steps() {
		fmt.Fprintf(&b, "\nstep %s %s %s %s", st.ID, st.Kind, st.Target, st.Status)
		if st.Status != StepDenied {
			fmt.Fprintf(&b, " attempts=%d idem=%s", st.Attempts, st.Idempotency)
		}
		fmt.Fprintf(&b, " started=%d ended=%d dispatch=%d", st.StartedAt, st.EndedAt, st.Dispatch)
		if len(st.Resources) > 0 {
			b.WriteString(" affects=" + strings.Join(st.Resources, ","))
		}
		bytesField(&b, "args", st.Args)
		bytesField(&b, "result", st.Result)
		strField(&b, "error", st.Error)
		if st.Indeterminate {
			b.WriteString(" indeterminate")
		}
		strField(&b, "reason", st.Reason)
		timeField(&b, "retry_at", st.RetryAt)
		if st.Overridden {
			b.WriteString(" overridden")
		}
	}
	for _, o := range s.Overrides() {
		if _, held := s.step(o.StepID); !held {
			fmt.Fprintf(&b, "\noverride %s", o.StepID)
			bytesField(&b, "result", o.Result)
		}
	}
	for _, tm := range s.Timers() {
		fmt.Fprintf(&b, "\ntimer %s started=%d fired=%d", tm.ID, tm.StartedAt, tm.FiredAt)
		timeField(&b, "wake", tm.WakeAt)
	}
	for _, a := range s.Approvals() {
		fmt.Fprintf(&b, "\napproval %s %s %s requested=%d decided=%d own=%t pending=%t", a.StepID, a.StepKind, a.Target,
			a.RequestedAt, a.DecidedAt, a.Own, a.Pending())
		strField(&b, "decision", string(a.Decision))
		strField(&b, "by", a.By)
		strField(&b, "note", a.Note)
		strField(&b, "reason", a.Reason)
	}
	for _, m := range s.Markers {
		fmt.Fprintf(&b, "\nmarker %s seq=%d dispatch=%d", m.Name, m.Seq, m.Dispatch)
	}
	if s.DivergedAt != 0 {
		fmt.Fprintf(&b, "\ndiverged at=%d unconsumed=%s", s.DivergedAt, strings.Join(s.Diverged, ","))
	}
	for _, bd := range s.Bindings() {
		fmt.Fprintf(&b, "\nbinding %s driver=%s seq=%d own=%t every=%d completion=%t reuse=%t",
			bd.Key, bd.DriverID, bd.Seq, bd.Own, bd.EverySteps, bd.OnCompletion, bd.CoverageReuse)
		strField(&b, "from", bd.From)
		bytesField(&b, "config", bd.Configuration)
		bytesField(&b, "binding", bd.Binding)
		if sel, ok := s.Selection(bd.Key); ok {
			b.WriteString(" selected=" + eventtext.FormatSelection(sel))
		}
	}
	return b.String()
}

func timeField(b *strings.Builder, key string, t time.Time) {
	if !t.IsZero() {
		b.WriteString(" " + key + "=" + t.UTC().Format(eventtext.TimeLayout))
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func strField(b *strings.Builder, key, v string) {
	if v != "" {
		b.WriteString(" " + key + "=" + strconv.Quote(v))
	}
}

func bytesField(b *strings.Builder, key string, v []byte) {
	if len(v) > 0 {
		strField(b, key, string(v))
	}
}
