package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/sdk"
)

// forkline check replays the demo's executions without a divergence and
// without writing to the log.
func TestCheckDemo(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	dir := filepath.Join(t.TempDir(), "data")
	if stdout, stderr, code := runCLI(t, "--dir", dir, "demo"); code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, stdout, stderr)
	}
	before := listAll2(t, logDir(dir))
	stdout, stderr, code := runCLI(t, "check", "--agent", "coder", dir)
	if code != 0 || stderr != "" {
		t.Fatalf("check: exit %d\n%s\n%s", code, stdout, stderr)
	}
	want := "forkline check: replayed 4 execution(s) of agent coder (model forkline-scripted-coder) against the current code; read-only, nothing written\n0 divergence(s)\n"
	if stdout != want {
		t.Errorf("check printed\n%s\nwant\n%s", stdout, want)
	}
	if after := listAll2(t, logDir(dir)); strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("check changed the log's files:\n%v\n%v", before, after)
	}
}

// An execution recorded by other code under the coder's name diverges:
// check names it, the call it expected and what the current code did, and
// exits 1.
func TestCheckDiverges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := pebblestore.Open(logDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := sdk.New(s)
	_, _ = sdk.Register(k, coderAgent, func(ctx context.Context, in coder.Input) (coder.Output, error) {
		_, err := sdk.Step(ctx, "plan", func(context.Context) (string, error) { return "old plan", nil })
		return coder.Output{Answer: "planned"}, err
	})
	ctx := context.Background()
	id, _ := k.Start(ctx, coderAgent, coder.Input{Task: "t"})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "--dir", dir, "check", "--agent", "coder")
	if code != exitFailure {
		t.Fatalf("check: exit %d, want 1\n%s\n%s", code, stdout, stderr)
	}
	for _, w := range []string{"DIVERGES  " + id.String() + " at seq", `local "plan"`, "1 divergence(s)"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("check output does not contain %q:\n%s", w, stdout)
		}
	}
	if !strings.Contains(stderr, "diverge") {
		t.Errorf("stderr %q does not say why it failed", stderr)
	}
}
