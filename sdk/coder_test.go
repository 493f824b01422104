package sdk_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// coderRig is the reference page's coder agent on a test driver, driven by
// the scripted model over HTTP through the official OpenAI client.
type coderRig struct {
	drv   *testdriver.Driver
	model *httptest.Server
	m     coder.Model
}

func newCoderRig(t *testing.T) *coderRig {
	t.Helper()
	script := coder.Script()
	srv := httptest.NewServer(script)
	t.Cleanup(srv.Close)
	return &coderRig{
		drv:   testdriver.New(),
		model: srv,
		m:     coder.Model{Name: coder.ScriptedName, BaseURL: srv.URL + "/v1", APIKey: "test"},
	}
}

func (r *coderRig) register(k *sdk.Kernel) {
	h := coder.Handler(func() driver.Driver[*testdriver.Handle, testdriver.Binding] { return r.drv }, r.m)
	if _, err := sdk.Register(k, "coder", h); err != nil {
		panic(err)
	}
}

const coderTask = "Build a tiny Go module that greets people."

// coderFirstRun is the exact event sequence of an uninterrupted first run:
// EverySteps(5) captures after the fifth write, the completion capture
// covers the three writes after it, and every live step (LLM calls too)
// advances the workspace's generation.
var coderFirstRun = []string{
	"created coder",
	"dispatch 1",
	"bound workspace every=5",
	"captured workspace baseline gen=1",
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", // go.mod (1)
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", // greet.go (2)
	"started llm forkline-scripted-coder", "succeeded",
	"started tool read_file", "succeeded",
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", // greet_test.go (3)
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", // README.md (4)
	"started llm forkline-scripted-coder", "succeeded",
	"started tool read_file", "succeeded",
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", "captured workspace steps gen=15", // main.go (5)
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", // greet.go (6)
	"started llm forkline-scripted-coder", "succeeded",
	"started tool read_file", "succeeded",
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", // CHANGELOG.md (7)
	"started llm forkline-scripted-coder", "succeeded",
	"started tool write_file affects=workspace", "succeeded", // LICENSE (8)
	"started llm forkline-scripted-coder", "succeeded",
	"captured workspace completion gen=24",
	"completed",
}

func TestCoderFirstRun(t *testing.T) {
	ctx := context.Background()
	rig := newCoderRig(t)
	k := newKernel(t, newStore(t), rig.register)
	id, err := k.Start(ctx, "coder", coder.Input{Task: coderTask})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out coder.Output
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Answer == "" {
		t.Fatal("empty answer")
	}
	if diff := cmp.Diff(coderFirstRun, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("event sequence (-want +got):\n%s", diff)
	}
	creates, opens, checkpoints := rig.drv.Counts()
	if creates != 1 || opens != 0 || checkpoints != 3 {
		t.Fatalf("driver calls: creates=%d opens=%d checkpoints=%d, want 1, 0, 3", creates, opens, checkpoints)
	}

	// Run again: the recorded outcome, nothing runs, nothing is appended.
	head := len(events(t, k, id))
	again, err := k.Run(ctx, id)
	if err != nil || string(again.Output) != string(res.Output) {
		t.Fatalf("second Run = %s, %v; want the recorded output %s", again.Output, err, res.Output)
	}
	if n := len(events(t, k, id)); n != head {
		t.Fatalf("second Run appended %d events", n-head)
	}
}

// workspaceOf returns the files of the resource an execution bound last.
func workspaceOf(t *testing.T, k *sdk.Kernel, drv *testdriver.Driver, id eventlog.ID) map[string]string {
	t.Helper()
	var binding string
	for _, ev := range events(t, k, id) {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok {
			binding = string(b.Binding)
		}
	}
	for _, rid := range []string{"test.mem.v1-r1", "test.mem.v1-r2", "test.mem.v1-r3", "test.mem.v1-r4", "test.mem.v1-r5"} {
		if binding == `{"id":"`+rid+`"}` {
			h, _ := drv.Resource(rid)
			return h.Files()
		}
	}
	t.Fatalf("execution %s: binding %s not found", id, binding)
	return nil
}

// TestCoderCrashAndResume kills the first dispatch at every event in turn and
// runs again: the output and the workspace equal an uninterrupted run's, and
// no recorded tool body runs again (DESIGN §8.6).
func TestCoderCrashAndResume(t *testing.T) {
	ctx := context.Background()
	ref := newCoderRig(t)
	refK := newKernel(t, newStore(t), ref.register)
	refID, _ := refK.Start(ctx, "coder", coder.Input{Task: coderTask})
	want, err := refK.Run(ctx, refID)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := workspaceOf(t, refK, ref.drv, refID)
	total := len(coderFirstRun)

	for k := 2; k < total; k++ { // event k+1 is the first that is not written
		rig := newCoderRig(t)
		store := newStore(t)
		crash := &crashLog{IndexedLog: store}
		crash.budget.Store(int64(k))
		dying := newKernel(t, crash, rig.register)
		id, err := dying.Start(ctx, "coder", coder.Input{Task: coderTask})
		if err != nil {
			t.Fatal(err)
		}
		crash.budget.Store(int64(k - 1)) // Start wrote event 1
		if _, err := dying.Run(ctx, id); !errors.Is(err, errCrash) {
			t.Fatalf("crash at %d: Run = %v, want the crash", k+1, err)
		}
		before := events(t, dying, id)
		if len(before) > k || len(before) < k-2 { // a group of up to 3 events is written whole or not at all
			t.Fatalf("crash at %d: %d events survived", k+1, len(before))
		}

		k2 := newKernel(t, store, rig.register)
		got, err := k2.Run(ctx, id)
		if err != nil {
			t.Fatalf("crash at %d: resume: %v", k+1, err)
		}
		if string(got.Output) != string(want.Output) {
			t.Fatalf("crash at %d: output %s, want %s", k+1, got.Output, want.Output)
		}
		if diff := cmp.Diff(wantFiles, workspaceOf(t, k2, rig.drv, id)); diff != "" {
			t.Fatalf("crash at %d: workspace (-want +got):\n%s", k+1, diff)
		}
		after := events(t, k2, id)
		// DESIGN §8.7: resuming never changes an existing event.
		if diff := cmp.Diff(describeAll(before), describeAll(after[:len(before)])); diff != "" {
			t.Fatalf("crash at %d: prefix changed:\n%s", k+1, diff)
		}
		// No recorded outcome was run again: every step that reached a
		// terminal event before the crash has no later step.started.
		terminal := map[string]bool{}
		for _, ev := range before {
			switch p := ev.Data.(type) {
			case *eventlog.StepSucceeded:
				terminal[p.StepID] = true
			case *eventlog.StepFailed:
				terminal[p.StepID] = true
			}
		}
		for _, ev := range after[len(before):] {
			if p, ok := ev.Data.(*eventlog.StepStarted); ok && terminal[p.StepID] {
				t.Fatalf("crash at %d: recorded step %s (%s) ran again", k+1, p.StepID, p.Target)
			}
		}
		_, opens, _ := rig.drv.Counts()
		boundBefore := slices.ContainsFunc(before, func(ev eventlog.Event) bool { return ev.Kind() == eventlog.KindResourceBound })
		if boundBefore && opens != 1 {
			t.Fatalf("crash at %d: the resumed dispatch opened the binding %d times, want 1", k+1, opens)
		}
	}
}

// coderFork runs the coder agent once and returns the rig, kernel and ID.
func coderRun(t *testing.T) (*coderRig, *sdk.Kernel, eventlog.ID) {
	t.Helper()
	ctx := context.Background()
	rig := newCoderRig(t)
	k := newKernel(t, newStore(t), rig.register)
	id, err := k.Start(ctx, "coder", coder.Input{Task: coderTask})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	return rig, k, id
}

// seqOf returns the seq of the n-th event (1-based) that describes as want.
func seqOf(t *testing.T, evs []eventlog.Event, want string, n int) uint64 {
	t.Helper()
	for _, ev := range evs {
		if describe(ev) == want {
			n--
			if n == 0 {
				return ev.Seq
			}
		}
	}
	t.Fatalf("no event %q", want)
	return 0
}

// TestCoderForkCovered forks at the fifth write's capture: the fork restores
// exactly the parent's workspace there, replays the prefix without running a
// body, and finishes with the parent's final workspace.
func TestCoderForkCovered(t *testing.T) {
	ctx := context.Background()
	rig, k, id := coderRun(t)
	parentEvents := events(t, k, id)
	at := seqOf(t, parentEvents, "captured workspace steps gen=15", 1)

	pt, err := k.Coverage(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	if !pt.Covered || len(pt.Resources) != 1 || pt.Resources[0].CapturedAt != at {
		t.Fatalf("coverage at %d = %+v, want covered by the capture at %d", at, pt, at)
	}
	// Also covered at the step.succeeded the capture was committed with.
	if pt, _ := k.Coverage(ctx, id, at-1); !pt.Covered {
		t.Fatalf("coverage at %d (the step's outcome) = %+v, want covered", at-1, pt)
	}
	snap, ok := rig.drv.Restore(pt.Resources[0].Ref)
	if !ok {
		t.Fatal("selected ref does not exist")
	}
	if len(snap) != 5 {
		t.Fatalf("checkpoint holds %d files, want the 5 written by then", len(snap))
	}

	fid, err := k.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	c0, o0, _ := rig.drv.Counts()
	llm0 := rig.model.Config.Handler.(interface{ Requests() int64 }).Requests()
	res, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	c1, o1, _ := rig.drv.Counts()
	if c1-c0 != 1 || o1 != o0 {
		t.Fatalf("fork: %d creates, %d opens; want 1 create (its own resource) and no open", c1-c0, o1-o0)
	}
	fevents := events(t, k, fid)
	if diff := cmp.Diff(describeAll(parentEvents[:at]), describeAll(fevents[:at])); diff != "" {
		t.Fatalf("fork prefix differs from the parent's:\n%s", diff)
	}
	if got := describe(fevents[at+2]); got != "bound workspace from="+pt.Resources[0].Ref+" every=5" {
		t.Fatalf("fork's binding: %q", got)
	}
	// The model was asked only for turns after the fork point.
	if n := rig.model.Config.Handler.(interface{ Requests() int64 }).Requests() - llm0; n != 5 {
		t.Fatalf("fork made %d live model calls, want the 5 after the fork point", n)
	}
	parentOut, _ := k.Run(ctx, id)
	if string(res.Output) != string(parentOut.Output) {
		t.Fatalf("fork output %s, parent %s", res.Output, parentOut.Output)
	}
	if diff := cmp.Diff(workspaceOf(t, k, rig.drv, id), workspaceOf(t, k, rig.drv, fid)); diff != "" {
		t.Fatalf("covered fork's final workspace differs from the parent's (-parent +fork):\n%s", diff)
	}
}

// TestCoderForkUncovered forks after the sixth write, before any capture
// covers it: the fork restores the newest earlier checkpoint, so the
// replayed sixth write's change is missing — the documented trade-off.
func TestCoderForkUncovered(t *testing.T) {
	ctx := context.Background()
	rig, k, id := coderRun(t)
	evs := events(t, k, id)
	capturedAt := seqOf(t, evs, "captured workspace steps gen=15", 1)
	at := capturedAt + 4 // llm, llm ok, write greet.go (6) started, succeeded
	if describe(evs[at-1]) != "succeeded" || describe(evs[at-2]) != "started tool write_file affects=workspace" {
		t.Fatalf("event %d is %q, want the sixth write's outcome", at, describe(evs[at-1]))
	}
	pt, err := k.Coverage(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Covered || pt.Resources[0].CapturedAt != capturedAt {
		t.Fatalf("coverage at %d = %+v, want uncovered, selecting the capture at %d", at, pt, capturedAt)
	}
	fid, err := k.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	parent, forked := workspaceOf(t, k, rig.drv, id), workspaceOf(t, k, rig.drv, fid)
	if parent["greet.go"] == forked["greet.go"] {
		t.Fatal("uncovered fork has the sixth write's content; it should have the checkpoint's")
	}
	delete(parent, "greet.go")
	delete(forked, "greet.go")
	if diff := cmp.Diff(parent, forked); diff != "" {
		t.Fatalf("beyond greet.go the workspaces differ (-parent +fork):\n%s", diff)
	}
}

// TestCoderForkMissingCheckpoint deletes the checkpoint a fork selected: the
// fork fails with checkpoint_unavailable, and Run's error says so now and on
// every later Run.
func TestCoderForkMissingCheckpoint(t *testing.T) {
	ctx := context.Background()
	rig, k, id := coderRun(t)
	at := seqOf(t, events(t, k, id), "captured workspace steps gen=15", 1)
	pt, _ := k.Coverage(ctx, id, at)
	rig.drv.DeleteCheckpoint(pt.Resources[0].Ref)
	fid, err := k.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		_, err = k.Run(ctx, fid)
		if !errors.Is(err, driver.ErrCheckpointUnavailable) {
			t.Fatalf("run %d: err = %v, want ErrCheckpointUnavailable", run, err)
		}
		var ee *sdk.ExecutionError
		if !errors.As(err, &ee) || ee.Code != eventlog.FailCheckpointUnavailable {
			t.Fatalf("run %d: err = %#v, want an ExecutionError with code checkpoint_unavailable", run, err)
		}
	}
	evs := events(t, k, fid)
	if last := describe(evs[len(evs)-1]); last != "execution_failed checkpoint_unavailable" {
		t.Fatalf("last event %q", last)
	}
}
