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
	"github.com/google/go-cmp/cmp"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/ from the current fold")

// goldenCase is one scenario: a lineage and what it shows.
type goldenCase struct {
	name    string
	comment string
	h       *history
}

const (
	ws = "workspace"
	db = "db"
)

// coderAgent is the reference page's coder agent (DESIGN §7): a workspace
// with EverySteps(5); write_file affects it, read_file does not; LLM calls
// between. The fifth write_file is followed by its capture, committed with
// its outcome; the handler returns with the workspace uncovered, so a
// completion capture precedes execution.completed.
func coderAgent(n byte, reuse bool) *history {
	h := newHistory(n, "coder").run().
		bind(ws, bindOpts{Every: 5, Reuse: reuse}).
		capture(ws, "ws-base", eventlog.CaptureBaseline).
		llm("llm#1").
		tool("write_file#1", ws).
		llm("llm#2").
		tool("read_file#1").
		tool("write_file#2", ws).
		tool("write_file#3", ws).
		llm("llm#3").
		tool("read_file#2").
		tool("write_file#4", ws).
		llm("llm#4").
		tool("write_file#5", ws).capture(ws, "ws-5", eventlog.CaptureSteps).
		llm("llm#5").
		tool("read_file#3").
		llm("llm#6").
		tool("write_file#6", ws).
		llm("llm#7")
	return h.capture(ws, "ws-done", eventlog.CaptureCompletion).completed()
}

func goldenCases() []goldenCase {
	coder := coderAgent(1, false)
	coderReuse := coderAgent(2, true)

	// A fork whose own run binds the workspace from its selection, with the
	// policy its lineage recorded (DESIGN §5), and goes on.
	forkRun := func(f *history, firstWrite string) *history {
		sel := f.events[len(f.events)-1].Data.(*eventlog.ForkCreated).Selections
		f.run()
		for _, s := range sel {
			o := f.policy(s.Key)
			o.From = s.Ref
			f.bind(s.Key, o)
			if s.Ref == "" {
				f.capture(s.Key, s.Key+"-fork-base", eventlog.CaptureBaseline)
			}
		}
		return f.llm("llm#f1").tool(firstWrite, ws).llm("llm#f2")
	}

	// Fork points in coder: 26 is the fifth write_file's step.succeeded (its
	// capture is event 27), 24 the step.succeeded of an LLM call between
	// captures, 25 the fifth write_file's step.started.
	forkCovered := forkRun(coder.fork(11, 26), "write_file#f1")
	forkUncovered := forkRun(coder.fork(12, 24), "write_file#f1")
	forkStarted := forkRun(coder.fork(13, 25), "write_file#5")
	fork1 := forkRun(coderReuse.fork(14, 31), "write_file#f1").capture(ws, "ws-f1-done", eventlog.CaptureCompletion).completed()
	fork2 := forkRun(fork1.fork(15, 26), "write_file#g1")
	fork3 := forkRun(fork1.fork(16, 39), "write_file#h1")

	return []goldenCase{
		{"coder_agent", "The reference page's coder agent: EverySteps(5); write_file affects the\n" +
			"workspace, read_file does not; LLM calls between. Without CoverageReuse every\n" +
			"live step advances the workspace, so coverage ends at the next live step:\n" +
			"only the baseline, the fifth write_file (its capture is committed with its\n" +
			"outcome) and the completion capture cover anything.", coder},
		{"coder_agent_reuse", "The same coder agent on a driver with CoverageReuse: LLM calls and\n" +
			"read_file advance nothing, so the baseline covers everything up to the first\n" +
			"write_file, and the fifth write_file's capture covers the LLM calls and\n" +
			"reads after it until the sixth write_file starts.", coderReuse},
		{"capture_failed", "EverySteps(1). The first write_file's capture fails: its outcome stands,\n" +
			"the workspace stays uncovered, and a fork there falls back to the baseline.\n" +
			"The next counted call captures again and covers its outcome.",
			newHistory(3, "coder").run().bind(ws, bindOpts{Every: 1}).capture(ws, "ws-base", eventlog.CaptureBaseline).
				tool("write_file#1", ws).captureFailed(ws, eventlog.CaptureSteps).
				llm("llm#1").
				tool("write_file#2", ws).capture(ws, "ws-2", eventlog.CaptureSteps).
				completed()},
		{"cancelled_step", "A write_file whose context is cancelled after it started counts (DESIGN §5):\n" +
			"step.cancelled ends its flight and its capture covers it. A denied call\n" +
			"never ran and advances nothing.",
			newHistory(4, "coder").run().bind(ws, bindOpts{Every: 1}).capture(ws, "ws-base", eventlog.CaptureBaseline).
				deny("delete_all#1", eventlog.StepTool).
				start("write_file#1", eventlog.StepTool, ws).cancel("write_file#1").capture(ws, "ws-1", eventlog.CaptureSteps).
				failed(eventlog.FailHandler)},
		{"orphan_indeterminate", "An at_most_once write_file is orphaned by a dead dispatch: it stays in\n" +
			"flight, so every point until it is resolved is uncovered. The next dispatch\n" +
			"resolves it as indeterminate (a counted call) and captures.",
			newHistory(5, "coder").run().bind(ws, bindOpts{Every: 1}).capture(ws, "ws-base", eventlog.CaptureBaseline).
				startWith("write_file#1", eventlog.StepTool, eventlog.AtMostOnce, 1, ws).
				run().
				indeterminate("write_file#1").capture(ws, "ws-1", eventlog.CaptureSteps).
				completed()},
		{"orphan_retry", "A safe_to_retry write_file is orphaned by a dead dispatch; the next dispatch\n" +
			"runs it again (attempt 2), which starts another generation, and its capture\n" +
			"covers the retried outcome only.",
			newHistory(6, "coder").run().bind(ws, bindOpts{Every: 1}).capture(ws, "ws-base", eventlog.CaptureBaseline).
				start("write_file#1", eventlog.StepTool, ws).
				run().
				startWith("write_file#1", eventlog.StepTool, eventlog.SafeToRetry, 2, ws).succeed("write_file#1").
				capture(ws, "ws-1", eventlog.CaptureSteps).
				completed()},
		{"baseline", "Before any resource is bound every point is covered. Binding from the\n" +
			"initial environment starts generation 1; the baseline capture right after it\n" +
			"holds that generation, so it covers the bind itself too (a checkpoint\n" +
			"established after a point covers it while the generation lasts).",
			newHistory(7, "coder").run().llm("llm#1").
				bind(ws, bindOpts{Every: 3, Reuse: true}).capture(ws, "ws-base", eventlog.CaptureBaseline).
				tool("read_file#1").llm("llm#2").
				completed()},
		{"completion_capture", "The handler returns with the workspace uncovered: the completion capture\n" +
			"and execution.completed are one append, and the capture covers the last\n" +
			"step's outcome. The db (OnCompletion false) stays uncovered.",
			newHistory(8, "coder").run().
				bind(ws, bindOpts{Every: 10, Reuse: true}).capture(ws, "ws-base", eventlog.CaptureBaseline).
				bind(db, bindOpts{Every: 10, Reuse: true, NoCompletion: true}).capture(db, "db-base", eventlog.CaptureBaseline).
				tool("write_file#1", ws).
				tool("insert_row#1", db).
				capture(ws, "ws-done", eventlog.CaptureCompletion).completed()},
		{"fork_covered", "A fork of coder_agent at 26, the fifth write_file's step.succeeded: covered,\n" +
			"because the capture committed with it (event 27, outside the fork's\n" +
			"lineage) holds its generation. The fork selects ws-5@27; its own run binds\n" +
			"from it (a new generation, covered by its From) and goes on.", forkCovered},
		{"fork_uncovered", "A fork of coder_agent at 24, an LLM call's step.succeeded: no checkpoint\n" +
			"holds that generation, so the fork is uncovered and selects the newest\n" +
			"checkpoint at or before 24, the baseline.", forkUncovered},
		{"fork_step_started", "A fork of coder_agent at 25, the fifth write_file's step.started: in\n" +
			"flight, so uncovered; the fork runs the step again from the baseline.", forkStarted},
		{"fork_of_fork", "A fork (F1) of coder_agent_reuse at 31, a read_file's step.succeeded\n" +
			"covered by ws-5@27 (read_file advances nothing with CoverageReuse); F1 binds\n" +
			"from ws-5, writes and completes.", fork1},
		{"fork_of_fork_prefix", "A fork of F1 (fork_of_fork) at 26, in the prefix F1 shares with\n" +
			"coder_agent_reuse: the same selection as a fork of coder_agent_reuse at 26,\n" +
			"ws-5@27 (DESIGN §8.5).", fork2},
		{"fork_of_fork_own", "A fork of F1 (fork_of_fork) at 39, in F1's own part, an LLM call's\n" +
			"step.started after F1's write_file: the LLM call advances nothing, so F1's\n" +
			"completion capture ws-f1-done@41 covers 39.", fork3},
		{"two_resources", "Two resources with different policies: the workspace (EverySteps 2, no\n" +
			"CoverageReuse) is advanced by every live step; the db (EverySteps 1,\n" +
			"CoverageReuse) only by calls that affect it. A fork point is covered only\n" +
			"when both are.",
			newHistory(9, "coder").run().
				bind(ws, bindOpts{Every: 2}).capture(ws, "ws-base", eventlog.CaptureBaseline).
				bind(db, bindOpts{Every: 1, Reuse: true}).capture(db, "db-base", eventlog.CaptureBaseline).
				llm("llm#1").
				tool("write_file#1", ws).
				tool("insert_row#1", db).capture(db, "db-1", eventlog.CaptureSteps).
				tool("write_file#2", ws).capture(ws, "ws-2", eventlog.CaptureSteps).
				tool("migrate#1", ws, db).capture(db, "db-2", eventlog.CaptureSteps).
				llm("llm#2").
				capture(ws, "ws-done", eventlog.CaptureCompletion).completed()},
	}
}

// TestGolden renders each scenario's coverage table and compares it with
// testdata/<name>.txt; run with -rewrite to regenerate them and review the
// diff. Each table is also checked against the naive model, so a golden file
// cannot silently record a wrong answer. DESIGN §5, §8.2.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			f := foldAll(t, c.h.events)
			for n := uint64(1); n <= f.Head(); n++ {
				got, err := f.Point(n)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(naivePoint(c.h.events, n), got); diff != "" {
					t.Fatalf("Point(%d) differs from the naive model (-naive +fold):\n%s", n, diff)
				}
			}
			text := renderCase(t, c, f)
			path := filepath.Join("testdata", c.name+".txt")
			if *rewrite {
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./coverage -rewrite to create it)", err)
			}
			if diff := cmp.Diff(string(want), text); diff != "" {
				t.Errorf("%s differs (-file +fold); review and run with -rewrite:\n%s", path, diff)
			}
		})
	}
}

func foldAll(t tb, events []eventlog.Event) *coverage.Fold {
	t.Helper()
	f := coverage.New()
	for _, ev := range events {
		if err := f.Apply(ev); err != nil {
			t.Fatalf("Apply(%s): %v", describe(ev), err)
		}
	}
	return f
}

// renderCase is the golden text of one case.
func renderCase(t *testing.T, c goldenCase, f *coverage.Fold) string {
	var b strings.Builder
	for _, line := range strings.Split(c.comment, "\n") {
		fmt.Fprintf(&b, "# %s\n", line)
	}
	b.WriteString("\nhistory:\n")
	for _, ev := range c.h.events {
		fmt.Fprintf(&b, "%4d %s\n", ev.Seq, describe(ev))
	}

	keys := slices.Clone(naiveKeys(c.h.events, len(c.h.events)))
	b.WriteString("\ncoverage (per resource: generation, covered, selection):\n")
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
		fmt.Fprintf(tw, "%d\t%s\t%s", n, subject(c.h.events[n-1]), point)
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
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}

	b.WriteString("\nwindows:\n")
	ws := f.Windows()
	if len(ws) == 0 {
		b.WriteString("(none)\n")
	}
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%d..%d\t%s\tg%d\n", w.Key, w.From, w.To, refAt(w.Ref, w.CapturedAt), w.Generation)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
