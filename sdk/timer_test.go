package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// TestSleepKilledMidSleep: two sleeps of the same duration get different
// TimerIDs; a dispatch killed during the second leaves the first fired and
// the second started; the resumed dispatch returns from the first at once
// (no wait) and sleeps only what is left of the second, on the clock.
func TestSleepKilledMidSleep(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	store := newStore(t)
	k := newKernel(t, store, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			for range 2 {
				if err := sdk.Sleep(ctx, 30*time.Second); err != nil {
					return "", err
				}
			}
			return "rested", nil
		})
	}, sdk.WithClock(clock))
	id, _ := k.Start(ctx, "a", none{})
	rctx, kill := context.WithCancel(ctx)
	done := runAsync(rctx, k, id)
	if left := clock.waitWaiter(t); left != 30*time.Second {
		t.Fatalf("first sleep waits %v", left)
	}
	clock.Advance(30 * time.Second)
	if left := clock.waitWaiter(t); left != 30*time.Second {
		t.Fatalf("second sleep waits %v", left)
	}
	clock.Advance(10 * time.Second)
	kill()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("killed Run = %v", err)
	}
	clock.forget()
	evs := rwant(t, k, id, []string{"created a", "dispatch 1", "timer.started", "timer.fired", "timer.started"})
	first, second := evs[2].Data.(*eventlog.TimerStarted), evs[4].Data.(*eventlog.TimerStarted)
	if first.TimerID == second.TimerID || evs[3].Data.(*eventlog.TimerFired).TimerID != first.TimerID {
		t.Fatalf("timer IDs %q, %q: two sleeps must not match each other", first.TimerID, second.TimerID)
	}
	if !second.WakeAt.Equal(evs[4].Time.Add(30 * time.Second)) {
		t.Fatalf("second WakeAt %v, started at %v", second.WakeAt, evs[4].Time)
	}

	clock.Advance(5 * time.Second) // down for 5 s: 15 s are left
	afters := clock.Afters()
	done = runAsync(ctx, k, id)
	if left := clock.waitWaiter(t); left != 15*time.Second {
		t.Fatalf("resumed sleep waits %v, want the 15 s left", left)
	}
	if clock.Afters() != afters+1 {
		t.Fatalf("the resumed dispatch waited %d times, want once (the fired timer returns at once)", clock.Afters()-afters)
	}
	clock.Advance(15 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rwant(t, k, id, []string{"created a", "dispatch 1", "timer.started", "timer.fired", "timer.started",
		"dispatch 2", "timer.fired", "completed"})
}

// TestSleepParks: a sleep longer than ParkAfter records timer.started,
// captures the resource a tool left uncovered, and parks (dispatch.parked
// {WakeAt, timer}, status waiting); Serve leaves it while the clock is
// before WakeAt and runs it after, when the replayed Sleep fires.
func TestSleepParks(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	store := newStore(t)
	drv := testdriver.New()
	k := newKernel(t, store, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(5))
			if err != nil {
				return "", err
			}
			if _, err := touchTool(ws, "ws").Call(ctx, 1); err != nil {
				return "", err
			}
			if err := sdk.Sleep(ctx, time.Hour); err != nil {
				return "", err
			}
			return "woke", nil
		})
	}, sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	parkedEvents := []string{"created a", "dispatch 1", "bound ws every=5", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "timer.started", "captured ws park gen=2", "parked timer"}
	evs := rwant(t, k, id, parkedEvents)
	wake := evs[6].Data.(*eventlog.TimerStarted).WakeAt
	info, _ := store.Info(ctx, id)
	if p := evs[8].Data.(*eventlog.DispatchParked); !p.WakeAt.Equal(wake) || info.Status != eventlog.StatusWaiting || !info.WakeAt.Equal(wake) {
		t.Fatalf("parked until %v, %s until %v; want waiting until %v", p.WakeAt, info.Status, info.WakeAt, wake)
	}
	cov, err := k.Coverage(ctx, id, uint64(len(evs)))
	if err != nil || !cov.Covered {
		t.Fatalf("coverage at the park: %+v, %v; want covered", cov, err)
	}
	clock.Advance(time.Hour)
	serveUntilEnded(t, k, id)
	rwant(t, k, id, append(parkedEvents, "dispatch 2", "timer.fired", "completed"))
}

// TestSleepBadInput: a negative duration is ErrInvalid and appends
// nothing; Sleep outside a handler is ErrNotInExecution, inside a body
// ErrNestedStep.
func TestSleepBadInput(t *testing.T) {
	var neg, nested error
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			neg = sdk.Sleep(ctx, -time.Second)
			_, _ = sdk.Step(ctx, "s", func(ctx context.Context) (int, error) {
				nested = sdk.Sleep(ctx, time.Second)
				return 1, nil
			})
			return "", nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(neg, sdk.ErrInvalid) || !errors.Is(nested, sdk.ErrNestedStep) {
		t.Fatalf("Sleep(-1s) = %v, nested = %v", neg, nested)
	}
	rwant(t, k, id, []string{"created a", "dispatch 1", "started local s", "succeeded", "completed"})
	if err := sdk.Sleep(context.Background(), time.Second); !errors.Is(err, sdk.ErrNotInExecution) {
		t.Fatalf("Sleep outside a handler = %v", err)
	}
}

// TestSleepParkedAfterChildIsNotWokenEarly: an execution whose children
// have all ended and that parked on a long sleep is not run by Serve
// before its wake time (it would only park again, appending each poll),
// and is run after it.
func TestSleepParkedAfterChildIsNotWokenEarly(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	store := newStore(t)
	k := newKernel(t, store, func(*sdk.Kernel) {}, sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	child, _ := sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
		r, err := child.Call(ctx, n)
		if err != nil {
			return 0, err
		}
		if err := sdk.Sleep(ctx, time.Hour); err != nil {
			return 0, err
		}
		return r, nil
	})
	id, _ := parent.Start(ctx, 1)
	if _, err := parent.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	parked := []string{"created parent", "dispatch 1", "started child child", "succeeded", "timer.started", "parked timer"}
	rwant(t, k, id, parked)

	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(2*time.Millisecond)) }()
	time.Sleep(50 * time.Millisecond) // many polls, all before the wake time
	stop()
	<-served
	rwant(t, k, id, parked)

	clock.Advance(time.Hour)
	serveUntilEnded(t, k, id)
	rwant(t, k, id, append(parked, "dispatch 2", "timer.fired", "completed"))
}

// TestSleepOfExactlyParkAfterWaits: only a wait longer than ParkAfter
// parks; a Sleep of exactly ParkAfter waits on the clock in the dispatch.
func TestSleepOfExactlyParkAfterWaits(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			if err := sdk.Sleep(ctx, time.Minute); err != nil {
				return "", err
			}
			return "rested", nil
		})
	}, sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	done := runAsync(ctx, k, id)
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("Run = %v before the sleep waited; want it waiting on the clock", err)
		case <-time.After(5 * time.Millisecond):
		}
		clock.mu.Lock()
		waiting = len(clock.waiters) > 0
		clock.mu.Unlock()
	}
	if left := clock.waitWaiter(t); left != time.Minute {
		t.Fatalf("the sleep waits %v, want 1m", left)
	}
	clock.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rwant(t, k, id, []string{"created a", "dispatch 1", "timer.started", "timer.fired", "completed"})
}

// TestSleepZero: Sleep(0) is no error: the timer is started and fired at
// once, in the dispatch, without parking.
func TestSleepZero(t *testing.T) {
	var slept error
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			slept = sdk.Sleep(ctx, 0)
			return "", slept
		})
	})
	if err != nil || slept != nil {
		t.Fatalf("Run = %v, Sleep(0) = %v", err, slept)
	}
	rwant(t, k, id, []string{"created a", "dispatch 1", "timer.started", "timer.fired", "completed"})
}
