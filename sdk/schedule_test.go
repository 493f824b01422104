package sdk_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
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
