package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

const (
	// serveExecutions is how many publisher executions a server child of
	// TestServeKillAndRecover starts and serves.
	serveExecutions = 20
	// serveConcurrency is its sdk.Concurrency.
	serveConcurrency = 4
	// serveWorkers is how many server trials run at once: each is a child
	// running serveConcurrency executions.
	serveWorkers = 2
)

// serveTrials is the number of server trials: a tenth of -reliability.trials'
// scale (10 by default, 2 with -short), at least 3.
func serveTrials() int { return max(trials()/10, 3) }

// childTrials is the number of TestChildKillAndResume trials: a twentieth
// of the scale, at least 3.
func childTrials() int { return max(trials()/20, 3) }

// expectation is what uninterrupted in-process runs of a server child's
// inputs give, on a fresh in-memory store.
type expectation struct {
	outputs [][]byte          // output of the i-th input (serveInput)
	files   map[string]string // the publisher's workspace at the end (the same for every input)
	acks    []acked           // the acknowledged writes, in order
}

// serveConfig returns the configuration of a server child of agent over n
// executions in folder dir; the nth server writes its acks to acks-<nth>.
func (h *harness) serveConfig(dir, agent string, n, nth int) childConfig {
	cfg := h.config(scenario{agent: agent}, dir)
	cfg.Serve = n
	cfg.Concurrency = serveConcurrency
	cfg.Acks = filepath.Join(dir, fmt.Sprintf("acks-%d", nth))
	return cfg
}

// expect runs the n inputs of a server child of agent in this process
// (Start with the same keys, then Run each, serveConcurrency at a time) on a
// fresh in-memory store behind an ackLog, and returns their outputs and
// acks (in order when n is 1).
func (h *harness) expect(t *testing.T, agent string, n int) *expectation {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(h.root, "expect-"+agent)
	cfg := h.serveConfig(dir, agent, n, 1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	side, err := os.Create(cfg.Acks)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	k, err := sdk.New(&ackLog{IndexedLog: store, side: side, mark: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := registerAgents(k, newAgentEnv(cfg, nil, true)); err != nil {
		t.Fatal(err)
	}
	exp := &expectation{outputs: make([][]byte, n)}
	start := time.Now()
	ids := make([]eventlog.ID, n)
	for i := range n {
		if ids[i], err = k.Start(ctx, agent, serveInput(task, i), sdk.WithKey(serveKey(i))); err != nil {
			t.Fatal(err)
		}
	}
	// serveConcurrency runs at a time, as a server would; each its own
	// uninterrupted dispatch.
	var wg sync.WaitGroup
	slots := make(chan struct{}, serveConcurrency)
	errs := make([]error, n)
	for i, id := range ids {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			res, err := k.Run(ctx, id)
			if err != nil {
				errs[i] = fmt.Errorf("uninterrupted run of input %d: %w", i, err)
				return
			}
			exp.outputs[i] = res.Output
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if agent == "publisher" {
		for i, id := range ids {
			files := workspaceFiles(t, cfg, lineage(t, store, id))
			if exp.files != nil && !maps.Equal(files, exp.files) {
				t.Fatalf("uninterrupted runs of inputs 0 and %d leave different workspaces", i)
			}
			exp.files = files
		}
	}
	if exp.acks, err = readAcks(cfg.Acks); err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for _, out := range exp.outputs {
		distinct[string(out)] = true
	}
	if len(distinct) != n {
		t.Fatalf("the %d inputs have fewer distinct outputs: a mixed-up execution would go unseen", n)
	}
	t.Logf("%s expectation: %d uninterrupted runs in %v, %d acks", agent, n, time.Since(start).Round(time.Millisecond), len(exp.acks))
	return exp
}

// DESIGN §9 "Recovery": a child process starts 20 publisher executions
// (each with an idempotency key) and runs Serve over them; the parent
// SIGKILLs it after a random acknowledged append plus a random delay, or a
// random delay into a random at-most-once body. A second child starts the
// same 20 (finding those the first started, creating the others: a fifth
// of the kills aim at the first 20 acks, the Creates) and runs Serve until
// List shows every one ended. Then every execution completed once per key
// with the output of an uninterrupted run of its input, every append the
// first child saw acknowledged is in the log, events written before the
// kill are unchanged, no at-most-once body ran twice, and the only
// at-most-once steps resolved as indeterminate are those the kill caught
// between their start and their outcome.
func TestServeKillAndRecover(t *testing.T) {
	h := newHarness(t)
	exp := h.expect(t, "publisher", serveExecutions)
	n := serveTrials()
	start := time.Now()
	h.parallel(t, n, serveWorkers, func(i int, rng *rand.Rand) (string, func(*testing.T)) {
		ackDelay := time.Duration(rng.Int64N(int64(2*time.Millisecond) + 1))
		var plan *killPlan
		switch i % 5 {
		case 2, 4:
			// Into one of the 2×20 at-most-once bodies, each a few ms.
			plan = &killPlan{trigger: markEffectBegin, nth: 1 + rng.IntN(2*serveExecutions), delay: time.Duration(rng.Int64N(int64(5*time.Millisecond) + 1))}
		case 3:
			// Among the 20 Creates: the second server creates the rest.
			plan = &killPlan{trigger: markAck, nth: 1 + rng.IntN(serveExecutions), delay: ackDelay}
		default:
			plan = &killPlan{trigger: markAck, nth: 1 + rng.IntN(len(exp.acks)), delay: ackDelay}
		}
		return fmt.Sprintf("%03d-%s", i, plan), func(t *testing.T) { h.serveTrial(t, i, plan, exp) }
	})
	h.report(t, start, n)
}

// serveTrial runs the first server of trial i, kills it by plan, runs the
// second to the end, and checks.
func (h *harness) serveTrial(t *testing.T, i int, plan *killPlan, exp *expectation) {
	ctx := context.Background()
	dir := filepath.Join(h.root, fmt.Sprintf("serve-%03d", i))
	first := h.serveConfig(dir, "publisher", serveExecutions, 1)
	second := h.serveConfig(dir, "publisher", serveExecutions, 2)
	run, err := spawn(first, plan)
	if err != nil {
		t.Fatal(err)
	}
	var run2 childRun
	defer func() {
		if !t.Failed() && !*keepFlag {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("trial folder: %s; first server's markers: %v; second's: %v", dir, run.markers, run2.markers)
		}
	}()
	switch {
	case !run.killed:
		h.count("finished before the kill")
	case run.count(markStarted) == 0:
		h.count("killed before every Start returned")
	default:
		h.count("killed while serving")
	}

	// After the kill, before anything else writes.
	store, err := pebblestore.Open(first.Log, pebblestore.WithoutSync())
	if err != nil {
		t.Fatalf("reopen the log: %v", err)
	}
	before := decodeAll(t, store)
	checkAcks(t, before, first.Acks)
	open := map[eventlog.ID]map[string]bool{}
	unfinished := 0
	for id, evs := range before {
		open[id] = openSteps(evs, "publish")
		if len(open[id]) > 0 {
			h.count("executions with an at-most-once body cut by the kill")
		}
		if info, err := store.Info(ctx, id); err != nil {
			t.Fatal(err)
		} else if !info.Status.Terminal() {
			unfinished++
		}
	}
	h.count(fmt.Sprintf("executions left unfinished by the kill: %02d", unfinished))
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// The second server, not killed, runs every one to its end.
	run2, store, after := runSecondServer(t, first, second)
	defer store.Close()
	byInput := checkServed(t, store, after, "publisher", serveExecutions)
	var all []eventlog.Event
	for idx, id := range byInput {
		evs := after[id]
		all = append(all, evs...)
		checkPrefix(t, id, before[id], evs)
		h.checkPublisherOutput(t, exp.outputs[idx], evs, completedOutput(t, evs))
		checkIndeterminate(t, id, open[id], evs, "publish")
		if diff := cmp.Diff(exp.files, workspaceFiles(t, first, evs)); diff != "" {
			t.Errorf("execution %s (input %d): workspace differs from an uninterrupted run's (-want +got):\n%s", id, idx, diff)
		}
	}
	checkCheckpoints(t, ctx, dirfs.New(dirfs.Config{Store: first.Store, NoSync: true}), all)
	checkEffects(t, first.Effects, slices.Collect(maps.Values(after))...)
}

// checkServed checks that the log holds exactly n executions of agent, one
// per key serveKey(i) with input serveInput(i), each completed, and no
// other root execution; it returns their IDs by input.
func checkServed(t *testing.T, store eventlog.Log, lineages map[eventlog.ID][]eventlog.Event, agent string, n int) []eventlog.ID {
	t.Helper()
	return checkServedFailing(t, store, lineages, agent, n, nil)
}

// checkServedFailing is checkServed, but an execution that ended failed is
// accepted when failedOK, if not nil, returns nil for its lineage (and
// reported with the error it returns otherwise).
func checkServedFailing(t *testing.T, store eventlog.Log, lineages map[eventlog.ID][]eventlog.Event, agent string, n int, failedOK func([]eventlog.Event) error) []eventlog.ID {
	t.Helper()
	ids := make([]eventlog.ID, n)
	for id, evs := range lineages {
		created, ok := evs[0].Data.(*eventlog.ExecutionCreated)
		if !ok {
			t.Fatalf("execution %s begins with %s", id, evs[0].Kind())
		}
		info, err := store.Info(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case info.Status == eventlog.StatusCompleted:
		case info.Status == eventlog.StatusFailed && failedOK != nil:
			if err := failedOK(evs); err != nil {
				t.Errorf("execution %s (%s, key %q) ended failed: %v; %s", id, created.Agent, created.Key, err, describeEnd(evs))
			}
		default:
			t.Errorf("execution %s (%s, key %q) ended %s, want completed; %s", id, created.Agent, created.Key, info.Status, describeEnd(evs))
		}
		if !info.Caller.IsZero() {
			continue // a child: its caller's test checks it
		}
		i := -1
		for j := range n {
			if created.Key == serveKey(j) {
				i = j
			}
		}
		if i < 0 || created.Agent != agent {
			t.Fatalf("execution %s of agent %q with key %q: not one the servers started", id, created.Agent, created.Key)
		}
		input, err := json.Marshal(serveInput(task, i))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(created.Input, input) {
			t.Errorf("execution %s (key %q) has input %s, want %s", id, created.Key, created.Input, input)
		}
		if !ids[i].IsZero() {
			t.Fatalf("key %q names two executions: %s and %s", created.Key, ids[i], id)
		}
		ids[i] = id
	}
	for i, id := range ids {
		if id.IsZero() {
			t.Fatalf("no execution with key %q", serveKey(i))
		}
	}
	return ids
}

// checkPrefix: resuming never changes an event written before (DESIGN
// §8.7).
func checkPrefix(t *testing.T, id eventlog.ID, before, after []eventlog.Event) {
	t.Helper()
	if len(after) < len(before) {
		t.Fatalf("execution %s: resume shortened the lineage from %d to %d events", id, len(before), len(after))
	}
	for i, ev := range before {
		if a, b := mustFingerprint(t, ev), mustFingerprint(t, after[i]); a != b {
			t.Errorf("execution %s: resume changed event %d (%s → %s)", id, ev.Seq, ev.Kind(), after[i].Kind())
		}
	}
}

// completedOutput returns the output of the execution.completed that ends
// events.
func completedOutput(t *testing.T, events []eventlog.Event) []byte {
	t.Helper()
	p, ok := events[len(events)-1].Data.(*eventlog.ExecutionCompleted)
	if !ok {
		t.Fatalf("lineage ends with %s, not execution.completed", events[len(events)-1].Kind())
	}
	return p.Output
}

// openSteps returns the steps of target that have started and have no
// outcome in events: the at-most-once bodies a kill may have cut.
func openSteps(events []eventlog.Event, target string) map[string]bool {
	open := map[string]bool{}
	for _, ev := range events {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if p.Target == target {
				open[p.StepID] = true
			}
		case *eventlog.StepSucceeded:
			delete(open, p.StepID)
		case *eventlog.StepFailed:
			delete(open, p.StepID)
		}
	}
	return open
}

// checkIndeterminate: the steps of target resolved as indeterminate in
// events are exactly those the kill caught open — started, no outcome — in
// the log it left (DESIGN §4: an at-most-once step whose dispatch died
// inside it is never run again, and no other is declared indeterminate).
func checkIndeterminate(t *testing.T, id eventlog.ID, open map[string]bool, events []eventlog.Event, target string) {
	t.Helper()
	got := map[string]bool{}
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.StepFailed); ok && p.Indeterminate {
			got[p.StepID] = true
		}
	}
	if open == nil {
		open = map[string]bool{}
	}
	if !maps.Equal(got, open) {
		t.Errorf("execution %s: %s steps resolved as indeterminate %v; the kill left open %v",
			id, target, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(open)))
	}
}

// DESIGN §9 "Child executions" and "Recovery": a child process runs a
// caller execution whose handler runs a publisher as its child (Agent.Call)
// and is SIGKILLed while the child runs — frozen inside one of the child's
// at-most-once bodies, or just after a random acknowledged append of the
// child. A second process runs Serve until the caller has ended. Then the
// caller completed with the output of an uninterrupted run, exactly one
// child execution exists for the call (List with Filter{Caller}), the
// child's at-most-once bodies ran at most once (once where the step
// succeeded), and every acknowledged append is in the log.
func TestChildKillAndResume(t *testing.T) {
	h := newHarness(t)
	exp := h.expect(t, "caller", 1)
	// The child's acks in the uninterrupted run: from its Create to its
	// execution.completed (the caller only waits meanwhile).
	first, last := childAcks(t, exp.acks)
	n := childTrials()
	start := time.Now()
	h.parallel(t, n, trialWorkers, func(i int, rng *rand.Rand) (string, func(*testing.T)) {
		// Bodies 1 and 2 are the child's publishes (3 is the caller's).
		plan := &killPlan{trigger: markEffectPaused, nth: 1, pauseFx: 1 + rng.IntN(2)}
		if i%2 == 1 {
			plan = &killPlan{trigger: markAck, nth: first + rng.IntN(last-first-1), delay: time.Duration(rng.Int64N(int64(time.Millisecond) + 1))}
		}
		return fmt.Sprintf("%03d-%s", i, plan), func(t *testing.T) { h.childTrial(t, i, plan, exp) }
	})
	h.report(t, start, n)
}

// childAcks returns the 1-based numbers of the first and the last ack of
// the child execution (the second execution created) in acks.
func childAcks(t *testing.T, acks []acked) (first, last int) {
	t.Helper()
	var creates []eventlog.ID
	for i, a := range acks {
		if a.op == 'C' {
			creates = append(creates, a.id)
			if len(creates) == 2 {
				first = i + 1
			}
		}
		if len(creates) == 2 && a.id == creates[1] {
			last = i + 1
		}
	}
	if len(creates) != 2 || last-first < 2 {
		t.Fatalf("the uninterrupted caller run has %d creates, the child's acks are %d..%d", len(creates), first, last)
	}
	return first, last
}

// childTrial runs the caller in a server child, kills it by plan, runs a
// second server until the caller has ended, and checks.
func (h *harness) childTrial(t *testing.T, i int, plan *killPlan, exp *expectation) {
	ctx := context.Background()
	dir := filepath.Join(h.root, fmt.Sprintf("child-%03d", i))
	first := h.serveConfig(dir, "caller", 1, 1)
	second := h.serveConfig(dir, "caller", 1, 2)
	run, err := spawn(first, plan)
	if err != nil {
		t.Fatal(err)
	}
	var run2 childRun
	defer func() {
		if !t.Failed() && !*keepFlag {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("trial folder: %s; first server's markers: %v; second's: %v", dir, run.markers, run2.markers)
		}
	}()
	if plan.pauseFx > 0 && (!run.killed || run.last() != markEffectPaused) {
		t.Fatalf("the child was to be killed frozen inside at-most-once body %d: killed %v, markers %v", plan.pauseFx, run.killed, run.markers)
	}

	// After the kill: the caller and its child are in the log, the child
	// unfinished.
	store, err := pebblestore.Open(first.Log, pebblestore.WithoutSync())
	if err != nil {
		t.Fatalf("reopen the log: %v", err)
	}
	before := decodeAll(t, store)
	checkAcks(t, before, first.Acks)
	parent, child := callerAndChild(t, store, before)
	if child.IsZero() {
		t.Fatalf("killed (%v) before the child execution was created: %d executions in the log", run.killed, len(before))
	}
	if info, err := store.Info(ctx, child); err != nil {
		t.Fatal(err)
	} else if info.Status.Terminal() {
		if plan.pauseFx > 0 {
			t.Fatalf("frozen inside the child's body %d, yet the child ended %s", plan.pauseFx, info.Status)
		}
		h.count("killed after the child ended")
	} else {
		h.count("killed while the child ran")
	}
	openParent, openChild := openSteps(before[parent], "publish"), openSteps(before[child], "publish")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	run2, store, after := runSecondServer(t, first, second)
	defer store.Close()
	if len(after) != 2 {
		t.Fatalf("%d executions in the log, want the caller and one child", len(after))
	}
	if ids := checkServed(t, store, after, "caller", 1); ids[0] != parent {
		t.Fatalf("the second server served %s, the first started %s", ids[0], parent)
	}
	k := h.kernel(t, store, first)
	children, err := k.List(ctx, sdk.Filter{Caller: parent})
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 || children[0].ID != child || children[0].Agent != "publisher" {
		t.Fatalf("List(Filter{Caller: %s}) = %+v, want the one child %s", parent, children, child)
	}
	checkPrefix(t, parent, before[parent], after[parent])
	checkPrefix(t, child, before[child], after[child])
	checkIndeterminate(t, parent, openParent, after[parent], "publish")
	checkIndeterminate(t, child, openChild, after[child], "publish")
	if len(openChild) > 0 {
		h.count("child's at-most-once body cut by the kill")
	}
	checkChildStep(t, parent, child, after[parent])

	// The outputs: the child's as an uninterrupted run's, the caller's as
	// one too with the child's output inside.
	var want callerOutput
	if err := json.Unmarshal(exp.outputs[0], &want); err != nil {
		t.Fatal(err)
	}
	wantChild, err := json.Marshal(want.Child)
	if err != nil {
		t.Fatal(err)
	}
	childOut := completedOutput(t, after[child])
	h.checkPublisherOutput(t, wantChild, after[child], childOut)
	var got callerOutput
	out := completedOutput(t, after[parent])
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("caller output %s: %v", out, err)
	}
	var gotChild publisherOutput
	if err := json.Unmarshal(childOut, &gotChild); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(gotChild, got.Child); diff != "" {
		t.Errorf("the caller's output holds another child output than the child's (-child +caller):\n%s", diff)
	}
	ind := indeterminateSteps(after[parent], "publish")
	if got.Published != want.Published && (got.Published != indeterminate || len(ind) != 1 || !ind[0]) {
		t.Errorf("caller's publish: %q, want %q (indeterminate steps: %v)", got.Published, want.Published, ind)
	}
	checkEffects(t, first.Effects, after[parent], after[child])
}

// callerAndChild finds the caller execution and its child in lineages (the
// child is zero if it was not created).
func callerAndChild(t *testing.T, store eventlog.Log, lineages map[eventlog.ID][]eventlog.Event) (parent, child eventlog.ID) {
	t.Helper()
	for id := range lineages {
		info, err := store.Info(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case info.Agent == "caller" && info.Caller.IsZero():
			parent = id
		case info.Agent == "publisher" && !info.Caller.IsZero():
			child = id
		default:
			t.Fatalf("unexpected execution %+v", info)
		}
	}
	if !child.IsZero() {
		if info, _ := store.Info(context.Background(), child); info.Caller != parent {
			t.Fatalf("child %s has caller %s, want %s", child, info.Caller, parent)
		}
	}
	return parent, child
}

// checkChildStep: the caller's lineage records one child step, which
// succeeded once with the child's output.
func checkChildStep(t *testing.T, parent, child eventlog.ID, events []eventlog.Event) {
	t.Helper()
	steps := map[string]bool{}
	succeeded := 0
	for _, ev := range events {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if p.StepKind == eventlog.StepChild {
				steps[p.StepID] = true
			}
		case *eventlog.StepSucceeded:
			if steps[p.StepID] {
				succeeded++
			}
		}
	}
	if len(steps) != 1 || succeeded != 1 {
		t.Errorf("caller %s: %d child steps, %d successes; want one step that succeeded once (child %s)", parent, len(steps), succeeded, child)
	}
}

// runSecondServer runs the second server (not killed) on first's log until
// it says done, then reopens the log and checks the second server's acks.
// The first server's acks were checked after the kill; an unsynced append
// lost by it may since have been written over (DESIGN §4), and what it left
// is checked by checkPrefix.
func runSecondServer(t *testing.T, first, second childConfig) (childRun, *pebblestore.Store, map[eventlog.ID][]eventlog.Event) {
	t.Helper()
	run2, err := spawn(second, nil)
	if err != nil {
		t.Fatalf("second server: %v", err)
	}
	if run2.last() != markDone {
		t.Fatalf("second server ended without %q: %v\n%s", markDone, run2.markers, run2.stderr)
	}
	store, err := pebblestore.Open(first.Log, pebblestore.WithoutSync())
	if err != nil {
		t.Fatalf("reopen the log: %v", err)
	}
	after := decodeAll(t, store)
	checkAcks(t, after, second.Acks)
	return run2, store, after
}

// describeEnd says how a lineage ended, for a failure message: its failure
// code and error, the coverage (coverage.Fold) at each dispatch.started,
// and its last events with the owner of each dispatch.started and the
// step, target and affected resources of each step.
func describeEnd(evs []eventlog.Event) string {
	var b strings.Builder
	if len(evs) > 0 {
		if p, ok := evs[len(evs)-1].Data.(*eventlog.ExecutionFailed); ok {
			fmt.Fprintf(&b, "code %s: %s; ", p.Code, p.Error)
		}
	}
	f := coverage.New()
	for _, ev := range evs {
		if err := f.Apply(ev); err != nil {
			fmt.Fprintf(&b, "fold: %v; ", err)
			break
		}
		if _, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			pt, err := f.Point(ev.Seq)
			fmt.Fprintf(&b, "coverage at dispatch.started %d: %+v %v; ", ev.Seq, pt, err)
		}
	}
	b.WriteString("last events:")
	for _, ev := range evs[max(0, len(evs)-16):] {
		fmt.Fprintf(&b, " %d:%s", ev.Seq, ev.Kind())
		switch p := ev.Data.(type) {
		case *eventlog.DispatchStarted:
			fmt.Fprintf(&b, "(%s)", p.Owner)
		case *eventlog.StepStarted:
			fmt.Fprintf(&b, "(%s %s %v)", p.StepID, p.Target, p.Resources)
		case *eventlog.StepSucceeded:
			fmt.Fprintf(&b, "(%s)", p.StepID)
		}
	}
	return b.String()
}
