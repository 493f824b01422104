package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

var pgExecutionsFlag = flag.Int("reliability.pg.executions", 0,
	"executions TestPostgresWorkers serves (0: 50, or 20 with -short)")

const (
	// pgWorkerCount is how many worker processes share one Postgres log.
	pgWorkerCount = 3
	// pgConcurrency is each worker's sdk.Concurrency.
	pgConcurrency = 4
	// pgLeaseTTL is the workers' lease TTL: a worker stopped longer than
	// this loses its executions to another.
	pgLeaseTTL = 2 * time.Second
	// pgStallFor is how long the stalled worker's at-most-once body waits
	// before its effect: time enough for the parent's SIGSTOP to land
	// inside it.
	pgStallFor = 500 * time.Millisecond
	// pgWait bounds how long the parent waits for the workers, or for a
	// takeover.
	pgWait = 3 * time.Minute
)

// Markers of a Postgres worker, beside those of harness_test.go; each may
// be followed by a space and an execution ID or an idempotency key.
const (
	markAppendRefused = "append-refused" // an append was refused with eventlog.ErrLeaseLost
	markLeaseLost     = "lease-lost"     // the kernel logged that a renewal found its lease lost
	markOutage        = "outage"         // Serve or List failed on the store; both retry
	markServeFailed   = "serve-failed"   // Serve returned an error no retry mends
)

func pgExecutions() int {
	switch {
	case *pgExecutionsFlag > 0:
		return *pgExecutionsFlag
	case testing.Short():
		return 20
	}
	return 50
}

// DESIGN §11 "Leases and fencing" and §9 "Recovery", on Postgres, with
// processes: three worker processes run Serve on one Postgres log over the
// same publisher executions (keyed Starts: each worker starts all of them,
// finding those another started). They share a dirfs store and an effects
// file, in which every at-most-once publish body records its run.
//
// "kill-and-stop": worker 0 is SIGKILLed just after one of its first
// at-most-once bodies begins, and restarted under its own name once its
// lease has expired. Worker 1 is SIGSTOPped inside one of its
// at-most-once bodies, kept stopped until every execution it held is
// owned by another worker, ended, or left to it (below), then SIGCONTed:
// it must report that its appends are refused with eventlog.ErrLeaseLost,
// and its body, which goes on to make its effect, must have run once and
// never again (the new owner resolves the step as indeterminate).
// "server-restart": a private Postgres cluster is restarted (pg_ctl
// restart -m fast) in the middle of the run: every worker reports the
// outage, reconnects, and goes on.
//
// Then, in both: ALL executions completed, once per key, as an
// uninterrupted run of their input; every append any worker saw
// acknowledged is in the log, inside a dispatch that worker owned
// (dispatch.started{Owner}); no at-most-once body ran twice, one whose
// step succeeded ran once; every checkpoint verifies.
//
// Where a resource may be opened (DESIGN §11, §15½.4): a dirfs binding is
// not portable, so a worker that takes an execution over binds its
// workspace anew from the checkpoint covering the head; when the head is
// uncovered it appends nothing and leaves the execution to the owner that
// bound the workspace, which resumes it when it returns (the restarted
// worker 0, or worker 1 after SIGCONT). The workers are what a user
// following DESIGN writes for that: they share one dirfs store (so a
// checkpoint any of them captured restores in all), capture the workspace
// after every write (sdk.EverySteps(1)), and declare that only write_file
// (sdk.Affects("workspace")) changes it (dirfs.Config.CoverageReuse), so a
// model call, a read or a publish leaves it covered. The head is then
// uncovered only while a write_file is in flight. No execution fails: the
// kernel no longer writes resource_unavailable.
func TestPostgresWorkers(t *testing.T) {
	pgtest.URL(t) // skips (or fails) at once without a server
	h := newHarness(t)
	n := pgExecutions()
	exp := h.expect(t, "publisher", n)
	t.Run("kill-and-stop", func(t *testing.T) {
		h.pgKillAndStop(t, n, exp, rand.New(rand.NewPCG(uint64(h.seed), 1)))
	})
	t.Run("server-restart", func(t *testing.T) {
		h.pgRestart(t, n, exp, rand.New(rand.NewPCG(uint64(h.seed), 2)))
	})
}

// pgKillAndStop runs the "kill-and-stop" case of TestPostgresWorkers.
func (h *harness) pgKillAndStop(t *testing.T, n int, exp *expectation, rng *rand.Rand) {
	ctx := context.Background()
	url := pgtest.SchemaURL(t)
	store, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	dir := filepath.Join(h.root, "pg-kill-and-stop")
	cfgs := h.pgConfigs(t, dir, url, n)
	killAt := 1 + rng.IntN(3) // worker 0: SIGKILL after its killAt-th body begins …
	killDelay := time.Duration(rng.Int64N(int64(3*time.Millisecond) + 1))
	cfgs[1].StallInEffect = 2 + rng.IntN(5) // worker 1: SIGSTOP inside this body
	cfgs[1].StallFor = pgStallFor
	t.Logf("worker 0 is killed %v after its at-most-once body %d begins; worker 1 is stopped inside its body %d",
		killDelay, killAt, cfgs[1].StallInEffect)

	stalled := make(chan string, 1)
	ws := make([]*pgWorker, len(cfgs))
	defer func() { stopWorkers(ws) }()
	// Worker 0 comes back under its own name once its lease has expired
	// (DESIGN §15½.4): the executions left to it resume with it.
	restart0 := make(chan *pgWorker, 1)
	var again *pgWorker
	defer func() {
		if again != nil {
			stopWorkers([]*pgWorker{again})
		}
	}()
	for i, cfg := range cfgs {
		var on func(w *pgWorker, m string, nth int)
		switch i {
		case 0:
			on = func(w *pgWorker, m string, nth int) {
				if m == markEffectBegin && nth == killAt {
					time.AfterFunc(killDelay, func() { _ = w.cmd.Process.Kill() })
				}
			}
		case 1:
			on = func(w *pgWorker, m string, nth int) {
				if key, ok := strings.CutPrefix(m, markEffectStalled+" "); ok {
					_ = w.cmd.Process.Signal(syscall.SIGSTOP)
					stalled <- key
				}
			}
		}
		if ws[i], err = startPGWorker(cfg, on); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		<-ws[0].done
		time.Sleep(pgLeaseTTL + pgLeaseTTL/2)
		w, err := startPGWorker(cfgs[0], nil)
		if err != nil {
			t.Errorf("restart worker 0: %v", err)
		}
		restart0 <- w
	}()

	// Worker 1 is stopped inside a body: wait until everything it held has
	// another owner, ended, or is left to it, then let it go on.
	var stallKey string
	select {
	case stallKey = <-stalled:
	case <-ws[1].done:
		t.Fatalf("worker 1 ended without stalling in at-most-once body %d: %s", cfgs[1].StallInEffect, ws[1].summary())
	case <-time.After(pgWait):
		t.Fatalf("worker 1 did not reach at-most-once body %d in %v: %s", cfgs[1].StallInEffect, pgWait, ws[1].summary())
	}
	stoppedAt := time.Now()
	held := heldBy(t, store, cfgs[1].Owner)
	if len(held) == 0 {
		t.Fatalf("worker 1 is stopped inside a body, yet holds no lease")
	}
	if err := waitTakenOver(store, held, cfgs[1].Owner); err != nil {
		dumpWorkers(t, ws[0], ws[2])
		t.Fatal(err)
	}
	t.Logf("worker 1 was stopped for %v holding %d executions; each has another owner or ended", time.Since(stoppedAt).Round(time.Millisecond), len(held))
	if err := ws[1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	for i, w := range ws {
		w.wait(t, pgWait)
		switch {
		case i == 0 && !w.killed:
			t.Fatalf("worker 0 was not killed: %s", w.summary())
		case i > 0 && (w.killed || w.last() != markDone):
			t.Fatalf("worker %d ended without %q: %s", i, markDone, w.summary())
		}
	}
	select {
	case again = <-restart0:
	case <-time.After(pgWait):
		t.Fatalf("worker 0 was not restarted in %v", pgWait)
	}
	if again == nil {
		t.Fatal("worker 0 could not be restarted")
	}
	again.wait(t, pgWait)
	if again.killed || again.last() != markDone {
		t.Fatalf("restarted worker 0 ended without %q: %s", markDone, again.summary())
	}
	// DESIGN §11: a worker paused past its lease never writes again; its
	// appends are refused with ErrLeaseLost, and it says so.
	if ws[1].count(markAppendRefused) == 0 {
		t.Errorf("worker 1 was stopped past its lease, yet reported no append refused with ErrLeaseLost: %s", ws[1].summary())
	}
	t.Logf("worker 1 after SIGCONT: %d appends refused (ErrLeaseLost), %d lease renewals found lost",
		ws[1].count(markAppendRefused), ws[1].count(markLeaseLost))

	lineages := h.pgCheck(t, store, cfgs, n, exp)
	// The kills and the stop land in publish bodies, which affect nothing:
	// each execution whose publish body was cut (resolved as
	// indeterminate by its new owner) completed as an uninterrupted run —
	// strictly. The other executions the killed or stopped worker held
	// may have been cut inside a write: they waited for that worker and
	// completed with it (pgCheck).
	cut := 0
	for id, evs := range lineages {
		if !hasIndeterminate(evs) {
			continue
		}
		cut++
		if _, ok := evs[len(evs)-1].Data.(*eventlog.ExecutionCompleted); !ok {
			t.Errorf("execution %s: a publish body was cut by the kill or the stop, and it ended with %s, not execution.completed: %s", id, evs[len(evs)-1].Kind(), describeEnd(evs))
		}
	}
	if cut == 0 {
		t.Errorf("no execution has a publish step resolved as indeterminate, yet worker 1 was stopped inside a body past its lease")
	}
	// The stalled body went on and made its effect once; its step, taken
	// over, is resolved as indeterminate, never as a success, and never
	// ran again.
	if got := effectRuns(t, cfgs[1].Effects)[stallKey]; got != 1 {
		t.Errorf("the body worker 1 was stopped in (key %s) made its effect %d times, want once", stallKey, got)
	}
	for id, evs := range lineages {
		for _, ev := range evs {
			if p, ok := ev.Data.(*eventlog.StepSucceeded); ok && string(p.Result) == strconv.Quote(stallKey) {
				t.Errorf("execution %s: the step whose body worker 1 was stopped in succeeded (seq %d): its outcome came from a stale owner", id, ev.Seq)
			}
		}
	}
}

// pgRestart runs the "server-restart" case of TestPostgresWorkers on a
// private cluster.
func (h *harness) pgRestart(t *testing.T, n int, exp *expectation, rng *rand.Rand) {
	ctx := context.Background()
	cl := startCluster(t)
	url := cl.url + "?" + pgstore.SchemaParam + "=forkline_restart"
	store, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	dir := filepath.Join(h.root, "pg-restart")
	cfgs := h.pgConfigs(t, dir, url, n)
	// Restart after a third to two thirds of the acks an uninterrupted run
	// makes, counted over every worker.
	at := len(exp.acks)/3 + rng.IntN(len(exp.acks)/3+1)
	t.Logf("the server restarts after the %d-th acknowledged write (of about %d)", at, len(exp.acks))
	var (
		mu        sync.Mutex
		acks      int
		restarted = make(chan error, 1)
	)
	on := func(_ *pgWorker, m string, _ int) {
		if m != markAck {
			return
		}
		mu.Lock()
		acks++
		now := acks
		mu.Unlock()
		if now == at {
			go func() { restarted <- cl.restart() }()
		}
	}
	ws := make([]*pgWorker, len(cfgs))
	defer func() { stopWorkers(ws) }()
	for i, cfg := range cfgs {
		if ws[i], err = startPGWorker(cfg, on); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-restarted:
		if err != nil {
			t.Fatalf("restart the server: %v", err)
		}
	case <-time.After(pgWait):
		t.Fatalf("the workers made fewer than %d acknowledged writes in %v", at, pgWait)
	}
	for i, w := range ws {
		w.wait(t, pgWait)
		if w.killed || w.last() != markDone {
			t.Fatalf("worker %d ended without %q: %s", i, markDone, w.summary())
		}
		if w.count(markOutage) == 0 {
			t.Errorf("worker %d did not report the outage: %s", i, w.summary())
		}
		if w.count(markServeFailed) != 0 {
			t.Errorf("worker %d: Serve gave up during the outage instead of retrying: %s", i, w.summary())
		}
		t.Logf("worker %d reported the outage %d times", i, w.count(markOutage))
	}
	h.pgCheck(t, store, cfgs, n, exp)
}

// pgConfigs returns the configurations of the workers of one case: one
// Postgres log, dirfs store and effects file, an acks file each.
func (h *harness) pgConfigs(t *testing.T, dir, url string, n int) []childConfig {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() && !*keepFlag {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("case folder: %s", dir)
		}
	})
	cfgs := make([]childConfig, pgWorkerCount)
	for i := range cfgs {
		cfg := h.serveConfig(dir, "publisher", n, i)
		cfg.Log = ""
		cfg.Acks = filepath.Join(dir, fmt.Sprintf("acks-w%d", i))
		cfg.Concurrency = pgConcurrency
		cfg.Postgres = url
		cfg.Owner = fmt.Sprintf("w%d", i)
		cfg.LeaseTTL = pgLeaseTTL
		// What a user following DESIGN §11 writes for workers that take
		// each other's executions over: every write is captured
		// (EverySteps(1)), and the workspace declares that only the
		// steps that say so (write_file, sdk.Affects) change it
		// (CoverageReuse), so model calls, reads and publishes leave it
		// covered. A new owner then finds the head covered, and binds
		// anew from the shared store, everywhere but inside a write.
		cfg.EverySteps = 1
		cfg.CoverageReuse = true
		cfgs[i] = cfg
	}
	return cfgs
}

// pgCheck checks the log the workers of cfgs left, and returns it: every
// execution completed as an uninterrupted run (DESIGN §15½.4: none fails
// because its owner was away).
func (h *harness) pgCheck(t *testing.T, store *pgstore.Store, cfgs []childConfig, n int, exp *expectation) map[eventlog.ID][]eventlog.Event {
	t.Helper()
	ctx := context.Background()
	lineages := decodeAll(t, store)
	if len(lineages) != n {
		t.Fatalf("%d executions in the log, want %d", len(lineages), n)
	}
	for _, cfg := range cfgs {
		checkAcks(t, lineages, cfg.Acks)
		checkOwners(t, lineages, cfg.Acks, cfg.Owner)
	}
	byInput := checkServedFailing(t, store, lineages, "publisher", n, nil)
	var all []eventlog.Event
	indeterminate, takeovers, awaited := 0, 0, 0
	for idx, id := range byInput {
		evs := lineages[id]
		all = append(all, evs...)
		h.checkPublisherOutput(t, exp.outputs[idx], evs, completedOutput(t, evs))
		if diff := cmp.Diff(exp.files, workspaceFiles(t, cfgs[0], evs)); diff != "" {
			t.Errorf("execution %s (input %d): workspace differs from an uninterrupted run's (-want +got):\n%s", id, idx, diff)
		}
		if hasIndeterminate(evs) {
			indeterminate++
		}
		if owners := dispatchOwners(evs); len(owners) > 1 {
			takeovers++
		}
		if resumedUncovered(evs) {
			awaited++
		}
	}
	checkCheckpoints(t, ctx, dirfs.New(dirfs.Config{Store: cfgs[0].Store, NoSync: true}), all)
	checkEffects(t, cfgs[0].Effects, slices.Collect(maps.Values(lineages))...)
	t.Logf("%d executions completed: %d ran under more than one owner, %d with an at-most-once step resolved as indeterminate, %d resumed by their owner with the workspace uncovered",
		n, takeovers, indeterminate, awaited)
	return lineages
}

// resumedUncovered reports whether a dispatch of a lineage started with
// the workspace uncovered (a write_file in flight): only the owner that
// bound it may run such a dispatch (DESIGN §15½.4).
func resumedUncovered(evs []eventlog.Event) bool {
	f := coverage.New()
	for i, ev := range evs {
		if err := f.Apply(ev); err != nil {
			return false
		}
		if _, ok := ev.Data.(*eventlog.DispatchStarted); !ok || i == 0 {
			continue
		}
		if uncoveredAt(f, ev.Seq) {
			return true
		}
	}
	return false
}

// uncoveredAt reports whether the workspace is bound and uncovered at seq
// of the folded lineage.
func uncoveredAt(f *coverage.Fold, seq uint64) bool {
	pt, err := f.Point(seq)
	if err != nil {
		return false
	}
	for _, sel := range pt.Resources {
		if sel.Key == "workspace" && !sel.Covered {
			return true
		}
	}
	return false
}

// leftToOwner reports whether execution id waits for owner (DESIGN
// §15½.4): its newest dispatch is owner's and its workspace is uncovered
// at the head, so no other worker may take it over.
func leftToOwner(ctx context.Context, store *pgstore.Store, id eventlog.ID, owner string) (bool, error) {
	f := coverage.New()
	last := ""
	var head uint64
	for ev, err := range store.Events(ctx, id, 1) {
		if err != nil {
			return false, err
		}
		if err := f.Apply(ev); err != nil {
			return false, err
		}
		if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			last = ds.Owner
		}
		head = ev.Seq
	}
	return last == owner && head > 0 && uncoveredAt(f, head), nil
}

// dispatchOwners lists the owners of a lineage's dispatches, in order,
// without repeats in a row.
func dispatchOwners(events []eventlog.Event) []string {
	var out []string
	for _, ev := range events {
		if p, ok := ev.Data.(*eventlog.DispatchStarted); ok && (len(out) == 0 || out[len(out)-1] != p.Owner) {
			out = append(out, p.Owner)
		}
	}
	return out
}

// checkOwners: every event the worker named owner saw acknowledged, but
// for execution.created, lies in a dispatch it owned — at or after a
// dispatch.started naming it and before the next dispatch.started (DESIGN
// §11: a worker whose lease was taken over never writes again).
func checkOwners(t *testing.T, lineages map[eventlog.ID][]eventlog.Event, path, owner string) {
	t.Helper()
	acks, err := readAcks(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acks {
		if a.op == 'C' {
			continue
		}
		evs := lineages[a.id]
		for _, e := range a.events {
			if e.seq == 0 || e.seq > uint64(len(evs)) {
				continue // checkAcks reports it
			}
			got := ""
			for _, ev := range evs[:e.seq] {
				if p, ok := ev.Data.(*eventlog.DispatchStarted); ok {
					got = p.Owner
				}
			}
			if got != owner {
				t.Errorf("execution %s: event %d (%s) acknowledged to %s lies in a dispatch of %q", a.id, e.seq, e.kind, owner, got)
			}
		}
	}
}

// heldBy lists the executions whose live lease is owner's.
func heldBy(t *testing.T, store *pgstore.Store, owner string) []eventlog.ID {
	t.Helper()
	ctx := context.Background()
	var out []eventlog.ID
	for info, err := range store.List(ctx, eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		l, ok, err := store.Holder(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok && l.Owner == owner {
			out = append(out, info.ID)
		}
	}
	return out
}

// pgTakeover bounds how long the parent waits for the executions of a
// stopped worker to be taken over.
const pgTakeover = time.Minute

// waitTakenOver waits until each of ids has ended, is held by another
// owner than owner, or is left to owner (leftToOwner) with owner's lease
// expired.
func waitTakenOver(store *pgstore.Store, ids []eventlog.ID, owner string) error {
	ctx := context.Background()
	deadline := time.Now().Add(pgTakeover)
	for _, id := range ids {
		for {
			info, err := store.Info(ctx, id)
			if err != nil {
				return err
			}
			l, ok, err := store.Holder(ctx, id)
			if err != nil {
				return err
			}
			if info.Status.Terminal() || (ok && l.Owner != owner) {
				break
			}
			if !ok {
				left, err := leftToOwner(ctx, store, id, owner)
				if err != nil {
					return err
				}
				if left {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("execution %s was not taken over from %s in %v (status %s, lease %+v held %v)", id, owner, pgTakeover, info.Status, l, ok)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// dumpWorkers makes every worker of ws that still runs print its
// goroutines (SIGQUIT) and logs what each said.
func dumpWorkers(t *testing.T, ws ...*pgWorker) {
	t.Helper()
	for _, w := range ws {
		select {
		case <-w.done:
		default:
			_ = w.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-w.done:
			case <-time.After(10 * time.Second):
			}
		}
		t.Logf("worker %s: %s", w.name, w.summary())
	}
}

// effectRuns counts the effects file's lines per idempotency key.
func effectRuns(t *testing.T, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for line := range strings.Lines(string(data)) {
		key, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		runs[key]++
	}
	return runs
}

// workerLog is a Postgres worker's log: the store behind an ackLog, with
// the store's leases and its Claimer (so that Serve claims with FOR UPDATE
// SKIP LOCKED), reporting every append refused with ErrLeaseLost.
type workerLog struct {
	*ackLog
	eventlog.Claimer
}

func (w *workerLog) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	n, err := w.ackLog.Append(ctx, id, head, evs...)
	w.refused(id, err)
	return n, err
}

func (w *workerLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	n, err := w.ackLog.AppendUnsynced(ctx, id, head, evs...)
	w.refused(id, err)
	return n, err
}

func (w *workerLog) refused(id eventlog.ID, err error) {
	if errors.Is(err, eventlog.ErrLeaseLost) {
		w.mark(markAppendRefused + " " + id.String())
	}
}

// markHandler is a worker kernel's slog handler: it copies warnings to
// standard error and reports a lost lease with a marker.
type markHandler struct {
	mark func(string)
}

func (h *markHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *markHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	fmt.Fprintln(os.Stderr, "worker:", b.String())
	if strings.Contains(r.Message, "lease lost") {
		h.mark(markLeaseLost)
	}
	if strings.Contains(r.Message, "the store failed") {
		h.mark(markOutage) // Serve retries on its own
	}
	return nil
}

func (h *markHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *markHandler) WithGroup(string) slog.Handler { return h }

// pgWorkerMain is a Postgres worker child: it starts cfg.Serve executions
// with their keys (finding those another worker started) and runs Serve
// (which retries the store through the outage, each failure reported by
// markHandler) until List shows every one of them ended, and returns.
func pgWorkerMain(cfg childConfig, mark func(string)) int {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, cfg.Postgres)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	defer store.Close()
	acks, err := os.OpenFile(cfg.Acks, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	log := &workerLog{ackLog: &ackLog{IndexedLog: store, side: acks, mark: mark}, Claimer: store}
	k, err := sdk.New(log, sdk.WithOwner(cfg.Owner), sdk.WithLeaseTTL(cfg.LeaseTTL), sdk.WithLogger(slog.New(&markHandler{mark: mark})))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	if err := registerAgents(k, newAgentEnv(cfg, mark, false)); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	mark(markReady)
	want := map[eventlog.ID]bool{}
	for i := range cfg.Serve {
		id, err := k.Start(ctx, cfg.Agent, serveInput(cfg.Task, i), sdk.WithKey(serveKey(i)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker: start:", err)
			return 3
		}
		want[id] = true
	}
	mark(markStarted)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan struct{})
	go func() {
		defer close(served)
		err := k.Serve(sctx, sdk.Concurrency(cfg.Concurrency), sdk.PollEvery(50*time.Millisecond))
		if sctx.Err() == nil {
			// Serve ends early only on an error no retry mends.
			mark(markServeFailed)
			fmt.Fprintln(os.Stderr, "worker: serve:", err)
		}
	}()
	timeout := time.After(serveTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	terminal := []eventlog.Status{eventlog.StatusCompleted, eventlog.StatusFailed, eventlog.StatusCancelled}
	for {
		ended, err := k.List(ctx, sdk.Filter{Agent: cfg.Agent, Status: terminal})
		if err != nil {
			mark(markOutage)
			fmt.Fprintln(os.Stderr, "worker: list:", err)
		}
		n := 0
		for _, info := range ended {
			if want[info.ID] {
				n++
			}
		}
		if err == nil && n == len(want) {
			break
		}
		select {
		case <-timeout:
			fmt.Fprintf(os.Stderr, "worker: %d of %d executions ended after %v\n", n, len(want), serveTimeout)
			return 3
		case <-tick.C:
		}
	}
	stop()
	<-served
	mark(markDone)
	return 0
}

// pgWorker is a running worker child as the parent sees it.
type pgWorker struct {
	name string // its owner name
	cmd  *exec.Cmd
	done chan struct{} // closed when the child has exited

	mu      sync.Mutex
	markers []string
	seen    map[string]int // markers by name (the first word)
	stderr  bytes.Buffer
	killed  bool // by SIGKILL
	err     error
}

// startPGWorker starts a worker child with cfg; on is called (from one
// goroutine, in order) with each marker and how many of its name the worker
// wrote so far.
func startPGWorker(cfg childConfig, on func(w *pgWorker, m string, nth int)) (*pgWorker, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	w := &pgWorker{name: cfg.Owner, done: make(chan struct{}), seen: map[string]int{}}
	w.cmd = exec.Command(os.Args[0], "-test.run=^$")
	w.cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	w.cmd.Stderr = &lockedWriter{mu: &w.mu, w: &w.stderr}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			m := sc.Text()
			name, _, _ := strings.Cut(m, " ")
			w.mu.Lock()
			w.markers = append(w.markers, m)
			w.seen[name]++
			nth := w.seen[name]
			w.mu.Unlock()
			if on != nil {
				on(w, m, nth)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		err := w.cmd.Wait()
		w.mu.Lock()
		defer w.mu.Unlock()
		if ws, ok := w.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			w.killed = true
		} else {
			w.err = err
		}
	}()
	return w, nil
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// wait waits until the worker has exited, killing it after timeout.
func (w *pgWorker) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(timeout):
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.done
		t.Fatalf("worker did not end in %v: %s", timeout, w.summary())
	}
}

// count returns how many markers named name the worker wrote.
func (w *pgWorker) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[name]
}

// last returns the worker's last marker.
func (w *pgWorker) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.markers) == 0 {
		return ""
	}
	return w.markers[len(w.markers)-1]
}

// summary describes the worker for a failure message.
func (w *pgWorker) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := slices.Sorted(maps.Keys(w.seen))
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, " %s=%d", n, w.seen[n])
	}
	last := ""
	if len(w.markers) > 0 {
		last = w.markers[len(w.markers)-1]
	}
	return fmt.Sprintf("markers%s; last %q; killed %v; exit %v; stderr:\n%s", b.String(), last, w.killed, w.err, w.stderr.String())
}

// stopWorkers kills every worker still running (a failed case) and waits
// for it.
func stopWorkers(ws []*pgWorker) {
	for _, w := range ws {
		if w == nil {
			continue
		}
		select {
		case <-w.done:
		default:
			_ = w.cmd.Process.Signal(syscall.SIGCONT)
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
}

// pgBinEnv names the folder of the PostgreSQL server's programs (initdb,
// pg_ctl) for the tests that start a private cluster; the default is
// PostgreSQL 15's on Debian and Ubuntu.
const pgBinEnv = "FORKLINE_PG_BIN"

// cluster is a private PostgreSQL cluster, started for one test and
// removed after it, which the test may restart: the shared server is never
// restarted.
type cluster struct {
	bin, dir, data string
	as             []string // runs a command as the cluster's owner (runuser … when root)
	url            string
}

// startCluster initializes and starts a private cluster on a free port,
// listening on 127.0.0.1 and a socket in its own folder. initdb refuses
// to run as root: as root, the cluster is made and run as the user
// postgres (with runuser). Without the programs, or as root without that
// user, the test skips saying why (or fails, with
// FORKLINE_REQUIRE_POSTGRES=1).
func startCluster(t *testing.T) *cluster {
	t.Helper()
	unable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("FORKLINE_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("private PostgreSQL cluster (FORKLINE_REQUIRE_POSTGRES=1): "+format, args...)
		}
		t.Skipf("private PostgreSQL cluster: "+format+": skipped", args...)
	}
	bin := os.Getenv(pgBinEnv)
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	for _, prog := range []string{"initdb", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(bin, prog)); err != nil {
			unable("no %s in %s (set %s)", prog, bin, pgBinEnv)
		}
	}
	dir, err := os.MkdirTemp("", "forkline-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			unable("running as root, and no user postgres to run initdb as: %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			_ = os.RemoveAll(dir)
			unable("running as root, and no runuser to run initdb as postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.as = []string{runuser, "-u", "postgres", "--"}
	}
	t.Cleanup(func() {
		_ = c.pgctl("stop", "-m", "immediate")
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(dir, "server.log")); err == nil {
				t.Logf("private cluster's log:\n%s", log)
			}
		}
		_ = os.RemoveAll(dir)
	})
	if out, err := c.run(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust", "-N", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=60 -c shared_buffers=16MB", port, dir)
	if out, err := c.run(filepath.Join(bin, "pg_ctl"), "-D", c.data, "-l", filepath.Join(dir, "server.log"), "-w", "-o", opts, "start"); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
	c.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port)
	return c
}

// restart restarts the cluster: a fast shutdown (open transactions are
// rolled back, connections cut), then a start with the same options.
func (c *cluster) restart() error { return c.pgctl("restart", "-m", "fast") }

func (c *cluster) pgctl(args ...string) error {
	out, err := c.run(filepath.Join(c.bin, "pg_ctl"), append([]string{"-D", c.data, "-l", filepath.Join(c.dir, "server.log"), "-w"}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// run runs prog as the cluster's owner. Its output goes through a file,
// not a pipe, so that a server it starts, which inherits the output, does
// not keep the call waiting.
func (c *cluster) run(prog string, args ...string) ([]byte, error) {
	f, err := os.CreateTemp("", "forkline-pg-cmd-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	argv := append(slices.Clone(c.as), prog)
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = os.TempDir()
	err = cmd.Run()
	out, _ := os.ReadFile(f.Name())
	return out, err
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
