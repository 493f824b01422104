package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/scriptedmodel"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

const task = "Build a tiny Go module that greets people."

// scenario is one kind of child run.
type scenario struct {
	name     string
	agent    string   // "coder" or "publisher"
	template string   // dirfs template ("" none)
	triggers []string // the markers kill plans aim at
	// syncAtEffects runs the trial's kernels under
	// sdk.Durability(sdk.SyncAtEffects) (DESIGN §21).
	syncAtEffects bool
}

// baseline is what an uninterrupted child run of a scenario did.
type baseline struct {
	output   []byte            // the execution's output
	files    map[string]string // its workspace at the end
	total    time.Duration     // from ready to done
	acks     int               // acknowledged appends
	captures []time.Duration   // each capture's duration, in order
	effects  []time.Duration   // each at-most-once body's duration, in order
	probed   []int             // the captures (1-based) in which dirfs checked the context
}

// harness runs kill trials of scenarios against one scripted model.
type harness struct {
	url   string
	root  string
	seed  int64
	base  map[string]*baseline
	stats struct {
		sync.Mutex
		m map[string]int
	}
}

func trials() int {
	switch {
	case *trialsFlag > 0:
		return *trialsFlag
	case testing.Short():
		return 25
	}
	return 100
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	url, stop, err := scriptedmodel.Serve(coder.Script())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	root, err := os.MkdirTemp("", "forkline-reliability-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *keepFlag {
			t.Logf("trial folders kept in %s", root)
			return
		}
		_ = os.RemoveAll(root)
	})
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("kill plans from -reliability.seed=%d", seed)
	h := &harness{url: url, root: root, seed: seed, base: map[string]*baseline{}}
	h.stats.m = map[string]int{}
	return h
}

func (h *harness) count(what string) {
	h.stats.Lock()
	defer h.stats.Unlock()
	h.stats.m[what]++
}

func (h *harness) report(t *testing.T, start time.Time, n int) {
	h.stats.Lock()
	defer h.stats.Unlock()
	keys := slices.Sorted(maps.Keys(h.stats.m))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-44s %d", k, h.stats.m[k])
	}
	t.Logf("%d trials in %v:%s", n, time.Since(start).Round(time.Millisecond), b.String())
}

// config returns the configuration of a child of sc in folder dir.
func (h *harness) config(sc scenario, dir string) childConfig {
	return childConfig{
		Log:      filepath.Join(dir, "log"),
		Store:    filepath.Join(dir, "dirfs"),
		Template: sc.template,
		ModelURL: h.url,
		Agent:    sc.agent,
		Task:     task,
		Acks:     filepath.Join(dir, "acks"),
		Effects:  filepath.Join(dir, "effects"),
		Owner:    "worker@" + dir,

		SyncAtEffects: sc.syncAtEffects,
	}
}

// calibrate runs sc once without a kill and records its baseline.
func (h *harness) calibrate(t *testing.T, sc scenario) {
	t.Helper()
	dir := filepath.Join(h.root, "baseline-"+sc.name)
	cfg := h.config(sc, dir)
	run, err := spawn(cfg, nil)
	if err != nil {
		t.Fatalf("%s: uninterrupted child: %v", sc.name, err)
	}
	b := &baseline{acks: run.count(markAck)}
	var ready, capBegin, effBegin time.Duration
	for _, m := range run.markers {
		switch m.name {
		case markReady:
			ready = m.at
		case markDone:
			b.total = m.at - ready
		case markCaptureBegin:
			capBegin = m.at
		case markCaptureCtx:
			if n := len(b.captures) + 1; !slices.Contains(b.probed, n) {
				b.probed = append(b.probed, n)
			}
		case markCaptureEnd:
			b.captures = append(b.captures, m.at-capBegin)
		case markEffectBegin:
			effBegin = m.at
		case markEffectEnd:
			b.effects = append(b.effects, m.at-effBegin)
		}
	}
	store, err := pebblestore.Open(cfg.Log, pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k := h.kernel(t, store, cfg)
	id := onlyExecution(t, store)
	res, err := k.Run(context.Background(), id)
	if err != nil {
		t.Fatalf("%s: uninterrupted run: %v", sc.name, err)
	}
	b.output = res.Output
	b.files = workspaceFiles(t, cfg, lineage(t, store, id))
	if len(b.files) == 0 || len(b.captures) == 0 || b.acks == 0 {
		t.Fatalf("%s: baseline has %d files, %d captures, %d acks", sc.name, len(b.files), len(b.captures), b.acks)
	}
	h.base[sc.name] = b
	t.Logf("%s baseline: %v, %d acks, captures %v (context checked in %v), effects %v",
		sc.name, b.total.Round(time.Millisecond), b.acks, b.captures, b.probed, b.effects)
}

// kernel opens a parent-side kernel on store with the agents of cfg.
func (h *harness) kernel(t testing.TB, store eventlog.IndexedLog, cfg childConfig) *sdk.Kernel {
	t.Helper()
	k, err := sdk.New(store, ownerOption(cfg)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := registerAgents(k, newAgentEnv(cfg, nil, true)); err != nil {
		t.Fatal(err)
	}
	return k
}

// plan draws a kill plan for sc.
func (h *harness) plan(sc scenario, rng *rand.Rand) *killPlan {
	b := h.base[sc.name]
	uniform := func(max time.Duration) time.Duration {
		if max <= 0 {
			return 0
		}
		return time.Duration(rng.Int64N(int64(max) + 1))
	}
	switch trigger := sc.triggers[rng.IntN(len(sc.triggers))]; trigger {
	case markCapturePaused:
		return &killPlan{trigger: trigger, nth: 1, pause: b.probed[rng.IntN(len(b.probed))]}
	case markCaptureBegin:
		n := rng.IntN(len(b.captures))
		return &killPlan{trigger: trigger, nth: n + 1, delay: uniform(b.captures[n] * 6 / 5)}
	case markEffectBegin:
		n := rng.IntN(len(b.effects))
		return &killPlan{trigger: trigger, nth: n + 1, delay: uniform(b.effects[n] * 6 / 5)}
	case markAck:
		return &killPlan{trigger: trigger, nth: 1 + rng.IntN(b.acks), delay: uniform(time.Millisecond)}
	default:
		return &killPlan{trigger: markReady, nth: 1, delay: uniform(b.total)}
	}
}

// DESIGN §4, §8.6, §8.7: kill the child at random moments; after each kill
// nothing acknowledged is lost, the run completes as an uninterrupted one,
// no at-most-once body runs twice, and coverage and forks work at every
// event.
func TestKillAndResume(t *testing.T) {
	h := newHarness(t)
	scenarios := []scenario{
		{name: "coder", agent: "coder", triggers: []string{markReady, markAck, markCaptureBegin}},
		{name: "publisher", agent: "publisher", triggers: []string{markReady, markAck, markCaptureBegin, markEffectBegin}},
	}
	for _, sc := range scenarios {
		h.calibrate(t, sc)
	}
	n := trials()
	start := time.Now()
	h.runTrials(t, n, func(i int) scenario { return scenarios[i%len(scenarios)] })
	h.report(t, start, n)
}

// DESIGN §21: TestKillAndResume's trials with the child and the resuming
// kernel under sdk.Durability(sdk.SyncAtEffects). A SIGKILL of the process
// loses no unsynced write (the operating system holds them), so every
// check of TestKillAndResume holds unchanged: nothing acknowledged is
// lost, the run completes as an uninterrupted one, no at-most-once body
// runs twice. (A crash of the machine, which does lose them, is
// simulated in sdk.TestSyncAtEffectsKill.)
func TestKillAndResumeSyncAtEffects(t *testing.T) {
	h := newHarness(t)
	scenarios := []scenario{
		{name: "coder-sync-at-effects", agent: "coder", triggers: []string{markReady, markAck, markCaptureBegin}, syncAtEffects: true},
		{name: "publisher-sync-at-effects", agent: "publisher", triggers: []string{markReady, markAck, markCaptureBegin, markEffectBegin}, syncAtEffects: true},
	}
	for _, sc := range scenarios {
		h.calibrate(t, sc)
	}
	n := max(trials()/4, 8)
	start := time.Now()
	h.runTrials(t, n, func(i int) scenario { return scenarios[i%len(scenarios)] })
	h.report(t, start, n)
}

// DESIGN §5 "Atomicity" and dirfs's: aim every kill at a dirfs capture of
// a workspace big enough that dirfs checks its context in the middle of the
// walk. Half the trials freeze the child there (after some blobs are
// stored, before the manifest) and kill it: certainly inside. The others
// kill at a random moment of a capture. No half checkpoint is visible, the
// resource is uncovered, and no selection points at a missing ref.
func TestKillDuringCapture(t *testing.T) {
	h := newHarness(t)
	template := filepath.Join(h.root, "template")
	for i := range 10 {
		p := filepath.Join(template, fmt.Sprintf("a%03d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte(fmt.Sprintf("line %d\n", i)), 400), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 260 { // entries enough for dirfs to check its context mid-walk
		if err := os.MkdirAll(filepath.Join(template, fmt.Sprintf("d%03d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sc := scenario{name: "bulk", agent: "coder", template: template, triggers: []string{markCapturePaused, markCaptureBegin}}
	h.calibrate(t, sc)
	if len(h.base[sc.name].probed) == 0 {
		t.Fatal("dirfs never checked its context during a capture: the kill inside a capture needs another hook")
	}
	n := max(trials()/8, 6)
	start := time.Now()
	h.runTrials(t, n, func(int) scenario { return sc })
	h.report(t, start, n)
}

// trialWorkers is how many trials run at once. A trial mostly waits: for
// the child's start, its fsyncs and the model's answers.
const trialWorkers = 3

// runTrials runs n trials, trialWorkers at a time, each a subtest named by
// its number, scenario and kill plan.
func (h *harness) runTrials(t *testing.T, n int, scenarioOf func(i int) scenario) {
	h.parallel(t, n, trialWorkers, func(i int, rng *rand.Rand) (string, func(*testing.T)) {
		sc := scenarioOf(i)
		plan := h.plan(sc, rng)
		return fmt.Sprintf("%03d-%s-%s", i, sc.name, plan), func(t *testing.T) {
			h.trial(t, sc, i, plan, rng)
		}
	})
}

// parallel runs n subtests, workers at a time. trial(i, rng) names the i-th
// and returns its body; rng is drawn from the harness's seed and i, so that
// -reliability.seed replays every trial.
func (h *harness) parallel(t *testing.T, n, workers int, trial func(i int, rng *rand.Rand) (string, func(*testing.T))) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				name, body := trial(i, rand.New(rand.NewPCG(uint64(h.seed), uint64(i))))
				t.Run(name, body)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// trial runs one child of sc, kills it by plan, and checks everything.
func (h *harness) trial(t *testing.T, sc scenario, i int, plan *killPlan, rng *rand.Rand) {
	ctx := context.Background()
	dir := filepath.Join(h.root, fmt.Sprintf("%s-%03d", sc.name, i))
	cfg := h.config(sc, dir)
	run, err := spawn(cfg, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if !t.Failed() && !*keepFlag {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("trial folder: %s; markers: %v", dir, run.markers)
		}
	}()
	if !run.killed {
		h.count("finished before the kill")
	} else {
		h.count("killed after marker " + run.last())
	}

	store, err := pebblestore.Open(cfg.Log, pebblestore.WithoutSync())
	if err != nil {
		t.Fatalf("reopen the log: %v", err)
	}
	defer store.Close()
	drv := dirfs.New(dirfs.Config{Store: cfg.Store, Template: cfg.Template, NoSync: true})

	// After the kill, before anything else writes.
	lineages := decodeAll(t, store)
	checkAcks(t, lineages, cfg.Acks)
	var id eventlog.ID
	switch len(lineages) {
	case 0:
		h.count("killed before Start returned")
	case 1:
		for id = range lineages {
		}
	default:
		t.Fatalf("%d executions in the log, want at most 1", len(lineages))
	}
	before := lineages[id]
	checkCheckpoints(t, ctx, drv, before)
	captureEvents := countKinds(before, eventlog.KindResourceCaptured, eventlog.KindResourceCaptureFailed)
	if plan != nil && plan.pause > 0 && (!run.killed || run.count(markCapturePaused) != 1 || run.count(markCaptureBegin) != plan.pause || captureEvents != plan.pause-1) {
		t.Fatalf("the child was to be killed frozen inside capture %d: killed %v, %d captures begun, %d in the log, markers %v",
			plan.pause, run.killed, run.count(markCaptureBegin), captureEvents, run.markers)
	}
	if uint64(len(before)) < ackedHead(t, cfg.Acks, id) {
		h.count("acknowledged unsynced appends lost to the kill")
	}
	if run.count(markCaptureBegin) > captureEvents {
		// The newest capture's event is not in the log: the kill landed
		// inside it (or between it and its append).
		h.count("capture interrupted")
		if leftovers(t, cfg.Store) {
			h.count("capture interrupted with temporary files left")
		}
		head := uint64(len(before))
		if sc.syncAtEffects && head < ackedHead(t, cfg.Acks, id) {
			// Under SyncAtEffects the kill lost acknowledged unsynced
			// appends (Pebble buffers a NoSync write in the process
			// before its write-ahead log file has it): the head is the
			// newest synced append, which may be the previous capture's,
			// and the steps since run again (DESIGN §21).
			h.count("capture interrupted after unsynced appends were lost")
		} else if head > 0 {
			p, err := h.kernel(t, store, cfg).Coverage(ctx, id, head)
			if err != nil {
				t.Fatalf("coverage at the head (seq %d): %v", head, err)
			}
			for _, sel := range p.Resources {
				if sel.Covered {
					t.Errorf("capture interrupted, yet %q is covered at the head (seq %d): %+v", sel.Key, head, sel)
				}
			}
		}
	}

	// Resume to completion.
	k := h.kernel(t, store, cfg)
	if id.IsZero() {
		if id, err = k.Start(ctx, sc.agent, coder.Input{Task: task}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	after := lineage(t, store, id)
	// DESIGN §8.7: resuming never changes an event written before.
	if len(after) < len(before) {
		t.Fatalf("resume shortened the lineage from %d to %d events", len(before), len(after))
	}
	for i, ev := range before {
		if a, b := mustFingerprint(t, ev), mustFingerprint(t, after[i]); a != b {
			t.Errorf("resume changed event %d (%s → %s)", ev.Seq, ev.Kind(), after[i].Kind())
		}
	}
	h.checkOutput(t, sc, after, res.Output)
	if diff := cmp.Diff(h.base[sc.name].files, workspaceFiles(t, cfg, after)); diff != "" {
		t.Errorf("workspace differs from an uninterrupted run's (-want +got):\n%s", diff)
	}
	if hasIndeterminate(after) {
		h.count("at_most_once resolved as indeterminate")
	}

	// Coverage and forks at every event; every selectable ref restores.
	checkForksEverywhere(t, ctx, k, store, drv, id, uint64(len(after)))
	at := 1 + uint64(rng.IntN(len(after)))
	fid, err := k.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	fres, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatalf("run of the fork at seq %d: %v", at, err)
	}
	h.checkOutput(t, sc, lineage(t, store, fid), fres.Output)
	checkEffects(t, cfg.Effects, after, lineage(t, store, fid))
}

// checkOutput compares an execution's output with the baseline's: equal,
// except that a publish whose at-most-once step was resolved as
// indeterminate in this lineage reports so.
func (h *harness) checkOutput(t *testing.T, sc scenario, events []eventlog.Event, out []byte) {
	t.Helper()
	want := h.base[sc.name].output
	if sc.agent != "publisher" {
		if !bytes.Equal(out, want) {
			t.Errorf("output %s, want %s", out, want)
		}
		return
	}
	h.checkPublisherOutput(t, want, events, out)
}

// checkPublisherOutput compares a publisher execution's output with want:
// equal, except that a publish whose at-most-once step was resolved as
// indeterminate in events reports so.
func (h *harness) checkPublisherOutput(t *testing.T, want []byte, events []eventlog.Event, out []byte) {
	t.Helper()
	var got, exp publisherOutput
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		t.Fatal(err)
	}
	ind := indeterminateSteps(events, "publish")
	if got.Answer != exp.Answer || len(got.Published) != len(exp.Published) {
		t.Errorf("output %s, want %s", out, want)
		return
	}
	for i := range got.Published {
		if got.Published[i] == exp.Published[i] {
			continue
		}
		if got.Published[i] != indeterminate || i >= len(ind) || !ind[i] {
			t.Errorf("publish %d: %q, want %q (indeterminate steps: %v)", i, got.Published[i], exp.Published[i], ind)
		}
	}
}

// indeterminateSteps says, for each step of target in order of first start,
// whether it was resolved as indeterminate.
func indeterminateSteps(events []eventlog.Event, target string) []bool {
	var order []string
	index := map[string]int{}
	var out []bool
	for _, ev := range events {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if _, ok := index[p.StepID]; !ok && p.Target == target {
				index[p.StepID] = len(order)
				order = append(order, p.StepID)
				out = append(out, false)
			}
		case *eventlog.StepFailed:
			if i, ok := index[p.StepID]; ok && p.Indeterminate {
				out[i] = true
			}
		}
	}
	return out
}

func hasIndeterminate(events []eventlog.Event) bool {
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.StepFailed); ok && p.Indeterminate {
			return true
		}
	}
	return false
}

// decodeAll reads every execution's lineage: the log must decode completely.
func decodeAll(t *testing.T, log eventlog.Log) map[eventlog.ID][]eventlog.Event {
	t.Helper()
	out := map[eventlog.ID][]eventlog.Event{}
	for info, err := range log.List(context.Background(), eventlog.Filter{}) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		out[info.ID] = lineage(t, log, info.ID)
		if uint64(len(out[info.ID])) != info.Head {
			t.Fatalf("execution %s: %d events, head %d", info.ID, len(out[info.ID]), info.Head)
		}
	}
	return out
}

// lineage reads id's lineage; an error fails the test.
func lineage(t testing.TB, log eventlog.Log, id eventlog.ID) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	for ev, err := range log.Events(context.Background(), id, 1) {
		if err != nil {
			t.Fatalf("execution %s: decode after %d events: %v", id, len(out), err)
		}
		if ev.Seq != uint64(len(out)+1) {
			t.Fatalf("execution %s: event %d has seq %d", id, len(out)+1, ev.Seq)
		}
		out = append(out, ev)
	}
	return out
}

func onlyExecution(t *testing.T, log eventlog.Log) eventlog.ID {
	t.Helper()
	var ids []eventlog.ID
	for info, err := range log.List(context.Background(), eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	if len(ids) != 1 {
		t.Fatalf("%d executions, want 1", len(ids))
	}
	return ids[0]
}

func mustFingerprint(t testing.TB, ev eventlog.Event) string {
	t.Helper()
	fp, err := fingerprint(ev)
	if err != nil {
		t.Fatalf("event %d: %v", ev.Seq, err)
	}
	return fp
}

// ackedHead returns the highest seq of id that the child saw
// acknowledged.
func ackedHead(t *testing.T, path string, id eventlog.ID) uint64 {
	t.Helper()
	acks, err := readAcks(path)
	if err != nil {
		t.Fatal(err)
	}
	var head uint64
	for _, a := range acks {
		if a.id != id {
			continue
		}
		for _, ev := range a.events {
			head = max(head, ev.seq)
		}
	}
	return head
}

// checkAcks checks that every write the child saw acknowledged is stored:
// every event of a synced write (Create, Append) is present with the same
// record, and so is every event of an unsynced write that is within the
// recovered head (DESIGN §4: a lost unsynced write loses only its suffix).
func checkAcks(t *testing.T, lineages map[eventlog.ID][]eventlog.Event, path string) {
	t.Helper()
	acks, err := readAcks(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		evs, ok := lineages[a.id]
		if !ok {
			t.Errorf("acknowledged %c of execution %s, which is not in the log", a.op, a.id)
			continue
		}
		for _, e := range a.events {
			if e.seq > uint64(len(evs)) {
				if a.op != 'U' {
					t.Errorf("execution %s: acknowledged event %d (%s) is lost: head is %d", a.id, e.seq, e.kind, len(evs))
				}
				continue
			}
			got := evs[e.seq-1]
			if fp := mustFingerprint(t, got); fp != e.fp || got.Kind().String() != e.kind {
				t.Errorf("execution %s: acknowledged event %d was %s %s, the log holds %s %s", a.id, e.seq, e.kind, e.fp, got.Kind(), fp)
			}
		}
	}
}

func countKinds(events []eventlog.Event, kinds ...eventlog.Kind) int {
	n := 0
	for _, ev := range events {
		if slices.Contains(kinds, ev.Kind()) {
			n++
		}
	}
	return n
}

// checkCheckpoints: every checkpoint in the store verifies (no half
// checkpoint is visible), and so does every ref the log records.
func checkCheckpoints(t *testing.T, ctx context.Context, drv *dirfs.Driver, events []eventlog.Event) {
	t.Helper()
	refs, err := drv.Checkpoints()
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if err := drv.Verify(ctx, ref); err != nil {
			t.Errorf("checkpoint in the store does not verify: %v", err)
		}
	}
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.ResourceCaptured); ok && !slices.Contains(refs, p.Ref) {
			t.Errorf("event %d records checkpoint %s, which is not in the store", ev.Seq, p.Ref)
		}
	}
}

// leftovers reports whether an interrupted dirfs operation left temporary
// files in the store's tmp/ (see the dirfs package documentation).
func leftovers(t *testing.T, store string) bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(store, "tmp"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return len(entries) > 0
}

// checkForksEverywhere asks for coverage and forks at every event of id:
// each works, each fork selects what coverage says, and every ref a fork
// could select verifies and restores.
func checkForksEverywhere(t *testing.T, ctx context.Context, k *sdk.Kernel, log eventlog.Log, drv *dirfs.Driver, id eventlog.ID, head uint64) {
	t.Helper()
	refs := map[string]uint64{}
	for at := uint64(1); at <= head; at++ {
		p, err := k.Coverage(ctx, id, at)
		if err != nil {
			t.Fatalf("coverage at %d: %v", at, err)
		}
		fid, err := k.Fork(ctx, id, at)
		if err != nil {
			t.Fatalf("fork at %d: %v", at, err)
		}
		var fc *eventlog.ForkCreated
		for ev, err := range log.Events(ctx, fid, at+1) {
			if err != nil {
				t.Fatalf("fork at %d: %v", at, err)
			}
			fc, _ = ev.Data.(*eventlog.ForkCreated)
		}
		if fc == nil || fc.Parent != id || fc.At != at || len(fc.Selections) != len(p.Resources) {
			t.Fatalf("fork at %d: fork.created %+v, coverage %+v", at, fc, p)
		}
		for i, s := range fc.Selections {
			c := p.Resources[i]
			if s.Key != c.Key || s.Ref != c.Ref || s.CapturedAt != c.CapturedAt || s.Generation != c.Generation || s.Covered != c.Covered {
				t.Errorf("fork at %d selects %+v, coverage says %+v", at, s, c)
			}
			if s.Ref != "" {
				refs[s.Ref] = at
			}
		}
	}
	for ref, at := range refs {
		if err := drv.Verify(ctx, ref); err != nil {
			t.Errorf("ref %s selectable at seq %d does not verify: %v", ref, at, err)
			continue
		}
		w, b, err := drv.Create(ctx, ref)
		if err != nil {
			t.Errorf("ref %s selectable at seq %d does not restore: %v", ref, at, err)
			continue
		}
		_ = w.Close()
		if err := drv.RemoveWorkspace(b); err != nil {
			t.Error(err)
		}
	}
}

// workspaceFiles returns the files of the workspace the lineage bound last.
func workspaceFiles(t testing.TB, cfg childConfig, events []eventlog.Event) map[string]string {
	t.Helper()
	var binding json.RawMessage
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.ResourceBound); ok {
			binding = p.Binding
		}
	}
	if binding == nil {
		t.Fatal("no workspace bound")
	}
	var b dirfs.Binding
	if err := json.Unmarshal(binding, &b); err != nil {
		t.Fatal(err)
	}
	w, err := dirfs.New(dirfs.Config{Store: cfg.Store, Template: cfg.Template}).Open(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	files := map[string]string{}
	err = filepath.WalkDir(w.Dir(), func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.Dir(), p)
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkEffects: no at-most-once body ran twice (one effect line per
// idempotency key), and each publish step that succeeded in the given
// lineages ran exactly once.
func checkEffects(t *testing.T, path string, lineages ...[]eventlog.Event) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for line := range strings.Lines(string(data)) {
		key, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		runs[key]++
	}
	for key, n := range runs {
		if n > 1 {
			t.Errorf("at_most_once body with idempotency key %s ran %d times", key, n)
		}
	}
	for _, events := range lineages {
		publish := map[string]bool{}
		for _, ev := range events {
			switch p := ev.Data.(type) {
			case *eventlog.StepStarted:
				if p.Target == "publish" {
					publish[p.StepID] = true
				}
			case *eventlog.StepSucceeded:
				if !publish[p.StepID] {
					continue
				}
				var key string
				if err := json.Unmarshal(p.Result, &key); err != nil {
					t.Fatalf("publish result %s: %v", p.Result, err)
				}
				if runs[key] != 1 {
					t.Errorf("publish step %s succeeded, but its body ran %d times (key %s)", p.StepID, runs[key], key)
				}
			}
		}
	}
}
