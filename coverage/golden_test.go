package coverage_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/eventtext"
	"github.com/google/go-cmp/cmp"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected tables of the golden files in testdata/")

// A golden file, testdata/*.txt, holds cases separated by blank lines. A case
// is a # comment and a lineage in eventtext form (a fork's lineage is its
// parent's events 1..at, then its fork.created and its own events), then
// "----", then the coverage table: one row per seq with the event, whether
// the point is covered, and per resource its generation, whether it is
// covered and its selection (ref@capturedAt, or (initial)); then the
// windows. -rewrite regenerates the tables; review them as a diff.

// goldenCase is one case of a golden file.
type goldenCase struct {
	where  string   // file:line of its first line
	input  []string // comment and event lines, verbatim
	output []string // the expected table
}

// readGolden splits a golden file into its cases.
func readGolden(t testing.TB, path string) []goldenCase {
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
		c := goldenCase{where: fmt.Sprintf("%s:%d", path, i+1)}
		for ; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s: case without ----", c.where)
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			c.output = append(c.output, lines[i])
		}
		cases = append(cases, c)
	}
	return cases
}

// events parses a case's lineage.
func (c goldenCase) events(t testing.TB) []eventlog.Event {
	t.Helper()
	evs, err := eventtext.Parse(strings.Join(c.input, "\n"))
	if err != nil {
		t.Fatalf("%s: %v", c.where, err)
	}
	return evs
}

// goldenCases reads every case of every golden file.
func goldenCases(t testing.TB) []goldenCase {
	t.Helper()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	var out []goldenCase
	for _, f := range files {
		out = append(out, readGolden(t, f)...)
	}
	return out
}

// goldenEvents returns the lineage of the i-th case of testdata/name.
func goldenEvents(t testing.TB, name string, i int) []eventlog.Event {
	t.Helper()
	return readGolden(t, filepath.Join("testdata", name))[i].events(t)
}

// TestGolden folds each case, compares its coverage table with the file and
// checks every Point against the naive model, so a golden file cannot
// silently record a wrong answer. DESIGN §5, §8.2.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var out strings.Builder
			for _, c := range readGolden(t, path) {
				events := c.events(t)
				f := foldAll(t, events)
				for n := uint64(1); n <= f.Head(); n++ {
					got, err := f.Point(n)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(naivePoint(events, n), got); diff != "" {
						t.Fatalf("%s: Point(%d) differs from the naive model (-naive +fold):\n%s", c.where, n, diff)
					}
				}
				got := renderTable(t, events, f)
				if want := strings.Join(c.output, "\n"); !*rewrite && got != want {
					t.Errorf("%s: %s\n%s", c.where, c.input[0], cmp.Diff(want, got))
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

// renderTable is the expected output of a case: no blank lines, no trailing
// newline.
func renderTable(t *testing.T, events []eventlog.Event, f *coverage.Fold) string {
	var b strings.Builder
	keys := naiveKeys(events, len(events))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "seq\tevent\tpoint")
	for _, k := range keys {
		fmt.Fprintf(tw, "\t%s", k)
	}
	fmt.Fprintln(tw)
	for n := uint64(1); n <= f.Head(); n++ {
		p, err := f.Point(n)
		if err != nil {
			t.Fatal(err)
		}
		point := "uncovered"
		if p.Covered {
			point = "covered"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s", n, subject(events[n-1]), point)
		for _, k := range keys {
			i := slices.IndexFunc(p.Resources, func(s coverage.Selection) bool { return s.Key == k })
			if i < 0 {
				fmt.Fprintf(tw, "\t-")
				continue
			}
			s := p.Resources[i]
			cov := "no "
			if s.Covered {
				cov = "yes"
			}
			fmt.Fprintf(tw, "\tg%d %s %s", s.Generation, cov, refAt(s.Ref, s.CapturedAt))
		}
		fmt.Fprintln(tw)
	}
	ws := f.Windows()
	if len(ws) == 0 {
		fmt.Fprintln(tw, "windows: none")
	} else {
		fmt.Fprintln(tw, "windows:")
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%d..%d\t%s\tg%d\n", w.Key, w.From, w.To, refAt(w.Ref, w.CapturedAt), w.Generation)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	return strings.TrimRight(b.String(), "\n")
}

// subject is the short form of an event for the table.
func subject(ev eventlog.Event) string {
	s := ev.Kind().String()
	switch p := ev.Data.(type) {
	case *eventlog.StepStarted:
		return s + " " + p.StepID
	case *eventlog.StepSucceeded:
		return s + " " + p.StepID
	case *eventlog.StepFailed:
		return s + " " + p.StepID
	case *eventlog.StepCancelled:
		return s + " " + p.StepID
	case *eventlog.StepDenied:
		return s + " " + p.StepID
	case *eventlog.ResourceBound:
		return s + " " + p.Key
	case *eventlog.ResourceCaptured:
		return s + " " + p.Key
	case *eventlog.ResourceCaptureFailed:
		return s + " " + p.Key
	case *eventlog.ForkCreated:
		return fmt.Sprintf("%s at=%d", s, p.At)
	}
	return s
}

// refAt is a checkpoint as the tables show it.
func refAt(ref string, at uint64) string {
	if ref == "" {
		return "(initial)"
	}
	return fmt.Sprintf("%s@%d", ref, at)
}

// parseEvents parses a lineage written in eventtext.
func parseEvents(t testing.TB, text string) []eventlog.Event {
	t.Helper()
	evs, err := eventtext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func foldAll(t tb, events []eventlog.Event) *coverage.Fold {
	t.Helper()
	f := coverage.New()
	for _, ev := range events {
		if err := f.Apply(ev); err != nil {
			t.Fatalf("Apply(%s): %v", eventtext.FormatEvent(ev), err)
		}
	}
	return f
}

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
