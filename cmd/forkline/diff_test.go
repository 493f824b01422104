package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
	"github.com/google/go-cmp/cmp"
)

// TestDiffGolden runs diff on the fixture's executions (a fork against
// its parent, siblings, a fork of a fork, unrelated executions, bad
// input) and compares the output with testdata/diff_*.golden. diff reads
// only: the data folder stays as it was.
func TestDiffGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"diff_fork", []string{"diff", "{A}", "{B}"}},
		{"diff_fork_json", []string{"diff", "--json", "{A}", "{B}"}},
		{"diff_siblings", []string{"diff", "{B}", "{C}"}},
		{"diff_fork_of_fork", []string{"diff", "{A}", "{E}"}},
		{"diff_unrelated", []string{"diff", "{A:prefix}", "{D:prefix}"}},
		{"err_diff_arg_count", []string{"diff", "{A}"}},
		{"err_diff_unknown", []string{"diff", "{A}", "ffffffff"}},
		{"err_diff_html_folder", []string{"diff", "{A}", "{B}", "--html", "{dir}"}},
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
			if strings.Contains(c.name, "json") && !json.Valid([]byte(stdout)) {
				t.Errorf("--json output is not one JSON document:\n%s", stdout)
			}
			if strings.HasPrefix(c.name, "err_") && (code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1) {
				t.Errorf("bad input: exit %d, stdout %q, stderr %q; want exit 2, one line on stderr", code, stdout, stderr)
			}
			if after := fingerprint(t, f.dir); after != before {
				t.Errorf("diff changed the data folder:\n%s", cmp.Diff(before, after))
			}
		})
	}
}

// TestDiffWorkspace compares two executions whose workspace is a real
// dirfs store in the data folder: the table, --json and --html show the
// files that differ between the two newest checkpoints, with a unified
// diff, and say when a head is not covered.
func TestDiffWorkspace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	drv := dirfs.New(dirfs.Config{Store: storeDir(dir), NoSync: true})
	w, _, err := drv.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	capture := func(files map[string]string) string {
		t.Helper()
		for name, content := range files {
			if err := w.WriteFile(name, []byte(content)); err != nil {
				t.Fatal(err)
			}
		}
		ref, err := drv.Checkpoint(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	base := capture(map[string]string{"main.go": "package main\n\nfunc main() {}\n"})
	one := capture(map[string]string{"greet.go": "package main\n\nconst hello = \"hi\"\n"})
	two := capture(map[string]string{"greet.go": "package main\n\nconst hello = \"hello\"\n", "README.md": "# greeter\n"})

	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	bound := &eventlog.ResourceBound{Key: workspaceKey, DriverID: dirfs.ID, Configuration: json.RawMessage(`{}`),
		Binding: json.RawMessage(`{"workspace":"w"}`), EverySteps: 1, OnCompletion: true}
	write := func(id, path string) []eventlog.Event {
		return []eventlog.Event{
			{Time: at, Data: &eventlog.StepStarted{StepID: id, StepKind: eventlog.StepTool, Target: "write_file",
				Args: []byte(`{"path":"` + path + `"}`), Resources: []string{workspaceKey}, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
			{Time: at, Data: &eventlog.StepSucceeded{StepID: id, Result: []byte(`"wrote ` + path + `"`)}},
		}
	}
	a, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "coder", Input: []byte(`"greeter"`)}, at)
	if err != nil {
		t.Fatal(err)
	}
	evs := []eventlog.Event{{Time: at, Data: &eventlog.DispatchStarted{Dispatch: 1}}, {Time: at, Data: bound},
		{Time: at, Data: &eventlog.ResourceCaptured{Key: workspaceKey, Ref: base, Generation: 1, Reason: eventlog.CaptureBaseline}}}
	evs = append(evs, write("w1", "greet.go")...)
	evs = append(evs, eventlog.Event{Time: at, Data: &eventlog.ResourceCaptured{Key: workspaceKey, Ref: one, Generation: 2, Reason: eventlog.CaptureSteps}},
		eventlog.Event{Time: at, Data: &eventlog.ExecutionCompleted{Output: []byte(`"done"`)}})
	if _, err := s.Append(ctx, a, 1, evs...); err != nil {
		t.Fatal(err)
	}
	// B forks A at 4 (the baseline), writes greet.go and README.md, and
	// is still running a third write: its head is not covered.
	b, _, err := fork.Create(ctx, s, a, 4, at)
	if err != nil {
		t.Fatal(err)
	}
	fromBase := *bound
	fromBase.From = base
	evs = []eventlog.Event{{Time: at, Data: &eventlog.DispatchStarted{Dispatch: 2}}, {Time: at, Data: &fromBase}}
	evs = append(evs, write("w2", "greet.go v2")...)
	evs = append(evs, eventlog.Event{Time: at, Data: &eventlog.ResourceCaptured{Key: workspaceKey, Ref: two, Generation: 3, Reason: eventlog.CaptureSteps}})
	evs = append(evs, write("w9", "NOTES")[0])
	if _, err := s.Append(ctx, b, 5, evs...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runCLI(t, "--dir", dir, "diff", a.String(), b.String())
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"shared prefix: events 1-4 of " + a.String() + ", 0 steps",
		`@6 succeeded "wrote greet.go"`,
		"only_a",
		`tool write_file {"path":"greet.go v2"}`,
		"only_b",
		"head not covered",
		"note: B's head is not covered: comparing its newest checkpoint (seq 10), not its live state",
		"  + file README.md\n",
		"  ~ file greet.go\n",
		"-const hello = \"hi\"\n",
		"+const hello = \"hello\"\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff output lacks %q:\n%s", want, stdout)
		}
	}

	page := filepath.Join(t.TempDir(), "diff.html")
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "diff", a.String(), b.String(), "--html", page)
	if code != 0 {
		t.Fatalf("diff --json --html: exit %d: %s", code, stderr)
	}
	var out struct {
		Shared    uint64 `json:"shared"`
		Resources []struct {
			Key        string `json:"key"`
			Compared   bool   `json:"compared"`
			Difference struct {
				Changes []struct{ Op, Kind, Name string }
			} `json:"difference"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	changes := []struct{ Op, Kind, Name string }{{"added", "file", "README.md"}, {"changed", "file", "greet.go"}}
	if out.Shared != 4 || len(out.Resources) != 1 || !out.Resources[0].Compared ||
		!cmp.Equal(out.Resources[0].Difference.Changes, changes) {
		t.Errorf("--json: shared %d, resources %+v; want shared 4 and the workspace's two changes", out.Shared, out.Resources)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<tr class="only_a">`, `<span class="add">&#43;const hello = &#34;hello&#34;</span>`, "README.md"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the HTML page lacks %q:\n%s", want, html)
		}
	}
}
