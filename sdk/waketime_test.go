package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// wakeStores runs f on a Pebble store in memory and on a fresh Postgres
// schema: the wake time a store keeps must not overflow on either.
func wakeStores(t *testing.T, f func(t *testing.T, store eventlog.IndexedLog)) {
	t.Run("pebble", func(t *testing.T) { f(t, newStore(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, openPG(t, 1)[0]) })
}

// TestSleepWakeTimeSaturates: a Sleep whose wake time lies past
// eventlog.MaxWakeTime — math.MaxInt64 meant as "forever", or anything
// that crosses the limit — records timer.started and dispatch.parked at
// exactly MaxWakeTime, and the store keeps that time (not a negative one
// that makes the execution always due). Durations are drawn near the
// limits: near math.MaxInt64, and on both sides of MaxWakeTime - now.
func TestSleepWakeTimeSaturates(t *testing.T) {
	wakeStores(t, func(t *testing.T, store eventlog.IndexedLog) {
		ctx := context.Background()
		clock := newFakeClock()
		now := clock.Now()
		k := newKernel(t, store, func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "sleeper", func(ctx context.Context, d time.Duration) (string, error) {
				return "woke", sdk.Sleep(ctx, d)
			})
		}, sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
		toLimit := eventlog.MaxWakeTime.Sub(now)
		rapid.Check(t, func(rt *rapid.T) {
			var d time.Duration
			switch rapid.IntRange(0, 2).Draw(rt, "where") {
			case 0:
				d = time.Duration(math.MaxInt64 - rapid.Int64Range(0, 1<<40).Draw(rt, "below max"))
			case 1:
				d = toLimit + time.Duration(rapid.Int64Range(-1<<20, 1<<20).Draw(rt, "around the limit"))
			default:
				d = time.Duration(rapid.Int64Range(int64(time.Hour), math.MaxInt64).Draw(rt, "any long"))
			}
			want := now.Add(d)
			if want.After(eventlog.MaxWakeTime) {
				want = eventlog.MaxWakeTime
			}
			id, err := k.Start(ctx, "sleeper", d)
			if err != nil {
				rt.Fatal(err)
			}
			if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
				rt.Fatalf("Run = %v, want ErrWaiting", err)
			}
			evs := events(t, k, id)
			if got := rdescribeAll(evs); fmt.Sprint(got) != fmt.Sprint([]string{"created sleeper", "dispatch 1", "timer.started", "parked timer"}) {
				rt.Fatalf("events %q", got)
			}
			started, parked := evs[2].Data.(*eventlog.TimerStarted), evs[3].Data.(*eventlog.DispatchParked)
			if !started.WakeAt.Equal(want) || !parked.WakeAt.Equal(want) {
				rt.Fatalf("Sleep(%d): timer.started WakeAt %v, parked %v; want %v", d, started.WakeAt, parked.WakeAt, want)
			}
			info, err := store.Info(ctx, id)
			if err != nil {
				rt.Fatal(err)
			}
			if info.Status != eventlog.StatusWaiting || !info.WakeAt.Equal(want) {
				rt.Fatalf("Sleep(%d): Info %s until %v, want waiting until %v", d, info.Status, info.WakeAt, want)
			}
		})
	})
}

// rdescribeAll is rdescribe of every event.
func rdescribeAll(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = rdescribe(ev)
	}
	return out
}

// TestForeverSleepIsNotDue: an execution parked by Sleep(math.MaxInt64)
// is not runnable: Serve, polling every millisecond, never dispatches it
// again (before the fix, Postgres kept a negative wake time, and every
// worker re-dispatched and re-parked it about 120 times a second).
func TestForeverSleepIsNotDue(t *testing.T) {
	wakeStores(t, func(t *testing.T, store eventlog.IndexedLog) {
		ctx := context.Background()
		k := newKernel(t, store, func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "sleeper", func(ctx context.Context, d time.Duration) (string, error) {
				return "woke", sdk.Sleep(ctx, d)
			})
		}, sdk.ParkAfter(time.Minute))
		id, err := k.Start(ctx, "sleeper", time.Duration(math.MaxInt64))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
			t.Fatalf("Run = %v, want ErrWaiting", err)
		}
		sctx, stop := context.WithTimeout(ctx, 500*time.Millisecond)
		defer stop()
		_ = k.Serve(sctx, sdk.PollEvery(time.Millisecond))
		evs := rwant(t, k, id, []string{"created sleeper", "dispatch 1", "timer.started", "parked timer"})
		if p := evs[3].Data.(*eventlog.DispatchParked); !p.WakeAt.Equal(eventlog.MaxWakeTime) {
			t.Fatalf("parked until %v, want MaxWakeTime", p.WakeAt)
		}
	})
}

// TestRetryAndDeadlineSaturate: a retry backoff of math.MaxInt64 waits
// centuries — step.failed{RetryAt} and dispatch.parked at least 50 years
// away, at most MaxWakeTime, and the store keeps that time (before the
// fix, the jitter overflowed into a negative delay: an immediate retry);
// a deadline past MaxWakeTime is recorded (and kept) as MaxWakeTime.
func TestRetryAndDeadlineSaturate(t *testing.T) {
	wakeStores(t, func(t *testing.T, store eventlog.IndexedLog) {
		ctx := context.Background()
		clock := newFakeClock()
		forever := time.Duration(math.MaxInt64)
		k := newKernel(t, store, func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
				return sdk.Step(ctx, "flaky", func(ctx context.Context) (int, error) {
					return 0, errors.New("down")
				}, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 3, Initial: forever, Max: forever}))
			})
		}, sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
		id, err := k.Start(ctx, "a", none{}, sdk.Deadline(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
			t.Fatalf("Run = %v, want ErrWaiting", err)
		}
		evs := rwant(t, k, id, []string{"created a", "dispatch 1", "started local flaky", "retrying down", "parked retry"})
		created := evs[0].Data.(*eventlog.ExecutionCreated)
		failed, parked := evs[3].Data.(*eventlog.StepFailed), evs[4].Data.(*eventlog.DispatchParked)
		retryAt := failed.RetryAt
		if !created.Deadline.Equal(eventlog.MaxWakeTime) || retryAt.Before(clock.Now().AddDate(50, 0, 0)) ||
			retryAt.After(eventlog.MaxWakeTime) || !parked.WakeAt.Equal(retryAt) {
			t.Fatalf("deadline %v, RetryAt %v, parked until %v; want the deadline at MaxWakeTime and the retry centuries away", created.Deadline, retryAt, parked.WakeAt)
		}
		info, err := store.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Deadline.Equal(eventlog.MaxWakeTime) || !info.WakeAt.Equal(retryAt) {
			t.Fatalf("Info deadline %v, wake %v; want MaxWakeTime and %v", info.Deadline, info.WakeAt, retryAt)
		}
	})
}

// TestKeyNotText: WithKey with invalid UTF-8 or a NUL byte is ErrInvalid
// on both stores, before anything is written (Postgres used to answer with
// a raw SQL error, Pebble accepted it).
func TestKeyNotText(t *testing.T) {
	wakeStores(t, func(t *testing.T, store eventlog.IndexedLog) {
		ctx := context.Background()
		k := newKernel(t, store, func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) { return 1, nil })
		})
		for _, key := range []string{"bad\xff", "nul\x00key", "\x00", "\xc3"} {
			if _, err := k.Start(ctx, "a", none{}, sdk.WithKey(key)); !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("WithKey(%q): Start = %v, want ErrInvalid", key, err)
			}
		}
		for info, err := range store.List(ctx, eventlog.Filter{}) {
			if err != nil {
				t.Fatal(err)
			}
			t.Fatalf("an execution was written: %s", info.ID)
		}
		if _, err := k.Start(ctx, "a", none{}, sdk.WithKey("ok-ключ")); err != nil {
			t.Fatalf("a UTF-8 key: %v", err)
		}
	})
}
