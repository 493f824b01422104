package sdk_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// report is the scheduled agent of these tests.
type report struct {
	To string `json:"to"`
}

func registerReport(k *sdk.Kernel) {
	_, _ = sdk.Register(k, "report", func(ctx context.Context, in report) (string, error) {
		return "sent to " + in.To, nil
	})
}

// tickStarts reads every execution's execution.created and returns, per
// idempotency key, how many executions were created under it, failing
// the test on a created event that is not a tick of schedule name with
// input want.
func tickStarts(t *testing.T, k *sdk.Kernel, name, wantInput string) map[string]int {
	t.Helper()
	infos, err := k.List(t.Context(), sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, info := range infos {
		evs := events(t, k, info.ID)
		c, ok := evs[0].Data.(*eventlog.ExecutionCreated)
		if !ok {
			t.Fatalf("execution %s starts with %s, not execution.created", info.ID, evs[0].Data.Kind())
		}
		if c.Agent != "report" || string(c.Input) != wantInput || !strings.HasPrefix(c.Key, name+"@") {
			t.Fatalf("execution %s created with agent %q, input %s, key %q; want a tick of %q with %s", info.ID, c.Agent, c.Input, c.Key, name, wantInput)
		}
		out[c.Key]++
	}
	return out
}

// waitUntil polls cond every 10 ms until it holds or 10 s pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveAll runs Serve of every kernel until the test ends.
func serveAll(t *testing.T, ks ...*sdk.Kernel) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.Serve(ctx, sdk.PollEvery(10*time.Millisecond)); err != nil {
				t.Errorf("Serve: %v", err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// lastTick returns the record's last tick of schedule name.
func lastTick(t *testing.T, k *sdk.Kernel, name string) time.Time {
	t.Helper()
	all, err := k.Schedules(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == name {
			return s.LastTick
		}
	}
	t.Fatalf("no schedule %q", name)
	return time.Time{}
}

// TestScheduleTwoServesPebble: two kernels Serve one in-process Pebble
// store on one fake clock; a schedule @every 1s over 10 s of ticks starts
// each tick exactly once — one execution.created per tick, under the
// tick's key, with the schedule's input — and every one completes
// (DESIGN §19, §21½.14).
func TestScheduleTwoServesPebble(t *testing.T) {
	s := newStore(t)
	clock := newFakeClock()
	kA := newKernel(t, s, registerReport, sdk.WithOwner("A"), sdk.WithClock(clock))
	kB := newKernel(t, s, registerReport, sdk.WithOwner("B"), sdk.WithClock(clock))
	testScheduleTwoServes(t, kA, kB, 10, clock.Advance, clock.Now)
}

// TestScheduleTwoServesPostgres: the same with two kernels on two
// connections to one Postgres schema (two hosts), on the wall clock for
// 10 s (issue 35: "two workers and a schedule @every 1s for 10 s: each
// tick started exactly once").
func TestScheduleTwoServesPostgres(t *testing.T) {
	stores := openPG(t, 2)
	kA := newKernel(t, stores[0], registerReport, sdk.WithOwner("A"))
	kB := newKernel(t, stores[1], registerReport, sdk.WithOwner("B"))
	testScheduleTwoServes(t, kA, kB, 10, nil, time.Now)
}

func testScheduleTwoServes(t *testing.T, kA, kB *sdk.Kernel, ticks int, advance func(time.Duration), now func() time.Time) {
	serveAll(t, kA, kB)
	time.Sleep(50 * time.Millisecond) // both Serves run before the schedule exists
	if err := kA.Schedule(t.Context(), "morning", "report", "@every 1s", report{To: "ops"}); err != nil {
		t.Fatal(err)
	}
	all, err := kB.Schedules(t.Context())
	if err != nil || len(all) != 1 {
		t.Fatalf("Schedules: %+v, %v", all, err)
	}
	var want []string
	first := all[0].Created.Truncate(time.Second).Add(time.Second)
	if !all[0].NextTick.Equal(first) {
		t.Fatalf("next tick %v, want %v", all[0].NextTick, first)
	}
	for i := range ticks {
		tick := first.Add(time.Duration(i) * time.Second)
		want = append(want, sdk.TickKey("morning", tick))
		if advance != nil {
			advance(tick.Sub(now()))
		}
		waitUntil(t, "tick "+tick.String(), func() bool { return !lastTick(t, kA, "morning").Before(tick) })
	}
	// On the wall clock a later tick may have started since: it must be
	// a tick after the last one waited for, started once too.
	got := tickStarts(t, kA, "morning", `{"to":"ops"}`)
	for _, key := range want {
		if got[key] != 1 {
			t.Errorf("tick %s started %d times; want exactly once", key, got[key])
		}
	}
	last := first.Add(time.Duration(ticks-1) * time.Second)
	for key, n := range got {
		tick, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(key, "morning@"))
		if err != nil || tick.Before(first) || (advance != nil && tick.After(last)) || !tick.Equal(tick.Truncate(time.Second)) {
			t.Errorf("an execution under key %q: not a tick of the schedule", key)
		} else if n != 1 {
			t.Errorf("tick %s started %d times; want exactly once", key, n)
		}
	}
	waitUntil(t, "every tick's execution to complete", func() bool {
		infos, err := kA.List(t.Context(), sdk.Filter{Status: []eventlog.Status{eventlog.StatusCompleted}})
		return err == nil && len(infos) >= ticks
	})
}

// TestScheduleCatchUp: ticks missed while no Serve ran start once (the
// newest), or the newest n with CatchUp(n); ticks that come due while a
// Serve runs all start; a Serve stopped and started again starts no tick
// twice (the record's last tick decides).
func TestScheduleCatchUp(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []sdk.ScheduleOption
		catchUp int
	}{
		{"default", nil, 1},
		{"three", []sdk.ScheduleOption{sdk.CatchUp(3)}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			clock := newFakeClock()
			k := newKernel(t, s, registerReport, sdk.WithClock(clock))
			t0 := clock.Now()
			if err := k.Schedule(t.Context(), "s", "report", "@every 1s", report{To: "x"}, c.opts...); err != nil {
				t.Fatal(err)
			}
			clock.Advance(10 * time.Second) // ticks t0+1s … t0+10s pass with no Serve
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = k.Serve(ctx, sdk.PollEvery(10*time.Millisecond)) }()
			waitUntil(t, "the catch-up", func() bool { return !lastTick(t, k, "s").IsZero() })
			var want []string
			for i := 10 - c.catchUp + 1; i <= 10; i++ {
				want = append(want, sdk.TickKey("s", t0.Add(time.Duration(i)*time.Second)))
			}
			// While it runs, the next two ticks come due: both start.
			clock.Advance(2 * time.Second)
			want = append(want, sdk.TickKey("s", t0.Add(11*time.Second)), sdk.TickKey("s", t0.Add(12*time.Second)))
			waitUntil(t, "the running ticks", func() bool { return lastTick(t, k, "s").Equal(t0.Add(12 * time.Second)) })
			cancel()
			<-done
			// A Serve started again with no tick due starts nothing.
			ctx, cancel = context.WithCancel(context.Background())
			done = make(chan struct{})
			go func() { defer close(done); _ = k.Serve(ctx, sdk.PollEvery(10*time.Millisecond)) }()
			time.Sleep(100 * time.Millisecond)
			cancel()
			<-done
			got := tickStarts(t, k, "s", `{"to":"x"}`)
			if len(got) != len(want) {
				t.Errorf("%d ticks started: %v; want %v", len(got), got, want)
			}
			for _, key := range want {
				if got[key] != 1 {
					t.Errorf("tick %s started %d times; want once", key, got[key])
				}
			}
		})
	}
}

// TestScheduleBadInput: every bad Schedule is ErrInvalid and writes
// nothing — no schedule record, no execution — and an unknown Unschedule
// is ErrNotFound.
func TestScheduleBadInput(t *testing.T) {
	s := newStore(t)
	k := newKernel(t, s, registerReport)
	ctx := t.Context()
	for _, c := range []struct {
		what, name, agent, spec string
		input                   any
		opts                    []sdk.ScheduleOption
	}{
		{"empty name", "", "report", "@every 1s", report{}, nil},
		{"NUL in name", "a\x00", "report", "@every 1s", report{}, nil},
		{"unregistered agent", "s", "nobody", "@every 1s", report{}, nil},
		{"malformed cron", "s", "report", "61 * * * *", report{}, nil},
		{"too few fields", "s", "report", "* *", report{}, nil},
		{"empty spec", "s", "report", "", report{}, nil},
		{"bad time zone", "s", "report", "CRON_TZ=Mars/Olympus 0 8 * * *", report{}, nil},
		{"time zone alone", "s", "report", "CRON_TZ=UTC", report{}, nil},
		{"every below a second", "s", "report", "@every 500ms", report{}, nil},
		{"every not whole seconds", "s", "report", "@every 1500ms", report{}, nil},
		{"every negative", "s", "report", "@every -1s", report{}, nil},
		{"never fires", "s", "report", "0 0 30 2 *", report{}, nil},
		{"input does not encode", "s", "report", "@every 1s", func() {}, nil},
		{"input of another type", "s", "report", "@every 1s", []int{1}, nil},
		{"catch-up 0", "s", "report", "@every 1s", report{}, []sdk.ScheduleOption{sdk.CatchUp(0)}},
		{"nil option", "s", "report", "@every 1s", report{}, []sdk.ScheduleOption{nil}},
	} {
		if err := k.Schedule(ctx, c.name, c.agent, c.spec, c.input, c.opts...); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Schedule with %s: %v; want ErrInvalid", c.what, err)
		}
	}
	if err := k.Unschedule(ctx, "none"); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("Unschedule of an unknown name: %v; want ErrNotFound", err)
	}
	if all, err := k.Schedules(ctx); err != nil || len(all) != 0 {
		t.Fatalf("after bad input the store holds schedules %+v (%v)", all, err)
	}
	if infos, err := k.List(ctx, sdk.Filter{}); err != nil || len(infos) != 0 {
		t.Fatalf("after bad input the store holds executions %+v (%v)", infos, err)
	}
}

// TestScheduleSpecs: the good specs a user writes are taken, and
// Schedules shows each with its next tick: UTC unless CRON_TZ says.
func TestScheduleSpecs(t *testing.T) {
	s := newStore(t)
	clock := newFakeClock() // 2026-01-02 03:04:05 UTC
	k := newKernel(t, s, registerReport, sdk.WithClock(clock))
	for _, c := range []struct{ name, spec, next string }{
		{"a-cron", "0 8 * * *", "2026-01-02T08:00:00Z"},
		{"b-seconds", "30 */5 * * * *", "2026-01-02T03:05:30Z"},
		{"c-tz", "CRON_TZ=America/New_York 0 8 * * *", "2026-01-02T13:00:00Z"},
		{"d-daily", "@daily", "2026-01-03T00:00:00Z"},
		{"e-every", "@every 1h30m", "2026-01-02T04:34:05Z"},
	} {
		if err := k.Schedule(t.Context(), c.name, "report", c.spec, report{To: c.name}); err != nil {
			t.Fatalf("Schedule(%q): %v", c.spec, err)
		}
		all, err := k.Schedules(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := all[len(all)-1]
		if got.Name != c.name || got.Spec != c.spec || got.NextTick.Format(time.RFC3339) != c.next || !got.LastTick.IsZero() {
			t.Errorf("Schedules shows %+v; want %s with next tick %s", got, c.spec, c.next)
		}
	}
	if err := k.Unschedule(t.Context(), "a-cron"); err != nil {
		t.Fatal(err)
	}
	if all, _ := k.Schedules(t.Context()); len(all) != 4 || all[0].Name != "b-seconds" {
		t.Fatalf("after Unschedule(a-cron): %+v", all)
	}
}

// tickBarrier holds the first AdvanceSchedule of each of two kernels
// until both made theirs: by then both read the record before either
// moved it, and both started the first tick.
type tickBarrier struct {
	mu      sync.Mutex
	arrived int
	both    chan struct{}
}

// barrierScheduler is a kernel's view of a store whose first
// AdvanceSchedule waits at a tickBarrier.
type barrierScheduler struct {
	*pebblestore.Store
	b       *tickBarrier
	waited  bool
	results chan bool // each AdvanceSchedule's outcome
}

func (s *barrierScheduler) AdvanceSchedule(ctx context.Context, name string, created, from, to time.Time) (bool, error) {
	if !s.waited {
		s.waited = true // Serve's schedule rounds run one at a time
		s.b.mu.Lock()
		if s.b.arrived++; s.b.arrived == 2 {
			close(s.b.both)
		}
		s.b.mu.Unlock()
		select {
		case <-s.b.both:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	ok, err := s.Store.AdvanceSchedule(ctx, name, created, from, to)
	if err == nil {
		s.results <- ok
	}
	return ok, err
}

// TestScheduleTickRaceStartsOnce (DESIGN §19, §21½.14): two workers that
// both read a schedule's record before either moved its last tick both
// start the due tick; its key makes them one execution (one
// execution.created under the tick's key, one dispatch), and of their
// two compare-and-sets on the record exactly one wins.
func TestScheduleTickRaceStartsOnce(t *testing.T) {
	s := newStore(t)
	clock := newFakeClock()
	b := &tickBarrier{both: make(chan struct{})}
	results := make(chan bool, 8)
	kA := newKernel(t, &barrierScheduler{Store: s, b: b, results: results}, registerReport, sdk.WithOwner("A"), sdk.WithClock(clock))
	kB := newKernel(t, &barrierScheduler{Store: s, b: b, results: results}, registerReport, sdk.WithOwner("B"), sdk.WithClock(clock))
	if err := kA.Schedule(t.Context(), "race", "report", "@every 1s", report{To: "ops"}); err != nil {
		t.Fatal(err)
	}
	t0 := clock.Now()
	serveAll(t, kA, kB)
	clock.Advance(time.Second)
	tick := t0.Truncate(time.Second).Add(time.Second)
	waitUntil(t, "both workers' advances", func() bool { return len(results) == 2 })
	if a, b := <-results, <-results; a == b {
		t.Fatalf("the two advances from one record returned %v and %v; want exactly one to win", a, b)
	}
	if got := lastTick(t, kA, "race"); !got.Equal(tick) {
		t.Fatalf("last tick %v, want %v", got, tick)
	}
	got := tickStarts(t, kA, "race", `{"to":"ops"}`)
	if len(got) != 1 || got[sdk.TickKey("race", tick)] != 1 {
		t.Fatalf("executions per key %v; want one, under %s", got, sdk.TickKey("race", tick))
	}
	waitUntil(t, "the tick's execution to complete", func() bool {
		infos, err := kA.List(t.Context(), sdk.Filter{Status: []eventlog.Status{eventlog.StatusCompleted}})
		return err == nil && len(infos) == 1
	})
	infos, err := kA.List(t.Context(), sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var dispatches int
	for _, ev := range events(t, kA, infos[0].ID) {
		if _, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			dispatches++
		}
	}
	if dispatches != 1 {
		t.Fatalf("the tick's execution was dispatched %d times, want once", dispatches)
	}
}

// countingScheduler counts the schedule rounds of the Serve on it (each
// reads Schedules once).
type countingScheduler struct {
	*pebblestore.Store
	reads atomic.Int64
}

func (s *countingScheduler) Schedules(ctx context.Context) ([]eventlog.Schedule, error) {
	s.reads.Add(1)
	return s.Store.Schedules(ctx)
}

// TestScheduleRecordDecides (DESIGN §21½.14): the schedule record's last
// tick decides which ticks were started, not the executions' keys: once
// the executions of started ticks are deleted (which frees their keys), a
// Serve started again with no new tick due starts none of them.
func TestScheduleRecordDecides(t *testing.T) {
	s := &countingScheduler{Store: newStore(t)}
	clock := newFakeClock()
	k := newKernel(t, s, registerReport, sdk.WithClock(clock))
	t0 := clock.Now()
	if err := k.Schedule(t.Context(), "gc", "report", "@every 1s", report{To: "x"}); err != nil {
		t.Fatal(err)
	}
	serve := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = k.Serve(ctx, sdk.PollEvery(10*time.Millisecond)) }()
		return func() { cancel(); <-done }
	}
	stop := serve()
	// The ticks come due while the Serve runs (after its first round):
	// all three start.
	waitUntil(t, "a schedule round", func() bool { return s.reads.Load() >= 1 })
	clock.Advance(3 * time.Second)
	last := t0.Truncate(time.Second).Add(3 * time.Second)
	waitUntil(t, "three ticks", func() bool { return lastTick(t, k, "gc").Equal(last) })
	waitUntil(t, "their executions to complete", func() bool {
		infos, err := k.List(t.Context(), sdk.Filter{Status: []eventlog.Status{eventlog.StatusCompleted}})
		return err == nil && len(infos) == 3
	})
	stop()
	if got := tickStarts(t, k, "gc", `{"to":"x"}`); len(got) != 3 {
		t.Fatalf("ticks started %v, want 3", got)
	}
	infos, err := k.List(t.Context(), sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if err := k.Delete(t.Context(), info.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A Serve again, with no tick due: two whole schedule rounds pass.
	reads := s.reads.Load()
	stop = serve()
	waitUntil(t, "two schedule rounds", func() bool { return s.reads.Load() >= reads+3 })
	stop()
	if infos, err := k.List(t.Context(), sdk.Filter{}); err != nil || len(infos) != 0 {
		t.Fatalf("a Serve with no tick due started %d executions (%v): a tick started before ran again", len(infos), err)
	}
	if got := lastTick(t, k, "gc"); !got.Equal(last) {
		t.Fatalf("last tick %v, want %v", got, last)
	}
}
