package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/scriptedmodel"
	"github.com/google/go-cmp/cmp"
)

var (
	refRE      = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	shortRefRE = regexp.MustCompile(`\b[0-9a-f]{12}\b`)
)

// maskRefs replaces checkpoint refs (content hashes, which depend on the
// file system's permission bits) with ref1…, ref2…, in order of appearance,
// keeping their width.
func maskRefs(s string) string {
	seen := map[string]string{}
	name := func(full string) string {
		if m, ok := seen[full[:12]]; ok {
			return m
		}
		m := "ref" + string(rune('A'+len(seen)))
		seen[full[:12]] = strings.Repeat(m, 16)
		return seen[full[:12]]
	}
	s = refRE.ReplaceAllStringFunc(s, func(r string) string { return name(r)[:64] })
	return shortRefRE.ReplaceAllStringFunc(s, func(r string) string { return name(r)[:12] })
}

// demoExecution is an execution the demo wrote, read back from its log.
type demoExecution struct {
	info   eventlog.Info
	events []eventlog.Event
}

func readDemoLog(t *testing.T, dir string) []demoExecution {
	t.Helper()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var out []demoExecution
	for info, err := range s.List(ctx, eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		x := demoExecution{info: info}
		for ev, err := range s.Events(ctx, info.ID, 1) {
			if err != nil {
				t.Fatal(err)
			}
			x.events = append(x.events, ev)
		}
		out = append(out, x)
	}
	return out
}

// recordedWorkspace is what the successful write_file calls recorded in
// events 1..upTo produce in an empty workspace: the test's own witness of
// the parent's state at a seq.
func recordedWorkspace(t *testing.T, events []eventlog.Event, upTo uint64) map[string]string {
	t.Helper()
	args := map[string]map[string]string{}
	out := map[string]string{}
	for _, ev := range events[:upTo] {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if p.Target == "write_file" {
				var a map[string]string
				if err := json.Unmarshal(p.Args, &a); err != nil {
					t.Fatal(err)
				}
				args[p.StepID] = a
			}
		case *eventlog.StepSucceeded:
			if a, ok := args[p.StepID]; ok {
				out[a["path"]] = a["content"]
			}
		}
	}
	return out
}

// tree reads the regular files under dir.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ownWorkspaceDir is the directory of the workspace an execution bound
// itself, and the ref it was bound from.
func ownWorkspaceDir(t *testing.T, dir string, x demoExecution) (string, string) {
	t.Helper()
	for _, ev := range x.events[x.info.ForkSeq:] {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok {
			var binding dirfs.Binding
			if err := json.Unmarshal(b.Binding, &binding); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(storeDir(dir), "workspaces", binding.Workspace), b.From
		}
	}
	t.Fatalf("execution %s bound no workspace", x.info.ID)
	return "", ""
}

// TestDemo runs the demo end to end in a fresh folder with the scripted
// model and checks its claims from the log and the workspaces, not from its
// output: the covered fork restored exactly the parent's workspace at the
// fork point (DESIGN §8.1), the uncovered one the newest earlier checkpoint
// (§8.2), which lacks the writes made after it. Then it runs the demo again
// in the same folder: a new execution, and nothing that was there changes
// (§8.7).
func TestDemo(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	dir := filepath.Join(t.TempDir(), "data")
	stdout, stderr, code := runCLI(t, "--dir", dir, "demo")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("demo wrote to stderr: %q", stderr)
	}
	checkGolden(t, "demo", maskRefs(strings.ReplaceAll(maskIDs(stdout), dir, "<dir>")))
	if !strings.Contains(stdout, "built-in scripted model") {
		t.Errorf("the demo does not say plainly that it used the scripted model:\n%s", stdout)
	}

	xs := readDemoLog(t, dir)
	if len(xs) != 4 {
		t.Fatalf("%d executions in the log, want the run and three forks", len(xs))
	}
	parent, forks := xs[0], xs[1:]
	if !parent.info.Parent.IsZero() || parent.info.Agent != coderAgent {
		t.Fatalf("first execution %+v: want a root execution of the coder agent", parent.info)
	}
	for _, x := range xs {
		if _, ok := x.events[len(x.events)-1].Data.(*eventlog.ExecutionCompleted); !ok {
			t.Fatalf("execution %s did not complete: last event %s", x.info.ID, x.events[len(x.events)-1].Kind())
		}
	}
	var writes, captures int
	for _, ev := range parent.events {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if p.Target == "write_file" {
				writes++
				if !slices.Equal(p.Resources, []string{workspaceKey}) {
					t.Errorf("seq %d: write_file affects %q, want the workspace", ev.Seq, p.Resources)
				}
			}
			if p.Target == "read_file" && len(p.Resources) > 0 {
				t.Errorf("seq %d: read_file affects %q, want nothing", ev.Seq, p.Resources)
			}
		case *eventlog.ResourceBound:
			if p.EverySteps != 5 {
				t.Errorf("workspace bound with EverySteps(%d), want 5", p.EverySteps)
			}
		case *eventlog.ResourceCaptured:
			captures++
		}
	}
	if writes < 8 || captures < 2 {
		t.Fatalf("parent made %d writes and %d captures; want the script's 8 writes with a capture after the fifth", writes, captures)
	}

	parentDir, _ := ownWorkspaceDir(t, dir, parent)
	parentFinal := tree(t, parentDir)
	if diff := cmp.Diff(recordedWorkspace(t, parent.events, parent.info.Head), parentFinal); diff != "" {
		t.Fatalf("the parent's workspace is not what its recorded writes produce (-recorded +workspace):\n%s", diff)
	}

	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	drv := dirfs.New(dirfs.Config{Store: storeDir(dir)})
	var sawCovered, sawUncovered, sawEdited bool
	for _, f := range forks {
		if f.info.Parent != parent.info.ID {
			t.Fatalf("fork %s has parent %s, want %s", f.info.ID, f.info.Parent, parent.info.ID)
		}
		at := f.info.ForkSeq
		fc, ok := f.events[at].Data.(*eventlog.ForkCreated)
		if !ok || len(fc.Selections) != 1 {
			t.Fatalf("fork %s: event %d is %s, want fork.created with one selection", f.info.ID, at+1, f.events[at].Kind())
		}
		if len(fc.Overrides) > 0 {
			sawEdited = true
			checkEditedFork(t, stdout, dir, parent, f, parentFinal)
			continue
		}
		sel := fc.Selections[0]
		p, err := coverage.At(context.Background(), s, parent.info.ID, at)
		if err != nil {
			t.Fatal(err)
		}
		if p.Covered != sel.Covered || p.Resources[0].Ref != sel.Ref {
			t.Fatalf("fork %s at %d selected %+v; coverage of the parent says %+v", f.info.ID, at, sel, p)
		}
		forkDir, from := ownWorkspaceDir(t, dir, f)
		if from != sel.Ref {
			t.Fatalf("fork %s bound its workspace from %q, selected %q", f.info.ID, from, sel.Ref)
		}
		// The fork's workspace right after the restore is the checkpoint
		// it was bound from: restore that checkpoint afresh and read it.
		ws, b, err := drv.Create(context.Background(), sel.Ref)
		if err != nil {
			t.Fatal(err)
		}
		restored := tree(t, ws.Dir())
		_ = ws.Close()
		if err := drv.RemoveWorkspace(b); err != nil {
			t.Fatal(err)
		}
		atFork := recordedWorkspace(t, parent.events, at)
		forkFinal := tree(t, forkDir)
		if sel.Covered {
			sawCovered = true
			// DESIGN §8.1: a covered fork restores exactly the parent's state at the fork point.
			if diff := cmp.Diff(atFork, restored); diff != "" {
				t.Errorf("covered fork at %d: restored workspace differs from the parent's at that point (-parent +restored):\n%s", at, diff)
			}
			if diff := cmp.Diff(parentFinal, forkFinal); diff != "" {
				t.Errorf("covered fork at %d: final workspace differs from the parent's (-parent +fork):\n%s", at, diff)
			}
			continue
		}
		sawUncovered = true
		// DESIGN §8.2: an uncovered fork restores the newest checkpoint at or
		// before the fork point, which lacks exactly the writes after it.
		if sel.Ref == "" || sel.CapturedAt >= at {
			t.Fatalf("uncovered fork at %d selected %+v; want a checkpoint before the fork point", at, sel)
		}
		if diff := cmp.Diff(recordedWorkspace(t, parent.events, sel.CapturedAt), restored); diff != "" {
			t.Errorf("uncovered fork at %d: restored workspace is not the parent's at seq %d (-parent +restored):\n%s", at, sel.CapturedAt, diff)
		}
		var lost []string
		for path, content := range atFork {
			if restored[path] != content {
				lost = append(lost, path)
			}
		}
		if len(lost) == 0 {
			t.Errorf("uncovered fork at %d: restored workspace equals the parent's at that point; the demo should show a difference", at)
		}
		if cmp.Equal(parentFinal, forkFinal) {
			t.Errorf("uncovered fork at %d: final workspace equals the parent's; its lost write should show", at)
		}
		for _, path := range lost {
			if !strings.Contains(stdout, "  "+path+" ") {
				t.Errorf("the demo does not list %s, which the uncovered fork lacks", path)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !sawCovered || !sawUncovered || !sawEdited {
		t.Fatalf("forks covered=%v uncovered=%v edited=%v; want one of each", sawCovered, sawUncovered, sawEdited)
	}
	if _, err := os.Stat(filepath.Join(dir, "timeline.html")); err != nil {
		t.Errorf("no timeline page: %v", err)
	}

	// Again, in the same folder, with --json: a new execution and three new
	// forks; what was there is unchanged.
	before := fingerprint(t, dir)
	beforeParent := tree(t, parentDir)
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "demo")
	if code != 0 {
		t.Fatalf("second demo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep demoReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, stdout)
	}
	if !rep.Scripted || len(rep.Forks) != 3 || !rep.Forks[0].Covered || rep.Forks[1].Covered ||
		len(rep.Forks[0].RestoredDiff) != 0 || len(rep.Forks[1].RestoredDiff) == 0 {
		t.Fatalf("demo --json report %+v: want a covered fork with no difference, an uncovered one with some, and an edited one", rep)
	}
	checkEditedReport(t, rep)
	after := readDemoLog(t, dir)
	if len(after) != 8 || after[4].info.ID.String() != rep.Execution {
		t.Fatalf("after the second demo: %d executions, want 8 with the new run fifth", len(after))
	}
	if got := fingerprint(t, dir); !strings.HasPrefix(logPart(got), logPart(before)) {
		t.Fatalf("the second demo changed what was there:\n%s", cmp.Diff(logPart(before), logPart(got)))
	}
	if diff := cmp.Diff(beforeParent, tree(t, parentDir)); diff != "" {
		t.Fatalf("the second demo changed the first run's workspace:\n%s", diff)
	}
}

// logPart is the log's part of a fingerprint.
func logPart(fp string) string {
	if i := strings.Index(fp, "execution "); i >= 0 {
		return fp[i:]
	}
	return ""
}

// TestRunFork forks the demo's run with the fork command and runs the fork
// with the run command in a later "process" (a new kernel, the scripted
// model served again where its recorded calls went): it completes and
// replays the prefix without calling the model for it.
func TestRunFork(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	dir := t.TempDir()
	if _, stderr, code := runCLI(t, "--dir", dir, "--json", "demo"); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	parent := readDemoLog(t, dir)[0]
	stdout, stderr, code := runCLI(t, "--dir", dir, "--json", "fork", parent.info.ID.String(), "45")
	if code != 0 {
		t.Fatalf("fork: exit %d: %s", code, stderr)
	}
	var fk struct{ ID string }
	if err := json.Unmarshal([]byte(stdout), &fk); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "run", fk.ID[:23])
	if code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, stderr, stdout)
	}
	var res struct {
		Status   string
		Appended uint64
		Scripted bool
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != eventlog.StatusCompleted.String() || !res.Scripted {
		t.Fatalf("run: %+v, want a completed run on the scripted model", res)
	}
	var x demoExecution
	for _, e := range readDemoLog(t, dir) {
		if e.info.ID.String() == fk.ID {
			x = e
		}
	}
	// DESIGN §8.2: the prefix replays — no step of 1..45 runs again.
	started := map[string]bool{}
	for _, ev := range x.events[:45] {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok {
			started[p.StepID] = true
		}
	}
	for _, ev := range x.events[45:] {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && started[p.StepID] {
			t.Fatalf("seq %d: step %s %s of the prefix ran again", ev.Seq, p.StepKind, p.Target)
		}
	}
	// Running it again runs nothing.
	if _, stderr, code = runCLI(t, "--dir", dir, "run", fk.ID); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
	if again := readDemoLog(t, dir); len(again[len(again)-1].events) != len(x.events) {
		t.Fatalf("running a completed fork appended events")
	}
}

// TestDemoRealModel: with LLM_MODEL and OPENAI_BASE_URL set, the demo calls
// that endpoint instead of its own scripted model, and says so. The
// endpoint here is the scripted model served by the test, so the run is
// still deterministic.
func TestDemoRealModel(t *testing.T) {
	m := coder.Script()
	base, stop, err := scriptedmodel.Serve(m)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	t.Setenv("LLM_MODEL", coder.ScriptedName)
	t.Setenv("OPENAI_BASE_URL", base)
	t.Setenv("OPENAI_API_KEY", "test-key")
	dir := t.TempDir()
	stdout, stderr, code := runCLI(t, "--dir", dir, "demo")
	if code != 0 {
		t.Fatalf("demo: exit %d: %s\n%s", code, stderr, stdout)
	}
	if !strings.Contains(stdout, "real model \""+coder.ScriptedName+"\" at "+base) || strings.Contains(stdout, "built-in scripted model") {
		t.Fatalf("the demo does not say it used the configured model:\n%s", stdout)
	}
	// The parent's 12 turns, the covered fork's 5, the uncovered fork's 4
	// and the edited fork's 4 (after the edited reply at turn 7).
	if n := m.Requests(); n != 12+5+4+4 {
		t.Fatalf("the configured endpoint answered %d requests, want 25", n)
	}
}

// TestForkInCopiedDataFolder is the README bug of DESIGN §11 (relocatable
// configuration): a data folder copied to another path, its original
// removed, forks and runs there. Before, the recorded workspace binding
// named the original store path and the fork failed with
// resource_mismatch.
func TestForkInCopiedDataFolder(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	base := t.TempDir()
	orig, moved := filepath.Join(base, "orig"), filepath.Join(base, "elsewhere", "copy")
	if _, stderr, code := runCLI(t, "--dir", orig, "--json", "demo"); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", orig, moved).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	if err := os.Chmod(orig, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("chmod", "-R", "u+w", orig).Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(orig); err != nil {
		t.Fatal(err)
	}
	parent := readDemoLog(t, moved)[0]
	for _, ev := range parent.events {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok && strings.Contains(string(b.Configuration), base) {
			t.Fatalf("seq %d: resource.bound records a path: %s", ev.Seq, b.Configuration)
		}
	}
	stdout, stderr, code := runCLI(t, "--dir", moved, "--json", "fork", parent.info.ID.String(), "45")
	if code != 0 {
		t.Fatalf("fork: exit %d: %s", code, stderr)
	}
	var fk struct{ ID string }
	if err := json.Unmarshal([]byte(stdout), &fk); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCLI(t, "--dir", moved, "--json", "run", fk.ID)
	if code != 0 {
		t.Fatalf("run in the copied folder: exit %d: %s\n%s", code, stderr, stdout)
	}
	var res struct{ Status string }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != eventlog.StatusCompleted.String() {
		t.Fatalf("run in the copied folder: %s, want completed", stdout)
	}
	// The fork's own binding was made from the copied store's checkpoint.
	for _, x := range readDemoLog(t, moved) {
		if x.info.ID.String() != fk.ID {
			continue
		}
		var bound []string
		for _, ev := range x.events[45:] {
			if b, ok := ev.Data.(*eventlog.ResourceBound); ok {
				bound = append(bound, b.From)
			}
		}
		if len(bound) != 1 || bound[0] == "" {
			t.Fatalf("fork's own bindings from %q, want one from a checkpoint", bound)
		}
	}
}

// stepLine describes a step.started as the edited fork's expected events
// name it: its kind, and a tool's name and path argument.
func stepLine(ev eventlog.Event) string {
	s, ok := ev.Data.(*eventlog.StepStarted)
	if !ok {
		return ev.Kind().String()
	}
	if s.StepKind == eventlog.StepLLM {
		return "step.started llm"
	}
	var a struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(s.Args, &a)
	return "step.started tool " + s.Target + " " + a.Path
}

// checkEditedFork checks the demo's third fork: made at the LLM reply that
// asks for write_file(greet.go), replaying it edited to ask for
// write_file(greet_edited.go); the events it appended; its workspace; and
// the demo's `forkline diff` of parent and fork.
func checkEditedFork(t *testing.T, stdout, dir string, parent, f demoExecution, parentFinal map[string]string) {
	t.Helper()
	at := f.info.ForkSeq
	fc := f.events[at].Data.(*eventlog.ForkCreated)
	done, ok := parent.events[at-1].Data.(*eventlog.StepSucceeded)
	if !ok {
		t.Fatalf("edited fork at %d: the parent's event there is %s, want an LLM reply's step.succeeded", at, parent.events[at-1].Kind())
	}
	recorded, ok := replyBody(done.Result)
	if !ok {
		t.Fatalf("edited fork at %d: the parent's step %s is not an LLM reply", at, done.StepID)
	}
	if !strings.HasPrefix(string(recorded), "data: ") {
		t.Fatalf("edited fork at %d: the parent's reply is not a stream: %.60q", at, recorded)
	}
	if p, _, _ := firstWrite(recorded); p != "greet.go" {
		t.Fatalf("edited fork at %d: the parent's reply asks for write_file(%q), want the script's second greet.go", at, p)
	}
	if len(fc.Overrides) != 1 || fc.Overrides[0].StepID != done.StepID {
		t.Fatalf("edited fork: fork.created overrides %+v, want one of step %s", fc.Overrides, done.StepID)
	}
	edited, ok := replyBody(fc.Overrides[0].Result)
	if !ok {
		t.Fatalf("edited fork: the override %q is not an LLM response", fc.Overrides[0].Result)
	}
	if p, _, _ := firstWrite(edited); p != "greet_edited.go" {
		t.Fatalf("edited fork: the override asks for write_file(%q), want greet_edited.go", p)
	}

	// What the fork appended: fork.created with the override, then the
	// rest of the script run live, writing greet_edited.go first.
	var got []string
	for _, ev := range f.events[at:] {
		got = append(got, stepLine(ev))
	}
	want := []string{
		"fork.created", "dispatch.started", "resource.bound",
		"step.started tool write_file greet_edited.go", "step.succeeded",
		"step.started llm", "step.succeeded",
		"step.started tool read_file cmd/greet/main.go", "step.succeeded",
		"step.started llm", "step.succeeded",
		"step.started tool write_file CHANGELOG.md", "step.succeeded",
		"step.started llm", "step.succeeded",
		"step.started tool write_file LICENSE", "step.succeeded",
		"step.started llm", "step.succeeded",
		"resource.captured", "execution.completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("edited fork appended (-want +got):\n%s", diff)
	}

	// Its workspace: the parent's, except that the second greet.go went
	// to greet_edited.go and greet.go stayed as first written.
	wantFinal := map[string]string{}
	for p, c := range parentFinal {
		wantFinal[p] = c
	}
	wantFinal["greet.go"] = recordedWorkspace(t, parent.events, at)["greet.go"]
	wantFinal["greet_edited.go"] = parentFinal["greet.go"]
	forkDir, _ := ownWorkspaceDir(t, dir, f)
	if diff := cmp.Diff(wantFinal, tree(t, forkDir)); diff != "" {
		t.Errorf("edited fork's final workspace (-want +got):\n%s", diff)
	}

	// The diff the demo printed: the edited reply changed, the write of
	// greet.go only in the parent, that of greet_edited.go only in the
	// fork, and the workspaces' difference.
	i := strings.Index(stdout, "diff "+parent.info.ID.String()+" "+f.info.ID.String()+":")
	if i < 0 {
		t.Fatalf("the demo printed no diff of %s and %s:\n%s", parent.info.ID, f.info.ID, stdout)
	}
	table := stdout[i:]
	for _, row := range []struct{ has, change string }{
		{"(override)", "changed"},
		{`"wrote greet.go"`, "only_a"},
		{`"wrote greet_edited.go"`, "only_b"},
	} {
		found := false
		for line := range strings.Lines(table) {
			if strings.Contains(line, row.has) && strings.HasSuffix(strings.TrimSpace(line), " "+row.change) {
				found = true
			}
		}
		if !found {
			t.Errorf("the demo's diff has no row with %s marked %s:\n%s", row.has, row.change, table)
		}
	}
	for _, s := range []string{"~ file greet.go", "+ file greet_edited.go"} {
		if !strings.Contains(table, s) {
			t.Errorf("the demo's diff does not show %q:\n%s", s, table)
		}
	}
}

// checkEditedReport checks the edited fork in the demo's --json report.
func checkEditedReport(t *testing.T, rep demoReport) {
	t.Helper()
	f := rep.Forks[2]
	if f.Edit == nil || f.Edit.From != "greet.go" || f.Edit.To != "greet_edited.go" || f.Diff == nil {
		t.Fatalf("demo --json: third fork %+v, want the edit of greet.go to greet_edited.go and its diff", f)
	}
	if f.Diff.A.String() != rep.Execution || f.Diff.B.String() != f.ID || f.Diff.Shared != f.At {
		t.Errorf("demo --json: diff of %s and %s sharing %d, want %s and %s sharing %d", f.Diff.A, f.Diff.B, f.Diff.Shared, rep.Execution, f.ID, f.At)
	}
	changes := map[string]int{}
	for _, s := range f.Diff.Steps {
		changes[string(s.Change)]++
		if s.StepID == f.Edit.StepID && (s.Change != "changed" || s.B == nil || !s.B.Overridden) {
			t.Errorf("demo --json: the edited step %s is %+v, want changed with the fork's result overridden", s.StepID, s)
		}
	}
	if changes["changed"] != 1 || changes["only_a"] == 0 || changes["only_b"] == 0 || changes["only_a"] != changes["only_b"] {
		t.Errorf("demo --json: step changes %v, want one changed and as many only_a as only_b", changes)
	}
	if len(f.Diff.Resources) != 1 || !f.Diff.Resources[0].Compared {
		t.Fatalf("demo --json: diff resources %+v, want the workspace compared", f.Diff.Resources)
	}
	var got []string
	for _, c := range f.Diff.Resources[0].Difference.Changes {
		got = append(got, string(c.Op)+" "+c.Kind+" "+c.Name)
	}
	if want := []string{"changed file greet.go", "added file greet_edited.go"}; !cmp.Equal(want, got) {
		t.Errorf("demo --json: workspace difference %q, want %q", got, want)
	}
}
