package proptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"pgregory.net/rapid"
)

// This file generates histories a real kernel could write (DESIGN §4, §5)
// and writes them through a real Pebble store. A World is a forest of
// executions; its actions (Actions) are rapid state-machine actions that
// each do one thing a kernel does: dispatch, bind a resource, start or end a
// step, crash, resolve an orphan, deny a call, complete, fail, fork.
//
// The generator keeps the bookkeeping a kernel keeps (kernelState, updated
// one event at a time) to know what it may write next: which steps are in
// flight, each resource's generation and count. The reference model in
// model.go recomputes all of it from scratch; the properties compare them.

// Keys are the resource keys the generator binds.
var Keys = []string{"a", "b", "c"}

// Limits of one generated world.
const (
	maxExecutions = 8  // roots and forks
	maxEvents     = 90 // per lineage
	maxLiveLLM    = 2  // LLM calls in flight at once in one dispatch
)

// Forker creates a fork of (parent, at) in log with edit: the hook through
// which a test plugs in fork.Create. Nil makes the World write fork.created
// itself with the model's selections and the edit.
type Forker func(ctx context.Context, log eventlog.IndexedLog, parent eventlog.ID, at uint64, edit ForkEdit) (eventlog.ID, error)

// ForkEdit is how a generated fork is edited (DESIGN §12): a new input
// (nil for none), and results it replays instead of the recorded ones.
type ForkEdit struct {
	Input     []byte
	Overrides []eventlog.StepOverride
}

// World is a generated forest of executions written through one in-memory
// Pebble store, and everything the model needs to judge it.
type World struct {
	Store    *pebblestore.Store
	Execs    []*Exec
	Contents map[string][]string // checkpoint ref → the state it captured

	// Fork, if set, creates forks (see Forker).
	Fork Forker
	// OnFork, if set, is called after every fork with the parent, the fork
	// point and the fork: a test compares what Fork wrote to the model there.
	OnFork func(t *rapid.T, parent *Exec, at uint64, fork *Exec)

	ctx                 context.Context
	steps, refs, change int
	clock               time.Time
}

// Exec is one generated execution.
type Exec struct {
	ID         eventlog.ID
	Parent     *Exec  // nil for a root
	At         uint64 // fork point; 0 for a root
	ParentHead uint64 // the parent's head when the fork was made; 0 for a root
	Edit       ForkEdit
	Lineage    Lineage

	k kernelState
}

// status is where an execution's dispatch is.
type status int

const (
	idle    status = iota // no dispatch running: fresh fork, or crashed
	running               // a dispatch is executing the handler
	done                  // completed or failed
)

// kernelState is what a kernel knows of one execution while it writes it.
// It is updated by apply for every event of the lineage, plus what is not in
// the log (the running dispatch, the real resources).
type kernelState struct {
	res        map[string]*kres
	steps      map[string]*kstep
	dispatches uint64
	status     status

	// Not derived from events:
	obtained map[string]bool     // keys obtained with Resource in this dispatch
	live     []string            // steps whose bodies are running in this dispatch
	real     map[string][]string // the real state of the execution's own resources
	pending  []Change            // changes made since the last event (orphans of a crash)
	sleeping []string            // timers started and not fired
	parked   bool                // the newest dispatch event is dispatch.parked

	forkAt   uint64 // the newest fork.created's At; 0 for a root
	newInput bool   // some fork.created of the lineage gave a new input
	diverged bool   // a fork.diverged follows the newest fork.created
}

// kres is a kernel's view of one bound resource.
type kres struct {
	every         int
	onCompletion  bool
	coverageReuse bool
	own           bool // this execution has its own resource.bound for it
	gen           uint64
	inflight      map[string]bool
	covered       bool // a checkpoint of gen is known
	count         int
	sel           eventlog.ForkSelection // what a fork restores it from
}

// kstep is a kernel's view of one step.
type kstep struct {
	started   *eventlog.StepStarted
	landed    bool     // its attempt reached a terminal event
	final     bool     // succeeded or failed: the recorded outcome replays
	cancelled uint64   // the dispatch in which it was cancelled; 0 if it was not
	retrying  bool     // its attempt failed with a RetryAt: it runs again
	abandoned bool     // a completing dispatch abandoned it (DESIGN §15)
	plan      []Change // the changes its running body makes, if it gets to them
}

func newKernelState() kernelState {
	return kernelState{
		res:      map[string]*kres{},
		steps:    map[string]*kstep{},
		obtained: map[string]bool{},
		real:     map[string][]string{},
	}
}

// apply folds one event of the lineage into the bookkeeping.
func (k *kernelState) apply(ev eventlog.Event) {
	switch p := ev.Data.(type) {
	case *eventlog.DispatchStarted:
		k.dispatches, k.parked = p.Dispatch, false
	case *eventlog.StepStarted:
		k.steps[p.StepID] = &kstep{started: p}
		for key, r := range k.res {
			if advances(p, key, r.coverageReuse) {
				r.gen++
				r.inflight[p.StepID] = true
				r.covered = false
			}
		}
	case *eventlog.StepSucceeded:
		k.land(p.StepID, true)
	case *eventlog.StepFailed:
		if p.RetryAt.IsZero() {
			k.land(p.StepID, true)
			break
		}
		k.land(p.StepID, false)
		if st := k.steps[p.StepID]; st != nil {
			st.cancelled, st.retrying = 0, true
		}
	case *eventlog.StepCancelled:
		k.land(p.StepID, false)
	case *eventlog.StepAbandoned:
		k.land(p.StepID, false)
		if st := k.steps[p.StepID]; st != nil {
			st.cancelled, st.retrying, st.abandoned = 0, false, true
		}
	case *eventlog.TimerStarted:
		k.sleeping = append(k.sleeping, p.TimerID)
	case *eventlog.TimerFired:
		k.sleeping = slices.DeleteFunc(k.sleeping, func(id string) bool { return id == p.TimerID })
	case *eventlog.DispatchParked:
		k.parked = true
	case *eventlog.ResourceBound:
		r := k.res[p.Key]
		var gen uint64
		if r != nil {
			gen = r.gen
		}
		k.res[p.Key] = &kres{
			every: p.EverySteps, onCompletion: p.OnCompletion, coverageReuse: p.CoverageReuse,
			own: true, gen: gen + 1, inflight: map[string]bool{}, covered: p.From != "",
		}
	case *eventlog.ResourceCaptured:
		r := k.res[p.Key]
		if p.Generation == r.gen {
			r.covered = true
		}
		r.count = 0
	case *eventlog.ExecutionCompleted, *eventlog.ExecutionFailed, *eventlog.ExecutionCancelled:
		k.status = done
	case *eventlog.ForkCreated:
		for _, s := range p.Selections {
			// The books track physical coverage (what decides captures): a
			// selection reported uncovered only because of a fork.diverged
			// still restores exactly the checkpoint of the current
			// generation the prefix holds, so the prefix's books stand.
			r := k.res[s.Key]
			r.own, r.covered, r.sel = false, s.Covered || r.covered, s
		}
		k.status, k.parked = idle, false
		k.forkAt, k.newInput, k.diverged = p.At, k.newInput || len(p.Input) > 0, false
	case *eventlog.ForkDiverged:
		k.diverged = true
	}
}

func (k *kernelState) land(id string, final bool) {
	st := k.steps[id]
	if st == nil {
		return
	}
	if final {
		st.final = true
	} else {
		st.cancelled = k.dispatches
	}
	if st.started.StepKind != eventlog.StepLLM && !st.landed { // an attempt counts at its first terminal event (see CountedFor)
		for _, key := range st.started.Resources {
			if r := k.res[key]; r != nil {
				r.count++
			}
		}
	}
	st.landed = true
	for _, r := range k.res {
		delete(r.inflight, id)
	}
	k.live = slices.DeleteFunc(k.live, func(s string) bool { return s == id })
}

// liveTool reports whether a tool or local step body is running.
func (k *kernelState) liveTool() bool {
	for _, id := range k.live {
		if k.steps[id].started.StepKind != eventlog.StepLLM {
			return true
		}
	}
	return false
}

func (k *kernelState) liveLLM() int {
	n := 0
	for _, id := range k.live {
		if k.steps[id].started.StepKind == eventlog.StepLLM {
			n++
		}
	}
	return n
}

// orphans returns, sorted, the started steps that neither succeeded nor
// failed and whose body is not running in this dispatch (DESIGN §4): those a
// dead dispatch left, and those cancelled in an earlier dispatch.
func (k *kernelState) orphans() []string {
	var out []string
	for id, st := range k.steps {
		if st.final || slices.Contains(k.live, id) || (st.landed && st.cancelled == k.dispatches) {
			continue
		}
		if !st.landed || st.cancelled != 0 || st.retrying || st.abandoned {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// NewWorld opens an in-memory store and starts one root execution.
func NewWorld(t *rapid.T) *World {
	st, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	w := &World{
		Store:    st,
		Contents: map[string][]string{},
		ctx:      context.Background(),
		clock:    time.Unix(1_700_000_000, 0).UTC(),
	}
	w.startRoot(t)
	return w
}

// Close closes the store.
func (w *World) Close() error { return w.Store.Close() }

func (w *World) now() time.Time {
	w.clock = w.clock.Add(time.Millisecond)
	return w.clock
}

// Actions returns the state-machine actions that grow the world, for
// (*rapid.T).Repeat. Each picks an execution it applies to and skips when
// none does.
func (w *World) Actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"root":     w.actRoot,
		"dispatch": w.actDispatch,
		"bind":     w.actBind,
		"call":     w.actCall,
		"start":    w.actStart,
		"llm":      w.actLLM,
		"finish":   w.actFinish,
		"crash":    w.actCrash,
		"resolve":  w.actResolve,
		"deny":     w.actDeny,
		"complete": w.actComplete,
		"fail":     w.actFail,
		"fork":     w.actFork,
		"diverge":  w.actDiverge,
		"sleep":    w.actSleep,
		"cancel":   w.actCancel,
		"approval": w.actApproval,
		"recv":     w.actRecv,
		"publish":  w.actPublish,
	}
}

// pick draws one of the executions for which ok holds, or returns nil when
// there is none: the action then does nothing, like a call that replays its
// recorded outcome. (Skipping instead would make rapid give up on a world
// whose executions have all finished.)
func (w *World) pick(t *rapid.T, label string, ok func(*Exec) bool) *Exec {
	var cands []*Exec
	for _, e := range w.Execs {
		if ok(e) {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	e := cands[rapid.IntRange(0, len(cands)-1).Draw(t, label)]
	t.Logf("%s: %v", label, e)
	return e
}

// isRunning reports whether e has a running dispatch and room for events.
func isRunning(e *Exec) bool { return e.k.status == running && len(e.Lineage.Events) < maxEvents }

// String names an execution in rapid's output.
func (e *Exec) String() string {
	if e.Parent == nil {
		return fmt.Sprintf("root %s (%d events)", e.ID, len(e.Lineage.Events))
	}
	return fmt.Sprintf("fork %s of %s at %d (%d events)", e.ID, e.Parent.ID, e.At, len(e.Lineage.Events))
}

// write appends events to e in one Append (DESIGN §5: a step's outcome and
// its captures are one append) and records them in e's lineage; pending
// changes of e land on the first.
func (w *World) write(t *rapid.T, e *Exec, events ...eventlog.Event) {
	head := uint64(len(e.Lineage.Events))
	for i := range events {
		events[i].Seq = head + uint64(i) + 1
		events[i].Time = w.now()
	}
	got, err := w.Store.Append(w.ctx, e.ID, head, events...)
	if err != nil {
		t.Fatalf("append to %v: %v", e, err)
	}
	if got != head+uint64(len(events)) {
		t.Fatalf("append to %v: head %d, want %d", e, got, head+uint64(len(events)))
	}
	for i, ev := range events {
		var eff []Change
		if i == 0 {
			eff, e.k.pending = e.k.pending, nil
		}
		e.Lineage.Events = append(e.Lineage.Events, ev)
		e.Lineage.Effects = append(e.Lineage.Effects, eff)
	}
}

// stage applies ev to e's bookkeeping and returns it, so that the next
// event of the same append can be computed from the state after it.
func stage(e *Exec, data eventlog.Payload) eventlog.Event {
	ev := eventlog.Event{Data: data}
	e.k.apply(ev)
	return ev
}

func (w *World) startRoot(t *rapid.T) {
	at := w.now()
	id, err := w.Store.Create(w.ctx, &eventlog.ExecutionCreated{Agent: "agent", Input: []byte("in")}, at)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	e := &Exec{ID: id, k: newKernelState()}
	e.Lineage.ID = id
	e.Lineage.Events = []eventlog.Event{{Seq: 1, Time: at, Data: &eventlog.ExecutionCreated{Agent: "agent", Input: []byte("in")}}}
	e.Lineage.Effects = [][]Change{nil}
	w.Execs = append(w.Execs, e)
	w.dispatch(t, e)
}

func (w *World) dispatch(t *rapid.T, e *Exec) {
	e.k.status = running
	e.k.obtained = map[string]bool{}
	e.k.live = nil
	w.write(t, e, stage(e, &eventlog.DispatchStarted{Dispatch: e.k.dispatches + 1}))
	// A dispatch that died or parked mid-sleep sleeps the rest first
	// (DESIGN §10); timers of a fork's prefix fire in the fork.
	for _, id := range slices.Clone(e.k.sleeping) {
		w.write(t, e, stage(e, &eventlog.TimerFired{TimerID: id}))
	}
	// Handlers mostly ask for their resources first thing, and a handler
	// that runs again from the top soon reaches the calls a crash orphaned.
	for _, key := range Keys {
		if rapid.Bool().Draw(t, "resource "+key+" first thing") {
			w.bind(t, e, key)
		}
	}
	for _, id := range e.k.orphans() {
		if w.orphanReady(e, id) && rapid.Bool().Draw(t, "reach orphan "+id) {
			w.resolve(t, e, id)
		}
	}
}

func (w *World) actRoot(t *rapid.T) {
	if len(w.Execs) >= maxExecutions {
		return
	}
	w.startRoot(t)
}

// actDispatch starts a dispatch of a crashed execution or of a fresh fork.
func (w *World) actDispatch(t *rapid.T) {
	e := w.pick(t, "dispatch of", func(e *Exec) bool { return e.k.status == idle && len(e.Lineage.Events) < maxEvents })
	if e == nil {
		return
	}
	w.dispatch(t, e)
}

func (w *World) newRef() string {
	w.refs++
	return "ck" + strconv.Itoa(w.refs)
}

func (w *World) newChange(key string) Change {
	w.change++
	return Change{Key: key, Value: key + strconv.Itoa(w.change)}
}

// capture stages a capture of key (or its failure, drawn) with the given
// reason; on success the ref's contents are the resource's real state now.
func (w *World) capture(t *rapid.T, e *Exec, key string, reason eventlog.CaptureReason) eventlog.Event {
	if rapid.IntRange(0, 7).Draw(t, "capture "+key+" fails") == 7 {
		return stage(e, &eventlog.ResourceCaptureFailed{Key: key, Reason: reason, Error: "driver: checkpoint failed"})
	}
	ref := w.newRef()
	w.Contents[ref] = slices.Clone(e.k.real[key])
	return stage(e, &eventlog.ResourceCaptured{Key: key, Ref: ref, Generation: e.k.res[key].gen, Reason: reason})
}

// actBind is a Resource(key) call of a running handler for a key it has
// not obtained yet in this dispatch.
func (w *World) actBind(t *rapid.T) {
	e := w.pick(t, "bind in", func(e *Exec) bool { return isRunning(e) && !e.k.liveTool() && len(e.k.obtained) < len(Keys) })
	if e == nil {
		return
	}
	var free []string
	for _, key := range Keys {
		if !e.k.obtained[key] {
			free = append(free, key)
		}
	}
	w.bind(t, e, rapid.SampledFrom(free).Draw(t, "key"))
}

// bind is the first Resource(key) of a dispatch: Open for an own binding
// (no event), otherwise create from the fork's selection or the initial
// environment, with a baseline for the latter (DESIGN §5 steps 2-4).
func (w *World) bind(t *rapid.T, e *Exec, key string) {
	e.k.obtained[key] = true
	r := e.k.res[key]
	if r != nil && r.own {
		return // Open(binding): nothing is appended
	}
	bound := &eventlog.ResourceBound{
		Key:           key,
		DriverID:      "proptest.mem.v1",
		Configuration: json.RawMessage(`{"key":"` + key + `"}`),
		Binding:       json.RawMessage(`{"id":"` + w.newRef() + `"}`),
	}
	if r != nil { // inherited from the parent: the recorded policy wins
		bound.From = r.sel.Ref
		bound.EverySteps, bound.OnCompletion, bound.CoverageReuse = r.every, r.onCompletion, r.coverageReuse
	} else {
		bound.EverySteps = rapid.IntRange(1, 3).Draw(t, "every steps")
		bound.OnCompletion = rapid.Bool().Draw(t, "on completion")
		bound.CoverageReuse = rapid.Bool().Draw(t, "coverage reuse")
	}
	e.k.real[key] = slices.Clone(w.Contents[bound.From])
	events := []eventlog.Event{stage(e, bound)}
	if bound.From == "" {
		baseline := w.capture(t, e, key, eventlog.CaptureBaseline)
		if rapid.Bool().Draw(t, "baseline in its own append") {
			w.write(t, e, events...)
			events = nil
		}
		events = append(events, baseline)
	}
	w.write(t, e, events...)
}

// startTool starts a live tool call or local step in e and returns its ID.
func (w *World) startTool(t *rapid.T, e *Exec) string {
	var affects []string
	for _, key := range Keys {
		if e.k.obtained[key] && rapid.Bool().Draw(t, "affects "+key) {
			affects = append(affects, key)
		}
	}
	w.steps++
	id := "s" + strconv.Itoa(w.steps)
	kind := rapid.SampledFrom([]eventlog.StepKind{eventlog.StepTool, eventlog.StepLocal, eventlog.StepChild}).Draw(t, "kind")
	idem := rapid.SampledFrom([]eventlog.Idempotency{eventlog.SafeToRetry, eventlog.AtMostOnce}).Draw(t, "idempotency")
	started := &eventlog.StepStarted{
		StepID: id, StepKind: kind, Target: "target" + strconv.Itoa(w.steps%4),
		Args: []byte(id), Resources: affects, Idempotency: idem, Attempt: 1,
	}
	w.write(t, e, stage(e, started))
	e.k.live = append(e.k.live, id)
	w.planChanges(t, e, id)
	return id
}

// planChanges decides what the running body of step id will change: each
// resource it affects, and (only for resources without CoverageReuse, whose
// changes need not go through declared calls) sometimes one it does not.
func (w *World) planChanges(t *rapid.T, e *Exec, id string) {
	st := e.k.steps[id]
	st.plan = nil
	for _, key := range Keys {
		if !e.k.obtained[key] {
			continue
		}
		if slices.Contains(st.started.Resources, key) {
			st.plan = append(st.plan, w.newChange(key))
		} else if !e.k.res[key].coverageReuse && rapid.IntRange(0, 4).Draw(t, "undeclared change of "+key) == 0 {
			st.plan = append(st.plan, w.newChange(key))
		}
	}
}

// runBody makes the planned changes the body got to (each drawn) to the
// real resources, as changes pending for the next event.
func (w *World) runBody(t *rapid.T, e *Exec, id string) {
	st := e.k.steps[id]
	for _, c := range st.plan {
		if rapid.IntRange(0, 3).Draw(t, "body made "+c.Value) > 0 {
			e.k.real[c.Key] = append(e.k.real[c.Key], c.Value)
			e.k.pending = append(e.k.pending, c)
		}
	}
	st.plan = nil
}

// land stages the terminal event of step id and, for a counted call, the
// due captures of the keys it affects that no other step is in flight for
// (DESIGN §5: committed with the outcome, a failure leaves it due).
func (w *World) land(t *rapid.T, e *Exec, terminal eventlog.Payload, id string) []eventlog.Event {
	st := e.k.steps[id]
	counted := !st.landed // an attempt counts at its first terminal event only
	events := []eventlog.Event{stage(e, terminal)}
	if st.started.StepKind == eventlog.StepLLM || !counted {
		return events
	}
	keys := slices.Clone(st.started.Resources)
	slices.Sort(keys)
	for _, key := range slices.Compact(keys) {
		r := e.k.res[key]
		if r.count >= r.every && len(r.inflight) == 0 {
			events = append(events, w.capture(t, e, key, eventlog.CaptureSteps))
		}
	}
	return events
}

// finish ends the running body of step id with a drawn outcome.
func (w *World) finish(t *rapid.T, e *Exec, id string) {
	w.runBody(t, e, id)
	var terminal eventlog.Payload
	switch rapid.IntRange(0, 4).Draw(t, "outcome") {
	case 0:
		terminal = &eventlog.StepFailed{StepID: id, Error: "body failed"}
	case 4:
		if e.k.steps[id].started.Idempotency == eventlog.AtMostOnce {
			// at_most_once is never retried (DESIGN §10).
			terminal = &eventlog.StepSucceeded{StepID: id, Result: []byte("ok " + id)}
			break
		}
		// A failed attempt that will be retried: the attempt ends (DESIGN
		// §8½), the step runs again when the handler reaches it.
		terminal = &eventlog.StepFailed{StepID: id, Error: "attempt failed", RetryAt: w.now().Add(time.Second)}
	case 1:
		terminal = &eventlog.StepCancelled{StepID: id}
	default:
		terminal = &eventlog.StepSucceeded{StepID: id, Result: []byte("ok " + id)}
	}
	if ok, isRecv := terminal.(*eventlog.StepSucceeded); isRecv && e.k.steps[id].started.StepKind == eventlog.StepRecv {
		// A recv returns a message received first (DESIGN §18): the fold
		// refuses a recv that succeeds with none waiting.
		msg := []byte(`"m-` + id + `"`)
		ok.Result = msg
		w.write(t, e, stage(e, &eventlog.MessageReceived{MessageID: "m-" + id + "-" + strconv.Itoa(len(e.Lineage.Events)), Topic: "chat", Value: msg, From: "user"}))
	}
	w.write(t, e, w.land(t, e, terminal, id)...)
}

// actCall is a whole live tool call or local step: start, body, outcome.
func (w *World) actCall(t *rapid.T) {
	e := w.pick(t, "call in", func(e *Exec) bool { return isRunning(e) && !e.k.liveTool() })
	if e == nil {
		return
	}
	w.finish(t, e, w.startTool(t, e))
}

// actStart starts a tool call or local step whose outcome comes later, so
// that crashes, forks and LLM calls can fall while it runs.
func (w *World) actStart(t *rapid.T) {
	e := w.pick(t, "start in", func(e *Exec) bool { return isRunning(e) && !e.k.liveTool() })
	if e == nil {
		return
	}
	w.startTool(t, e)
}

// actLLM starts an LLM call; LLM calls may run beside anything.
func (w *World) actLLM(t *rapid.T) {
	e := w.pick(t, "llm in", func(e *Exec) bool { return isRunning(e) && e.k.liveLLM() < maxLiveLLM })
	if e == nil {
		return
	}
	w.steps++
	id := "s" + strconv.Itoa(w.steps)
	w.write(t, e, stage(e, &eventlog.StepStarted{
		StepID: id, StepKind: eventlog.StepLLM, Target: "model", Args: []byte(id),
		Idempotency: eventlog.SafeToRetry, Attempt: 1,
	}))
	e.k.live = append(e.k.live, id)
}

// actFinish ends one running step.
func (w *World) actFinish(t *rapid.T) {
	e := w.pick(t, "finish in", func(e *Exec) bool { return isRunning(e) && len(e.k.live) > 0 })
	if e == nil {
		return
	}
	id := rapid.SampledFrom(slices.Clone(e.k.live)).Draw(t, "step")
	w.finish(t, e, id)
}

// actCrash kills the dispatch: running steps become orphans, their bodies
// having made some of their changes.
func (w *World) actCrash(t *rapid.T) {
	e := w.pick(t, "crash of", isRunning)
	if e == nil {
		return
	}
	for _, id := range e.k.live {
		w.runBody(t, e, id)
	}
	e.k.live = nil
	e.k.status = idle
}

// orphanReady reports whether the handler can reach orphan id now: a tool
// call or local step needs every resource it affects obtained in this
// dispatch and no other body running; LLM calls may run beside anything.
func (w *World) orphanReady(e *Exec, id string) bool {
	st := e.k.steps[id].started
	if st.StepKind == eventlog.StepLLM {
		return e.k.liveLLM() < maxLiveLLM
	}
	if e.k.liveTool() {
		return false
	}
	for _, key := range st.Resources {
		if !e.k.obtained[key] {
			return false // Affects names a key this dispatch has not obtained
		}
	}
	return true
}

// actResolve is the handler reaching an orphan again.
func (w *World) actResolve(t *rapid.T) {
	e := w.pick(t, "resolve in", func(e *Exec) bool {
		return isRunning(e) && slices.ContainsFunc(e.k.orphans(), func(id string) bool { return w.orphanReady(e, id) })
	})
	if e == nil {
		return
	}
	id := rapid.SampledFrom(slices.DeleteFunc(e.k.orphans(), func(id string) bool { return !w.orphanReady(e, id) })).Draw(t, "orphan")
	w.resolve(t, e, id)
}

// resolve is DESIGN §4 for an orphan: safe_to_retry runs it again
// (Attempt+1), at_most_once fails it as indeterminate without running it,
// which is a counted call unless the attempt was cancelled (and counted)
// before.
func (w *World) resolve(t *rapid.T, e *Exec, id string) {
	st := e.k.steps[id].started
	if st.Idempotency == eventlog.AtMostOnce {
		w.write(t, e, w.land(t, e, &eventlog.StepFailed{StepID: id, Error: "indeterminate", Indeterminate: true}, id)...)
		return
	}
	again := *st
	again.Attempt++
	w.write(t, e, stage(e, &again))
	e.k.live = append(e.k.live, id)
	if st.StepKind != eventlog.StepLLM && st.StepKind != eventlog.StepRecv { // a recv has no body to change anything
		w.planChanges(t, e, id)
	}
}

// actDeny is the gate refusing a call: step.denied, nothing runs.
func (w *World) actDeny(t *rapid.T) {
	e := w.pick(t, "deny in", isRunning)
	if e == nil {
		return
	}
	w.steps++
	id := "s" + strconv.Itoa(w.steps)
	kind := rapid.SampledFrom([]eventlog.StepKind{eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM}).Draw(t, "denied kind")
	code := rapid.SampledFrom([]eventlog.DenialCode{eventlog.DenyPolicy, eventlog.DenyRateLimited, eventlog.DenyBudget,
		eventlog.DenyApprovalExpired, eventlog.DenyApprovalRejected}).Draw(t, "denial code")
	w.write(t, e, stage(e, &eventlog.StepDenied{StepID: id, StepKind: kind, Target: "denied", Reason: "gate", RuleID: "r1", Code: code}))
}

// actRecv is sdk.Recv in a running handler with no body running (DESIGN
// §18, §21½.1): step.started{recv, WakeAt}, then a message.received and the
// recv's step.succeeded, or a timeout's step.failed, or the dispatch parks
// waiting for a message (the recv is then an orphan the next dispatch runs
// again). A recv has no body: it advances nothing and is never counted,
// which every fold check of the world then covers.
func (w *World) actRecv(t *rapid.T) {
	e := w.pick(t, "recv in", func(e *Exec) bool { return isRunning(e) && len(e.k.live) == 0 })
	if e == nil {
		return
	}
	w.steps++
	id := "s" + strconv.Itoa(w.steps)
	wake := w.now().Add(time.Minute)
	w.write(t, e, stage(e, &eventlog.StepStarted{StepID: id, StepKind: eventlog.StepRecv, Target: "chat",
		Args: []byte(id), Idempotency: eventlog.SafeToRetry, Attempt: 1, WakeAt: wake}))
	switch rapid.IntRange(0, 2).Draw(t, "recv outcome") {
	case 0:
		msg := []byte(`"m-` + id + `"`)
		w.write(t, e, stage(e, &eventlog.MessageReceived{MessageID: "m-" + id, Topic: "chat", Value: msg, From: "user"}))
		w.write(t, e, w.land(t, e, &eventlog.StepSucceeded{StepID: id, Result: msg}, id)...)
	case 1:
		w.write(t, e, w.land(t, e, &eventlog.StepFailed{StepID: id, Error: "timeout"}, id)...)
	default:
		w.write(t, e, stage(e, &eventlog.DispatchParked{WakeAt: wake, Reason: eventlog.ParkMessage}))
		e.k.status = idle
	}
}

// actPublish is sdk.SetEvent in a running handler: event.set, which has no
// body (DESIGN §8½).
func (w *World) actPublish(t *rapid.T) {
	e := w.pick(t, "publish in", isRunning)
	if e == nil {
		return
	}
	w.write(t, e, stage(e, &eventlog.EventSet{Key: "progress", Value: []byte(strconv.Itoa(len(e.Lineage.Events)))}))
}

// actComplete returns from the handler: completion captures of the
// uncovered resources with OnCompletion (skipped for one a step is still in
// flight for), then execution.completed, in one append. A fork completes
// only once it has made every resource it inherited.
func (w *World) actComplete(t *rapid.T) {
	e := w.pick(t, "complete", func(e *Exec) bool {
		if !isRunning(e) || len(e.k.live) > 0 {
			return false
		}
		for _, r := range e.k.res {
			if !r.own {
				return false
			}
		}
		return true
	})
	if e == nil {
		return
	}
	// Orphans of earlier dispatches the handler never reached again are
	// abandoned first (DESIGN §15): each lands as an ended attempt, with
	// the steps captures it makes due, so completion can capture.
	var events []eventlog.Event
	for _, id := range e.k.orphans() {
		if e.k.steps[id].landed {
			continue // its attempt ended already (cancelled, retrying, abandoned)
		}
		events = append(events, w.land(t, e, &eventlog.StepAbandoned{StepID: id}, id)...)
	}
	for _, key := range slices.Sorted(maps.Keys(e.k.res)) {
		r := e.k.res[key]
		if r.onCompletion && !r.covered && len(r.inflight) == 0 {
			events = append(events, w.capture(t, e, key, eventlog.CaptureCompletion))
		}
	}
	events = append(events, stage(e, &eventlog.ExecutionCompleted{Output: []byte("out")}))
	w.write(t, e, events...)
}

// actSleep is sdk.Sleep in a running handler: a short sleep fires in the
// same dispatch; a long one parks the dispatch (DESIGN §10), which ends
// like a crash without orphans; the next dispatch fires it.
func (w *World) actSleep(t *rapid.T) {
	e := w.pick(t, "sleep in", func(e *Exec) bool { return isRunning(e) && len(e.k.live) == 0 })
	if e == nil {
		return
	}
	w.steps++
	id := "t" + strconv.Itoa(w.steps)
	wake := w.now().Add(time.Minute)
	w.write(t, e, stage(e, &eventlog.TimerStarted{TimerID: id, WakeAt: wake}))
	if rapid.Bool().Draw(t, "park") {
		w.write(t, e, stage(e, &eventlog.DispatchParked{WakeAt: wake, Reason: eventlog.ParkTimer}))
		e.k.status = idle
		return
	}
	w.write(t, e, stage(e, &eventlog.TimerFired{TimerID: id}))
}

// actApproval is a call the gate asks a person about (DESIGN §12), in a
// running handler: approval.requested, then the decision — granted (the
// call's run, if any, is another action's), or rejected (the call ends
// step.denied) — or the dispatch parks waiting (dispatch.parked{approval})
// and the requester appends the decision itself, with no owner running.
// Approval events have no body: they advance nothing and are never
// counted (DESIGN §8½), which every fold check of the world then covers.
func (w *World) actApproval(t *rapid.T) {
	e := w.pick(t, "approval in", func(e *Exec) bool { return isRunning(e) && len(e.k.live) == 0 })
	if e == nil {
		return
	}
	w.steps++
	id := "s" + strconv.Itoa(w.steps)
	kind := rapid.SampledFrom([]eventlog.StepKind{eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM}).Draw(t, "approval kind")
	w.write(t, e, stage(e, &eventlog.ApprovalRequested{StepID: id, StepKind: kind, Target: "approved", Reason: "gate"}))
	switch rapid.SampledFrom([]string{"granted", "rejected", "park"}).Draw(t, "decision") {
	case "granted":
		w.write(t, e, stage(e, &eventlog.ApprovalGranted{StepID: id, By: "test"}))
	case "rejected":
		w.write(t, e, stage(e, &eventlog.ApprovalRejected{StepID: id, By: "test", Note: "no"}))
		w.write(t, e, stage(e, &eventlog.StepDenied{StepID: id, StepKind: kind, Target: "approved", Reason: "approval rejected: no"}))
	case "park":
		w.write(t, e, stage(e, &eventlog.DispatchParked{Reason: eventlog.ParkApproval}))
		e.k.status = idle
		w.write(t, e, stage(e, &eventlog.ApprovalGranted{StepID: id, By: "test"}))
	}
}

// actFail is the handler returning an error.
func (w *World) actFail(t *rapid.T) {
	e := w.pick(t, "fail", func(e *Exec) bool { return isRunning(e) && len(e.k.live) == 0 })
	if e == nil {
		return
	}
	w.write(t, e, stage(e, &eventlog.ExecutionFailed{Error: "handler failed", Code: eventlog.FailHandler}))
}

// actCancel is a durable cancel (DESIGN §9, §8½) of an execution that has
// not ended: its request lands in the lineage (execution.cancel_requested);
// the bodies running in its dispatch see their context cancelled and end
// step.cancelled, counted like any ended attempt, with the captures that
// makes due; and the execution ends execution.cancelled, with no completion
// capture. An idle execution (pending, parked, interrupted) is cancelled at
// once by the requester: its orphans stay in flight.
func (w *World) actCancel(t *rapid.T) {
	e := w.pick(t, "cancel", func(e *Exec) bool { return e.k.status != done && len(e.Lineage.Events) < maxEvents })
	if e == nil {
		return
	}
	w.write(t, e, stage(e, &eventlog.CancelRequested{Reason: "stop", By: "test"}))
	for _, id := range slices.Clone(e.k.live) {
		w.runBody(t, e, id)
		w.write(t, e, w.land(t, e, &eventlog.StepCancelled{StepID: id}, id)...)
	}
	w.write(t, e, stage(e, &eventlog.ExecutionCancelled{Reason: "stop"}))
}

// actFork forks any execution at any of its events, including a
// step.started and a point inside another fork's inherited prefix.
func (w *World) actFork(t *rapid.T) {
	if len(w.Execs) >= maxExecutions {
		return
	}
	parent := w.pick(t, "fork of", func(*Exec) bool { return true })
	if parent == nil {
		return
	}
	// A fork at a step.started (the step in flight, run again by the fork) is
	// the case §5 singles out: aim at one some of the time.
	var starts []uint64
	for _, ev := range parent.Lineage.Events {
		if ev.Kind() == eventlog.KindStepStarted {
			starts = append(starts, ev.Seq)
		}
	}
	var at uint64
	if len(starts) > 0 && rapid.IntRange(0, 3).Draw(t, "fork at a step.started") == 3 {
		at = rapid.SampledFrom(starts).Draw(t, "fork at")
	} else {
		at = rapid.Uint64Range(1, uint64(len(parent.Lineage.Events))).Draw(t, "fork at")
	}
	w.ForkEditAt(t, parent, at, w.drawEdit(t, parent, at))
}

// drawEdit draws how a fork of parent at at is edited (DESIGN §12):
// sometimes a new input, and, when at is the terminal event of a step
// (succeeded, or failed for good), sometimes an override of its result.
func (w *World) drawEdit(t *rapid.T, parent *Exec, at uint64) ForkEdit {
	var edit ForkEdit
	if rapid.IntRange(0, 3).Draw(t, "new input") == 0 {
		edit.Input = []byte(`"input ` + strconv.Itoa(len(w.Execs)) + `"`)
	}
	var ended string
	switch p := parent.Lineage.Events[at-1].Data.(type) {
	case *eventlog.StepSucceeded:
		ended = p.StepID
	case *eventlog.StepFailed:
		if p.RetryAt.IsZero() {
			ended = p.StepID
		}
	}
	if ended != "" && rapid.Bool().Draw(t, "override "+ended) {
		edit.Overrides = []eventlog.StepOverride{{StepID: ended, Result: []byte(`"edited"`)}}
	}
	return edit
}

// actDiverge is a fork with a new input making a live call while recorded
// steps of its prefix remain unconsumed: fork.diverged, once per fork,
// naming some of the prefix's steps (DESIGN §12). It advances nothing.
func (w *World) actDiverge(t *rapid.T) {
	prefixSteps := func(e *Exec) []string {
		var ids []string
		for _, ev := range e.Lineage.Events[:e.k.forkAt] {
			var id string
			switch p := ev.Data.(type) {
			case *eventlog.StepStarted:
				id = p.StepID
			case *eventlog.StepDenied:
				id = p.StepID
			}
			if id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	e := w.pick(t, "diverge in", func(e *Exec) bool {
		return isRunning(e) && e.k.newInput && !e.k.diverged && e.k.forkAt > 0 && len(prefixSteps(e)) > 0
	})
	if e == nil {
		return
	}
	var unconsumed []string
	for _, id := range prefixSteps(e) {
		if rapid.Bool().Draw(t, "unconsumed "+id) {
			unconsumed = append(unconsumed, id)
		}
	}
	if len(unconsumed) == 0 {
		unconsumed = prefixSteps(e)[:1]
	}
	w.write(t, e, stage(e, &eventlog.ForkDiverged{Unconsumed: unconsumed}))
}

// ForkAt forks parent at seq at without editing it; see ForkEditAt.
func (w *World) ForkAt(t *rapid.T, parent *Exec, at uint64) *Exec {
	return w.ForkEditAt(t, parent, at, ForkEdit{})
}

// ForkEditAt forks parent at seq at with edit, through w.Fork if set, else
// by writing the model's selections; the fork's bookkeeping is its parent's
// at at, then fork.created.
func (w *World) ForkEditAt(t *rapid.T, parent *Exec, at uint64, edit ForkEdit) *Exec {
	var id eventlog.ID
	var err error
	if w.Fork != nil {
		id, err = w.Fork(w.ctx, w.Store, parent.ID, at, edit)
	} else {
		pt := PointAt(parent.Lineage.Events, at)
		id, err = w.Store.Fork(w.ctx, parent.ID, at, &eventlog.ForkCreated{Selections: pt.Resources,
			Input: edit.Input, Overrides: edit.Overrides}, w.now())
	}
	if err != nil {
		t.Fatalf("fork %v at %d: %v", parent, at, err)
	}
	// Read back what the fork wrote: its fork.created is the only own event.
	var fc eventlog.Event
	for ev, err := range w.Store.Events(w.ctx, id, at+1) {
		if err != nil {
			t.Fatalf("read fork: %v", err)
		}
		fc = ev
	}
	if _, ok := fc.Data.(*eventlog.ForkCreated); !ok || fc.Seq != at+1 {
		t.Fatalf("fork %v at %d: event %d is %v, want fork.created", parent, at, fc.Seq, fc.Kind())
	}
	f := &Exec{ID: id, Parent: parent, At: at, ParentHead: uint64(len(parent.Lineage.Events)), Edit: edit, k: newKernelState()}
	f.Lineage.ID = id
	f.Lineage.Events = append(slices.Clone(parent.Lineage.Events[:at]), fc)
	f.Lineage.Effects = append(slices.Clone(parent.Lineage.Effects[:at]), nil)
	for _, ev := range f.Lineage.Events {
		f.k.apply(ev)
	}
	for _, s := range fc.Data.(*eventlog.ForkCreated).Selections {
		f.k.real[s.Key] = slices.Clone(w.Contents[s.Ref])
	}
	w.Execs = append(w.Execs, f)
	if w.OnFork != nil {
		w.OnFork(t, parent, at, f)
	}
	return f
}

// Encoded returns the encoded records of every event of e's lineage as the
// store holds them now.
func (w *World) Encoded(e *Exec) ([][]byte, error) { return w.encodedOf(e.ID, 1) }

// encodedOwn returns the encoded records of e's own events (after its fork
// point) as the store holds them now.
func (w *World) encodedOwn(e *Exec) ([][]byte, error) { return w.encodedOf(e.ID, e.At+1) }

// encodedOf returns the encoded records of execution id's lineage from seq
// from, all encoded as records of the zero ID (they are compared by
// content; the place a store binds a record to is the store's check).
func (w *World) encodedOf(id eventlog.ID, from uint64) ([][]byte, error) {
	var out [][]byte
	for ev, err := range w.Store.Events(w.ctx, id, from) {
		if err != nil {
			return nil, err
		}
		rec, err := eventlog.AppendRecord(nil, eventlog.ID{}, ev)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// CheckStored fails t unless the store holds exactly the lineage the world
// wrote for every execution.
func (w *World) CheckStored(t *rapid.T) {
	for _, e := range w.Execs {
		got, err := w.Encoded(e)
		if err != nil {
			t.Fatalf("read %v: %v", e, err)
		}
		if len(got) != len(e.Lineage.Events) {
			t.Fatalf("%v: store has %d events, world wrote %d", e, len(got), len(e.Lineage.Events))
		}
		for i, ev := range e.Lineage.Events {
			want, err := eventlog.AppendRecord(nil, eventlog.ID{}, ev)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(got[i], want) {
				t.Fatalf("%v: event %d differs from what was written", e, i+1)
			}
		}
	}
}
