package reliability

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/sdk"
)

var (
	trialsFlag = flag.Int("reliability.trials", 0, "kill-harness trials per test (0: 100, or 25 with -short)")
	seedFlag   = flag.Int64("reliability.seed", 0, "seed of the kill plans (0: from the clock; the seed is logged)")
	keepFlag   = flag.Bool("reliability.keep", false, "keep every trial's folder (a failed trial's folder is always kept)")

	exhaustiveFlag = flag.Bool("reliability.exhaustive", false, "damage every byte of every stored event, not a sample")
)

// childEnv, when set, turns the test binary into a child of the kill
// harness; its value is the child's configuration as JSON.
const childEnv = "FORKLINE_RELIABILITY_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(childMain(cfg))
	}
	// Build the forkline command while the first tests run (not when the
	// binary only lists its tests).
	flag.Parse()
	if f := flag.Lookup("test.list"); f == nil || f.Value.String() == "" {
		startForklineBuild()
	}
	code := m.Run()
	stopForklineBuild()
	os.Exit(code)
}

// childConfig is what a child runs.
type childConfig struct {
	Log      string // the Pebble log's folder (synced)
	Store    string // the dirfs store
	Template string // the dirfs template ("" none)
	ModelURL string // the scripted model, served by the parent
	Agent    string // "coder" or "publisher"
	Task     string
	Acks     string // side file: every acknowledged append
	Effects  string // side file: every at-most-once effect
	// PauseInCapture, when n > 0, freezes the child inside its n-th dirfs
	// capture (at dirfs's first context check of the walk) after the
	// marker capture-paused, so that a kill lands there for certain.
	PauseInCapture int
	// PauseInEffect, when n > 0, freezes the child inside its n-th
	// at-most-once body (before its effect) after the marker effect-paused.
	PauseInEffect int
	// Serve, when n > 0, makes the child a server (serveMain): it starts n
	// executions of Agent with idempotency keys (serveKey, serveInput) and
	// runs Serve with Concurrency until every one of them has ended.
	Serve       int
	Concurrency int

	// Postgres, when set, makes the child a worker on the Postgres log at
	// this URL (pgWorkerMain, pgworkers_test.go) instead of a Pebble one.
	Postgres string
	// Owner names the worker in the store's leases (sdk.WithOwner): one
	// per data folder, so that a process that resumes after a kill is the
	// same worker restarted and reopens its own workspaces (DESIGN §11: a
	// workspace binding is not portable; a new owner would bind anew from
	// a covering checkpoint or fail with resource_unavailable); on
	// Postgres, one per worker process. LeaseTTL is sdk.WithLeaseTTL.
	Owner    string
	LeaseTTL time.Duration
	// SyncAtEffects runs the kernels of the trial (the child's and the
	// parent's that resumes) under sdk.Durability(sdk.SyncAtEffects).
	SyncAtEffects bool
	// StallInEffect, when n > 0, stalls the child inside its n-th
	// at-most-once body (before its effect) for StallFor, after the marker
	// "effect-stalled <idempotency key>", so that the parent can SIGSTOP it
	// there; unlike PauseInEffect the body goes on afterwards.
	StallInEffect int
	StallFor      time.Duration
	// EverySteps, when n > 0, is the coder workspace's checkpoint policy
	// (sdk.EverySteps(n)) instead of the coder's default of 5.
	EverySteps int
	// CoverageReuse sets dirfs.Config.CoverageReuse: every change to the
	// workspace goes through write_file, which declares it (sdk.Affects),
	// so steps that declare nothing leave the workspace covered.
	CoverageReuse bool

	// Rate, when set, makes the child a rate-limited worker on Postgres
	// (rateWorkerMain, ratelimit_test.go); it is a rateChild as JSON.
	Rate json.RawMessage `json:",omitempty"`

	// Queue, when set, makes the child a queue worker on Postgres
	// (queueWorkerMain, queue_test.go); it is a queueChild as JSON.
	Queue json.RawMessage `json:",omitempty"`

	// Version, when set, makes the child a worker of one code version on
	// Postgres (versionWorkerMain, version_test.go); it is a versionChild
	// as JSON.
	Version json.RawMessage `json:",omitempty"`
}

// The child's progress markers, one per line on its standard output.
const (
	markReady         = "ready"          // the kernel is open; Start comes next
	markAck           = "ack"            // an append was acknowledged and recorded in Acks
	markCaptureBegin  = "capture-begin"  // a dirfs Checkpoint starts
	markCaptureCtx    = "capture-ctx"    // dirfs checked the context in the middle of a capture
	markCapturePaused = "capture-paused" // … and the child froze there (PauseInCapture)
	markCaptureEnd    = "capture-end"    // … and returned
	markEffectBegin   = "effect-begin"   // an at-most-once body starts
	markEffectPaused  = "effect-paused"  // … and the child froze there, before the effect (PauseInEffect)
	markEffectStalled = "effect-stalled" // … and the child stalls there for a while, before the effect (StallInEffect; the key follows)
	markEffectEnd     = "effect-end"     // … and its effect is durable
	markStarted       = "started"        // a server's Starts returned (Serve comes next)
	markDone          = "done"           // Run returned; a server's executions all ended
)

// childMain runs one execution (or, with Serve, serveMain) as the harness's
// child and returns the exit status. It is killed, usually, before it
// returns. Its log is the Pebble store behind an ackLog, with the store's
// leases.
func childMain(raw string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad configuration:", err)
		return 3
	}
	var outMu sync.Mutex
	mark := func(m string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintln(os.Stdout, m)
	}
	if cfg.Postgres != "" {
		return pgWorkerMain(cfg, mark)
	}
	if len(cfg.Rate) > 0 {
		var rc rateChild
		if err := json.Unmarshal(cfg.Rate, &rc); err != nil {
			fmt.Fprintln(os.Stderr, "child: bad rate configuration:", err)
			return 3
		}
		return rateWorkerMain(rc, mark)
	}
	if len(cfg.Queue) > 0 {
		var qc queueChild
		if err := json.Unmarshal(cfg.Queue, &qc); err != nil {
			fmt.Fprintln(os.Stderr, "child: bad queue configuration:", err)
			return 3
		}
		return queueWorkerMain(qc, mark)
	}
	if len(cfg.Version) > 0 {
		var vc versionChild
		if err := json.Unmarshal(cfg.Version, &vc); err != nil {
			fmt.Fprintln(os.Stderr, "child: bad version configuration:", err)
			return 3
		}
		return versionWorkerMain(vc, mark)
	}
	store, err := pebblestore.Open(cfg.Log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	acks, err := os.OpenFile(cfg.Acks, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	k, err := sdk.New(&leasedAckLog{ackLog: &ackLog{IndexedLog: store, side: acks, mark: mark}, Leaser: store}, ownerOption(cfg)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	if err := registerAgents(k, newAgentEnv(cfg, mark, false)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	ctx := context.Background()
	mark(markReady)
	if cfg.Serve > 0 {
		return serveMain(ctx, k, cfg, mark)
	}
	id, err := k.Start(ctx, cfg.Agent, coder.Input{Task: cfg.Task})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: start:", err)
		return 3
	}
	if _, err := k.Run(ctx, id); err != nil {
		fmt.Fprintln(os.Stderr, "child: run:", err)
		return 3
	}
	mark(markDone)
	return 0
}

// serveTimeout bounds how long a server child waits for its executions to
// end before it gives up with an error.
const serveTimeout = 2 * time.Minute

// serveKey and serveInput are the idempotency key and the input of a
// server child's i-th execution: every server of a trial starts the same.
func serveKey(i int) string { return fmt.Sprintf("serve-%02d", i) }

func serveInput(task string, i int) coder.Input {
	return coder.Input{Task: fmt.Sprintf("%s (#%02d)", task, i)}
}

// serveMain starts cfg.Serve executions of cfg.Agent with their keys (a
// second server finds those the first started, and starts the others), then
// runs Serve until List shows every one of them ended, and returns.
func serveMain(ctx context.Context, k *sdk.Kernel, cfg childConfig, mark func(string)) int {
	want := map[eventlog.ID]bool{}
	for i := range cfg.Serve {
		id, err := k.Start(ctx, cfg.Agent, serveInput(cfg.Task, i), sdk.WithKey(serveKey(i)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: start:", err)
			return 3
		}
		want[id] = true
	}
	mark(markStarted)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- k.Serve(sctx, sdk.Concurrency(cfg.Concurrency), sdk.PollEvery(50*time.Millisecond))
	}()
	timeout := time.After(serveTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	terminal := []eventlog.Status{eventlog.StatusCompleted, eventlog.StatusFailed, eventlog.StatusCancelled}
	for {
		ended, err := k.List(ctx, sdk.Filter{Agent: cfg.Agent, Status: terminal})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: list:", err)
			return 3
		}
		n := 0
		for _, info := range ended {
			if want[info.ID] {
				n++
			}
		}
		if n == len(want) {
			break
		}
		select {
		case err := <-served:
			fmt.Fprintf(os.Stderr, "child: Serve returned with %d of %d executions ended: %v\n", n, len(want), err)
			return 3
		case <-timeout:
			fmt.Fprintf(os.Stderr, "child: %d of %d executions ended after %v\n", n, len(want), serveTimeout)
			return 3
		case <-tick.C:
		}
	}
	stop()
	if err := <-served; err != nil {
		fmt.Fprintln(os.Stderr, "child: Serve:", err)
		return 3
	}
	mark(markDone)
	return 0
}

// ackLog records, in an append-only side file fsynced before the caller
// sees the outcome, every write the log acknowledged: one line per call,
//
//	<C|A|U> <execution> <seq>:<kind>:<fingerprint> …
//
// C for Create, A for a synced Append, U for AppendUnsynced. The fingerprint
// is a hash of the event's record, so the parent can check that the very
// event is stored.
//
// A Create with an idempotency key may return an execution created earlier
// (by a process since killed): what is recorded then is the stored
// execution.created, after checking that it is of the same agent, key and
// input.
type ackLog struct {
	eventlog.IndexedLog
	side *os.File
	mark func(string)
	mu   sync.Mutex
}

// leasedAckLog is an ackLog that keeps the store's leases, so that the
// child's kernel owns what it runs through the store, as a real one does.
type leasedAckLog struct {
	*ackLog
	eventlog.Leaser
}

func (a *ackLog) Create(ctx context.Context, created *eventlog.ExecutionCreated, at time.Time, opts ...eventlog.CreateOption) (eventlog.ID, error) {
	id, err := a.IndexedLog.Create(ctx, created, at, opts...)
	if err != nil {
		return id, err
	}
	ev := eventlog.Event{Seq: 1, Time: at, Data: created}
	if created.Key != "" {
		if ev, err = a.firstEvent(ctx, id); err != nil {
			return id, err
		}
		got, ok := ev.Data.(*eventlog.ExecutionCreated)
		if !ok || got.Agent != created.Agent || got.Key != created.Key || !bytes.Equal(got.Input, created.Input) {
			return id, fmt.Errorf("keyed create of %q returned %s, whose first event is %+v", created.Key, id, ev.Data)
		}
	}
	return id, a.record('C', id, []eventlog.Event{ev})
}

// firstEvent reads event 1 of id.
func (a *ackLog) firstEvent(ctx context.Context, id eventlog.ID) (eventlog.Event, error) {
	for ev, err := range a.IndexedLog.Events(ctx, id, 1) {
		return ev, err
	}
	return eventlog.Event{}, fmt.Errorf("execution %s has no events", id)
}

func (a *ackLog) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	n, err := a.IndexedLog.Append(ctx, id, head, evs...)
	if err == nil {
		err = a.record('A', id, evs)
	}
	return n, err
}

func (a *ackLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	n, err := a.IndexedLog.AppendUnsynced(ctx, id, head, evs...)
	if err == nil {
		err = a.record('U', id, evs)
	}
	return n, err
}

func (a *ackLog) record(op byte, id eventlog.ID, evs []eventlog.Event) error {
	var b strings.Builder
	b.WriteByte(op)
	b.WriteByte(' ')
	b.WriteString(id.String())
	for _, ev := range evs {
		fp, err := fingerprint(ev)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, " %d:%s:%s", ev.Seq, ev.Kind(), fp)
	}
	b.WriteByte('\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.side.WriteString(b.String()); err != nil {
		return err
	}
	if err := a.side.Sync(); err != nil {
		return err
	}
	a.mark(markAck)
	return nil
}

// fingerprint identifies an event by its stored record: seq, time and
// payload.
func fingerprint(ev eventlog.Event) (string, error) {
	rec, err := eventlog.AppendRecord(nil, eventlog.ID{}, ev)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(binaryAppendSeq(rec, ev.Seq))
	return hex.EncodeToString(sum[:8]), nil
}

func binaryAppendSeq(b []byte, seq uint64) []byte {
	return strconv.AppendUint(append(b, '@'), seq, 10)
}

// ackedEvent is one event of an acknowledged write.
type ackedEvent struct {
	seq  uint64
	kind string
	fp   string
}

// acked is one line of the acks file.
type acked struct {
	op     byte
	id     eventlog.ID
	events []ackedEvent
}

// readAcks parses the acks file. A last line without its newline was cut by
// the kill and is ignored: its write had not been recorded.
func readAcks(path string) ([]acked, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
		data = data[:i+1]
	}
	var out []acked
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 3 || len(f[0]) != 1 {
			return nil, fmt.Errorf("acks: bad line %q", line)
		}
		id, err := eventlog.ParseID(f[1])
		if err != nil {
			return nil, fmt.Errorf("acks: %w", err)
		}
		a := acked{op: f[0][0], id: id}
		for _, e := range f[2:] {
			parts := strings.Split(e, ":")
			if len(parts) != 3 {
				return nil, fmt.Errorf("acks: bad event %q", e)
			}
			seq, err := strconv.ParseUint(parts[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("acks: bad seq %q", e)
			}
			a.events = append(a.events, ackedEvent{seq: seq, kind: parts[1], fp: parts[2]})
		}
		out = append(out, a)
	}
	return out, nil
}

// agentEnv is what the agents need: the same in the child and the parent.
type agentEnv struct {
	store    dirfs.Config
	model    coder.Model
	effects  string        // the at-most-once effects file
	mark     func(string)  // progress markers; a no-op in the parent
	pauseAt  int           // freeze inside this capture (childConfig.PauseInCapture)
	captures atomic.Int64  // captures so far, over every dispatch
	pauseFx  int           // freeze inside this at-most-once body (childConfig.PauseInEffect)
	stallFx  int           // stall inside this at-most-once body (childConfig.StallInEffect) …
	stallFor time.Duration // … for this long
	bodies   atomic.Int64  // at-most-once bodies begun so far
	every    int           // the workspace's EverySteps (childConfig.EverySteps; 0: the coder's default)
}

// newAgentEnv returns the agents' environment for cfg. The child's dirfs
// store syncs; the parent's, which is never killed, need not (noSync).
func newAgentEnv(cfg childConfig, mark func(string), noSync bool) *agentEnv {
	if mark == nil {
		mark = func(string) {}
	}
	return &agentEnv{
		store:    dirfs.Config{Store: cfg.Store, Template: cfg.Template, NoSync: noSync, CoverageReuse: cfg.CoverageReuse},
		model:    coder.Model{Name: coder.ScriptedName, BaseURL: cfg.ModelURL, APIKey: "reliability"},
		effects:  cfg.Effects,
		mark:     mark,
		pauseAt:  cfg.PauseInCapture,
		pauseFx:  cfg.PauseInEffect,
		stallFx:  cfg.StallInEffect,
		stallFor: cfg.StallFor,
		every:    cfg.EverySteps,
	}
}

// markedDriver is the dirfs driver with markers around every capture, so
// that the parent can aim a kill inside one. It has the DriverID and
// Configuration of dirfs, so the parent may use a plain dirfs driver.
type markedDriver struct {
	*dirfs.Driver
	env *agentEnv
}

var _ driver.Driver[*dirfs.Workspace, dirfs.Binding] = (*markedDriver)(nil)

func (m *markedDriver) Checkpoint(ctx context.Context, w *dirfs.Workspace) (string, error) {
	n := m.env.captures.Add(1)
	m.env.mark(markCaptureBegin)
	ref, err := m.Driver.Checkpoint(&probeContext{Context: ctx, env: m.env, pause: int(n) == m.env.pauseAt}, w)
	m.env.mark(markCaptureEnd)
	return ref, err
}

// probeContext reports dirfs's context checks in the middle of a capture
// (dirfs looks at the context every 256 entries of the walk: after some
// blobs are stored, before the manifest) and, when pause is set, freezes
// the child at the first one until the parent kills it.
type probeContext struct {
	context.Context
	env   *agentEnv
	pause bool
}

func (c *probeContext) Err() error {
	c.env.mark(markCaptureCtx)
	if c.pause {
		c.env.mark(markCapturePaused)
		for {
			time.Sleep(time.Hour)
		}
	}
	return c.Context.Err()
}

func (e *agentEnv) newDriver() driver.Driver[*dirfs.Workspace, dirfs.Binding] {
	return &markedDriver{Driver: dirfs.New(e.store), env: e}
}

// publisherOutput is the publisher agent's output: the coder's answer and
// the outcome of each at-most-once publish call.
type publisherOutput struct {
	Answer    string   `json:"answer"`
	Published []string `json:"published"`
}

// indeterminate is the publish outcome of an at-most-once call whose
// earlier attempt died (sdk.ErrIndeterminate).
const indeterminate = "indeterminate"

// publishArgs are the publish tool's arguments.
type publishArgs struct {
	Note string `json:"note"`
}

// callerOutput is the caller agent's output: its child's and the outcome
// of its own at-most-once publish call after the child.
type callerOutput struct {
	Child     publisherOutput `json:"child"`
	Published string          `json:"published"`
}

// registerAgents registers "coder" (the example agent), "publisher" (the
// coder between two at-most-once publish calls, whose bodies append one
// line per effect to the effects file and fsync it before returning; the
// notes name the task, so that outputs differ by input) and "caller" (a
// publisher run as its child execution with Agent.Call, then a publish of
// its own).
func registerAgents(k *sdk.Kernel, e *agentEnv) error {
	var ropts []sdk.ResourceOption
	if e.every > 0 {
		ropts = append(ropts, sdk.EverySteps(e.every))
	}
	inner := coder.Handler(e.newDriver, e.model, ropts...)
	if _, err := sdk.Register(k, "coder", inner); err != nil {
		return err
	}
	publish := sdk.DefineTool("publish", func(ctx context.Context, a publishArgs) (string, error) {
		e.mark(markEffectBegin)
		key := sdk.IdempotencyKey(ctx)
		switch n := e.bodies.Add(1); int(n) {
		case e.pauseFx:
			e.mark(markEffectPaused)
			for {
				time.Sleep(time.Hour)
			}
		case e.stallFx:
			e.mark(markEffectStalled + " " + key)
			time.Sleep(e.stallFor)
		}
		if err := appendLine(e.effects, key+" "+a.Note); err != nil {
			return "", err
		}
		e.mark(markEffectEnd)
		return key, nil
	}, sdk.AtMostOnce())
	call := func(ctx context.Context, note string) (string, error) {
		_, err := publish.Call(ctx, publishArgs{Note: note})
		switch {
		case err == nil:
			return "published " + note, nil
		case errors.Is(err, sdk.ErrIndeterminate):
			return indeterminate, nil
		}
		return "", err
	}
	publisher, err := sdk.Register(k, "publisher", func(ctx context.Context, in coder.Input) (publisherOutput, error) {
		var out publisherOutput
		p, err := call(ctx, "before: "+in.Task)
		if err != nil {
			return out, err
		}
		out.Published = append(out.Published, p)
		res, err := inner(ctx, in)
		if err != nil {
			return out, err
		}
		out.Answer = res.Answer
		if p, err = call(ctx, "after: "+in.Task); err != nil {
			return out, err
		}
		out.Published = append(out.Published, p)
		return out, nil
	})
	if err != nil {
		return err
	}
	_, err = sdk.Register(k, "caller", func(ctx context.Context, in coder.Input) (callerOutput, error) {
		var out callerOutput
		child, err := publisher.Call(ctx, in)
		if err != nil {
			return out, err
		}
		out.Child = child
		out.Published, err = call(ctx, "caller: "+in.Task)
		return out, err
	})
	return err
}

// appendLine appends line to the file at path and fsyncs it.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// marker is a progress marker as the parent read it.
type marker struct {
	name string
	at   time.Duration // since the child started
}

// killPlan says when the parent kills the child: delay after the nth
// occurrence of the marker trigger. A nil plan never kills.
type killPlan struct {
	trigger string
	nth     int
	delay   time.Duration
	pause   int // childConfig.PauseInCapture
	pauseFx int // childConfig.PauseInEffect
}

func (p *killPlan) String() string {
	switch {
	case p == nil:
		return "no kill"
	case p.pause > 0:
		return fmt.Sprintf("inside-capture#%d", p.pause)
	case p.pauseFx > 0:
		return fmt.Sprintf("inside-effect#%d", p.pauseFx)
	}
	return fmt.Sprintf("%s#%d+%v", p.trigger, p.nth, p.delay.Round(time.Microsecond))
}

// childRun is what became of one child.
type childRun struct {
	killed  bool
	markers []marker
	stderr  string
}

// count returns how many markers named name the child wrote.
func (r childRun) count(name string) int {
	n := 0
	for _, m := range r.markers {
		if m.name == name {
			n++
		}
	}
	return n
}

// last returns the name of the child's last marker.
func (r childRun) last() string {
	if len(r.markers) == 0 {
		return ""
	}
	return r.markers[len(r.markers)-1].name
}

// spawn runs a child with cfg and kills it by plan. It returns when the
// child has exited.
func spawn(cfg childConfig, plan *killPlan) (childRun, error) {
	if plan != nil {
		cfg.PauseInCapture = plan.pause
		cfg.PauseInEffect = plan.pauseFx
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return childRun{}, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return childRun{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return childRun{}, err
	}
	var run childRun
	var timer *time.Timer
	seen := map[string]int{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		name := sc.Text()
		run.markers = append(run.markers, marker{name: name, at: time.Since(start)})
		seen[name]++
		if plan != nil && timer == nil && name == plan.trigger && seen[name] == plan.nth {
			timer = time.AfterFunc(plan.delay, func() { _ = cmd.Process.Kill() })
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	run.stderr = stderr.String()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		run.killed = true
		return run, nil
	}
	if werr != nil {
		return run, fmt.Errorf("child: %v\n%s", werr, run.stderr)
	}
	return run, nil
}

// ownerOption is sdk.WithOwner(cfg.Owner) when cfg names an owner, and
// sdk.Durability(sdk.SyncAtEffects) when cfg asks for it.
func ownerOption(cfg childConfig) []sdk.Option {
	var opts []sdk.Option
	if cfg.Owner != "" {
		opts = append(opts, sdk.WithOwner(cfg.Owner))
	}
	if cfg.SyncAtEffects {
		opts = append(opts, sdk.Durability(sdk.SyncAtEffects))
	}
	return opts
}
