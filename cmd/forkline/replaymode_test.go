package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/scriptedmodel"
)

// TestRunReplaysAsRecorded: a coder lineage recorded with unstreamed model
// calls (an older demo's, or a program's with coder.Model.Stream off)
// replays through forkline fork and run: the CLI asks the way the lineage
// recorded, so the fork's prefix is answered from the record and only the
// calls after the fork point go to the model.
func TestRunReplaysAsRecorded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	script := coder.Script()
	base, stop, err := scriptedmodel.Serve(script)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	dirfsStore, err := filepath.Abs(storeDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	m := &model{Model: coder.Model{Name: coder.ScriptedName, BaseURL: base, APIKey: "test"}, scripted: true}
	ck, err := openCoderKernel(store, dirfsStore, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ck.k.Start(ctx, coderAgent, coder.Input{Task: defaultTask})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ck.k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	ck.k.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// Seq 10 is the second model reply's step.succeeded.
	stdout, stderr, code := runCLI(t, "--dir", dir, "--json", "fork", id.String(), "10")
	if code != 0 {
		t.Fatalf("fork: exit %d: %s", code, stderr)
	}
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "--dir", dir, "run", out.ID); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	fid, err := eventlog.ParseID(out.ID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	info, err := s.Info(ctx, fid)
	if err != nil || info.Status != eventlog.StatusCompleted {
		t.Fatalf("fork %s: %+v, %v; want completed", fid, info.Status, err)
	}
	var llm int
	for ev, err := range s.Events(ctx, fid, 11) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && p.StepKind == eventlog.StepLLM {
			var req struct {
				Body struct {
					Stream bool `json:"stream"`
				} `json:"body"`
			}
			if json.Unmarshal(p.Args, &req) != nil || req.Body.Stream {
				t.Fatalf("fork's llm call at seq %d asked streamed: %s", ev.Seq, p.Args)
			}
			llm++
		}
	}
	if llm != 10 {
		t.Fatalf("the fork appended %d llm calls, want the 10 after the fork point (the prefix's 2 replayed)", llm)
	}
}
