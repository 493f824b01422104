package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Rate limits of policy bundles (DESIGN §17, §21½.7, §21½.11).

// countingLimiter wraps a log and is its eventlog.Limiter: it counts every
// TakeLimit by key, and keeps the windows itself on clock when clock is
// set (so that waits are checked on the test's fake clock), else passes
// each take to the wrapped store's limiter. fail, when set, is the error
// of every take.
type countingLimiter struct {
	eventlog.IndexedLog
	clock *fakeClock

	mu    sync.Mutex
	times map[string][]time.Time
	takes []string // every take's key, in order
	fail  error
}

func (l *countingLimiter) Unwrap() eventlog.Log { return l.IndexedLog }

func (l *countingLimiter) TakeLimit(ctx context.Context, key string, max int, window time.Duration) (bool, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.takes = append(l.takes, key)
	if l.fail != nil {
		return false, time.Time{}, l.fail
	}
	if l.clock == nil {
		var inner eventlog.Limiter
		if !eventlog.As(l.IndexedLog, &inner) {
			return false, time.Time{}, errors.New("the wrapped store keeps no limits")
		}
		return inner.TakeLimit(ctx, key, max, window)
	}
	if err := eventlog.CheckTake(key, max, window); err != nil {
		return false, time.Time{}, err
	}
	if l.times == nil {
		l.times = map[string][]time.Time{}
	}
	kept, ok, retryAt := eventlog.SlideWindow(l.times[key], l.clock.Now(), max, window)
	l.times[key] = kept
	return ok, retryAt, nil
}

// taken returns the keys of every take so far.
func (l *countingLimiter) taken() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.takes...)
}

// limitBundle caps the fetch tool with rule fetch-cap: max calls per
// window, per scope, waiting up to wait; on is its on_limiter_error ("":
// not written).
func limitBundle(max int, window time.Duration, per string, wait time.Duration, on string) string {
	s := fmt.Sprintf(`default: allow
rules:
  - id: fetch-cap
    priority: 1
    when: {kind: tool, target: fetch}
    then:
      decision: allow
      rate_limit: {max_calls: %d, window: %s, per: %s, max_wait: %s}
`, max, window, per, wait)
	if on != "" {
		s += "      on_limiter_error: " + on + "\n"
	}
	return s
}

// fetchAgent registers agents "a" and "b": each calls the fetch tool n
// times (args 0..n-1) and returns what each call gave: "ok I", or for a
// denied call "denied CODE RULE (ErrRateLimited BOOL)".
func fetchAgent(bodies *atomic.Int64) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		fetch := sdk.DefineTool("fetch", func(_ context.Context, i int) (int, error) {
			bodies.Add(1)
			return i, nil
		})
		h := func(ctx context.Context, n int) ([]string, error) {
			var out []string
			for i := range n {
				r, err := fetch.Call(ctx, i)
				var de *sdk.DeniedError
				switch {
				case errors.As(err, &de):
					out = append(out, fmt.Sprintf("denied %s %s (ErrRateLimited %t)", de.Code, de.RuleID, errors.Is(err, sdk.ErrRateLimited)))
				case err != nil:
					return nil, err
				default:
					out = append(out, fmt.Sprintf("ok %d", r))
				}
			}
			return out, nil
		}
		_, _ = sdk.Register(k, "a", h)
		_, _ = sdk.Register(k, "b", h)
	}
}

// runFetch starts agent with n calls and runs it to its end, returning
// its id and output.
func runFetch(t *testing.T, k *sdk.Kernel, agent string, n int) (eventlog.ID, []string) {
	t.Helper()
	id, err := k.Start(t.Context(), agent, n)
	if err != nil {
		t.Fatal(err)
	}
	return id, runToEnd(t, k, id)
}

// runToEnd runs id to its end and returns its output.
func runToEnd(t *testing.T, k *sdk.Kernel, id eventlog.ID) []string {
	t.Helper()
	res, err := k.Run(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRateLimitDenied (DESIGN §17): on the store's own limiter, the calls
// under a rule's limit run and the next, whose wait would pass max_wait
// (0), is step.denied{Code: rate_limited, RuleID: fetch-cap} and never
// runs; the call returns a *DeniedError that is ErrRateLimited. The scope
// decides who shares the window: per execution, another execution has
// its own; per agent, another agent has its own but the same agent
// shares; globally, everyone shares. A fork past the denial replays it —
// ErrRateLimited again — and takes nothing.
func TestRateLimitDenied(t *testing.T) {
	const denied = "denied rate_limited fetch-cap (ErrRateLimited true)"
	for _, c := range []struct {
		per          string
		second       string   // the agent of the second execution
		secondOutput []string // its output with 1 call
	}{
		{"execution", "a", []string{"ok 0"}},
		{"agent", "a", []string{denied}},
		{"agent", "b", []string{"ok 0"}},
		{"global", "b", []string{denied}},
	} {
		t.Run(c.per+"/"+c.second, func(t *testing.T) {
			store := newStore(t)
			lim := &countingLimiter{IndexedLog: store}
			var bodies atomic.Int64
			k := newKernel(t, lim, fetchAgent(&bodies), sdk.WithBundle(mustBundle(t, limitBundle(2, time.Hour, c.per, 0, ""))))

			id, out := runFetch(t, k, "a", 3)
			if diff := cmp.Diff([]string{"ok 0", "ok 1", denied}, out); diff != "" {
				t.Fatalf("output (-want +got):\n%s", diff)
			}
			if bodies.Load() != 2 {
				t.Fatalf("the body ran %d times, want 2", bodies.Load())
			}
			evs := events(t, k, id)
			want := []string{"created a", "dispatch 1", "started tool fetch", "succeeded", "started tool fetch", "succeeded",
				"denied tool fetch", "completed"}
			got := describeAll(evs)
			got[6], _, _ = strings.Cut(got[6], ":")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			den := evs[6].Data.(*eventlog.StepDenied)
			if den.Code != eventlog.DenyRateLimited || den.RuleID != "fetch-cap" || !strings.Contains(den.Reason, "max_wait 0s") {
				t.Fatalf("step.denied = %+v; want Code rate_limited, RuleID fetch-cap, a reason naming max_wait", den)
			}
			wantKey := "fetch-cap/global"
			switch c.per {
			case "execution":
				wantKey = "fetch-cap/execution/" + id.String()
			case "agent":
				wantKey = "fetch-cap/agent/a"
			}
			if diff := cmp.Diff([]string{wantKey, wantKey, wantKey}, lim.taken()); diff != "" {
				t.Fatalf("takes (-want +got):\n%s", diff)
			}

			if _, out := runFetch(t, k, c.second, 1); !cmp.Equal(out, c.secondOutput) {
				t.Fatalf("a second execution of %s: output %q, want %q", c.second, out, c.secondOutput)
			}

			// The fork replays the denial without taking a call.
			takes := len(lim.taken())
			f, err := k.Fork(t.Context(), id, 7)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"ok 0", "ok 1", denied}, runToEnd(t, k, f)); diff != "" {
				t.Fatalf("the fork's output (-want +got):\n%s", diff)
			}
			if n := len(lim.taken()); n != takes {
				t.Fatalf("the fork's replay took %d calls of the window", n-takes)
			}
		})
	}
}

// TestRateLimitWaits (DESIGN §17): a call over the limit whose wait is
// within max_wait waits on the kernel's clock until the limiter admits it
// — no event is appended while it waits, none of the policy's after — and
// then runs; with ParkAfter longer than the wait, the dispatch does not
// park.
func TestRateLimitWaits(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	lim := &countingLimiter{IndexedLog: newStore(t), clock: clock}
	var bodies atomic.Int64
	k := newKernel(t, lim, fetchAgent(&bodies), sdk.WithClock(clock), sdk.ParkAfter(time.Hour),
		sdk.WithBundle(mustBundle(t, limitBundle(1, time.Minute, "global", 2*time.Minute, ""))))
	id, err := k.Start(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	done := runAsync(ctx, k, id)
	if left := clock.waitWaiter(t); left != time.Minute {
		t.Fatalf("the call waits %v, want 1m (the window)", left)
	}
	rwant(t, k, id, []string{"created a", "dispatch 1", "started tool fetch", "succeeded"})
	clock.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rwant(t, k, id, []string{"created a", "dispatch 1", "started tool fetch", "succeeded", "started tool fetch", "succeeded", "completed"})
	if n := len(lim.taken()); n != 3 {
		t.Fatalf("%d takes, want 3 (admitted, refused, admitted)", n)
	}
}

// TestRateLimitParks (DESIGN §17, §21½.7): a wait within max_wait but
// longer than ParkAfter parks the dispatch with dispatch.parked{Reason:
// rate_limit, WakeAt: when the limiter admits the call}; Serve leaves it
// until then and runs it at the wake time, where the replayed call takes
// nothing and the waiting one takes again and runs.
func TestRateLimitParks(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	start := clock.Now()
	lim := &countingLimiter{IndexedLog: newStore(t), clock: clock}
	var bodies atomic.Int64
	k := newKernel(t, lim, fetchAgent(&bodies), sdk.WithClock(clock), sdk.ParkAfter(time.Minute),
		sdk.WithBundle(mustBundle(t, limitBundle(1, time.Hour, "execution", 2*time.Hour, ""))))
	id, err := k.Start(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	parked := []string{"created a", "dispatch 1", "started tool fetch", "succeeded", "parked rate_limit"}
	evs := rwant(t, k, id, parked)
	if p := evs[4].Data.(*eventlog.DispatchParked); !p.WakeAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("parked until %v, want %v (the window's end)", p.WakeAt, start.Add(time.Hour))
	}
	if n := len(lim.taken()); n != 2 {
		t.Fatalf("%d takes before parking, want 2", n)
	}

	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(2*time.Millisecond)) }()
	time.Sleep(50 * time.Millisecond) // many polls, all before the wake time
	stop()
	<-served
	rwant(t, k, id, parked)

	clock.Advance(time.Hour)
	serveUntilEnded(t, k, id)
	rwant(t, k, id, append(parked, "dispatch 2", "started tool fetch", "succeeded", "completed"))
	if n := len(lim.taken()); n != 3 {
		t.Fatalf("%d takes in all, want 3: the resumed dispatch replays the first call without taking", n)
	}
	if bodies.Load() != 2 {
		t.Fatalf("the body ran %d times, want 2", bodies.Load())
	}
}

// TestRateLimitReplayAndFork (DESIGN §17): a replayed call never takes a
// call of a window — a fork that replays every call of its prefix takes
// none — and a fork's live call takes one, from the window its parent's
// calls filled: past the limit it is denied.
func TestRateLimitReplayAndFork(t *testing.T) {
	clock := newFakeClock()
	lim := &countingLimiter{IndexedLog: newStore(t), clock: clock}
	var bodies atomic.Int64
	k := newKernel(t, lim, fetchAgent(&bodies), sdk.WithClock(clock),
		sdk.WithBundle(mustBundle(t, limitBundle(3, time.Hour, "agent", 0, ""))))
	id, out := runFetch(t, k, "a", 2)
	if !cmp.Equal(out, []string{"ok 0", "ok 1"}) || len(lim.taken()) != 2 {
		t.Fatalf("output %q after %d takes; want both calls run, 2 takes", out, len(lim.taken()))
	}

	all, err := k.Fork(t.Context(), id, 6) // past both calls
	if err != nil {
		t.Fatal(err)
	}
	if out := runToEnd(t, k, all); !cmp.Equal(out, []string{"ok 0", "ok 1"}) || len(lim.taken()) != 2 || bodies.Load() != 2 {
		t.Fatalf("fork replaying both calls: output %q, %d takes, %d bodies; want no take, no body", out, len(lim.taken()), bodies.Load())
	}

	for i, want := range []string{"ok 1", "denied rate_limited fetch-cap (ErrRateLimited true)"} {
		f, err := k.Fork(t.Context(), id, 4) // past the first call
		if err != nil {
			t.Fatal(err)
		}
		if out := runToEnd(t, k, f); !cmp.Equal(out, []string{"ok 0", want}) {
			t.Fatalf("fork %d: output %q, want [ok 0 %s]", i, out, want)
		}
		if n := len(lim.taken()); n != 3+i {
			t.Fatalf("fork %d: %d takes in all, want %d: its live call takes one", i, n, 3+i)
		}
		got := describeAll(events(t, k, f))[4:]
		wantEvs := []string{"fork at=4", "dispatch 2", "started tool fetch", "succeeded", "completed"}
		if i == 1 {
			wantEvs = []string{"fork at=4", "dispatch 2", "denied tool fetch", "completed"}
			got[2], _, _ = strings.Cut(got[2], ":")
		}
		if diff := cmp.Diff(wantEvs, got); diff != "" {
			t.Fatalf("fork %d's events (-want +got):\n%s", i, diff)
		}
	}
}

// TestRateLimitLimiterError (DESIGN §17 "Bad input"): when the limiter
// fails, on_limiter_error decides — open (the default, and written) lets
// the call run, closed records step.denied{Code: rate_limited, RuleID}
// naming the failure and never runs the body.
func TestRateLimitLimiterError(t *testing.T) {
	for _, c := range []struct {
		on     string
		output string
		events []string
	}{
		{"", "ok 0", []string{"created a", "dispatch 1", "started tool fetch", "succeeded", "completed"}},
		{"open", "ok 0", []string{"created a", "dispatch 1", "started tool fetch", "succeeded", "completed"}},
		{"closed", "denied rate_limited fetch-cap (ErrRateLimited true)", []string{"created a", "dispatch 1",
			"denied tool fetch: rate limiter failed (on_limiter_error: closed): limiter down", "completed"}},
	} {
		t.Run("on="+c.on, func(t *testing.T) {
			lim := &countingLimiter{IndexedLog: newStore(t), clock: newFakeClock(), fail: errors.New("limiter down")}
			var bodies atomic.Int64
			k := newKernel(t, lim, fetchAgent(&bodies), sdk.WithBundle(mustBundle(t, limitBundle(5, time.Minute, "global", 0, c.on))))
			id, out := runFetch(t, k, "a", 1)
			if !cmp.Equal(out, []string{c.output}) {
				t.Fatalf("output %q, want [%s]", out, c.output)
			}
			evs := events(t, k, id)
			if diff := cmp.Diff(c.events, describeAll(evs)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			if c.on == "closed" {
				if den := evs[2].Data.(*eventlog.StepDenied); den.Code != eventlog.DenyRateLimited || den.RuleID != "fetch-cap" || bodies.Load() != 0 {
					t.Fatalf("step.denied = %+v, body ran %d times", den, bodies.Load())
				}
			}
			if len(lim.taken()) != 1 {
				t.Fatalf("%d takes, want 1", len(lim.taken()))
			}
		})
	}
}

// TestRateLimitAfterApproval (DESIGN §17): a rule that asks an approval
// and has a rate limit applies the limit once the approval is granted:
// the granted call takes a call of the window, and a granted call past
// the limit is denied rate_limited.
func TestRateLimitAfterApproval(t *testing.T) {
	ctx := context.Background()
	// The store's own limiter, on the store's clock as the kernel's is
	// (a fake clock here would never let the approvals' wait park).
	lim := &countingLimiter{IndexedLog: newStore(t)}
	var bodies atomic.Int64
	k := newKernel(t, lim, fetchAgent(&bodies), sdk.ParkAfter(time.Millisecond), sdk.WithBundle(mustBundle(t, `default: allow
rules:
  - id: fetch-ask
    priority: 1
    when: {kind: tool, target: fetch}
    then:
      decision: approve
      rate_limit: {max_calls: 1, window: 1h}
`)))
	id, err := k.Start(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
			t.Fatalf("Run = %v, want ErrWaiting for the approval", err)
		}
		pending, err := k.AwaitedApprovals(ctx, id)
		if err != nil || len(pending) != 1 {
			t.Fatalf("AwaitedApprovals = %v, %v", pending, err)
		}
		if n := len(lim.taken()); n != i {
			t.Fatalf("%d takes before grant %d, want %d: only a granted call takes", n, i, i)
		}
		if err := k.Approve(ctx, id, pending[0].StepID, sdk.By("ops")); err != nil {
			t.Fatal(err)
		}
	}
	out := runToEnd(t, k, id)
	if diff := cmp.Diff([]string{"ok 0", "denied rate_limited fetch-ask (ErrRateLimited true)"}, out); diff != "" {
		t.Fatalf("output (-want +got):\n%s", diff)
	}
	if len(lim.taken()) != 2 || bodies.Load() != 1 {
		t.Fatalf("%d takes, %d bodies; want 2 takes (one per granted call), 1 body", len(lim.taken()), bodies.Load())
	}
}
