package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// DESIGN §15½.1, §21½.2: a dispatch whose caller's context ends (a
// shutdown) records no outcome; the execution stays resumable.

// fallbackAgent registers agent "f": local step "one" (1), then local step
// "wait", whose first body signals entered and then runs block (it gets
// the body's context); later bodies return 42 at once. The handler
// swallows wait's error and returns a fallback answer — the user's
// pattern. An uninterrupted run returns "got 43".
func fallbackAgent(entered chan<- struct{}, block func(ctx context.Context) (int, error)) func(*sdk.Kernel) {
	var bodies atomic.Int64
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "f", func(ctx context.Context, _ none) (string, error) {
			one, err := sdk.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil })
			if err != nil {
				return "", err
			}
			n, err := sdk.Step(ctx, "wait", func(ctx context.Context) (int, error) {
				if bodies.Add(1) == 1 {
					entered <- struct{}{}
					return block(ctx)
				}
				return 42, nil
			})
			if err != nil {
				return "fallback", nil
			}
			return fmt.Sprintf("got %d", one+n), nil
		})
	}
}

// shutDown runs id on k and cancels the Run's context once entered says
// a body runs; it returns Run's error.
func shutDown(k *sdk.Kernel, id eventlog.ID, entered <-chan struct{}) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-entered
		cancel()
	}()
	_, err := k.Run(ctx, id)
	return err
}

// resumeTo runs id again with a fresh context and wants it completed with
// output want.
func resumeTo(t *testing.T, k *sdk.Kernel, id eventlog.ID, want string) {
	t.Helper()
	res, err := k.Run(context.Background(), id)
	if err != nil {
		t.Fatalf("resumed Run = %v, want the execution completed", err)
	}
	var got string
	if err := res.Decode(&got); err != nil || got != want {
		t.Fatalf("resumed output %q (%v), want %q as an uninterrupted run", got, err, want)
	}
}

// TestShutdownFallbackRecordsNoOutcome is the user's case: the step's body
// returns the cancellation error of the Run whose context was cancelled,
// and the handler returns a fallback. The log ends at step.cancelled (no
// execution.completed), Run returns context.Canceled, and a second Run
// completes with the output of an uninterrupted run.
func TestShutdownFallbackRecordsNoOutcome(t *testing.T) {
	entered := make(chan struct{}, 1)
	k := newKernel(t, newStore(t), fallbackAgent(entered, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}))
	id, _ := k.Start(context.Background(), "f", none{})
	if err := shutDown(k, id, entered); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	stopped := []string{"created f", "dispatch 1", "started local one", "succeeded", "started local wait", "cancelled"}
	wantEvents(t, k, id, stopped)
	if info, err := k.Log().Info(context.Background(), id); err != nil || info.Status.Terminal() {
		t.Fatalf("status after the shutdown %v (%v), want resumable", info.Status, err)
	}
	resumeTo(t, k, id, "got 43")
	wantEvents(t, k, id, append(stopped, "dispatch 2", "started local wait attempt=2", "succeeded", "completed"))
}

// TestShutdownAppendsNothingElse: what a handler's fallback path writes
// after the caller's context ended — here a Patched marker — is not
// appended either: the log ends at step.cancelled, and the next Run
// records the marker and completes.
func TestShutdownAppendsNothingElse(t *testing.T) {
	entered := make(chan struct{}, 1)
	var bodies atomic.Int64
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "f", func(ctx context.Context, _ none) (string, error) {
			n, err := sdk.Step(ctx, "wait", func(ctx context.Context) (int, error) {
				if bodies.Add(1) == 1 {
					entered <- struct{}{}
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return 2, nil
			})
			if sdk.Patched(ctx, "v2") {
				n *= 10
			}
			if err != nil {
				return "fallback", nil
			}
			return fmt.Sprint(n), nil
		})
	})
	id, _ := k.Start(context.Background(), "f", none{})
	if err := shutDown(k, id, entered); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	stopped := []string{"created f", "dispatch 1", "started local wait", "cancelled"}
	wantEvents(t, k, id, stopped)
	resumeTo(t, k, id, "20")
	wantEvents(t, k, id, append(stopped, "dispatch 2", "started local wait attempt=2", "succeeded", "marker.recorded", "completed"))
}

// TestShutdownCallerDeadline: a Run whose own context times out (the
// caller's deadline, not the execution's Deadline) is a shutdown too: Run
// returns context.DeadlineExceeded and nothing but step.cancelled lands.
func TestShutdownCallerDeadline(t *testing.T) {
	entered := make(chan struct{}, 1)
	k := newKernel(t, newStore(t), fallbackAgent(entered, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}))
	id, _ := k.Start(context.Background(), "f", none{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := k.Run(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
	}
	stopped := []string{"created f", "dispatch 1", "started local one", "succeeded", "started local wait", "cancelled"}
	wantEvents(t, k, id, stopped)
	resumeTo(t, k, id, "got 43")
}

// TestShutdownIgnoresBodyValue: a body that ignores its context and
// returns a value after the caller's context ended gets step.cancelled,
// not step.succeeded, and the handler sees the cancellation, not the
// value; nothing else is appended.
func TestShutdownIgnoresBodyValue(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			entered := make(chan struct{}, 1)
			var seen error
			k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "f", func(ctx context.Context, _ none) (int, error) {
					n, err := sdk.Step(ctx, "late", func(ctx context.Context) (int, error) {
						entered <- struct{}{}
						<-ctx.Done()
						return 7, nil // a value, after the context ended
					})
					seen = err
					if err != nil && fallback {
						return -1, nil
					}
					return n, err
				})
			})
			id, _ := k.Start(context.Background(), "f", none{})
			if err := shutDown(k, id, entered); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			if !errors.Is(seen, context.Canceled) {
				t.Fatalf("the handler saw %v, want context.Canceled", seen)
			}
			wantEvents(t, k, id, []string{"created f", "dispatch 1", "started local late", "cancelled"})
		})
	}
}

// TestShutdownRacesCompletion: a body that returns its value just as the
// caller's context ends. Either the outcome was recorded before (then the
// execution completed with the uninterrupted output and Run returned it)
// or nothing but step.cancelled was (Run returned context.Canceled and the
// next Run completes it the same) — never the fallback, never an
// execution.completed behind an error.
func TestShutdownRacesCompletion(t *testing.T) {
	for i := range 40 {
		k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "f", func(ctx context.Context, _ none) (string, error) {
				n, err := sdk.Step(ctx, "quick", func(context.Context) (int, error) { return 5, nil })
				if err != nil {
					return "fallback", nil
				}
				return fmt.Sprint(n), nil
			})
		})
		id, _ := k.Start(context.Background(), "f", none{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(time.Duration(i%8) * 50 * time.Microsecond)
			cancel()
		}()
		res, err := k.Run(ctx, id)
		cancel()
		evs := describeAll(events(t, k, id))
		last := evs[len(evs)-1]
		switch {
		case err == nil:
			var out string
			if derr := res.Decode(&out); derr != nil || out != "5" || last != "completed" {
				t.Fatalf("run %d: completed with %q (%v), events %v; want \"5\"", i, out, derr, evs)
			}
		case errors.Is(err, context.Canceled):
			if last == "completed" {
				t.Fatalf("run %d: Run = %v, but the log holds execution.completed: %v", i, err, evs)
			}
			for _, ev := range evs {
				if ev == "execution_failed handler" {
					t.Fatalf("run %d: a shutdown failed the execution: %v", i, evs)
				}
			}
			resumeTo(t, k, id, "5")
		default:
			t.Fatalf("run %d: Run = %v", i, err)
		}
	}
}

// TestShutdownCapturesNonPortable: the shutdown appends
// resource.captured{Reason: shutdown} for an uncovered resource whose
// driver is not portable, after step.cancelled and with nothing after
// it; a portable one is left as it is. The next Run — by another owner —
// binds anew from that capture and completes.
func TestShutdownCapturesNonPortable(t *testing.T) {
	for _, portable := range []bool{false, true} {
		t.Run(fmt.Sprintf("portable=%v", portable), func(t *testing.T) {
			store := newStore(t)
			drv := testdriver.New()
			if !portable {
				drv = drv.WithoutPortable()
			}
			entered := make(chan struct{}, 1)
			var bodies atomic.Int64
			register := func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "f", func(ctx context.Context, _ none) (string, error) {
					ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(5))
					if err != nil {
						return "", err
					}
					if _, err := touchTool(ws, "ws").Call(ctx, 1); err != nil {
						return "", err
					}
					_, err = sdk.Step(ctx, "wait", func(ctx context.Context) (int, error) {
						if bodies.Add(1) == 1 {
							entered <- struct{}{}
							<-ctx.Done()
							return 0, ctx.Err()
						}
						return 1, nil
					})
					if err != nil {
						return "fallback", nil
					}
					return "done", nil
				})
			}
			a := newKernel(t, store, register, sdk.WithOwner("a"))
			id, _ := a.Start(context.Background(), "f", none{})
			if err := shutDown(a, id, entered); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			stopped := []string{"created f", "dispatch 1", "bound ws every=5", "captured ws baseline gen=1",
				"started tool touch affects=ws", "succeeded", "started local wait", "cancelled"}
			if !portable {
				stopped = append(stopped, "captured ws shutdown gen=3")
			}
			wantEvents(t, a, id, stopped)
			if portable {
				return // the next owner opens it as it is
			}
			ref := events(t, a, id)[8].Data.(*eventlog.ResourceCaptured).Ref
			b := newKernel(t, store, register, sdk.WithOwner("b"))
			resumeTo(t, b, id, "done")
			wantEvents(t, b, id, append(stopped, "dispatch 2", "bound ws from="+ref+" every=5",
				"started local wait attempt=2", "succeeded", "captured ws completion gen=5", "completed"))
		})
	}
}

// renewLost is a store whose renewals, once lose is closed, say the
// lease was taken over: the dispatch's context is cancelled with a cause
// wrapping eventlog.ErrLeaseLost, though the store still takes its
// appends.
type renewLost struct {
	*pebblestore.Store
	lose chan struct{}
}

func (s renewLost) Renew(ctx context.Context, l eventlog.Lease, ttl time.Duration) (eventlog.Lease, error) {
	select {
	case <-s.lose:
		return eventlog.Lease{}, fmt.Errorf("test: %w", eventlog.ErrLeaseLost)
	default:
		return s.Store.Renew(ctx, l, ttl)
	}
}

// TestLeaseLossRecordsNothing: a dispatch stopped because its lease was
// lost records nothing at all — not step.cancelled, not a capture, not the
// handler's fallback — even on a store that would take the appends; Run
// returns an error wrapping ErrLeaseLost, and the execution resumes.
func TestLeaseLossRecordsNothing(t *testing.T) {
	store := newStore(t)
	entered := make(chan struct{}, 1)
	register := fallbackAgent(entered, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	lose := make(chan struct{})
	k := newKernel(t, renewLost{store, lose}, register, sdk.WithLeaseTTL(30*time.Millisecond))
	id, _ := k.Start(context.Background(), "f", none{})
	done := runAsync(context.Background(), k, id)
	<-entered
	close(lose)
	if err := <-done; !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("Run = %v, want ErrLeaseLost", err)
	}
	stopped := []string{"created f", "dispatch 1", "started local one", "succeeded", "started local wait"}
	wantEvents(t, k, id, stopped)
	resumeTo(t, newKernel(t, store, register), id, "got 43")
}

// TestServeShutdownRecordsNoOutcome: cancelling Serve's context while a
// dispatch runs records step.cancelled and nothing else; Serve returns
// ctx's error, and a later Serve completes the execution as an
// uninterrupted run would.
func TestServeShutdownRecordsNoOutcome(t *testing.T) {
	entered := make(chan struct{}, 1)
	k := newKernel(t, newStore(t), fallbackAgent(entered, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}))
	id, _ := k.Start(context.Background(), "f", none{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- k.Serve(ctx, sdk.PollEvery(5*time.Millisecond)) }()
	<-entered
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v, want nil (a clean stop)", err)
	}
	stopped := []string{"created f", "dispatch 1", "started local one", "succeeded", "started local wait", "cancelled"}
	wantEvents(t, k, id, stopped)
	serveUntilEnded(t, k, id)
	wantEvents(t, k, id, append(stopped, "dispatch 2", "started local wait attempt=2", "succeeded", "completed"))
	resumeTo(t, k, id, "got 43")
}
