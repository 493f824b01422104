package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// rdescribe is describe with the Part II events of DESIGN §10 spelled out:
// a retried attempt's step.failed ("retrying"), timers and parking.
func rdescribe(ev eventlog.Event) string {
	switch p := ev.Data.(type) {
	case *eventlog.StepFailed:
		if !p.RetryAt.IsZero() {
			return "retrying " + p.Error
		}
	case *eventlog.TimerStarted:
		return "timer.started"
	case *eventlog.TimerFired:
		return "timer.fired"
	case *eventlog.DispatchParked:
		return "parked " + string(p.Reason)
	}
	return describe(ev)
}

func rwant(t *testing.T, k *sdk.Kernel, id eventlog.ID, want []string) []eventlog.Event {
	t.Helper()
	evs := events(t, k, id)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = rdescribe(ev)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	return evs
}

// retryAts returns the RetryAt of every retried attempt, with the Time of
// its step.failed.
func retryAts(evs []eventlog.Event) (at, when []time.Time) {
	for _, ev := range evs {
		if p, ok := ev.Data.(*eventlog.StepFailed); ok && !p.RetryAt.IsZero() {
			at, when = append(at, p.RetryAt), append(when, ev.Time)
		}
	}
	return at, when
}

// runAsync runs id in the background and returns its outcome's channel.
func runAsync(ctx context.Context, k *sdk.Kernel, id eventlog.ID) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := k.Run(ctx, id)
		done <- err
	}()
	return done
}

// flakyTool fails its first n calls with "503 unavailable".
func flakyTool(n int64, calls *atomic.Int64, opts ...sdk.CallOption) *sdk.Tool[string, string] {
	return sdk.DefineTool("fetch", func(ctx context.Context, url string) (string, error) {
		if calls.Add(1) <= n {
			return "", errors.New("503 unavailable")
		}
		return "page " + url, nil
	}, opts...)
}

// TestRetryToolFailsTwice: a tool that fails twice and then succeeds under
// a policy of 3 attempts is recorded as two retried attempts (step.failed
// with RetryAt) and one success; the dispatch waits each recorded backoff on
// the injected clock, exactly RetryAt minus the failure's time; a later Run
// replays the success without running the body.
func TestRetryToolFailsTwice(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	var calls atomic.Int64
	pol := sdk.RetryPolicy{MaxAttempts: 3, Initial: time.Second, Max: 10 * time.Second, Multiplier: 2}
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return flakyTool(2, &calls, sdk.Retry(pol)).Call(ctx, "x")
		})
	}, sdk.WithClock(clock))
	id, _ := k.Start(ctx, "a", none{})
	done := runAsync(ctx, k, id)
	var waited []time.Duration
	for range 2 {
		left := clock.waitWaiter(t)
		waited = append(waited, left)
		clock.Advance(left)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := rwant(t, k, id, []string{"created a", "dispatch 1",
		"started tool fetch", "retrying 503 unavailable",
		"started tool fetch attempt=2", "retrying 503 unavailable",
		"started tool fetch attempt=3", "succeeded", "completed"})
	at, when := retryAts(evs)
	for i := range at {
		if d := at[i].Sub(when[i]); d != waited[i] {
			t.Errorf("attempt %d: recorded backoff %v, the dispatch waited %v", i+1, d, waited[i])
		}
	}
	// backoff's jitter is ±50 % of 1 s, then of 2 s.
	if d := at[0].Sub(when[0]); d < 500*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("first backoff %v, want within 0.5 s..1.5 s", d)
	}
	if d := at[1].Sub(when[1]); d < time.Second || d > 3*time.Second {
		t.Errorf("second backoff %v, want within 1 s..3 s", d)
	}
	// Replay: a fork at the success runs nothing and waits for nothing.
	afters := clock.Afters()
	fid, err := k.Fork(ctx, id, 8)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, fid)
	if err != nil || string(res.Output) != `"page x"` {
		t.Fatalf("fork = %v, %v", res, err)
	}
	if calls.Load() != 3 || clock.Afters() != afters {
		t.Fatalf("replay ran the body (%d calls) or waited (%d waits)", calls.Load()-3, clock.Afters()-afters)
	}
}

// TestRetryFinalFailure: the last allowed attempt's failure has no RetryAt
// and is the call's error; a Retryable that says no ends at the first.
func TestRetryFinalFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  sdk.RetryPolicy
		want []string
	}{
		{"attempts", sdk.RetryPolicy{MaxAttempts: 2, Initial: time.Millisecond},
			[]string{"started tool fetch", "retrying 503 unavailable", "started tool fetch attempt=2", "failed 503 unavailable"}},
		{"retryable", sdk.RetryPolicy{MaxAttempts: 5, Retryable: func(err error) bool { return false }},
			[]string{"started tool fetch", "failed 503 unavailable"}},
		{"retryable panics", sdk.RetryPolicy{MaxAttempts: 5, Retryable: func(err error) bool { panic("no") }},
			[]string{"started tool fetch", "failed 503 unavailable"}},
		{"retryable says yes", sdk.RetryPolicy{MaxAttempts: 2, Initial: time.Millisecond, Retryable: func(err error) bool { return strings.Contains(err.Error(), "503") }},
			[]string{"started tool fetch", "retrying 503 unavailable", "started tool fetch attempt=2", "failed 503 unavailable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					return flakyTool(100, &calls).Call(ctx, "x")
				})
			}, sdk.WithRetry(tc.pol), sdk.WithClock(instantClock{newFakeClock()}))
			var se *sdk.StepError
			if !errors.As(err, &se) || se.Message != "503 unavailable" {
				t.Fatalf("Run = %v, want the step's error", err)
			}
			want := append([]string{"created a", "dispatch 1"}, tc.want...)
			rwant(t, k, id, append(want, "execution_failed handler"))
		})
	}
}

// instantClock is a fake clock whose waits end at once (tests that do not
// check waits).
type instantClock struct{ *fakeClock }

func (c instantClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// TestRetryAtMostOnce: an at_most_once call is never retried, unless its
// body's error wraps ErrNotStarted.
func TestRetryAtMostOnce(t *testing.T) {
	for _, notStarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("not_started=%v", notStarted), func(t *testing.T) {
			var calls atomic.Int64
			k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					pay := sdk.DefineTool("pay", func(ctx context.Context, n int) (string, error) {
						if calls.Add(1) == 1 {
							if notStarted {
								return "", fmt.Errorf("queue full: %w", sdk.ErrNotStarted)
							}
							return "", errors.New("gateway error")
						}
						return "paid", nil
					}, sdk.AtMostOnce(), sdk.Retry(sdk.RetryPolicy{MaxAttempts: 3}))
					return pay.Call(ctx, 5)
				})
			}, sdk.WithClock(instantClock{newFakeClock()}))
			if notStarted {
				if err != nil || string(res.Output) != `"paid"` {
					t.Fatalf("Run = %v, %v", res, err)
				}
				rwant(t, k, id, []string{"created a", "dispatch 1", "started tool pay at_most_once",
					"retrying queue full: sdk: the call took no effect",
					"started tool pay attempt=2 at_most_once", "succeeded", "completed"})
				return
			}
			if err == nil || calls.Load() != 1 {
				t.Fatalf("Run = %v with %d calls, want the failure and 1", err, calls.Load())
			}
			rwant(t, k, id, []string{"created a", "dispatch 1", "started tool pay at_most_once",
				"failed gateway error", "execution_failed handler"})
		})
	}
}

// TestRetryKillDuringBackoff: a dispatch abandoned during a backoff (its
// context cancelled, the kernel closed) leaves the step retrying; the
// kernel reopened on the same directory waits only what is left of the
// recorded backoff on the clock, then runs attempt 2.
func TestRetryKillDuringBackoff(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := newFakeClock()
	var calls atomic.Int64
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return flakyTool(1, &calls).Call(ctx, "x")
		})
	}
	pol := sdk.RetryPolicy{MaxAttempts: 3, Initial: 10 * time.Second, Max: 20 * time.Second}
	k1, err := sdk.Open(dir, sdk.WithClock(clock), sdk.WithRetry(pol))
	if err != nil {
		t.Fatal(err)
	}
	register(k1)
	id, _ := k1.Start(ctx, "a", none{})
	rctx, kill := context.WithCancel(ctx)
	done := runAsync(rctx, k1, id)
	full := clock.waitWaiter(t)
	kill()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("killed Run = %v", err)
	}
	clock.forget()
	if err := k1.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second) // the process is down for 3 s

	k2, err := sdk.Open(dir, sdk.WithClock(clock), sdk.WithRetry(pol))
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	register(k2)
	done = runAsync(ctx, k2, id)
	if left := clock.waitWaiter(t); left != full-3*time.Second {
		t.Fatalf("resumed dispatch waits %v, want what was left: %v", left, full-3*time.Second)
	}
	clock.Advance(full - 3*time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := rwant(t, k2, id, []string{"created a", "dispatch 1", "started tool fetch", "retrying 503 unavailable",
		"dispatch 2", "started tool fetch attempt=2", "succeeded", "completed"})
	if at, when := retryAts(evs); at[0].Sub(when[0]) != full {
		t.Fatalf("recorded backoff %v, first dispatch waited %v", at[0].Sub(when[0]), full)
	}
}

// TestRetryOrphanCounts: MaxAttempts counts every step.started, the
// re-run of an orphan included: with 2 attempts, an attempt orphaned by a
// crash and a failed re-run leave none; with 1, the orphan is the last
// attempt and is resolved indeterminate without running.
func TestRetryOrphanCounts(t *testing.T) {
	for _, max := range []int{1, 2} {
		t.Run(fmt.Sprint("max=", max), func(t *testing.T) {
			ctx := context.Background()
			var calls atomic.Int64
			register := func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					return flakyTool(100, &calls).Call(ctx, "x")
				})
			}
			opts := []sdk.Option{sdk.WithRetry(sdk.RetryPolicy{MaxAttempts: max}), sdk.WithClock(instantClock{newFakeClock()})}
			store := newStore(t)
			crash := &crashLog{IndexedLog: store}
			crash.budget.Store(2) // dispatch.started, step.started
			k1 := newKernel(t, crash, register, opts...)
			id, _ := k1.Start(ctx, "a", none{})
			if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) {
				t.Fatalf("Run = %v, want the crash", err)
			}
			k2 := newKernel(t, store, register, opts...)
			_, err := k2.Run(ctx, id)
			if err == nil {
				t.Fatal("Run succeeded")
			}
			want := []string{"created a", "dispatch 1", "started tool fetch", "dispatch 2"}
			if max == 1 {
				want = append(want, "failed indeterminate")
			} else {
				want = append(want, "started tool fetch attempt=2", "failed 503 unavailable")
			}
			rwant(t, k2, id, append(want, "execution_failed handler"))
			if int(calls.Load()) != max {
				t.Fatalf("body ran %d times, want %d", calls.Load(), max)
			}
		})
	}
}

// TestRetryParks: a backoff longer than ParkAfter parks the dispatch with
// dispatch.parked{WakeAt: RetryAt, Reason: retry} (status waiting, Info's
// WakeAt), after capturing the resource the failed attempt left uncovered;
// Serve runs it again once the clock passes WakeAt, and attempt 2 runs.
func TestRetryParks(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	store := newStore(t)
	var calls atomic.Int64
	drv := testdriver.New()
	k := newKernel(t, store, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(5))
			if err != nil {
				return "", err
			}
			_, err = sdk.DefineTool("write", func(ctx context.Context, n int) (string, error) {
				if err := ws.WriteFile(fmt.Sprint(calls.Add(1)), []byte("x")); err != nil {
					return "", err
				}
				if calls.Load() == 1 {
					return "", errors.New("flaky")
				}
				return "ok", nil
			}, sdk.Affects("ws"), sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2, Initial: time.Hour, Max: time.Hour})).Call(ctx, 1)
			return "done", err
		})
	}, sdk.WithClock(clock), sdk.ParkAfter(time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	evs := rwant(t, k, id, []string{"created a", "dispatch 1", "bound ws every=5", "captured ws baseline gen=1",
		"started tool write affects=ws", "retrying flaky", "captured ws park gen=2", "parked retry"})
	at, _ := retryAts(evs)
	parked := evs[len(evs)-1].Data.(*eventlog.DispatchParked)
	info, _ := store.Info(ctx, id)
	if !parked.WakeAt.Equal(at[0]) || info.Status != eventlog.StatusWaiting || !info.WakeAt.Equal(at[0]) {
		t.Fatalf("parked until %v, status %s until %v; want waiting until RetryAt %v", parked.WakeAt, info.Status, info.WakeAt, at[0])
	}
	clock.Advance(at[0].Sub(clock.Now()))
	serveUntilEnded(t, k, id)
	rwant(t, k, id, []string{"created a", "dispatch 1", "bound ws every=5", "captured ws baseline gen=1",
		"started tool write affects=ws", "retrying flaky", "captured ws park gen=2", "parked retry",
		"dispatch 2", "started tool write affects=ws attempt=2", "succeeded", "captured ws completion gen=3", "completed"})
}

// serveUntilEnded runs Serve until id has ended.
func serveUntilEnded(t *testing.T, k *sdk.Kernel, id eventlog.ID) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- k.Serve(ctx, sdk.PollEvery(5*time.Millisecond)) }()
	defer func() {
		stop()
		<-served
	}()
	for range 2000 {
		info, err := k.Log().Info(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status.Terminal() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("Serve did not end the execution")
}

// TestTimeout: a body past its Timeout sees its context's deadline; the
// kernel records nothing until the body has returned (bodies never
// overlap), then a failed attempt — retried under the policy — or, for an
// at_most_once call, an indeterminate failure.
func TestTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sdk.CallOption
		want []string
	}{
		{"no retry", nil, []string{"started tool slow", "failed timed out after 1ms: context deadline exceeded", "execution_failed handler"}},
		{"retried", []sdk.CallOption{sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2})}, []string{"started tool slow",
			"retrying timed out after 1ms: context deadline exceeded", "started tool slow attempt=2", "succeeded", "completed"}},
		{"at_most_once", []sdk.CallOption{sdk.AtMostOnce(), sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2})},
			[]string{"started tool slow at_most_once", "failed indeterminate", "execution_failed handler"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var calls atomic.Int64
			expired, release := make(chan struct{}), make(chan struct{})
			k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					slow := sdk.DefineTool("slow", func(ctx context.Context, n int) (string, error) {
						if calls.Add(1) > 1 {
							return "fast", nil
						}
						if _, ok := ctx.Deadline(); !ok {
							return "", errors.New("no deadline")
						}
						<-ctx.Done()
						close(expired)
						<-release // the body goes on past its deadline
						return "", ctx.Err()
					}, append([]sdk.CallOption{sdk.Timeout(time.Millisecond)}, tc.opts...)...)
					return slow.Call(ctx, 1)
				})
			}, sdk.WithClock(instantClock{newFakeClock()}))
			id, _ := k.Start(ctx, "a", none{})
			done := runAsync(ctx, k, id)
			<-expired
			// The deadline passed; the body has not returned: nothing recorded.
			rwant(t, k, id, []string{"created a", "dispatch 1", tc.want[0]})
			close(release)
			err := <-done
			rwant(t, k, id, append([]string{"created a", "dispatch 1"}, tc.want...))
			if tc.name == "at_most_once" && !errors.Is(err, sdk.ErrIndeterminate) {
				t.Fatalf("Run = %v, want ErrIndeterminate", err)
			}
		})
	}
}

// TestRetryBadInput: a bad policy or Timeout is ErrInvalid, and the call
// appends nothing; a bad kernel policy fails New.
func TestRetryBadInput(t *testing.T) {
	bad := map[string]sdk.CallOption{
		"max attempts 0":    sdk.Retry(sdk.RetryPolicy{}),
		"max attempts -1":   sdk.Retry(sdk.RetryPolicy{MaxAttempts: -1}),
		"negative initial":  sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2, Initial: -time.Second}),
		"negative max":      sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2, Max: -time.Second}),
		"max below initial": sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2, Initial: time.Minute, Max: time.Second}),
		"multiplier 0.5":    sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2, Multiplier: 0.5}),
		"timeout 0":         sdk.Timeout(0),
		"timeout negative":  sdk.Timeout(-time.Second),
	}
	for name, opt := range bad {
		t.Run(name, func(t *testing.T) {
			var stepErr, toolErr error
			k, id, _, _ := runOnce(t, func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					_, stepErr = sdk.Step(ctx, "s", func(context.Context) (int, error) { return 1, nil }, opt)
					_, toolErr = sdk.DefineTool("t", func(context.Context, int) (int, error) { return 1, nil }, opt).Call(ctx, 1)
					return "", nil
				})
			})
			if !errors.Is(stepErr, sdk.ErrInvalid) || !errors.Is(toolErr, sdk.ErrInvalid) {
				t.Fatalf("Step = %v, Call = %v; want ErrInvalid", stepErr, toolErr)
			}
			rwant(t, k, id, []string{"created a", "dispatch 1", "completed"})
		})
	}
	if _, err := sdk.New(newStore(t), sdk.WithRetry(sdk.RetryPolicy{MaxAttempts: 0})); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("WithRetry(MaxAttempts 0) = %v, want ErrInvalid", err)
	}
	if _, err := sdk.New(newStore(t), sdk.WithClock(nil)); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("WithClock(nil) = %v, want ErrInvalid", err)
	}
	for _, opt := range []struct {
		name string
		opt  sdk.Option
	}{{"WithLeaseTTL(0)", sdk.WithLeaseTTL(0)}, {"WithLeaseTTL(-1s)", sdk.WithLeaseTTL(-time.Second)}, {"ParkAfter(0)", sdk.ParkAfter(0)}, {"ParkAfter(-1s)", sdk.ParkAfter(-time.Second)}} {
		if _, err := sdk.New(newStore(t), opt.opt); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("%s = %v, want ErrInvalid", opt.name, err)
		}
	}
}

// TestRetryNotForChildren: the kernel's retry policy does not apply to a
// child call: a failed child is not retried, and a parent that parked on
// its child re-runs the child step (attempt 2) although MaxAttempts is 1.
func TestRetryNotForChildren(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {}, sdk.WithRetry(sdk.RetryPolicy{MaxAttempts: 3}),
		sdk.ParkAfter(20*time.Millisecond))
	release := make(chan struct{})
	child, _ := sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) {
		if n == 1 {
			return 0, errors.New("child broke")
		}
		<-release
		return n * 2, nil
	})
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
		return child.Call(ctx, n)
	})
	id, _ := parent.Start(ctx, 1)
	if _, err := parent.Run(ctx, id); err == nil {
		t.Fatal("parent succeeded")
	}
	evs := events(t, k, id)
	if len(evs) != 5 || rdescribe(evs[3])[:7] != "failed " || rdescribe(evs[4]) != "execution_failed handler" {
		t.Fatalf("events %q: want one attempt, failed", describeAllR(evs))
	}

	k1 := newKernel(t, newStore(t), func(*sdk.Kernel) {}, sdk.WithRetry(sdk.RetryPolicy{MaxAttempts: 1}),
		sdk.ParkAfter(20*time.Millisecond))
	child, _ = sdk.Register(k1, "child", func(ctx context.Context, n int) (int, error) {
		<-release
		return n * 2, nil
	})
	parent, _ = sdk.Register(k1, "parent", func(ctx context.Context, n int) (int, error) {
		return child.Call(ctx, n)
	})
	id, _ = parent.Start(ctx, 5)
	if _, err := parent.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	close(release)
	kids, err := k1.List(ctx, sdk.Filter{Caller: id})
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %v, %v", kids, err)
	}
	if _, err := child.Wait(ctx, kids[0].ID); err != nil { // the child has ended: the parent does not park again
		t.Fatal(err)
	}
	out, err := parent.Run(ctx, id)
	if err != nil || out != 10 {
		t.Fatalf("second Run = %v, %v", out, err)
	}
	rwant(t, k1, id, []string{"created parent", "dispatch 1", "started child child", "parked child",
		"dispatch 2", "started child child attempt=2", "succeeded", "completed"})
}

// TestRetryInFork: a fork taken at a retried attempt's step.failed
// replays the failed attempt, waits what is left of its recorded backoff
// on the clock, and runs the next attempt live with the fork's own
// idempotency key; the parent's later attempts are not in its lineage.
func TestRetryInFork(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	var calls atomic.Int64
	keys := make(chan string, 8)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return sdk.DefineTool("fetch", func(ctx context.Context, url string) (string, error) {
				keys <- sdk.IdempotencyKey(ctx)
				if calls.Add(1) == 1 {
					return "", errors.New("503 unavailable")
				}
				return "page", nil
			}, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 3, Initial: 10 * time.Second, Max: 10 * time.Second})).Call(ctx, "x")
		})
	}, sdk.WithClock(clock))
	id, _ := k.Start(ctx, "a", none{})
	done := runAsync(ctx, k, id)
	clock.Advance(clock.waitWaiter(t))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := rwant(t, k, id, []string{"created a", "dispatch 1", "started tool fetch", "retrying 503 unavailable",
		"started tool fetch attempt=2", "succeeded", "completed"})
	at, when := retryAts(evs)
	parentKey := <-keys
	<-keys

	fid, err := k.Fork(ctx, id, 4) // at the retried attempt's step.failed
	if err != nil {
		t.Fatal(err)
	}
	// Set the fake clock back to the middle of the backoff: the fork must
	// wait the half that is left, no more.
	clock.Advance(-at[0].Sub(when[0]) / 2)
	done = runAsync(ctx, k, fid)
	if left := clock.waitWaiter(t); left != at[0].Sub(clock.Now()) {
		t.Fatalf("fork waits %v, want what is left until RetryAt: %v", left, at[0].Sub(clock.Now()))
	}
	clock.Advance(at[0].Sub(clock.Now()))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rwant(t, k, fid, []string{"created a", "dispatch 1", "started tool fetch", "retrying 503 unavailable",
		"fork at=4", "dispatch 2", "started tool fetch attempt=2", "succeeded", "completed"})
	if forkKey := <-keys; forkKey == parentKey || calls.Load() != 3 {
		t.Fatalf("fork ran with key %q (parent %q), %d calls; want its own key and one more call", forkKey, parentKey, calls.Load())
	}
}

// TestRetryGatedInFork: in a fork every retry is gated (DESIGN §8½): a
// denied retry ends the step with step.denied after its retried attempt,
// and the call returns ErrDenied, live and on replay; in the root the
// gate is asked only for the first attempt.
func TestRetryGatedInFork(t *testing.T) {
	ctx := context.Background()
	var asked []bool // InFork of each question
	gate := func(ctx context.Context, c policy.Call) policy.Decision {
		asked = append(asked, c.InFork)
		if c.InFork {
			return policy.Decision{Reason: "no retries in forks"}
		}
		return policy.Decision{Allow: true}
	}
	var calls atomic.Int64
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			out, err := flakyTool(1, &calls, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 3})).Call(ctx, "x")
			if errors.Is(err, sdk.ErrDenied) {
				return "denied", nil
			}
			return out, err
		})
	}, sdk.WithGate(gate), sdk.WithClock(instantClock{newFakeClock()}))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 {
		t.Fatalf("the root asked the gate %d times, want once (the first attempt)", len(asked))
	}
	fid, err := k.Fork(ctx, id, 4) // at the retried attempt
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, fid)
	if err != nil || string(res.Output) != `"denied"` {
		t.Fatalf("fork = %v, %v", res, err)
	}
	rwant(t, k, fid, []string{"created a", "dispatch 1", "started tool fetch", "retrying 503 unavailable",
		"fork at=4", "dispatch 2", "denied tool fetch: no retries in forks", "completed"})
	if calls.Load() != 2 || len(asked) != 2 || !asked[1] {
		t.Fatalf("%d calls, gate asked %v; want the denied retry not run", calls.Load(), asked)
	}
	// Replay of the denial: a fork at the completion returns it without asking.
	f2, _ := k.Fork(ctx, fid, 8)
	if res, err := k.Run(ctx, f2); err != nil || string(res.Output) != `"denied"` || len(asked) != 2 {
		t.Fatalf("replay = %v, %v; gate asked %d times", res, err, len(asked))
	}
}
