package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"github.com/forkline/forkline/sdk"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the command's current output")

// runCLI runs the command in-process.
func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runContext(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// maskIDs replaces every ID with new1new1-…, new2new2-…, … in order of
// appearance.
func maskIDs(s string) string {
	seen := map[string]string{}
	return uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		if m, ok := seen[id]; ok {
			return m
		}
		seen[id] = idShaped(fmt.Sprintf("new%d", len(seen)+1))
		return seen[id]
	})
}

// checkGolden compares got with testdata/name.golden, or rewrites the file
// with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/forkline -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got; go test ./cmd/forkline -update rewrites it):\n%s", path, diff)
	}
}

// transcript is a golden file's text: the command, its exit status and
// its output.
func transcript(args []string, stdout, stderr string, code int) string {
	return fmt.Sprintf("$ forkline %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
}

// TestGolden runs every subcommand against the fixture's log and compares
// its output with testdata/<name>.golden. Read-only commands must leave the
// log exactly as it was.
func TestGolden(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		writes bool // the command may change the log (fork)
	}{
		{"ls", []string{"ls"}, false},
		{"ls_json", []string{"ls", "--json"}, false},
		{"ls_status", []string{"ls", "--status", "pending,failed"}, false},
		{"ls_agent", []string{"ls", "--agent", "mailer", "--status", "failed"}, false},
		{"ls_no_match", []string{"ls", "--status", "cancelled"}, false},
		{"cancel_ended", []string{"cancel", "{A}"}, false},
		{"cancel_pending", []string{"cancel", "{C}", "--reason", "not needed"}, true},
		{"tree", []string{"tree"}, false},
		{"tree_json", []string{"--json", "tree"}, false},
		{"events", []string{"events", "{A}"}, false},
		{"events_json", []string{"events", "{A}", "--json"}, false},
		{"events_fork_prefix", []string{"events", "{B:prefix}"}, false},
		{"events_nodash", []string{"events", "{D:nodash}"}, false},
		{"coverage", []string{"coverage", "{A}"}, false},
		{"coverage_json", []string{"coverage", "--json", "{A}"}, false},
		{"coverage_fork", []string{"coverage", "{E}"}, false},
		{"coverage_no_resources", []string{"coverage", "{D}"}, false},
		{"coverage_seq_covered", []string{"coverage", "{A}", "13"}, false},
		{"coverage_seq_uncovered", []string{"coverage", "{A}", "20"}, false},
		{"coverage_seq_json", []string{"coverage", "{A}", "20", "--json"}, false},
		{"show_tool_started", []string{"show", "{A}", "7"}, false},
		{"show_llm_result", []string{"show", "{A}", "6"}, false},
		{"show_bound", []string{"show", "{A}", "14"}, false},
		{"show_fork_created", []string{"show", "{B}", "14"}, false},
		{"show_json", []string{"show", "{A}", "17", "--json"}, false},
		{"fork_covered", []string{"fork", "{A}", "13"}, true},
		{"fork_uncovered_json", []string{"fork", "--json", "{A}", "20"}, true},
		{"fork_other_agent", []string{"fork", "{D}", "3"}, true},
		{"run_other_agent", []string{"run", "{D}"}, false},
		{"gc_dry_run", []string{"gc", "--older-than", "0s", "--dry-run"}, false},
		{"du", []string{"du"}, false},
		{"help", []string{"-h"}, false},
		{"help_command", []string{"help", "coverage"}, false},
		{"help_flag_command", []string{"timeline", "-h"}, false},
		{"no_args", []string{}, false},
		// Bad input: exit 2, one line, nothing written.
		{"err_unknown_id", []string{"events", "ffffffff"}, false},
		{"err_ambiguous", []string{"events", "0"}, false},
		{"err_bad_id", []string{"show", "xyz", "1"}, false},
		{"err_seq_range", []string{"show", "{A}", "29"}, false},
		{"err_seq_zero", []string{"coverage", "{A}", "0"}, false},
		{"err_seq_word", []string{"fork", "{A}", "last"}, false},
		{"err_fork_range", []string{"fork", "{B}", "18"}, false},
		{"err_unknown_command", []string{"frok", "{A}", "3"}, false},
		{"err_bad_flag", []string{"ls", "--colour"}, false},
		{"err_ls_status", []string{"ls", "--status", "done"}, false},
		{"err_cancel_unknown", []string{"cancel", "ffffffff"}, false},
		{"err_arg_count", []string{"show", "{A}"}, false},
		{"err_timeline_no_html", []string{"timeline", "{A}"}, false},
		{"err_gc_no_age", []string{"gc"}, false},
		{"err_gc_status", []string{"gc", "--status", "done", "--older-than", "1h"}, false},
		{"err_gc_days", []string{"gc", "--older-than", "7d"}, false},
		{"err_gc_negative", []string{"gc", "--older-than", "-1h"}, false},
		{"err_gc_running", []string{"gc", "--status", "running", "--older-than", "1h"}, false},
		{"err_gc_grace", []string{"gc", "--older-than", "1h", "--grace", "-5m"}, false},
		{"err_delete_unknown", []string{"delete", "ffffffff"}, false},
		{"err_timeline_no_folder", []string{"timeline", "{A}", "--html", "{dir}/nope/t.html"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			before := fingerprint(t, f.dir)
			args := append([]string{"--dir", f.dir}, f.expand(c.args)...)
			stdout, stderr, code := runCLI(t, args...)
			shown := append([]string{"--dir", "<dir>"}, c.args...)
			checkGolden(t, c.name, f.mask(transcript(shown, stdout, stderr, code)))

			if strings.Contains(c.name, "json") && code == 0 && !json.Valid([]byte(stdout)) {
				t.Errorf("--json output is not one JSON document:\n%s", stdout)
			}
			if c.name != "no_args" && (code == exitInput || strings.HasPrefix(c.name, "err_")) {
				// Bad input: status 2, one line on stderr, nothing else.
				if code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1 {
					t.Errorf("bad input: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, one line on stderr", code, stdout, stderr)
				}
			}
			if !c.writes || code != 0 {
				if after := fingerprint(t, f.dir); after != before {
					t.Errorf("the command changed the data folder:\n%s", cmp.Diff(before, after))
				}
			}
		})
	}
}

// TestForkWritesOneExecution checks what fork writes: one execution whose
// parent and fork point are the ones asked for, whose fork.created carries
// the plan it printed, and nothing else (DESIGN §8.7: forking never changes
// an existing event).
func TestForkWritesOneExecution(t *testing.T) {
	f := newFixture(t)
	before := fingerprint(t, f.dir)
	stdout, stderr, code := runCLI(t, "--dir", f.dir, "--json", "fork", f.ids["A"].String(), "20")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		ID     string
		Parent string
		At     uint64
		Plan   pointJSON
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	after := fingerprint(t, f.dir)
	if !strings.HasPrefix(after, before) {
		t.Fatalf("fork changed what was there:\n%s", cmp.Diff(before, after))
	}
	added := strings.TrimPrefix(after, before)
	want := fmt.Sprintf("execution %s coder parent=%s@20 head=21\n", out.ID, f.ids["A"])
	if !strings.HasPrefix(added, want) {
		t.Fatalf("fork added:\n%s\nwant an execution %q", added, want)
	}
	if out.Plan.Covered || len(out.Plan.Resources) != 2 || out.Plan.Resources[0].Key != "db" || !out.Plan.Resources[0].Covered ||
		out.Plan.Resources[1].Ref != "ref-two" || out.Plan.Resources[1].Covered {
		t.Fatalf("plan %+v: want db covered by ref-db1, workspace uncovered restoring ref-two", out.Plan)
	}
	if !strings.Contains(added, `21 `) || !strings.Contains(added, `fork.created {"parent":"`+f.ids["A"].String()+`","at":20`) {
		t.Fatalf("the fork's own event is not its fork.created:\n%s", added)
	}
}

// TestNotALog: a folder without a log, with an empty or foreign log folder,
// or whose log path is a file, is refused with exit 2 and left as it was —
// no log is created by a read-only command.
func TestNotALog(t *testing.T) {
	setups := map[string]func(t *testing.T, dir string){
		"missing":  func(t *testing.T, dir string) {},
		"empty":    func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "log")) },
		"foreign":  func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "log", "notes.txt"), "mine") },
		"log_file": func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "log"), "not a folder") },
	}
	for name, setup := range setups {
		for _, cmd := range [][]string{{"ls"}, {"tree"}, {"events", "01"}, {"coverage", "01", "1"}, {"fork", "01", "1"}, {"timeline", "01", "--html", "t.html"}} {
			t.Run(name+"/"+cmd[0], func(t *testing.T) {
				dir := t.TempDir()
				setup(t, dir)
				before := listAll2(t, dir)
				stdout, stderr, code := runCLI(t, append([]string{"--dir", dir}, cmd...)...)
				if code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "not a forkline log") {
					t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line saying: not a forkline log", code, stdout, stderr)
				}
				if after := listAll2(t, dir); !cmp.Equal(before, after) {
					t.Fatalf("the folder changed:\n%s", cmp.Diff(before, after))
				}
			})
		}
	}
}

// TestMain lets the test binary act as another process holding a log
// open: with FORKLINE_TEST_HOLD set to a log folder it opens it, says
// "ready" and holds it until its stdin closes. With FORKLINE_TEST_MAIN=1
// it is the forkline command itself, its arguments the command's.
func TestMain(m *testing.M) {
	if os.Getenv("FORKLINE_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if url := os.Getenv("FORKLINE_TEST_PGWRITE"); url != "" {
		os.Exit(pgWriter(url))
	}
	if dir := os.Getenv("FORKLINE_TEST_HOLD"); dir != "" {
		s, err := pebblestore.Open(dir, pebblestore.WithoutSync())
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDemoRefusesForeignLog: the demo creates a log where there is none,
// but never in a folder that holds something else.
func TestDemoRefusesForeignLog(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	for name, setup := range map[string]func(t *testing.T, dir string){
		"foreign":  func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "log", "notes.txt"), "mine") },
		"log_file": func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "log"), "not a folder") },
		"dir_file": func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "data"), "not a folder") },
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			setup(t, root)
			dir := root
			if name == "dir_file" {
				dir = filepath.Join(root, "data")
			}
			before := listAll2(t, root)
			stdout, stderr, code := runCLI(t, "--dir", dir, "demo")
			if code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line", code, stdout, stderr)
			}
			if after := listAll2(t, root); !cmp.Equal(before, after) {
				t.Fatalf("the folder changed:\n%s", cmp.Diff(before, after))
			}
		})
	}
}

// TestLocked: a log that another process (or another open in this one)
// holds is refused with exit 2 and one line, and nothing is written.
func TestLocked(t *testing.T) {
	check := func(t *testing.T, f *fixture) {
		t.Helper()
		for _, cmd := range [][]string{{"ls"}, {"fork", f.ids["A"].String(), "3"}, {"demo"}, {"gc", "--older-than", "0s"}, {"delete", f.ids["A"].String()}} {
			stdout, stderr, code := runCLI(t, append([]string{"--dir", f.dir}, cmd...)...)
			if code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "in use by another process") {
				t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line saying the log is in use", cmd, code, stdout, stderr)
			}
		}
		if _, err := os.Stat(storeDir(f.dir)); !os.IsNotExist(err) {
			t.Fatalf("demo on a locked log created %s (%v)", storeDir(f.dir), err)
		}
	}
	t.Run("other_process", func(t *testing.T) {
		f := newFixture(t)
		before := fingerprint(t, f.dir)
		holder := exec.Command(os.Args[0], "-test.run=^$")
		holder.Env = append(os.Environ(), "FORKLINE_TEST_HOLD="+logDir(f.dir))
		stdin, err := holder.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			_ = stdin.Close()
			_ = holder.Wait()
			t.Fatalf("holder: %q, %v", line, err)
		}
		check(t, f)
		_ = stdin.Close()
		if err := holder.Wait(); err != nil {
			t.Fatal(err)
		}
		if after := fingerprint(t, f.dir); after != before {
			t.Fatalf("the log changed:\n%s", cmp.Diff(before, after))
		}
	})
	t.Run("same_process", func(t *testing.T) {
		f := newFixture(t)
		s, err := pebblestore.Open(logDir(f.dir), pebblestore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		before := logFingerprint(t, s)
		check(t, f)
		if after := logFingerprint(t, s); after != before {
			t.Fatalf("the log changed:\n%s", cmp.Diff(before, after))
		}
	})
}

// TestProgress: with --progress a scan reports on stderr every
// progressEvery events and ends its line; without it (stderr is not a
// terminal) it says nothing.
func TestProgress(t *testing.T) {
	f := newFixture(t)
	defer func(n uint64) { progressEvery = n }(progressEvery)
	progressEvery = 10
	_, stderr, code := runCLI(t, "--dir", f.dir, "events", f.ids["A"].String(), "--progress")
	want := fmt.Sprintf("\rreading %s: 10 events\rreading %[1]s: 20 events\rreading %[1]s: 28 events, done\n", f.ids["A"])
	if code != 0 || stderr != want {
		t.Fatalf("exit %d, stderr %q; want %q", code, stderr, want)
	}
	_, stderr, code = runCLI(t, "--dir", f.dir, "events", f.ids["A"].String())
	if code != 0 || stderr != "" {
		t.Fatalf("without --progress: exit %d, stderr %q; want nothing", code, stderr)
	}
	progressEvery = 2
	_, stderr, code = runCLI(t, "--dir", f.dir, "ls", "--progress")
	if want := "\rlisting: 2 executions\rlisting: 4 executions\rlisting: 5 executions, done\n"; code != 0 || stderr != want {
		t.Fatalf("ls: exit %d, stderr %q; want %q", code, stderr, want)
	}
}

// TestShowAgreesWithCoverage: show answers coverage from the store's index
// (coverage.At), coverage from a fold of the lineage; for every event of
// every fixture execution they must agree (DESIGN §8.3: the folds are
// pure and incremental, and the index answers as the fold does).
func TestShowAgreesWithCoverage(t *testing.T) {
	f := newFixture(t)
	for _, n := range f.names {
		stdout, stderr, code := runCLI(t, "--dir", f.dir, "--json", "coverage", f.ids[n].String())
		if code != 0 {
			t.Fatalf("coverage %s: exit %d: %s", n, code, stderr)
		}
		var all struct{ Points []pointJSON }
		if err := json.Unmarshal([]byte(stdout), &all); err != nil {
			t.Fatal(err)
		}
		for _, want := range all.Points {
			stdout, stderr, code := runCLI(t, "--dir", f.dir, "--json", "show", f.ids[n].String(), fmt.Sprint(want.Seq))
			if code != 0 {
				t.Fatalf("show %s %d: exit %d: %s", n, want.Seq, code, stderr)
			}
			var got struct{ Coverage pointJSON }
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatal(err)
			}
			want.Kind = ""
			if diff := cmp.Diff(want, got.Coverage); diff != "" {
				t.Errorf("%s seq %d: show's coverage differs from coverage's (-coverage +show):\n%s", n, want.Seq, diff)
			}
		}
	}
}

// TestTimelineHTML renders the fixture's timeline and checks the picture:
// one circle per event with a tooltip, a bar per coverage window labelled
// with its checkpoint and generation, the forks branching off, no external
// asset, and an SVG that parses as XML.
func TestTimelineHTML(t *testing.T) {
	f := newFixture(t)
	page := filepath.Join(t.TempDir(), "a.html")
	stdout, stderr, code := runCLI(t, "--dir", f.dir, "timeline", f.ids["A"].String(), "--html", page)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkGolden(t, "timeline_stdout", f.mask(strings.ReplaceAll(stdout, page, "<page>")))
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	checkGolden(t, "timeline_html", f.mask(html))

	for _, bad := range []string{"http://", "https://", "<script", "<link", "@import", "ZgotmplZ"} {
		if strings.Contains(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("the page contains %q: it must be self-contained and fully rendered", bad)
		}
	}
	i, j := strings.Index(html, "<svg"), strings.Index(html, "</svg>")
	if i < 0 || j < 0 {
		t.Fatal("no <svg> in the page")
	}
	var svg struct {
		Circles []struct {
			Title string `xml:"title"`
		} `xml:"circle"`
		Groups []struct {
			Class   string `xml:"class,attr"`
			Title   string `xml:"title"`
			Circles []struct {
				Title string `xml:"title"`
			} `xml:"circle"`
			Rects []struct {
				Class string `xml:"class,attr"`
				Title string `xml:"title"`
			} `xml:"rect"`
			Texts []string `xml:"text"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal([]byte(html[i:j+len("</svg>")]), &svg); err != nil {
		t.Fatalf("the SVG is not well-formed: %v", err)
	}
	var events int
	for _, c := range svg.Circles {
		if strings.HasPrefix(c.Title, "seq ") {
			events++
		}
	}
	if events != 28 {
		t.Errorf("%d event circles with a tooltip, want 28", events)
	}
	var forks, bars []string
	var laneTexts []string
	for _, g := range svg.Groups {
		switch g.Class {
		case "forkgroup":
			forks = append(forks, g.Title)
		case "lanegroup":
			laneTexts = append(laneTexts, g.Texts...)
			for _, r := range g.Rects {
				if r.Class == "window" {
					bars = append(bars, r.Title)
				}
			}
		}
	}
	if len(forks) != 2 || !strings.Contains(forks[0], f.ids["B"].String()) || !strings.Contains(forks[1], f.ids["C"].String()) {
		t.Errorf("fork branches %q, want B then C", forks)
	}
	wantBars := []string{"db covered at seqs 14–15 by checkpoint ref-db0", "db covered at seqs 17–28 by checkpoint ref-db1",
		"workspace covered at seqs 3–4 by checkpoint ref-base", "workspace covered at seqs 12–15 by checkpoint ref-two",
		"workspace covered at seqs 26–28 by checkpoint ref-done"}
	if len(bars) != len(wantBars) {
		t.Fatalf("coverage bars %q, want %d", bars, len(wantBars))
	}
	for k, w := range wantBars {
		if !strings.HasPrefix(bars[k], w) {
			t.Errorf("bar %d: %q, want it to start with %q", k, bars[k], w)
		}
	}
	joined := strings.Join(laneTexts, "|")
	for _, w := range []string{"ref-two · g5 · @13", "ref-done · g9 · @27", "ref-db1 · g2 · @18"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no window label %q among %q", w, joined)
		}
	}
}

// coderLineage is the shape of the coder agent's lineage without its LLM
// calls: a workspace bound with EverySteps(every) and its baseline, then
// writes write_file calls with a capture after every every-th, and a
// completion capture when the last write left the workspace uncovered.
func coderLineage(t testing.TB, writes, every int) *lineage {
	t.Helper()
	id := eventlog.NewID()
	l := &lineage{info: eventlog.Info{ID: id, Agent: "coder"}, cov: coverage.New(), steps: stepIndex{}}
	push := func(p eventlog.Payload) {
		ev := eventlog.Event{Seq: uint64(len(l.events) + 1), Time: baseTime, Data: p}
		if err := l.cov.Apply(ev); err != nil {
			t.Fatal(err)
		}
		l.steps.Add(ev)
		l.events = append(l.events, ev)
	}
	capture := func(reason eventlog.CaptureReason) {
		st, _ := l.cov.State("workspace")
		push(&eventlog.ResourceCaptured{Key: "workspace", Ref: fmt.Sprintf("ref-%d", len(l.events)+1), Generation: st.Generation, Reason: reason})
	}
	push(&eventlog.ExecutionCreated{Agent: "coder"})
	push(&eventlog.DispatchStarted{Dispatch: 1})
	push(&eventlog.ResourceBound{Key: "workspace", DriverID: "d", Binding: js(map[string]string{}), EverySteps: every, OnCompletion: true})
	capture(eventlog.CaptureBaseline)
	for k := 1; k <= writes; k++ {
		sid := fmt.Sprintf("w%d", k)
		push(&eventlog.StepStarted{StepID: sid, StepKind: eventlog.StepTool, Target: "write_file",
			Args:      js(map[string]string{"path": fmt.Sprintf("f%d.txt", k), "content": fmt.Sprint(k)}),
			Resources: []string{"workspace"}, Idempotency: eventlog.SafeToRetry, Attempt: 1})
		push(&eventlog.StepSucceeded{StepID: sid, Result: js("ok")})
		if k%every == 0 {
			capture(eventlog.CaptureSteps)
		}
	}
	if writes%every != 0 {
		capture(eventlog.CaptureCompletion)
	}
	push(&eventlog.ExecutionCompleted{})
	l.info.Head = uint64(len(l.events))
	return l
}

// TestPickForkPoints: the demo forks at the capture after the fifth write
// (covered) and at the outcome of the next write (uncovered); with fewer
// writes than the policy's five, at the completion capture and at the
// first write's outcome.
func TestPickForkPoints(t *testing.T) {
	for _, c := range []struct {
		writes             int
		covered, uncovered uint64
	}{
		// 1 created, 2 dispatch, 3 bound, 4 baseline, writes at 5-6, 7-8, …,
		// the fifth's outcome at 14 and its capture at 15, the sixth at 16-17.
		{writes: 8, covered: 15, uncovered: 17},
		{writes: 5, covered: 15, uncovered: 6},
		// No steps capture: the completion capture at 11 after three writes.
		{writes: 3, covered: 11, uncovered: 6},
		{writes: 0, covered: 0, uncovered: 0},
	} {
		l := coderLineage(t, c.writes, 5)
		cov, unc, err := pickForkPoints(l)
		if err != nil || cov != c.covered || unc != c.uncovered {
			t.Errorf("%d writes: picked covered %d, uncovered %d (%v); want %d and %d", c.writes, cov, unc, err, c.covered, c.uncovered)
		}
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listAll2 lists every file and folder under dir with its size.
func listAll2(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %v %d", rel, fi.IsDir(), fi.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTreeShowsChildren: tree hangs a child execution (Agent.Call) from
// its caller, marked child, apart from forks.
func TestTreeShowsChildren(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k, err := sdk.Open(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := sdk.Register(k, "helper", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	parent, _ := sdk.Register(k, "boss", func(ctx context.Context, n int) (int, error) { return child.Call(ctx, n) })
	id, _ := parent.Start(ctx, 1)
	if _, err := parent.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	fork, err := k.Fork(ctx, id, 2)
	if err != nil {
		t.Fatal(err)
	}
	_ = k.Close()
	stdout, stderr, code := runCLI(t, "--dir", dir, "tree")
	if code != 0 {
		t.Fatalf("tree: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], id.String()) ||
		!strings.HasPrefix(lines[2], "├── "+fork.String()) || !strings.Contains(lines[3], "└─▸ ") ||
		!strings.Contains(lines[3], "helper") || !strings.Contains(lines[3], " child ") {
		t.Fatalf("tree:\n%s", stdout)
	}
}

// TestServe: serve answers the executions page to a request presenting
// its token (--token) until interrupted, then exits 0; one without is 401;
// an address it cannot listen on is bad input.
func TestServe(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runContext(ctx, []string{"--dir", f.dir, "serve", "--addr", addr, "--token", "t0ps3cret", "--workers", "0"}, &out, &errb)
	}()
	var body string
	for i := 0; ; i++ {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		req.Header.Set("Authorization", "Bearer t0ps3cret")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if i == 500 {
			t.Fatalf("serve never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(body, "forkline · executions") || !strings.Contains(body, f.ids["A"].String()) {
		t.Fatalf("GET / =\n%s", body)
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET / without the token: %s", resp.Status)
	}
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("serve exited %d: %s", c, errb.String())
	}
	if _, stderr, c := runCLI(t, "--dir", f.dir, "serve", "--addr", "nonsense"); c != exitInput || !strings.Contains(stderr, `listen on "nonsense"`) {
		t.Fatalf("serve --addr nonsense = %d %q", c, stderr)
	}
}
