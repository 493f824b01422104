package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// fullSyncKill runs TestSyncAtEffectsKill at every event under -short too
// (without -short it always does).
var fullSyncKill = flag.Bool("syncateffects.full", false, "TestSyncAtEffectsKill: kill at every event even under -short")

// lossLog is a log that a process runs on until it is killed: it lets
// budget more events be appended, then fails every append (as crashLog),
// and remembers every acknowledged append, whether it was synced, and the
// head made durable by the newest synced one. A crash of the machine loses
// everything above that head (an unsynced append becomes durable only with
// a later synced one, eventlog.Log.AppendUnsynced); a kill that loses
// nothing acknowledged (of a client of Postgres, say) keeps everything. It gives no leases and no inbox (no Unwrap),
// but says whether its store commits each append (so the kernel defers
// safe_to_retry starts on Postgres, DESIGN §21).
type lossLog struct {
	eventlog.IndexedLog
	budget atomic.Int64

	mu      sync.Mutex
	durable uint64 // the head the newest synced append (or Create) made durable
	acked   []ackedAppend
}

// ackedAppend is one append the log acknowledged.
type ackedAppend struct {
	synced bool
	events []eventlog.Event
}

func newLossLog(store eventlog.IndexedLog, budget int64) *lossLog {
	l := &lossLog{IndexedLog: store}
	l.budget.Store(budget)
	return l
}

// CommitPerAppend is the store's.
func (l *lossLog) CommitPerAppend() bool {
	var c eventlog.CommitPerAppend
	return eventlog.As(l.IndexedLog, &c) && c.CommitPerAppend()
}

func (l *lossLog) Create(ctx context.Context, created *eventlog.ExecutionCreated, at time.Time, opts ...eventlog.CreateOption) (eventlog.ID, error) {
	id, err := l.IndexedLog.Create(ctx, created, at, opts...)
	if err == nil {
		l.mu.Lock()
		l.durable = 1
		l.mu.Unlock()
	}
	return id, err
}

func (l *lossLog) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	return l.append(ctx, id, head, true, evs)
}

func (l *lossLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	return l.append(ctx, id, head, false, evs)
}

func (l *lossLog) append(ctx context.Context, id eventlog.ID, head uint64, synced bool, evs []eventlog.Event) (uint64, error) {
	if l.budget.Add(-int64(len(evs))) < 0 {
		return 0, errCrash
	}
	var n uint64
	var err error
	if synced {
		n, err = l.IndexedLog.Append(ctx, id, head, evs...)
	} else {
		n, err = l.IndexedLog.AppendUnsynced(ctx, id, head, evs...)
	}
	if err != nil {
		return n, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked = append(l.acked, ackedAppend{synced: synced, events: slices.Clone(evs)})
	if synced {
		l.durable = n
	}
	return n, nil
}

// syncAgent is the agent of the SyncAtEffects tests: n safe_to_retry tool
// calls inc(i), and after every third an at_most_once send(i); a send
// found indeterminate is reported as "?i" and the run goes on.
type syncAgent struct {
	mu    sync.Mutex
	phase string         // "killed" or "resumed"
	runs  map[string]int // phase/target-i → bodies run
}

func (a *syncAgent) ran(what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runs[a.phase+"/"+what]++
}

func (a *syncAgent) count(phase, what string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[phase+"/"+what]
}

func (a *syncAgent) register(k *sdk.Kernel) {
	inc := sdk.DefineTool("inc", func(_ context.Context, i int) (string, error) {
		a.ran(fmt.Sprintf("inc-%d", i))
		return fmt.Sprintf("inc-%d", i), nil
	})
	send := sdk.DefineTool("send", func(_ context.Context, i int) (string, error) {
		a.ran(fmt.Sprintf("send-%d", i))
		return fmt.Sprintf("send-%d", i), nil
	}, sdk.AtMostOnce())
	_, _ = sdk.Register(k, "mix", func(ctx context.Context, n int) ([]string, error) {
		var out []string
		for i := range n {
			r, err := inc.Call(ctx, i)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
			if i%3 == 2 {
				r, err := send.Call(ctx, i)
				switch {
				case errors.Is(err, sdk.ErrIndeterminate):
					r = fmt.Sprintf("?%d", i)
				case err != nil:
					return nil, err
				}
				out = append(out, r)
			}
		}
		return out, nil
	})
}

// checkSyncClasses fails unless every append the log acknowledged was
// synced as mode says: unsynced, only safe_to_retry step.started and —
// under SyncAtEffects only — a safe_to_retry step's step.succeeded or
// step.failed appended without a capture; every other event synced.
func checkSyncClasses(t *testing.T, mode sdk.DurabilityMode, acked []ackedAppend) {
	t.Helper()
	safe := map[string]bool{} // StepID → safe_to_retry
	for _, a := range acked {
		for _, ev := range a.events {
			if st, ok := ev.Data.(*eventlog.StepStarted); ok {
				safe[st.StepID] = st.Idempotency == eventlog.SafeToRetry
			}
		}
	}
	for _, a := range acked {
		if a.synced {
			continue
		}
		for _, ev := range a.events {
			switch p := ev.Data.(type) {
			case *eventlog.StepStarted:
				if p.Idempotency == eventlog.SafeToRetry {
					continue
				}
			case *eventlog.StepSucceeded:
				if mode == sdk.SyncAtEffects && safe[p.StepID] {
					continue
				}
			case *eventlog.StepFailed:
				if mode == sdk.SyncAtEffects && safe[p.StepID] && !p.Indeterminate {
					continue
				}
			}
			t.Fatalf("seq %d (%s) was appended unsynced under %s", ev.Seq, describe(ev), mode)
		}
	}
}

// succeededResults returns the results (JSON strings) of the
// step.succeeded events among evs, with the seq of each.
func succeededResults(t *testing.T, evs []eventlog.Event) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, ev := range evs {
		if p, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			var s string
			if err := json.Unmarshal(p.Result, &s); err != nil {
				t.Fatalf("seq %d: result %s: %v", ev.Seq, p.Result, err)
			}
			out[s] = ev.Seq
		}
	}
	return out
}

// syncKillStats sums what the trials of one mode saw.
type syncKillStats struct {
	trials, lostOutcomes, rerunAfterLoss int
}

// syncKillTrial kills a run of mix(n) on store under mode (nil opts: the
// default) once budget events were appended, then — crash true — drops
// what was not durable (everything above the newest synced append), as a
// crash does, or — crash false — keeps every acknowledged append, as a
// kill that loses no acknowledged write does. The surviving lineage is copied
// into a new execution of store and run to completion by a new kernel.
// It checks DESIGN §21's guarantee: every at_most_once body ran at most
// once (exactly once when it succeeded), the output is the uninterrupted
// run's (a send found indeterminate, whose body ran before the kill,
// reads "?i"), the safe_to_retry bodies run again are exactly those whose
// outcome the surviving lineage lacks — and an outcome lost was appended
// after the newest synced append — and every append was synced as the
// mode says.
func syncKillTrial(t *testing.T, store eventlog.IndexedLog, mode sdk.DurabilityMode, opts []sdk.Option, n int, want []string, budget int64, crash bool, stats *syncKillStats) {
	t.Helper()
	ctx := t.Context()
	agent := &syncAgent{phase: "killed", runs: map[string]int{}}
	ll := newLossLog(store, budget)
	k1 := newKernel(t, ll, agent.register, append([]sdk.Option{sdk.WithOwner("w")}, opts...)...)
	id, err := k1.Start(ctx, "mix", n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) {
		t.Fatalf("budget %d: Run = %v; want the simulated crash", budget, err)
	}
	checkSyncClasses(t, mode, ll.acked)

	// What survives the kill.
	var all []eventlog.Event
	for ev, err := range store.Events(ctx, id, 1) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
	}
	cut := uint64(len(all))
	if crash {
		cut = ll.durable
	}
	kept := all[:cut]
	lost := succeededResults(t, all[cut:])
	stats.trials++
	stats.lostOutcomes += len(lost)
	for name, seq := range lost {
		if mode != sdk.SyncAtEffects || name[:4] != "inc-" {
			t.Fatalf("budget %d: the crash lost the outcome of %s (seq %d) under %s", budget, name, seq, mode)
		}
	}

	// The survivors, copied into a new execution of the store.
	created := kept[0].Data.(*eventlog.ExecutionCreated)
	id2, err := store.Create(ctx, created, kept[0].Time)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) > 1 {
		if _, err := store.Append(ctx, id2, 1, kept[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	agent.phase = "resumed"
	rl := newLossLog(store, 1<<40)
	k2 := newKernel(t, rl, agent.register, append([]sdk.Option{sdk.WithOwner("w")}, opts...)...)
	res, err := k2.Run(ctx, id2)
	if err != nil {
		t.Fatalf("budget %d crash %v: resumed Run: %v", budget, crash, err)
	}
	checkSyncClasses(t, mode, rl.acked)
	var got []string
	if err := res.Decode(&got); err != nil {
		t.Fatal(err)
	}

	keptDone := succeededResults(t, kept)
	final := events(t, k2, id2)
	indeterminate := 0
	for _, ev := range final {
		if p, ok := ev.Data.(*eventlog.StepFailed); ok && p.Indeterminate {
			indeterminate++
		}
	}
	if len(got) != len(want) {
		t.Fatalf("budget %d crash %v: output %v; want %v", budget, crash, got, want)
	}
	found := 0
	for i := range n {
		inc, send := fmt.Sprintf("inc-%d", i), fmt.Sprintf("send-%d", i)
		// safe_to_retry: run again exactly when the survivors lack its outcome.
		_, done := keptDone[inc]
		again := agent.count("resumed", inc)
		if done == (again != 0) || again > 1 {
			t.Fatalf("budget %d crash %v: %s ran %d times after resuming, its outcome survived: %v", budget, crash, inc, again, done)
		}
		if _, ok := lost[inc]; ok && again != 1 {
			t.Fatalf("budget %d crash %v: %s's lost outcome was not run again", budget, crash, inc)
		}
		if _, ok := lost[inc]; ok {
			stats.rerunAfterLoss++
		}
		if i%3 != 2 {
			continue
		}
		bodies := agent.count("killed", send) + agent.count("resumed", send)
		_, sent := keptDone[send]
		switch {
		case bodies > 1:
			t.Fatalf("budget %d crash %v: at_most_once %s ran %d times", budget, crash, send, bodies)
		case slices.Contains(got, fmt.Sprintf("?%d", i)):
			// Indeterminate: its intent survived, its body ran, its outcome did not.
			found++
			if bodies != 1 || agent.count("resumed", send) != 0 || sent {
				t.Fatalf("budget %d crash %v: %s indeterminate, but bodies %d (resumed %d), outcome kept %v", budget, crash, send, bodies, agent.count("resumed", send), sent)
			}
		case bodies != 1:
			t.Fatalf("budget %d crash %v: %s succeeded with %d bodies run", budget, crash, send, bodies)
		}
	}
	if found != indeterminate {
		t.Fatalf("budget %d crash %v: %d sends read indeterminate, the lineage has %d indeterminate steps", budget, crash, found, indeterminate)
	}
	for j, w := range want {
		if got[j] != w && !(len(got[j]) > 0 && got[j][0] == '?' && w == "send-"+got[j][1:]) {
			t.Fatalf("budget %d crash %v: output %v; want %v (a send may read ?i only when indeterminate)", budget, crash, got, want)
		}
	}
}

// runSyncKill runs syncKillTrial at every event (a sample under -short)
// under both modes, with a process kill and a machine crash each.
func runSyncKill(t *testing.T, store eventlog.IndexedLog) {
	const n = 9
	ctx := t.Context()
	// The uninterrupted run, under the default.
	base := &syncAgent{phase: "base", runs: map[string]int{}}
	rl := newLossLog(store, 1<<40)
	k := newKernel(t, rl, base.register, sdk.WithOwner("w"))
	id, err := k.Start(ctx, "mix", n)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := res.Decode(&want); err != nil {
		t.Fatal(err)
	}
	total := int64(len(events(t, k, id)) - 1) // appended after execution.created
	for _, mode := range []sdk.DurabilityMode{sdk.SyncEveryStep, sdk.SyncAtEffects} {
		var opts []sdk.Option // SyncEveryStep: no option, the default
		if mode == sdk.SyncAtEffects {
			opts = []sdk.Option{sdk.Durability(mode)}
		}
		var stats syncKillStats
		for budget := range total {
			if testing.Short() && !*fullSyncKill && budget%3 != 1 {
				continue
			}
			for _, crash := range []bool{false, true} {
				syncKillTrial(t, store, mode, opts, n, want, budget, crash, &stats)
			}
		}
		// A crash after Run returned loses nothing: the completion the
		// caller saw is durable, and so is every outcome before it.
		ll := newLossLog(store, 1<<40)
		kc := newKernel(t, ll, (&syncAgent{phase: "complete", runs: map[string]int{}}).register, append([]sdk.Option{sdk.WithOwner("w")}, opts...)...)
		idc, err := kc.Start(ctx, "mix", n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kc.Run(ctx, idc); err != nil {
			t.Fatal(err)
		}
		checkSyncClasses(t, mode, ll.acked)
		if head := uint64(len(events(t, kc, idc))); ll.durable != head {
			t.Fatalf("%s: Run returned, but a crash then keeps %d of %d events", mode, ll.durable, head)
		}
		t.Logf("%s: %d trials, %d safe_to_retry outcomes lost to a crash and run again", mode, stats.trials, stats.rerunAfterLoss)
		// The mode is what makes a crash lose outcomes: never the default.
		if mode == sdk.SyncEveryStep && stats.lostOutcomes != 0 {
			t.Fatalf("the default lost %d outcomes to crashes", stats.lostOutcomes)
		}
		if mode == sdk.SyncAtEffects && stats.rerunAfterLoss == 0 {
			t.Fatalf("SyncAtEffects: no crash lost a safe_to_retry outcome: the mode appends them synced")
		}
	}
}

// TestSyncAtEffectsKill (issue 36, DESIGN §21) on Pebble: kill the
// process at every event, or crash the machine there (losing every append
// after the newest synced one), under SyncEveryStep (the default) and
// SyncAtEffects, and resume. See syncKillTrial for what it checks.
func TestSyncAtEffectsKill(t *testing.T) {
	runSyncKill(t, newStore(t))
}

// TestSyncAtEffectsKillPostgres is TestSyncAtEffectsKill on Postgres,
// where a safe_to_retry step's start rides its outcome's append.
func TestSyncAtEffectsKillPostgres(t *testing.T) {
	url, schema := pgtest.Schema(t)
	s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	runSyncKill(t, s)
}

// TestDurabilityOption: an unknown mode is refused; the modes name
// themselves.
func TestDurabilityOption(t *testing.T) {
	if _, err := sdk.New(newStore(t), sdk.Durability(sdk.DurabilityMode(7))); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("Durability(7): %v; want ErrInvalid", err)
	}
	if sdk.SyncEveryStep.String() != "sync_every_step" || sdk.SyncAtEffects.String() != "sync_at_effects" {
		t.Fatalf("names %q %q", sdk.SyncEveryStep, sdk.SyncAtEffects)
	}
}

// TestSyncAtEffectsCaptures: under SyncAtEffects a safe_to_retry outcome
// that commits a capture (EverySteps) is synced with it, as the baseline
// binding, the completion captures and the completion are; the outcomes
// that commit none — of calls that affect the resource or not — are
// appended unsynced.
func TestSyncAtEffectsCaptures(t *testing.T) {
	ctx := t.Context()
	drv := testdriver.New()
	ll := newLossLog(newStore(t), 1<<40)
	k := newKernel(t, ll, func(k *sdk.Kernel) {
		write := sdk.DefineTool("write", func(ctx context.Context, n int) (int, error) { return n, nil }, sdk.Affects("ws"))
		read := sdk.DefineTool("read", func(ctx context.Context, n int) (int, error) { return n, nil })
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			if _, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(2)); err != nil {
				return 0, err
			}
			sum := 0
			for i := range 3 {
				w, err := write.Call(ctx, i)
				if err != nil {
					return 0, err
				}
				r, err := read.Call(ctx, i)
				if err != nil {
					return 0, err
				}
				sum += w + r
			}
			return sum, nil
		})
	}, sdk.Durability(sdk.SyncAtEffects))
	id, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	checkSyncClasses(t, sdk.SyncAtEffects, ll.acked)
	var got []string
	for _, a := range ll.acked {
		s := "unsynced:"
		if a.synced {
			s = "synced:"
		}
		got = append(got, s+strings.Join(describeAll(a.events), "+"))
	}
	want := []string{
		"synced:dispatch 1", "synced:bound ws every=2+captured ws baseline gen=1",
		"unsynced:started tool write affects=ws", "unsynced:succeeded",
		"unsynced:started tool read", "unsynced:succeeded",
		"unsynced:started tool write affects=ws", "synced:succeeded+captured ws steps gen=4",
		"unsynced:started tool read", "unsynced:succeeded",
		"unsynced:started tool write affects=ws", "unsynced:succeeded",
		"unsynced:started tool read", "unsynced:succeeded",
		"synced:captured ws completion gen=7+completed",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("appends:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
