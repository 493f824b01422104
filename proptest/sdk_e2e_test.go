package proptest

// End-to-end properties of the SDK (DESIGN §8.1, §8.2, §8.4, §8.6, §8.8):
// real handlers run random programs of tool calls, local steps and LLM calls
// over two resources on a real in-memory Pebble log — LLM calls running
// beside affecting tools, identical repeated calls, denied affecting calls,
// at_most_once affecting calls whose orphans a kill leaves —; dispatches are
// killed at random events and run again; random events of executions and
// of their forks are forked and the forks run. Every lineage the SDK wrote
// is then folded and checked against the model (checkSDKLineage).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// op is one call of a generated program.
type op struct {
	Kind string `json:"k"` // write, note, fail, sneak, read, send, ask, par, dup, rm, sendres, flaky
	Res  string `json:"r"` // "ws" or "db"
	Key  string `json:"key"`
	Val  string `json:"val"`
}

// program is the input of the generated agent.
type program struct {
	Ops          []op `json:"ops"`
	EveryWS      int  `json:"every_ws"`
	EveryDB      int  `json:"every_db"`
	CompletionWS bool `json:"completion_ws"`
	ReuseWS      bool `json:"reuse_ws"`
}

func genProgram(t *rapid.T) program {
	p := program{
		EveryWS:      rapid.IntRange(1, 4).Draw(t, "every_ws"),
		EveryDB:      rapid.IntRange(1, 3).Draw(t, "every_db"),
		CompletionWS: rapid.Bool().Draw(t, "completion_ws"),
		ReuseWS:      rapid.Bool().Draw(t, "reuse_ws"),
	}
	kinds := []string{"write", "write", "note", "fail", "read", "send", "ask", "par", "dup", "rm", "sendres", "flaky"}
	if !p.ReuseWS {
		kinds = append(kinds, "sneak") // an undeclared change: sound only without CoverageReuse
	}
	n := rapid.IntRange(1, 14).Draw(t, "ops")
	for i := range n {
		o := op{
			Kind: rapid.SampledFrom(kinds).Draw(t, fmt.Sprintf("kind%d", i)),
			Res:  rapid.SampledFrom([]string{"ws", "db"}).Draw(t, fmt.Sprintf("res%d", i)),
			Key:  rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, fmt.Sprintf("key%d", i)),
			Val:  fmt.Sprintf("v%d", i),
		}
		if o.Kind == "sneak" {
			o.Res = "ws"
		}
		p.Ops = append(p.Ops, o)
	}
	return p
}

// world is the external state and the counters shared by every kernel of
// one check.
type world struct {
	ws, db *testdriver.Driver
	llm    *httptest.Server

	bodies     atomic.Int64 // tool and local bodies run
	inside     atomic.Int64 // bodies running now
	overlapped atomic.Bool  // DESIGN §8.8 broken
	sends      sync.Map     // idempotency key -> *atomic.Int64
	flaky      sync.Map     // idempotency key -> *atomic.Int64: attempts of a flaky tool

	holdMu sync.Mutex
	holds  map[string]*hold // LLM prompt -> the hold the server keeps it in
}

// hold keeps an LLM request in the server (in flight) until release is
// closed; arrived is closed when the request reached the server.
type hold struct {
	arrived, release chan struct{}
	once             sync.Once
}

// holdLLM makes the server hold the next request with prompt.
func (w *world) holdLLM(prompt string) *hold {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	h := &hold{arrived: make(chan struct{}), release: make(chan struct{})}
	if w.holds == nil {
		w.holds = map[string]*hold{}
	}
	w.holds[prompt] = h
	return h
}

// heldFor returns the hold of the request with body b, if any.
func (w *world) heldFor(b string) *hold {
	w.holdMu.Lock()
	defer w.holdMu.Unlock()
	for prompt, h := range w.holds {
		if strings.Contains(b, fmt.Sprintf("%q", prompt)) {
			return h
		}
	}
	return nil
}

func newWorld(t *rapid.T) *world {
	w := &world{ws: testdriver.New(), db: testdriver.New()}
	w.llm = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if h := w.heldFor(string(b)); h != nil {
			h.once.Do(func() { close(h.arrived) })
			<-h.release
		}
		_, _ = fmt.Fprintf(rw, `{"echo":%q}`, b)
	}))
	return w
}

func (w *world) body(f func() (string, error)) (string, error) {
	if w.inside.Add(1) > 1 {
		w.overlapped.Store(true)
	}
	defer w.inside.Add(-1)
	w.bodies.Add(1)
	return f()
}

// gate denies every call of the tool "rm".
func gate(ctx context.Context, c policy.Call) policy.Decision {
	if c.Target == "rm" {
		return policy.Decision{Reason: "no rm"}
	}
	return policy.Decision{Allow: true}
}

// kernel returns a kernel on log, as a new process would make it, with
// the gate and the agent registered.
func (w *world) kernel(t *rapid.T, log eventlog.IndexedLog) *sdk.Kernel {
	k, err := sdk.New(log, sdk.WithGate(gate))
	if err != nil {
		t.Fatal(err)
	}
	w.register(k)
	return k
}

func (w *world) register(k *sdk.Kernel) {
	client := &http.Client{Transport: sdk.Transport(nil)}
	_, _ = sdk.Register(k, "prog", func(ctx context.Context, p program) ([]string, error) {
		wsDrv := w.ws
		if p.ReuseWS {
			wsDrv = w.ws.WithCoverageReuse()
		}
		ws, err := sdk.Resource(ctx, "ws", wsDrv, sdk.EverySteps(p.EveryWS), sdk.OnCompletion(p.CompletionWS))
		if err != nil {
			return nil, err
		}
		db, err := sdk.Resource(ctx, "db", w.db, sdk.EverySteps(p.EveryDB))
		if err != nil {
			return nil, err
		}
		handles := map[string]*testdriver.Handle{"ws": ws, "db": db}
		var out []string
		for i, o := range p.Ops {
			h := handles[o.Res]
			write := func(ctx context.Context, o op) (string, error) {
				return w.body(func() (string, error) { return "ok", h.WriteFile(o.Key, []byte(o.Val)) })
			}
			var res string
			var err error
			switch o.Kind {
			case "write":
				res, err = sdk.DefineTool("write", write, sdk.Affects(o.Res)).Call(ctx, o)
			case "sneak":
				res, err = sdk.DefineTool("sneak", write).Call(ctx, o)
			case "note":
				res, err = sdk.Step(ctx, "note-"+o.Key+o.Val, func(ctx context.Context) (string, error) { return write(ctx, o) }, sdk.Affects(o.Res))
			case "fail":
				res, err = sdk.DefineTool("fail", func(ctx context.Context, o op) (string, error) {
					return w.body(func() (string, error) { return "", errors.New("nope") })
				}, sdk.Affects(o.Res)).Call(ctx, o)
			case "read":
				res, err = sdk.DefineTool("read", func(ctx context.Context, o op) (string, error) {
					return w.body(func() (string, error) {
						b, err := h.ReadFile(o.Key)
						if err != nil {
							return "missing", nil
						}
						return string(b), nil
					})
				}).Call(ctx, o)
			case "send":
				res, err = sdk.DefineTool("send", func(ctx context.Context, o op) (string, error) {
					return w.body(func() (string, error) {
						c, _ := w.sends.LoadOrStore(sdk.IdempotencyKey(ctx), new(atomic.Int64))
						c.(*atomic.Int64).Add(1)
						return "sent", nil
					})
				}, sdk.AtMostOnce()).Call(ctx, o)
			case "ask":
				res, err = ask(ctx, client, w.llm.URL, fmt.Sprintf("turn %d", i))
			case "par": // an LLM call in flight while a tool that affects a resource finishes
				prompt := fmt.Sprintf("par %d", i)
				hold := w.holdLLM(prompt)
				llm := make(chan string, 1)
				go func() {
					r, err := ask(ctx, client, w.llm.URL, prompt)
					if err != nil {
						r = "error"
					}
					llm <- r
				}()
				var answer string
				select {
				case <-hold.arrived: // live: its step.started is written, the server holds it
				case answer = <-llm: // replayed (or its append failed): nothing in flight
				}
				res, err = sdk.DefineTool("write", write, sdk.Affects(o.Res)).Call(ctx, o)
				close(hold.release)
				if answer == "" {
					answer = <-llm
				}
				res += " | " + answer
			case "dup": // two identical calls: two steps (occurrences 0 and 1)
				tool := sdk.DefineTool("write", write, sdk.Affects(o.Res))
				var a string
				if a, err = tool.Call(ctx, o); err == nil {
					res, err = tool.Call(ctx, o)
					res = a + "," + res
				}
			case "rm": // denied by the gate (w.gate): never runs, never counts
				res, err = sdk.DefineTool("rm", write, sdk.Affects(o.Res)).Call(ctx, o)
			case "flaky": // affecting, retried: its first two attempts write and fail (DESIGN §10)
				res, err = sdk.DefineTool("flaky", func(ctx context.Context, o op) (string, error) {
					return w.body(func() (string, error) {
						c, _ := w.flaky.LoadOrStore(sdk.IdempotencyKey(ctx), new(atomic.Int64))
						if err := h.WriteFile(o.Key, []byte(o.Val)); err != nil {
							return "", err
						}
						if n := c.(*atomic.Int64).Add(1); n <= 2 {
							return "", fmt.Errorf("attempt %d: 503", n)
						}
						return "ok", nil
					})
				}, sdk.Affects(o.Res), sdk.Retry(flakyRetry)).Call(ctx, o)
			case "sendres": // at_most_once and affecting: a kill may leave its orphan
				res, err = sdk.DefineTool("sendres", func(ctx context.Context, o op) (string, error) {
					return w.body(func() (string, error) {
						c, _ := w.sends.LoadOrStore(sdk.IdempotencyKey(ctx), new(atomic.Int64))
						c.(*atomic.Int64).Add(1)
						return "sent", h.WriteFile(o.Key, []byte(o.Val))
					})
				}, sdk.Affects(o.Res), sdk.AtMostOnce()).Call(ctx, o)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				res = "error: " + err.Error()
				if errors.Is(err, sdk.ErrIndeterminate) {
					res = "indeterminate"
				}
			}
			out = append(out, res)
		}
		return out, nil
	})
}

// flakyRetry retries the flaky tool. Its body fails twice, then succeeds;
// three kills orphan at most three more attempts, so eight are never
// exhausted and the tool's output does not depend on the kills. The
// backoff is a few microseconds of wall time.
var flakyRetry = sdk.RetryPolicy{MaxAttempts: 8, Initial: time.Microsecond, Max: 4 * time.Microsecond}

func ask(ctx context.Context, c *http.Client, url, prompt string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(fmt.Sprintf(`{"model":"m","prompt":%q}`, prompt)))
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// recLog records, for every event appended, the physical state of the
// appending execution's own resources at that moment, and can kill the
// dispatch after a budget of events.
type recLog struct {
	eventlog.IndexedLog
	w *world

	mu      sync.Mutex
	handles map[eventlog.ID]map[string]string                       // exec -> key -> own handle id
	snaps   map[eventlog.ID]map[uint64]map[string]map[string]string // exec -> seq -> key -> files
	budget  int64                                                   // < 0: unlimited
	appends map[eventlog.ID][]appendRec                             // exec -> its appends, in order
}

// appendRec is one append that reached the log.
type appendRec struct {
	synced bool
	events []eventlog.Event
}

func newRecLog(store eventlog.IndexedLog, w *world) *recLog {
	return &recLog{IndexedLog: store, w: w, budget: -1,
		handles: map[eventlog.ID]map[string]string{}, snaps: map[eventlog.ID]map[uint64]map[string]map[string]string{},
		appends: map[eventlog.ID][]appendRec{}}
}

func (l *recLog) record(id eventlog.ID, evs []eventlog.Event, head uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.budget >= 0 {
		if l.budget < int64(len(evs)) {
			return errKilled
		}
		l.budget -= int64(len(evs))
	}
	return nil
}

func (l *recLog) snapshot(id eventlog.ID, evs []eventlog.Event, head uint64, synced bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appends[id] = append(l.appends[id], appendRec{synced: synced, events: evs})
	for _, ev := range evs {
		if b, ok := ev.Data.(*eventlog.ResourceBound); ok {
			var bind testdriver.Binding
			_ = json.Unmarshal(b.Binding, &bind)
			if l.handles[id] == nil {
				l.handles[id] = map[string]string{}
			}
			l.handles[id][b.Key] = bind.ID
		}
	}
	state := map[string]map[string]string{}
	for key, hid := range l.handles[id] {
		drv := l.w.ws
		if key == "db" {
			drv = l.w.db
		}
		if h, ok := drv.Resource(hid); ok {
			state[key] = h.Files()
		}
	}
	if l.snaps[id] == nil {
		l.snaps[id] = map[uint64]map[string]map[string]string{}
	}
	for i := range evs {
		l.snaps[id][head+uint64(i)+1] = state
	}
}

func (l *recLog) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if err := l.record(id, evs, head); err != nil {
		return 0, err
	}
	n, err := l.IndexedLog.Append(ctx, id, head, evs...)
	if err == nil {
		l.snapshot(id, evs, head, true)
	}
	return n, err
}

func (l *recLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if err := l.record(id, evs, head); err != nil {
		return 0, err
	}
	n, err := l.IndexedLog.AppendUnsynced(ctx, id, head, evs...)
	if err == nil {
		l.snapshot(id, evs, head, false)
	}
	return n, err
}

// stateAt is the physical state of resource key of execution id's lineage
// right after event seq was written: the state of the resource of the
// execution that wrote it, or — for a fork's events before it made its
// own — what its parent had at the fork point.
func (l *recLog) stateAt(t *rapid.T, id eventlog.ID, seq uint64, key string) (map[string]string, bool) {
	info, err := l.Info(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Parent.IsZero() && seq <= info.ForkSeq {
		return l.stateAt(t, info.Parent, seq, key)
	}
	l.mu.Lock()
	st, ok := l.snaps[id][seq][key]
	l.mu.Unlock()
	if ok {
		return st, true
	}
	if !info.Parent.IsZero() {
		return l.stateAt(t, info.Parent, info.ForkSeq, key)
	}
	return nil, false
}

func sdkLineage(t *rapid.T, k *sdk.Kernel, id eventlog.ID) []eventlog.Event {
	var out []eventlog.Event
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func decodeOut(t *rapid.T, res *sdk.Result) []string {
	var out []string
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKillAndRerunSameOutput: killing a dispatch at any event and running
// again ends in the output of an uninterrupted run; an at_most_once body
// never runs twice; no two bodies overlap (DESIGN §8.6, §8.8).
func TestKillAndRerunSameOutput(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		p := genProgram(t)

		// The uninterrupted run.
		refW := newWorld(t)
		defer refW.llm.Close()
		refStore, _ := pebblestore.Open("")
		defer refStore.Close()
		refLog := newRecLog(refStore, refW)
		refK := refW.kernel(t, refLog)
		refID, err := refK.Start(ctx, "prog", p)
		if err != nil {
			t.Fatal(err)
		}
		refRes, err := refK.Run(ctx, refID)
		if err != nil {
			t.Fatal(err)
		}
		want := decodeOut(t, refRes)
		total := len(sdkLineage(t, refK, refID))

		// Killed runs: up to three kills at random events, then a clean run.
		w := newWorld(t)
		defer w.llm.Close()
		store, _ := pebblestore.Open("")
		defer store.Close()
		log := newRecLog(store, w)
		k := w.kernel(t, log)
		id, err := k.Start(ctx, "prog", p)
		if err != nil {
			t.Fatal(err)
		}
		kills := rapid.IntRange(0, 3).Draw(t, "kills")
		for i := range kills {
			log.mu.Lock()
			log.budget = int64(rapid.IntRange(0, total).Draw(t, fmt.Sprintf("kill%d", i)))
			log.mu.Unlock()
			k2 := w.kernel(t, log) // a new process
			if _, err := k2.Run(ctx, id); err != nil && !errors.Is(err, errKilled) {
				t.Fatalf("killed run %d: %v", i, err)
			}
		}
		log.mu.Lock()
		log.budget = -1
		log.mu.Unlock()
		k3 := w.kernel(t, log)
		res, err := k3.Run(ctx, id)
		if err != nil {
			t.Fatalf("final run: %v", err)
		}
		got := decodeOut(t, res)
		for i := range want {
			if (p.Ops[i].Kind == "send" || p.Ops[i].Kind == "sendres") && got[i] == "indeterminate" {
				continue // killed between its intent and its outcome: never run twice, so indeterminate
			}
			if got[i] != want[i] {
				t.Fatalf("op %d (%s): got %q, an uninterrupted run got %q\nall: %q\nwant: %q", i, p.Ops[i].Kind, got[i], want[i], got, want)
			}
		}
		w.sends.Range(func(key, c any) bool {
			if n := c.(*atomic.Int64).Load(); n > 1 {
				t.Fatalf("at_most_once body ran %d times for key %v", n, key)
			}
			return true
		})
		var root eventlog.ID
		checkSDKLineage(t, refLog, refK, refID, root, 0)
		checkSDKLineage(t, log, k3, id, root, 0)
		if w.overlapped.Load() || refW.overlapped.Load() {
			t.Fatal("two tool or local-step bodies overlapped while resources were bound (DESIGN §8.8)")
		}
	})
}

// TestForksRestoreAndReplay: at random events of an execution and of its
// forks, a covered fork restores exactly the state the resource had there
// (DESIGN §8.1), every fork's selection is the kernel's coverage answer and
// its replay of the prefix runs no recorded body (DESIGN §8.2).
func TestForksRestoreAndReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		p := genProgram(t)
		w := newWorld(t)
		defer w.llm.Close()
		store, _ := pebblestore.Open("")
		defer store.Close()
		log := newRecLog(store, w)
		k := w.kernel(t, log)
		root, err := k.Start(ctx, "prog", p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, root); err != nil {
			t.Fatal(err)
		}
		checkSDKLineage(t, log, k, root, eventlog.ID{}, 0)
		execs := []eventlog.ID{root}
		forks := rapid.IntRange(1, 4).Draw(t, "forks")
		for i := range forks {
			src := rapid.SampledFrom(execs).Draw(t, fmt.Sprintf("src%d", i))
			evs := sdkLineage(t, k, src)
			at := uint64(rapid.IntRange(1, len(evs)).Draw(t, fmt.Sprintf("at%d", i)))
			pt, err := k.Coverage(ctx, src, at)
			if err != nil {
				t.Fatal(err)
			}
			fid, err := k.Fork(ctx, src, at)
			if err != nil {
				t.Fatalf("%v\npoint %+v\n%s", err, pt, indexStates(store, src, at))
			}
			fevs := sdkLineage(t, k, fid)
			fc, ok := fevs[at].Data.(*eventlog.ForkCreated)
			if !ok {
				t.Fatalf("event %d of the fork is %s", at+1, fevs[at].Kind())
			}
			if len(fc.Selections) != len(pt.Resources) {
				t.Fatalf("fork.created has %d selections, coverage %d resources", len(fc.Selections), len(pt.Resources))
			}
			for j, sel := range fc.Selections {
				r := pt.Resources[j]
				if sel.Key != r.Key || sel.Ref != r.Ref || sel.CapturedAt != r.CapturedAt || sel.Generation != r.Generation || sel.Covered != r.Covered {
					t.Fatalf("fork.created selection %+v, coverage says %+v", sel, r)
				}
				// DESIGN §8.1: a covered selection holds exactly the state at the fork point.
				if r.Covered {
					drv := w.ws
					if r.Key == "db" {
						drv = w.db
					}
					restored, ok := drv.Restore(r.Ref)
					if !ok {
						t.Fatalf("selected ref %q does not exist", r.Ref)
					}
					physical, ok := log.stateAt(t, src, at, r.Key)
					if !ok {
						t.Fatalf("no recorded state of %s at %d", r.Key, at)
					}
					if diff := cmp.Diff(physical, restored, cmpEmpty); diff != "" {
						t.Fatalf("covered fork of %s at %d: %s restores a state that differs from the resource's there (-at fork point +restored):\n%s",
							src, at, r.Key, diff)
					}
				}
			}
			// DESIGN §8.2: replaying the prefix runs no recorded body.
			terminal := map[string]bool{}
			for _, ev := range evs[:at] {
				switch p := ev.Data.(type) {
				case *eventlog.StepSucceeded:
					terminal[p.StepID] = true
				case *eventlog.StepFailed:
					terminal[p.StepID] = p.RetryAt.IsZero() // a retried attempt's outcome is not the step's
				case *eventlog.StepDenied:
					terminal[p.StepID] = true
				}
			}
			before := w.bodies.Load()
			if _, err := k.Run(ctx, fid); err != nil {
				t.Fatalf("run fork of %s at %d: %v", src, at, err)
			}
			ran := w.bodies.Load() - before
			var live int64
			for _, ev := range sdkLineage(t, k, fid)[at:] {
				if s, ok := ev.Data.(*eventlog.StepStarted); ok {
					if terminal[s.StepID] {
						t.Fatalf("fork at %d ran recorded step %s (%s) again", at, s.StepID, s.Target)
					}
					if s.StepKind != eventlog.StepLLM {
						live++
					}
				}
			}
			if ran != live {
				t.Fatalf("fork at %d ran %d bodies but recorded %d live tool/local steps", at, ran, live)
			}
			checkSDKLineage(t, log, k, fid, src, at)
			execs = append(execs, fid)
		}
		if w.overlapped.Load() {
			t.Fatal("bodies overlapped (DESIGN §8.8)")
		}
	})
}

var cmpEmpty = cmp.Comparer(func(a, b map[string]string) bool { return maps.Equal(a, b) })

// indexStates renders what the store's index says at seq at (twice, to
// catch a nondeterministic read), for failure messages.
func indexStates(store *pebblestore.Store, id eventlog.ID, at uint64) string {
	s := ""
	for i := 0; i < 2; i++ {
		st, err := store.ResourceStates(context.Background(), id, at)
		s += fmt.Sprintf("try %d: err=%v\n", i, err)
		for _, x := range st {
			s += fmt.Sprintf("   %+v\n", x)
		}
	}
	return s
}

// checkSDKLineage folds the lineage the SDK wrote for execution id (a fork
// of parent at at, or a root when at is 0) and checks its own events
// against the model:
//   - captures happen exactly when the policy says, with their reasons
//     (DESIGN §8.4: checkCapturesFollowPolicy, the generator's judge);
//   - no capture lands while a step that advances its resource is in
//     flight (DESIGN §5);
//   - a dispatch appends nothing for a call whose outcome is recorded, and
//     nothing but its bindings before its first live call (DESIGN §4);
//   - an at_most_once intent is synced before its body runs, a
//     safe_to_retry one rides unsynced, and every other event is synced
//     (DESIGN §4 "What must be durable when").
func checkSDKLineage(t *rapid.T, log *recLog, k *sdk.Kernel, id, parent eventlog.ID, at uint64) {
	evs := sdkLineage(t, k, id)
	e := &Exec{ID: id, At: at, Lineage: Lineage{ID: id, Events: evs, Effects: make([][]Change, len(evs))}}
	if at > 0 {
		e.Parent = &Exec{ID: parent}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v: %s\n%s", e, fmt.Sprintf(format, args...), dump(e.Lineage))
	}
	checkCapturesFollowPolicy(t, e)

	final := map[string]bool{} // steps whose outcome replays
	note := func(ev eventlog.Event) {
		switch p := ev.Data.(type) {
		case *eventlog.StepSucceeded:
			final[p.StepID] = true
		case *eventlog.StepFailed:
			final[p.StepID] = p.RetryAt.IsZero() // a retried attempt's outcome is not the step's
		case *eventlog.StepDenied:
			final[p.StepID] = true
		}
	}
	for _, ev := range evs[:at] {
		note(ev)
	}
	var recorded map[string]bool // steps whose outcome replayed as the current dispatch began
	var startedHere map[string]bool
	for i := int(at); i < len(evs); i++ {
		ev, n := evs[i], uint64(i+1)
		if p, ok := ev.Data.(*eventlog.ResourceCaptured); ok {
			if fl := InFlight(evs[:i], p.Key); len(fl) > 0 {
				fail("seq %d: capture of %s while %v advancing it are in flight", n, p.Key, fl)
			}
		}
		if _, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			recorded, startedHere = maps.Clone(final), map[string]bool{}
		}
		if sid := ev.StepID(); sid != "" {
			if recorded[sid] {
				fail("seq %d (%s): the dispatch appended an event for step %s, whose recorded outcome replays", n, describe(ev), sid)
			}
			if _, ok := ev.Data.(*eventlog.StepStarted); ok {
				startedHere[sid] = true
			}
			if _, ok := terminalStep(ev); ok && !startedHere[sid] {
				if p, isFailed := ev.Data.(*eventlog.StepFailed); !isFailed || !p.Indeterminate {
					fail("seq %d (%s): an outcome of step %s, which this dispatch did not run", n, describe(ev), sid)
				}
			}
		}
		note(ev)
	}

	// Which appends are synced.
	log.mu.Lock()
	appends := log.appends[id]
	log.mu.Unlock()
	var seqs int
	for _, a := range appends {
		seqs += len(a.events)
		for _, ev := range a.events {
			st, ok := ev.Data.(*eventlog.StepStarted)
			switch {
			case ok && st.Idempotency == eventlog.AtMostOnce && !a.synced:
				fail("seq %d: the at_most_once intent %s was appended unsynced", ev.Seq, st.StepID)
			case ok && st.Idempotency == eventlog.SafeToRetry && (a.synced || len(a.events) != 1):
				fail("seq %d: the safe_to_retry step.started %s was appended synced=%v with %d events; it rides alone on the next sync", ev.Seq, st.StepID, a.synced, len(a.events))
			case !ok && !a.synced:
				fail("seq %d (%s) was appended unsynced", ev.Seq, describe(ev))
			}
		}
	}
	if own := len(evs) - int(at) - 1; seqs != own {
		// Every own event but the first (execution.created or fork.created,
		// written by Create or Fork) went through Append or AppendUnsynced.
		fail("the log saw %d appended events, the lineage has %d own ones after the first", seqs, own)
	}
}
