package proptest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/eventtext"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// TB is what the kit needs of a test: *testing.T, *testing.B and *rapid.T
// (for generated inputs) all have it.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// NewKernel makes a kernel on log with opts (the kit passes sdk.Strict, or
// sdk.ReplayOnly) and registers the agents under test on it:
//
//	func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
//		k, err := sdk.New(log, opts...)
//		if err != nil {
//			return nil, err
//		}
//		_, err = sdk.Register(k, "greeter", greet)
//		return k, err
//	}
//
// CheckAgent calls it several times on the same log: the agent's drivers
// must outlive one kernel (a fork restores checkpoints its parent's kernel
// took).
type NewKernel func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error)

// Option configures CheckAgent.
type Option func(*config)

type config struct {
	differs  map[string]driver.Differ
	states   map[string]func(ctx context.Context, ref string) (string, error)
	every    int
	messages []sdk.Message
}

// WithDiffer compares the states of resource key with d (the resource's
// driver, when it implements driver.Differ).
func WithDiffer(key string, d driver.Differ) Option {
	return func(c *config) { c.differs[key] = d }
}

// WithState compares the states of resource key by what state returns for
// two checkpoint refs of it: equal strings are equal states. Use it for a
// driver that is not a driver.Differ.
func WithState(key string, state func(ctx context.Context, ref string) (string, error)) Option {
	return func(c *config) { c.states[key] = state }
}

// Every kills and forks at every n-th event only (1, the default: every
// event), to bound the cost of long runs. n < 1 counts as 1.
func Every(n int) Option {
	return func(c *config) { c.every = max(n, 1) }
}

// WithSent sends msgs (DESIGN §18), in order, to every run CheckAgent
// starts — the uninterrupted run and each run it kills — right after
// Start, for an agent that waits for them with sdk.Recv (a chat). A
// message without an ID gets "proptest-N", N its index. A fork owns only
// the messages its prefix received, so each fork is given the others with
// sdk.WithMessages (received at its fork.created): it then ends as its
// parent did, as the invariants ask.
func WithSent(msgs ...sdk.Message) Option {
	return func(c *config) {
		for _, m := range msgs {
			if m.ID == "" {
				m.ID = fmt.Sprintf("proptest-%d", len(c.messages))
			}
			c.messages = append(c.messages, m)
		}
	}
}

// send sends the configured messages to id through k.
func (c *checker) send(k *sdk.Kernel, id eventlog.ID) error {
	for _, m := range c.cfg.messages {
		if err := k.Send(c.ctx, id, m.Topic, m.Value, sdk.MessageID(m.ID)); err != nil {
			return fmt.Errorf("proptest: send %s to %s: %w", m.ID, id, err)
		}
	}
	return nil
}

// unreceived returns the configured messages that lineage evs does not
// hold: what a fork of it is given.
func (c *checker) unreceived(evs []eventlog.Event) []sdk.Message {
	got := map[string]bool{}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.MessageReceived:
			got[p.MessageID] = true
		case *eventlog.ForkCreated:
			for _, m := range p.Messages {
				got[m.MessageID] = true
			}
		}
	}
	var out []sdk.Message
	for _, m := range c.cfg.messages {
		if !got[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// CheckAgent checks DESIGN §8's invariants on a user's agent: it runs
// agent on input on an in-memory log, then kills that run at every event
// and resumes it, and forks it at every event and runs the forks, every
// kernel made by newKernel with sdk.Strict and one owner name,
// sdk.WithOwner("checkagent") (newKernel must pass its options to sdk.New),
// so that a resumed run reopens the non-portable resources (dirfs,
// sqlitedb) the killed one bound, as a restarted process does. It fails t
// with the first broken invariant, its seq and a window of the events
// around it:
//
//   - §8.4: every lineage written — the run, each resumed run, each fork —
//     captures exactly when the checkpoint policy says;
//   - §8.3: the coverage the kernel reports agrees with proptest's naive
//     model ([PointAt]) at every event;
//   - §8.6: a run killed after any event and run again completes with the
//     uninterrupted run's output — the same execution, its ID and so its
//     idempotency keys (sdk.IdempotencyKey) the uninterrupted run's, each
//     trial on a clone of the log the execution was started in —, replaying what was recorded (Strict:
//     a handler that makes other calls than its history holds — it reads
//     the clock outside a step, or depends on a map's order — fails here,
//     with a diagnosis), and no at_most_once step starts twice;
//   - §8.2: every fork selects what the model selects, completes, and runs
//     no recorded effect of its prefix again;
//   - §8.1: a covered fork ends with the parent's output (a fork is
//     another execution: the keys of the steps it ran live are put back
//     to the parent's before comparing, so an output derived from a key
//     passes) and, for each
//     resource given WithDiffer or WithState, the parent's final state (a
//     step that changes a resource it does not declare in Affects fails
//     here, under a driver with CoverageReuse);
//   - §8.7: all this leaves the original run's events unchanged.
//
// The agent must complete, and be deterministic given its recorded
// calls: fake its model (an httptest server) and its outside world.
// Generated inputs: call CheckAgent inside rapid.Check with the *rapid.T.
func CheckAgent(t TB, newKernel NewKernel, agent string, input any, opts ...Option) {
	t.Helper()
	if err := checkAgent(context.Background(), newKernel, agent, input, opts...); err != nil {
		t.Fatalf("%v", err)
	}
}

// failure is the first broken invariant checkAgent found.
type failure struct {
	invariant string
	exec      eventlog.ID
	seq       uint64
	cause     string
	window    string
}

func (f *failure) Error() string {
	return fmt.Sprintf("proptest: %s\n  execution %s, seq %d: %s\n%s", f.invariant, f.exec, f.seq, f.cause, f.window)
}

const (
	invCompletes = "the agent completes"
	invCoverage  = "DESIGN §8.3: coverage agrees with the model"
	invKill      = "DESIGN §8.6: a run killed at any event and resumed ends in the same output"
	invOnce      = "DESIGN §8.6: an at_most_once body never runs twice"
	invSelect    = "DESIGN §8.2: a fork selects as §5 says and replays its prefix without running it"
	invRestore   = "DESIGN §8.1: a covered fork restores exactly the parent's state"
	invImmutable = "DESIGN §8.7: forking and resuming never change an existing event"
	invPolicy    = "DESIGN §8.4: captures happen exactly when the policy says"
)

// checkOwner is the owner name of every kernel CheckAgent makes: a run
// killed and resumed stands for one process restarted on its data, which
// reopens the resources it bound — dirfs workspaces, sqlitedb databases,
// which are not portable — rather than taking the run over from another
// owner (DESIGN §11, §15½.2).
const checkOwner = "checkagent"

// errKilled is what a killLog returns once its budget is spent.
var errKilled = errors.New("proptest: killed")

// killLog lets budget more events be appended, then fails every append, as
// a process killed before writing the next event. Once killed it refuses
// reads and creates as well: the process is gone, so nothing it ran — the
// killed dispatch, a child it ran in the background (sdk.Agent.Call) —
// waits for anything, and each ends at its next use of the log. Its
// leases are the store's (it is the kernel's eventlog.Leaser, and gives
// the store's inbox through Unwrap), counted, so that the kit waits until
// every dispatch of the killed kernel has released what it held before it
// resumes the run: a child left running by the killed kernel never holds
// its lease against the resumed one (which would wait for it, DESIGN §9,
// until ParkAfter), as the lease of a process killed for real expires.
type killLog struct {
	eventlog.IndexedLog
	leaser eventlog.Leaser
	budget atomic.Int64

	mu   sync.Mutex
	idle *sync.Cond // signalled when held drops to 0
	held int        // leases claimed and not released
}

// newKillLog returns a killLog on store that lets budget events be
// appended.
func newKillLog(store *pebblestore.Store, budget int64) *killLog {
	l := &killLog{IndexedLog: store, leaser: store}
	l.idle = sync.NewCond(&l.mu)
	l.budget.Store(budget)
	return l
}

// Unwrap gives the kernel the store's inbox (eventlog.As), as the process
// it stands for would have. Requests taken from the inbox (Take) pass
// straight to the store, not through the budget: CheckAgent's runs make
// none.
func (l *killLog) Unwrap() eventlog.Log { return l.IndexedLog }

// killed reports whether the budget is spent.
func (l *killLog) killed() bool { return l.budget.Load() < 0 }

// kill spends the budget: everything after fails.
func (l *killLog) kill() { l.budget.Store(-1 << 40) }

// drain waits until every lease claimed through l is released: the
// killed kernel's dispatches have all ended.
func (l *killLog) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.held > 0 {
		l.idle.Wait()
	}
}

func (l *killLog) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if l.budget.Add(-int64(len(evs))) < 0 {
		return 0, errKilled
	}
	return l.IndexedLog.Append(ctx, id, head, evs...)
}

func (l *killLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if l.budget.Add(-int64(len(evs))) < 0 {
		return 0, errKilled
	}
	return l.IndexedLog.AppendUnsynced(ctx, id, head, evs...)
}

func (l *killLog) Create(ctx context.Context, created *eventlog.ExecutionCreated, at time.Time, opts ...eventlog.CreateOption) (eventlog.ID, error) {
	if l.killed() {
		return eventlog.ID{}, errKilled
	}
	return l.IndexedLog.Create(ctx, created, at, opts...)
}

func (l *killLog) Info(ctx context.Context, id eventlog.ID) (eventlog.Info, error) {
	if l.killed() {
		return eventlog.Info{}, errKilled
	}
	return l.IndexedLog.Info(ctx, id)
}

func (l *killLog) Events(ctx context.Context, id eventlog.ID, from uint64) iter.Seq2[eventlog.Event, error] {
	if l.killed() {
		return func(yield func(eventlog.Event, error) bool) { yield(eventlog.Event{}, errKilled) }
	}
	return l.IndexedLog.Events(ctx, id, from)
}

// Claim claims id's lease in the store, unless l is killed.
func (l *killLog) Claim(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration) (eventlog.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.killed() {
		return eventlog.Lease{}, errKilled
	}
	lease, err := l.leaser.Claim(ctx, id, owner, ttl)
	if err == nil {
		l.held++
	}
	return lease, err
}

// Renew renews lease in the store.
func (l *killLog) Renew(ctx context.Context, lease eventlog.Lease, ttl time.Duration) (eventlog.Lease, error) {
	return l.leaser.Renew(ctx, lease, ttl)
}

// Release releases lease in the store, and counts it released whatever
// the store answers: the dispatch that held it has ended.
func (l *killLog) Release(ctx context.Context, lease eventlog.Lease) error {
	err := l.leaser.Release(ctx, lease)
	l.mu.Lock()
	l.held--
	if l.held <= 0 {
		l.idle.Broadcast()
	}
	l.mu.Unlock()
	return err
}

// Holder returns the store's holder of id's lease.
func (l *killLog) Holder(ctx context.Context, id eventlog.ID) (eventlog.Lease, bool, error) {
	return l.leaser.Holder(ctx, id)
}

// checker holds one CheckAgent run.
type checker struct {
	ctx       context.Context
	cfg       config
	start     *pebblestore.Store // the log holding only the started execution
	store     *pebblestore.Store // the uninterrupted run's log
	k         *sdk.Kernel
	newKernel NewKernel
	agent     string
	input     any
	id        eventlog.ID
	ref       []eventlog.Event
	output    []byte
}

func checkAgent(ctx context.Context, newKernel NewKernel, agent string, input any, opts ...Option) error {
	c := &checker{ctx: ctx, newKernel: newKernel, agent: agent, input: input, cfg: config{
		differs: map[string]driver.Differ{}, states: map[string]func(context.Context, string) (string, error){}, every: 1,
	}}
	for _, o := range opts {
		o(&c.cfg)
	}
	start, err := c.create()
	if err != nil {
		return err
	}
	defer start.Close()
	c.start = start
	store, err := start.Clone(ctx)
	if err != nil {
		return fmt.Errorf("proptest: %w", err)
	}
	defer store.Close()
	c.store = store
	if c.k, err = newKernel(store, sdk.Strict(), sdk.WithOwner(checkOwner)); err != nil {
		return fmt.Errorf("proptest: newKernel: %w", err)
	}
	defer c.k.Close()
	if err := c.send(c.k, c.id); err != nil {
		return err
	}
	res, err := c.k.Run(ctx, c.id)
	if c.ref, _ = c.lineage(c.id); err != nil {
		return c.fail(invCompletes, c.id, uint64(len(c.ref)), c.ref, err.Error())
	}
	c.output = res.Output
	if err := c.checkPolicy(c.id, c.ref, 0); err != nil {
		return err
	}
	for _, step := range []func() error{c.checkCoverage, c.checkKills, c.checkForks, c.checkImmutable} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// create starts the execution under check in a log of its own, which
// holds only its execution.created, and returns that log. The
// uninterrupted run and each kill trial run on a clone of it
// (pebblestore.Store.Clone): they are one execution — one ID, so the same
// idempotency keys (sdk.IdempotencyKey) — run apart, as a Temporal or DBOS
// user expects of a workflow resumed after a crash.
func (c *checker) create() (*pebblestore.Store, error) {
	store, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		return nil, err
	}
	k, err := c.newKernel(store, sdk.Strict(), sdk.WithOwner(checkOwner))
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("proptest: newKernel: %w", err)
	}
	c.id, err = k.Start(c.ctx, c.agent, c.input)
	_ = k.Close()
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("proptest: start %s: %w", c.agent, err)
	}
	return store, nil
}

// lineage reads id's lineage from the uninterrupted run's log.
func (c *checker) lineage(id eventlog.ID) ([]eventlog.Event, error) {
	return lineageIn(c.ctx, c.store, id)
}

// lineageIn reads id's lineage from log.
func lineageIn(ctx context.Context, log eventlog.Log, id eventlog.ID) ([]eventlog.Event, error) {
	var out []eventlog.Event
	for ev, err := range log.Events(ctx, id, 1) {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// fail returns the failure of invariant at seq of lineage evs.
func (c *checker) fail(invariant string, id eventlog.ID, seq uint64, evs []eventlog.Event, cause string) error {
	return &failure{invariant: invariant, exec: id, seq: seq, cause: cause, window: Window(evs, seq, 5)}
}

// Window renders the events of a lineage from seq-around to seq+around, one
// a line with its seq, the line of seq marked with ">".
func Window(evs []eventlog.Event, seq uint64, around int) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Seq+uint64(around) < seq || ev.Seq > seq+uint64(around) {
			continue
		}
		mark := " "
		if ev.Seq == seq {
			mark = ">"
		}
		fmt.Fprintf(&b, "  %s %4d  %s\n", mark, ev.Seq, eventtext.FormatEvent(ev))
	}
	return b.String()
}

// checkCoverage compares the kernel's coverage with the model's at every
// event of the run (§8.3).
func (c *checker) checkCoverage() error {
	for n := uint64(1); n <= uint64(len(c.ref)); n++ {
		got, err := c.k.Coverage(c.ctx, c.id, n)
		if err != nil {
			return c.fail(invCoverage, c.id, n, c.ref, err.Error())
		}
		want := PointAt(c.ref, n)
		gotSels := make([]Selection, len(got.Resources))
		for i, s := range got.Resources {
			gotSels[i] = Selection{Key: s.Key, Ref: s.Ref, CapturedAt: s.CapturedAt, Generation: s.Generation, Covered: s.Covered}
		}
		if got.Covered != want.Covered || !slices.Equal(gotSels, want.Resources) {
			return c.fail(invCoverage, c.id, n, c.ref, fmt.Sprintf("kernel says covered=%v %v, the model covered=%v %v",
				got.Covered, gotSels, want.Covered, want.Resources))
		}
	}
	return nil
}

// checkKills kills a run after each event and resumes it (§8.6). Each
// trial runs the execution under check — the same ID as the uninterrupted
// run — on a copy of its started log (see create): killed after n events,
// then resumed by a new kernel, as a restarted process would.
func (c *checker) checkKills() error {
	for n := 2; n < len(c.ref); n += c.cfg.every {
		if err := c.killTrial(n); err != nil {
			return err
		}
	}
	return nil
}

// killTrial kills the run after its n-th event and resumes it.
func (c *checker) killTrial(n int) error {
	store, err := c.start.Clone(c.ctx)
	if err != nil {
		return fmt.Errorf("proptest: %w", err)
	}
	defer store.Close()
	kl := newKillLog(store, int64(n-1)) // execution.created is written by Start, not appended
	kk, err := c.newKernel(kl, sdk.Strict(), sdk.WithOwner(checkOwner))
	if err != nil {
		return fmt.Errorf("proptest: newKernel: %w", err)
	}
	id := c.id
	if err := c.send(kk, id); err != nil {
		_ = kk.Close()
		return err
	}
	_, err = kk.Run(c.ctx, id)
	kl.kill()  // the process dies with its dispatch: a child it ran in the background too
	kl.drain() // and the dispatches it ran end
	_ = kk.Close()
	if err != nil && !errors.Is(err, errKilled) {
		evs, _ := lineageIn(c.ctx, store, id)
		return c.fail(invKill, id, uint64(n), evs, "the run killed after this event failed otherwise: "+c.diagnose(err))
	}
	rk, err := c.newKernel(store, sdk.Strict(), sdk.WithOwner(checkOwner))
	if err != nil {
		return fmt.Errorf("proptest: newKernel: %w", err)
	}
	defer rk.Close()
	res, err := rk.Run(c.ctx, id)
	evs, _ := lineageIn(c.ctx, store, id)
	if inFlight := c.inFlight(uint64(n)); len(inFlight) > 0 {
		// The kill left an at_most_once call in flight: the resumed run
		// sees it as indeterminate (DESIGN §4) and may fail or end
		// otherwise. It still must not run the call again, nor break the
		// record.
		if err != nil && !acceptedEnd(err) {
			return c.fail(invKill, id, errSeq(err, uint64(n)), evs,
				fmt.Sprintf("killed after seq %d, with %s in flight, the resumed run failed: %s", n, inFlight, c.diagnose(err)))
		}
		if err := c.checkOnce(id, evs); err != nil {
			return err
		}
		return c.checkPolicy(id, evs, 0)
	}
	if err != nil {
		return c.fail(invKill, id, errSeq(err, uint64(n)), evs,
			fmt.Sprintf("killed after seq %d, the resumed run failed: %s", n, c.diagnose(err)))
	}
	if string(res.Output) != string(c.output) {
		return c.fail(invKill, id, uint64(len(evs)), evs,
			fmt.Sprintf("killed after seq %d, the resumed run returned %s, the uninterrupted one %s", n, res.Output, c.output))
	}
	if err := c.checkOnce(id, evs); err != nil {
		return err
	}
	return c.checkPolicy(id, evs, 0)
}

// checkPolicy checks the captures of lineage evs from index at (§8.4).
func (c *checker) checkPolicy(id eventlog.ID, evs []eventlog.Event, at int) error {
	if seq, err := capturesFollowPolicy(evs, at); err != nil {
		return c.fail(invPolicy, id, seq, evs, err.Error())
	}
	return nil
}

// checkOnce fails when an at_most_once step of evs started twice: its
// step.started is synced before the body runs, so a second one means a
// second run of the body.
func (c *checker) checkOnce(id eventlog.ID, evs []eventlog.Event) error {
	started := map[string]uint64{}
	for _, ev := range evs {
		p, ok := ev.Data.(*eventlog.StepStarted)
		if !ok || p.Idempotency != eventlog.AtMostOnce {
			continue
		}
		if first, twice := started[p.StepID]; twice {
			return c.fail(invOnce, id, ev.Seq, evs, fmt.Sprintf("%s %q started at seq %d and again here", p.StepKind, p.Target, first))
		}
		started[p.StepID] = ev.Seq
	}
	return nil
}

// checkForks forks the run at each event and runs the fork (§8.2, §8.1).
func (c *checker) checkForks() error {
	for n := uint64(1); n <= uint64(len(c.ref)); n += uint64(c.cfg.every) {
		var edits []sdk.ForkOption
		if msgs := c.unreceived(c.ref[:n]); len(msgs) > 0 {
			edits = append(edits, sdk.WithMessages(msgs...))
		}
		fid, err := c.k.Fork(c.ctx, c.id, n, edits...)
		if err != nil {
			return c.fail(invSelect, c.id, n, c.ref, "fork: "+err.Error())
		}
		want := PointAt(c.ref, n)
		evs, _ := c.lineage(fid)
		fc, ok := evs[n].Data.(*eventlog.ForkCreated)
		if !ok || !slices.Equal(normal(fc.Selections), normal(want.Resources)) {
			return c.fail(invSelect, fid, n+1, evs, fmt.Sprintf("the fork selects %v, the model %v", evs[n].Data, want.Resources))
		}
		res, err := c.k.Run(c.ctx, fid)
		evs, _ = c.lineage(fid)
		inFlight := c.inFlight(n)
		if err != nil && len(inFlight) > 0 && acceptedEnd(err) {
			err = nil // the fork saw the call in flight as indeterminate, and failed: its right
		}
		if err != nil {
			return c.fail(invSelect, fid, errSeq(err, n+1), evs, fmt.Sprintf("the fork at seq %d failed: %s", n, c.diagnose(err)))
		}
		if err := c.checkNoRerun(fid, evs, n); err != nil {
			return err
		}
		if err := c.checkPolicy(fid, evs, int(n)); err != nil {
			return err
		}
		if !want.Covered {
			continue // an uncovered fork may end otherwise: the documented trade-off
		}
		if len(inFlight) > 0 {
			continue // an at_most_once call in flight is indeterminate to the fork, by design
		}
		if err := c.checkStates(fid, evs, n, want); err != nil {
			return err
		}
		if out := c.parentKeys(fid, evs, n, res.Output); out != string(c.output) {
			return c.fail(invRestore, fid, n, evs, fmt.Sprintf("the covered fork at seq %d returned %s, its parent %s", n, out, c.output))
		}
	}
	return nil
}

// parentKeys returns the output of fork fid (at n, lineage evs) with the
// idempotency keys of the steps it ran live put back to its parent's keys
// of the same steps (sdk.StepIdempotencyKey): a fork is another execution,
// whose keys differ by design, so an output derived from a key (a deploy
// named by it) differs only by them. A key shortened to a prefix of 8
// characters or more is replaced as well.
func (c *checker) parentKeys(fid eventlog.ID, evs []eventlog.Event, n uint64, output []byte) string {
	out := string(output)
	for _, ev := range evs[n:] {
		p, ok := ev.Data.(*eventlog.StepStarted)
		if !ok {
			continue
		}
		fk, pk := sdk.StepIdempotencyKey(fid, p.StepID), sdk.StepIdempotencyKey(c.id, p.StepID)
		for l := len(fk); l >= 8; l-- {
			out = strings.ReplaceAll(out, fk[:l], pk[:l])
		}
	}
	return out
}

// inFlight returns the at_most_once steps of the uninterrupted run in
// flight after its n-th event (coverage.Point.InFlight).
func (c *checker) inFlight(n uint64) inFlightSteps {
	steps, _ := coverage.InFlightAt(func(yield func(eventlog.Event, error) bool) {
		for _, ev := range c.ref {
			if !yield(ev, nil) {
				return
			}
		}
	}, n)
	return steps
}

// inFlightSteps names at_most_once steps in flight in a failure.
type inFlightSteps []coverage.InFlight

func (s inFlightSteps) String() string {
	var names []string
	for _, st := range s {
		names = append(names, fmt.Sprintf("at_most_once %s %q (seq %d)", st.Kind, st.Target, st.StartedAt))
	}
	return strings.Join(names, ", ")
}

// acceptedEnd reports whether err, the end of a run that met an
// at_most_once call in flight, is one the agent may choose: its execution
// failed (its handler returned the indeterminate call's error, or another).
// A nondeterministic replay is never accepted.
func acceptedEnd(err error) bool {
	var nd *sdk.NonDeterministicError
	var ee *sdk.ExecutionError
	return errors.As(err, &ee) && !errors.As(err, &nd)
}

func normal(s []Selection) []Selection {
	if len(s) == 0 {
		return nil
	}
	return s
}

// checkNoRerun fails when fork fid (at n) started a step whose outcome its
// prefix recorded.
func (c *checker) checkNoRerun(fid eventlog.ID, evs []eventlog.Event, n uint64) error {
	done := map[string]bool{}
	for _, ev := range evs[:n] {
		switch p := ev.Data.(type) {
		case *eventlog.StepSucceeded:
			done[p.StepID] = true
		case *eventlog.StepFailed:
			done[p.StepID] = p.RetryAt.IsZero()
		case *eventlog.StepDenied:
			done[p.StepID] = true
		}
	}
	for _, ev := range evs[n:] {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && done[p.StepID] {
			return c.fail(invSelect, fid, ev.Seq, evs, fmt.Sprintf("the fork ran %s %q again, whose outcome its prefix recorded", p.StepKind, p.Target))
		}
	}
	return nil
}

// checkStates compares the final states of a covered fork at n with its
// parent's, for every resource the options say how to compare (§8.1).
func (c *checker) checkStates(fid eventlog.ID, evs []eventlog.Event, n uint64, at Point) error {
	parentEnd := PointAt(c.ref, uint64(len(c.ref)))
	forkEnd := PointAt(evs, uint64(len(evs)))
	for _, sel := range at.Resources {
		a, okA := selected(parentEnd, sel.Key)
		b, okB := selected(forkEnd, sel.Key)
		if !okA || !okB {
			continue // a final state without a covering checkpoint cannot be read
		}
		diff, err := c.diff(sel.Key, a, b)
		if err != nil {
			return c.fail(invRestore, fid, n, evs, fmt.Sprintf("compare %q: %v", sel.Key, err))
		}
		if diff == "" {
			continue
		}
		cause := fmt.Sprintf("the covered fork at seq %d ends with another state of resource %q than its parent (checkpoints %s, %s):\n%s",
			n, sel.Key, a, b, indent(diff))
		if undeclared := c.undeclared(sel, n); len(undeclared) > 0 {
			cause += fmt.Sprintf("\n  cause: after the checkpoint it restored (seq %d), %s ran without declaring %q in Affects; "+
				"a driver with CoverageReuse trusts Affects, so a step that changes the resource must declare it (sdk.Affects)",
				sel.CapturedAt, strings.Join(undeclared, ", "), sel.Key)
		}
		return c.fail(invRestore, c.id, n, c.ref, cause)
	}
	return nil
}

// selected returns the ref that covers key at pt.
func selected(pt Point, key string) (string, bool) {
	for _, s := range pt.Resources {
		if s.Key == key {
			return s.Ref, s.Covered && s.Ref != ""
		}
	}
	return "", false
}

// diff compares two checkpoints of key by the options.
func (c *checker) diff(key, a, b string) (string, error) {
	if d, ok := c.cfg.differs[key]; ok {
		diff, err := d.Diff(c.ctx, a, b)
		return diff.String(), err
	}
	state, ok := c.cfg.states[key]
	if !ok {
		return "", nil
	}
	sa, err := state(c.ctx, a)
	if err != nil {
		return "", err
	}
	sb, err := state(c.ctx, b)
	if err != nil {
		return "", err
	}
	if sa == sb {
		return "", nil
	}
	return fmt.Sprintf("parent: %s\nfork:   %s", sa, sb), nil
}

// undeclared lists the tool calls and local steps of the run that started
// after sel's checkpoint and up to n without declaring sel.Key.
func (c *checker) undeclared(sel Selection, n uint64) []string {
	var out []string
	for _, ev := range c.ref[:n] {
		p, ok := ev.Data.(*eventlog.StepStarted)
		if !ok || ev.Seq <= sel.CapturedAt || p.StepKind == eventlog.StepLLM || slices.Contains(p.Resources, sel.Key) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %q (seq %d)", p.StepKind, p.Target, ev.Seq))
	}
	return out
}

// checkImmutable fails when the run's events changed (§8.7).
func (c *checker) checkImmutable() error {
	now, err := c.lineage(c.id)
	if err != nil {
		return err
	}
	if d := cmp.Diff(c.ref, now); d != "" {
		return c.fail(invImmutable, c.id, uint64(len(c.ref)), now, "the run's events changed (-before +after):\n"+d)
	}
	return nil
}

// errSeq returns the seq of the recorded call a NonDeterministicError
// expected, else def.
func errSeq(err error, def uint64) uint64 {
	var nd *sdk.NonDeterministicError
	if errors.As(err, &nd) && len(nd.Expected) > 0 && nd.Expected[0].Seq != 0 {
		return nd.Expected[0].Seq
	}
	return def
}

// timeLike matches a timestamp or a Unix time (s, ms, µs, ns) in args.
var timeLike = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}|\b1[5-9]\d{8}(\d{3}){0,3}\b`)

// diagnose explains err, naming the likely cause of a divergence.
func (c *checker) diagnose(err error) string {
	var nd *sdk.NonDeterministicError
	if !errors.As(err, &nd) {
		return err.Error()
	}
	msg := err.Error()
	if nd.Got == nil {
		return msg + "\n  cause: the resumed handler did not make calls its history recorded: it decides what to call from " +
			"something that is not recorded (the clock, a random number, a map's order) outside a step"
	}
	for _, ev := range c.ref {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && p.StepID == nd.Got.StepID {
			return msg + fmt.Sprintf("\n  cause: the uninterrupted run made this same call (seq %d), in another order: the order of the "+
				"handler's calls changes between runs — it ranges over a map (iteration order is random; sort the keys) "+
				"or depends on goroutine scheduling", ev.Seq)
		}
	}
	if timeLike.MatchString(nd.Got.Args) && timeLike.MatchString(nd.Expected[0].Args) {
		return msg + "\n  cause: the call's args hold a time that differs between runs: the handler reads the clock outside a " +
			"step (read it inside sdk.Step, whose result is recorded and replayed)"
	}
	return msg + "\n  cause: the call's args differ between runs: a value that is not recorded (the clock, a random number, a " +
		"map's order) reaches them outside a step"
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
