package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// touchArgs name one call of the overlap agent's tool.
type touchArgs struct {
	Goroutine int `json:"g"`
	Call      int `json:"i"`
}

// overlapInput is the overlap agent's input: its name keys its body
// counters.
type overlapInput struct {
	Name string `json:"name"`
}

// bodyWatch counts the bodies of one execution's tool that run at once.
type bodyWatch struct {
	inside, most atomic.Int64
}

func (w *bodyWatch) enter() {
	now := w.inside.Add(1)
	for {
		m := w.most.Load()
		if now <= m || w.most.CompareAndSwap(m, now) {
			return
		}
	}
}

// DESIGN §8.8 and §8.6: many executions and forks run at once on one kernel
// (run with -race). Within an execution no two tool bodies overlap; across
// executions they may; every execution and fork ends with the output of an
// uninterrupted run, and every lineage decodes with dense seqs.
func TestConcurrentExecutionsAndForks(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(coder.Script())
	t.Cleanup(srv.Close)
	store, err := pebblestore.Open(filepath.Join(t.TempDir(), "log"), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	k, err := sdk.New(store)
	if err != nil {
		t.Fatal(err)
	}
	drv := testdriver.New()
	model := coder.Model{Name: coder.ScriptedName, BaseURL: srv.URL + "/v1", APIKey: "reliability"}
	if _, err := sdk.Register(k, "coder", coder.Handler(func() driver.Driver[*testdriver.Handle, testdriver.Binding] { return drv }, model)); err != nil {
		t.Fatal(err)
	}
	const goroutines, calls = 6, 4
	var watchMu sync.Mutex
	watches := map[string]*bodyWatch{}
	var across bodyWatch // over every execution
	watch := func(name string) *bodyWatch {
		watchMu.Lock()
		defer watchMu.Unlock()
		if watches[name] == nil {
			watches[name] = new(bodyWatch)
		}
		return watches[name]
	}
	_, err = sdk.Register(k, "overlap", func(ctx context.Context, in overlapInput) (int, error) {
		if _, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(3)); err != nil {
			return 0, err
		}
		w := watch(in.Name)
		touch := sdk.DefineTool("touch", func(ctx context.Context, a touchArgs) (int, error) {
			w.enter()
			across.enter()
			for range 20 {
				runtime.Gosched()
			}
			across.inside.Add(-1)
			w.inside.Add(-1)
			return a.Goroutine*100 + a.Call, nil
		}, sdk.Affects("ws"))
		var wg sync.WaitGroup
		var sum atomic.Int64
		errs := make(chan error, goroutines*calls)
		for g := range goroutines {
			wg.Go(func() {
				for i := range calls {
					n, err := touch.Call(ctx, touchArgs{Goroutine: g, Call: i})
					if err != nil {
						errs <- err
						return
					}
					sum.Add(int64(n))
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
		return int(sum.Load()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSum := 0
	for g := range goroutines {
		for i := range calls {
			wantSum += g*100 + i
		}
	}
	wantCoder := fmt.Sprintf(`{"answer":%q}`, coder.Script().Turns[len(coder.Script().Turns)-1].Say)

	// Round 1: executions at once. Round 2: a fork of each at a random
	// event, all at once, while coverage and events are read beside them.
	const perAgent = 6
	type run struct {
		id    eventlog.ID
		agent string
		name  string
	}
	var runs []run
	for i := range perAgent {
		for _, agent := range []string{"coder", "overlap"} {
			name := fmt.Sprintf("%s-%d", agent, i)
			var input any = coder.Input{Task: task}
			if agent == "overlap" {
				input = overlapInput{Name: name}
			}
			id, err := k.Start(ctx, agent, input)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{id: id, agent: agent, name: name})
		}
	}
	check := func(r run, res *sdk.Result, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s (%s): %v", r.name, r.id, err)
			return
		}
		want := wantCoder
		if r.agent == "overlap" {
			want = fmt.Sprint(wantSum)
		}
		if string(res.Output) != want {
			t.Errorf("%s: output %s, want %s", r.name, res.Output, want)
		}
	}
	runAll := func(rs []run, readers func(stop <-chan struct{})) {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var rwg sync.WaitGroup
		if readers != nil {
			rwg.Go(func() { readers(stop) })
		}
		for _, r := range rs {
			wg.Go(func() {
				res, err := k.Run(ctx, r.id)
				check(r, res, err)
			})
		}
		wg.Wait()
		close(stop)
		rwg.Wait()
	}
	runAll(runs, nil)

	rng := rand.New(rand.NewPCG(1, 2))
	var forks []run
	for i, r := range runs {
		head := uint64(len(lineage(t, store, r.id)))
		at := 1 + rng.Uint64N(head)
		fid, err := k.Fork(ctx, r.id, at)
		if err != nil {
			t.Fatal(err)
		}
		// A fork of an overlap execution has its parent's input, so its
		// bodies are watched under its parent's name (the parent is done).
		forks = append(forks, run{id: fid, agent: r.agent, name: fmt.Sprintf("fork-%d-of-%s@%d", i, r.name, at)})
	}
	var reads atomic.Int64
	runAll(forks, func(stop <-chan struct{}) {
		for {
			for _, r := range runs {
				select {
				case <-stop:
					return
				default:
				}
				head, err := store.Head(ctx, r.id)
				if err != nil {
					t.Errorf("head of %s: %v", r.name, err)
					return
				}
				if _, err := k.Coverage(ctx, r.id, 1+rng.Uint64N(head)); err != nil {
					t.Errorf("coverage of %s: %v", r.name, err)
				}
				reads.Add(1)
			}
		}
	})

	for _, r := range append(runs, forks...) {
		evs := lineage(t, store, r.id) // dense seqs, decodes
		if evs[len(evs)-1].Kind() != eventlog.KindExecutionCompleted {
			t.Errorf("%s ends with %s", r.name, evs[len(evs)-1].Kind())
		}
	}
	watchMu.Lock()
	defer watchMu.Unlock()
	for name, w := range watches {
		if m := w.most.Load(); m != 1 {
			t.Errorf("%s: %d tool bodies of one execution overlapped", name, m)
		}
	}
	t.Logf("%d executions and %d forks; at most %d tool bodies of different executions at once; %d coverage reads during the forks",
		len(runs), len(forks), across.most.Load(), reads.Load())
}

// DESIGN §7 ErrBusy: of many Runs of one execution at once, exactly one runs
// the handler and every other returns ErrBusy.
func TestConcurrentRunsOneBusy(t *testing.T) {
	ctx := context.Background()
	store, k := memKernel(t)
	release := make(chan struct{})
	var entered atomic.Int64
	_, err := sdk.Register(k, "block", func(ctx context.Context, _ int) (int, error) {
		entered.Add(1)
		<-release
		return 7, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, runs := range []int{2, 16} {
		id, err := k.Start(ctx, "block", 0)
		if err != nil {
			t.Fatal(err)
		}
		entered.Store(0)
		release = make(chan struct{})
		type outcome struct {
			res *sdk.Result
			err error
		}
		out := make(chan outcome, runs)
		start := make(chan struct{})
		for range runs {
			go func() {
				<-start
				res, err := k.Run(ctx, id)
				out <- outcome{res, err}
			}()
		}
		close(start)
		// Every Run but one returns ErrBusy while the handler is held.
		busy := 0
		for range runs - 1 {
			o := <-out
			if !errors.Is(o.err, sdk.ErrBusy) {
				t.Fatalf("%d runs: a Run while the handler is held returned %v, want ErrBusy", runs, o.err)
			}
			busy++
		}
		close(release)
		o := <-out
		if o.err != nil || string(o.res.Output) != "7" {
			t.Fatalf("%d runs: the running Run returned %v, %v", runs, o.res, o.err)
		}
		if busy != runs-1 || entered.Load() != 1 {
			t.Fatalf("%d runs: %d ErrBusy, handler entered %d times", runs, busy, entered.Load())
		}
		if kinds := kindsOf(lineage(t, store, id)); fmt.Sprint(kinds) != "[execution.created dispatch.started execution.completed]" {
			t.Fatalf("%d runs: events %v", runs, kinds)
		}
	}
}

func kindsOf(events []eventlog.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.Kind().String()
	}
	return out
}

// DESIGN §3, §8.7: writers racing to append at the same head: exactly one
// wins each round and the others get ErrConflict having written nothing;
// writers that retry on conflict lose and duplicate no event.
func TestRacingAppends(t *testing.T) {
	ctx := context.Background()
	store, err := pebblestore.Open(filepath.Join(t.TempDir(), "log")) // synced
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	tag := func(w, i int) string { return fmt.Sprintf("w%02d-%03d", w, i) }
	ev := func(s string) eventlog.Event {
		return eventlog.Event{Data: &eventlog.StepSucceeded{StepID: s, Result: []byte(`"` + s + `"`)}}
	}

	t.Run("rounds", func(t *testing.T) {
		id, err := store.Create(ctx, &eventlog.ExecutionCreated{Agent: "race"}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		const writers, rounds = 8, 15
		var winners []string
		for r := range rounds {
			head, err := store.Head(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			errs := make([]error, writers)
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					<-start
					_, errs[w] = store.Append(ctx, id, head, ev(tag(w, r)))
				})
			}
			close(start)
			wg.Wait()
			won := -1
			for w, err := range errs {
				switch {
				case err == nil && won >= 0:
					t.Fatalf("round %d: writers %d and %d both appended at head %d", r, won, w, head)
				case err == nil:
					won = w
				case !errors.Is(err, eventlog.ErrConflict):
					t.Fatalf("round %d: writer %d: %v, want ErrConflict", r, w, err)
				}
			}
			if won < 0 {
				t.Fatalf("round %d: nobody appended", r)
			}
			winners = append(winners, tag(won, r))
		}
		evs := lineage(t, store, id)
		if len(evs) != 1+rounds {
			t.Fatalf("%d events after %d rounds, want %d", len(evs), rounds, 1+rounds)
		}
		for i, w := range winners {
			if got := evs[i+1].Data.(*eventlog.StepSucceeded).StepID; got != w {
				t.Fatalf("event %d is %s, the round's winner was %s", i+2, got, w)
			}
		}
	})

	t.Run("retry", func(t *testing.T) {
		id, err := store.Create(ctx, &eventlog.ExecutionCreated{Agent: "race"}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		const writers, each = 8, 12
		var conflicts atomic.Int64
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := 0; i < each; {
					head, err := store.Head(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					_, err = store.Append(ctx, id, head, ev(tag(w, i)), ev(tag(w, i)+"b"))
					switch {
					case err == nil:
						i++
					case errors.Is(err, eventlog.ErrConflict):
						conflicts.Add(1)
					default:
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		evs := lineage(t, store, id)
		if len(evs) != 1+2*writers*each {
			t.Fatalf("%d events, want %d", len(evs), 1+2*writers*each)
		}
		seen := map[string]bool{}
		next := map[int]int{}
		for j := 1; j < len(evs); j += 2 {
			a := evs[j].Data.(*eventlog.StepSucceeded).StepID
			b := evs[j+1].Data.(*eventlog.StepSucceeded).StepID
			if b != a+"b" {
				t.Fatalf("events %d and %d are %s and %s: an append was split", j+1, j+2, a, b)
			}
			if seen[a] {
				t.Fatalf("%s appears twice", a)
			}
			seen[a] = true
			var w, i int
			if _, err := fmt.Sscanf(a, "w%02d-%03d", &w, &i); err != nil {
				t.Fatal(err)
			}
			if next[w] != i {
				t.Fatalf("writer %d's append %d came before its append %d", w, i, next[w])
			}
			next[w]++
		}
		t.Logf("%d appends by %d writers, %d conflicts retried", writers*each, writers, conflicts.Load())
	})
}

// Two kernels on one log run one execution. On a store that keeps leases
// (eventlog.Leaser, DESIGN §11) the second kernel's Run is ErrBusy and
// appends nothing while the first runs. On a log without leases, Part I's
// rule holds: the dispatch whose append comes second gets ErrConflict and
// stops. Either way the step runs once and the lineage loses nothing.
func TestTwoKernelsOneExecution(t *testing.T) {
	for _, leased := range []bool{true, false} {
		t.Run(map[bool]string{true: "leased store", false: "log without leases"}[leased], func(t *testing.T) {
			testTwoKernelsOneExecution(t, leased)
		})
	}
}

// noLeases hides a store's Leaser.
type noLeases struct{ eventlog.IndexedLog }

func testTwoKernelsOneExecution(t *testing.T, leased bool) {
	ctx := context.Background()
	store, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	var log eventlog.IndexedLog = store
	if !leased {
		log = noLeases{store}
	}
	inA := make(chan struct{})
	goA := make(chan struct{})
	var ran atomic.Int64
	newKernel := func(hold bool) *sdk.Kernel {
		k, err := sdk.New(log)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sdk.Register(k, "two", func(ctx context.Context, _ int) (int, error) {
			if hold {
				close(inA)
				<-goA
			}
			return sdk.Step(ctx, "work", func(context.Context) (int, error) { return int(ran.Add(1)), nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := newKernel(true), newKernel(false)
	id, err := a.Start(ctx, "two", 0)
	if err != nil {
		t.Fatal(err)
	}
	errA := make(chan error, 1)
	go func() { _, err := a.Run(ctx, id); errA <- err }()
	<-inA // A has appended dispatch.started and holds its handler
	res, errB := b.Run(ctx, id)
	want := "[execution.created dispatch.started dispatch.started step.started step.succeeded execution.completed]"
	if leased {
		if !errors.Is(errB, sdk.ErrBusy) {
			t.Fatalf("B's Run = %v, want ErrBusy", errB)
		}
		close(goA)
		if err := <-errA; err != nil {
			t.Fatalf("A's Run: %v", err)
		}
		want = "[execution.created dispatch.started step.started step.succeeded execution.completed]"
		if res, err = b.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
	} else {
		if errB != nil {
			t.Fatalf("B's Run: %v", errB)
		}
		close(goA)
		if err := <-errA; !errors.Is(err, eventlog.ErrConflict) {
			t.Fatalf("A's Run = %v, want ErrConflict", err)
		}
	}
	if got := fmt.Sprint(kindsOf(lineage(t, store, id))); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	if ran.Load() != 1 || string(res.Output) != "1" {
		t.Fatalf("step ran %d times, output %s", ran.Load(), res.Output)
	}
	// The recorded outcome stands for both kernels.
	for _, k := range []*sdk.Kernel{a, b} {
		if again, err := k.Run(ctx, id); err != nil || string(again.Output) != "1" {
			t.Fatalf("Run after = %v, %v", again, err)
		}
	}
}
