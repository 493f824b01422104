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

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

type none struct{}

// runOnce starts and runs agent on a fresh in-memory kernel.
func runOnce(t *testing.T, register func(*sdk.Kernel), opts ...sdk.Option) (*sdk.Kernel, eventlog.ID, *sdk.Result, error) {
	t.Helper()
	ctx := context.Background()
	k := newKernel(t, newStore(t), register, opts...)
	id, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, id)
	return k, id, res, err
}

func TestCheckpointPolicy(t *testing.T) {
	// DESIGN §5 / §8.4: a capture after every n-th counted call (failed ones
	// count), never for non-affecting tools or LLM-free local steps that do
	// not affect it, and at completion only when uncovered.
	for _, tc := range []struct {
		name       string
		every      int
		completion bool
		want       []string
	}{
		{"every2", 2, true, []string{
			"created a", "dispatch 1", "bound ws every=2", "captured ws baseline gen=1",
			"started tool touch affects=ws", "succeeded",
			"started tool look", "succeeded",
			"started tool touch affects=ws", "failed boom", "captured ws steps gen=4",
			"started local note affects=ws", "succeeded",
			"started tool touch affects=ws", "succeeded", "captured ws steps gen=6",
			"started tool touch affects=ws", "succeeded",
			"captured ws completion gen=7", "completed",
		}},
		{"every2-no-completion", 2, false, []string{
			"created a", "dispatch 1", "bound ws every=2", "captured ws baseline gen=1",
			"started tool touch affects=ws", "succeeded",
			"started tool look", "succeeded",
			"started tool touch affects=ws", "failed boom", "captured ws steps gen=4",
			"started local note affects=ws", "succeeded",
			"started tool touch affects=ws", "succeeded", "captured ws steps gen=6",
			"started tool touch affects=ws", "succeeded",
			"completed",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := testdriver.New()
			k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
					ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(tc.every), sdk.OnCompletion(tc.completion))
					if err != nil {
						return none{}, err
					}
					touch := sdk.DefineTool("touch", func(ctx context.Context, n int) (int, error) {
						if n == 2 {
							return 0, errors.New("boom")
						}
						return n, ws.WriteFile(fmt.Sprint(n), nil)
					}, sdk.Affects("ws"))
					look := sdk.DefineTool("look", func(ctx context.Context, n int) (int, error) { return n, nil })
					_, _ = touch.Call(ctx, 1)
					_, _ = look.Call(ctx, 1)
					_, _ = touch.Call(ctx, 2)
					if _, err := sdk.Step(ctx, "note", func(ctx context.Context) (string, error) { return "n", nil }, sdk.Affects("ws")); err != nil {
						return none{}, err
					}
					_, _ = touch.Call(ctx, 3)
					_, _ = touch.Call(ctx, 4)
					return none{}, nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, describeAll(events(t, k, id))); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCaptureFailure: a failed capture leaves the call's outcome intact and
// the resource uncovered, so the next counted call tries again.
func TestCaptureFailure(t *testing.T) {
	drv := testdriver.New()
	var fails atomic.Int64
	drv.FailCheckpoint = func() error {
		if fails.Add(1) == 2 { // the baseline succeeds, the first steps capture fails
			return errors.New("disk full")
		}
		return nil
	}
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			touch := sdk.DefineTool("touch", func(ctx context.Context, n int) (string, error) {
				return "ok", ws.WriteFile(fmt.Sprint(n), nil)
			}, sdk.Affects("ws"))
			a, err := touch.Call(ctx, 1)
			if err != nil {
				return "", err
			}
			b, err := touch.Call(ctx, 2)
			return a + b, err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "capture_failed ws steps",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=3",
		"completed",
	}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if pt, _ := k.Coverage(context.Background(), id, 7); pt.Covered {
		t.Fatalf("covered after a failed capture: %+v", pt)
	}
}

// TestOrphans: a dispatch dies after a step started; the next dispatch runs
// a safe_to_retry step again (Attempt 2) and fails an at_most_once one as
// indeterminate without running it (DESIGN §4, §8.6).
func TestOrphans(t *testing.T) {
	for _, atMostOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("at_most_once=%v", atMostOnce), func(t *testing.T) {
			ctx := context.Background()
			var runs atomic.Int64
			var keys sync.Map
			register := func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					var opts []sdk.CallOption
					if atMostOnce {
						opts = append(opts, sdk.AtMostOnce())
					}
					send := sdk.DefineTool("send", func(ctx context.Context, to string) (string, error) {
						keys.Store(runs.Add(1), sdk.IdempotencyKey(ctx))
						return "sent to " + to, nil
					}, opts...)
					out, err := send.Call(ctx, "bob")
					if errors.Is(err, sdk.ErrIndeterminate) {
						return "unknown", nil
					}
					return out, err
				})
			}
			store := newStore(t)
			crash := &crashLog{IndexedLog: store}
			crash.budget.Store(2) // dispatch, step.started (Create is not an Append)
			k1 := newKernel(t, crash, register)
			id, _ := k1.Start(ctx, "a", none{})
			if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) {
				t.Fatalf("Run = %v, want the crash", err)
			}
			if runs.Load() != 1 {
				t.Fatalf("body ran %d times before the crash", runs.Load())
			}
			k2 := newKernel(t, store, register)
			res, err := k2.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got := describeAll(events(t, k2, id))
			var want []string
			if atMostOnce {
				want = []string{"created a", "dispatch 1", "started tool send at_most_once", "dispatch 2", "failed indeterminate", "completed"}
				if string(res.Output) != `"unknown"` || runs.Load() != 1 {
					t.Fatalf("output %s, body runs %d; want \"unknown\" and 1", res.Output, runs.Load())
				}
			} else {
				want = []string{"created a", "dispatch 1", "started tool send", "dispatch 2", "started tool send attempt=2", "succeeded", "completed"}
				if runs.Load() != 2 {
					t.Fatalf("body ran %d times, want 2", runs.Load())
				}
				k1v, _ := keys.Load(int64(1))
				k2v, _ := keys.Load(int64(2))
				if k1v != k2v || k1v == "" {
					t.Fatalf("idempotency keys %q and %q: want the same, non-empty", k1v, k2v)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGate: a denied call is recorded, never runs, returns ErrDenied with the
// reason, and is replayed in a fork without asking the gate again. The gate
// is told when a call runs live in a fork.
func TestGate(t *testing.T) {
	ctx := context.Background()
	var asked []policy.Call
	var mu sync.Mutex
	gate := policy.Gate(func(ctx context.Context, c policy.Call) policy.Decision {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, c)
		if c.Target == "rm" {
			return policy.Decision{Allow: false, Reason: "no deleting"}
		}
		return policy.Decision{Allow: true}
	})
	var rmRuns atomic.Int64
	k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			rm := sdk.DefineTool("rm", func(ctx context.Context, p string) (string, error) { rmRuns.Add(1); return "", nil })
			ls := sdk.DefineTool("ls", func(ctx context.Context, p string) (string, error) { return "a b", nil }, sdk.AtMostOnce())
			_, err := rm.Call(ctx, "/")
			var de *sdk.DeniedError
			if !errors.Is(err, sdk.ErrDenied) || !errors.As(err, &de) || de.Reason != "no deleting" {
				return "", fmt.Errorf("rm: %v", err)
			}
			return ls.Call(ctx, ".")
		})
	}, sdk.WithGate(gate))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"a b"` || rmRuns.Load() != 0 {
		t.Fatalf("output %s, rm ran %d times", res.Output, rmRuns.Load())
	}
	want := []string{"created a", "dispatch 1", "denied tool rm: no deleting", "started tool ls at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	// Fork after the denial: rm replays its denial without the gate; ls runs
	// live in the fork and the gate is told so.
	fid, err := k.Fork(ctx, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	asked = nil
	mu.Unlock()
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].Target != "ls" || !asked[0].InFork || asked[0].Agent != "a" || string(asked[0].Args) != `"."` {
		t.Fatalf("gate asked %+v, want one live ls call in a fork", asked)
	}
}

// TestRunBusy: a second Run of a running execution returns ErrBusy; other
// executions run at the same time.
func TestRunBusy(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			entered <- struct{}{}
			<-release
			return none{}, nil
		})
	})
	id1, _ := k.Start(ctx, "a", none{})
	id2, _ := k.Start(ctx, "a", none{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, id := range []eventlog.ID{id1, id2} {
		wg.Add(1)
		go func() { defer wg.Done(); _, err := k.Run(ctx, id); errs <- err }()
	}
	<-entered
	<-entered // both run at once
	if _, err := k.Run(ctx, id1); !errors.Is(err, sdk.ErrBusy) {
		t.Fatalf("second Run = %v, want ErrBusy", err)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestPanics: a panic in a handler or a tool fails the execution with the
// panic message and does not crash the process.
func TestPanics(t *testing.T) {
	for _, where := range []string{"handler", "tool"} {
		t.Run(where, func(t *testing.T) {
			k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
					if where == "handler" {
						panic("handler exploded")
					}
					boom := sdk.DefineTool("boom", func(ctx context.Context, _ int) (int, error) { panic("tool exploded") })
					_, err := boom.Call(ctx, 1)
					return none{}, err
				})
			})
			var ee *sdk.ExecutionError
			if !errors.As(err, &ee) || ee.Code != eventlog.FailPanic || !strings.Contains(ee.Message, "exploded") {
				t.Fatalf("Run = %v, want a panic failure with the message", err)
			}
			evs := events(t, k, id)
			if last := describe(evs[len(evs)-1]); last != "execution_failed panic" {
				t.Fatalf("last event %q", last)
			}
			// Running it again returns the recorded failure.
			if _, err := k.Run(context.Background(), id); !errors.As(err, &ee) || ee.Code != eventlog.FailPanic {
				t.Fatalf("second Run = %v", err)
			}
		})
	}
}

// TestCancelWhileStepRuns: the step is recorded as cancelled, Run returns the
// context's error, and the execution resumes: the step runs again.
func TestCancelWhileStepRuns(t *testing.T) {
	var attempts atomic.Int64
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return sdk.Step(ctx, "wait", func(ctx context.Context) (string, error) {
				if attempts.Add(1) == 1 {
					<-ctx.Done()
					return "", ctx.Err()
				}
				return "done", nil
			})
		})
	})
	id, _ := k.Start(context.Background(), "a", none{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for attempts.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := k.Run(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	res, err := k.Run(context.Background(), id)
	if err != nil || string(res.Output) != `"done"` {
		t.Fatalf("resume = %v, %v", res, err)
	}
	want := []string{"created a", "dispatch 1", "started local wait", "cancelled", "dispatch 2", "started local wait attempt=2", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestResourceMismatch: a later dispatch with a different driver fails the
// call and the execution (DESIGN §5.2).
func TestResourceMismatch(t *testing.T) {
	ctx := context.Background()
	drv := testdriver.New()
	var use driver.Driver[*testdriver.Handle, testdriver.Binding] = drv
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			if _, err := sdk.Resource(ctx, "ws", use); err != nil {
				return none{}, err
			}
			_, err := sdk.Step(ctx, "s", func(ctx context.Context) (int, error) { return 1, nil })
			return none{}, err
		})
	}
	store := newStore(t)
	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(3) // dispatch, bound+baseline
	k1 := newKernel(t, crash, register)
	id, _ := k1.Start(ctx, "a", none{})
	if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) {
		t.Fatalf("Run = %v", err)
	}
	use = drv.WithID("test.other.v1", nil)
	k2 := newKernel(t, store, register)
	_, err := k2.Run(ctx, id)
	if !errors.Is(err, sdk.ErrResourceMismatch) {
		t.Fatalf("Run = %v, want ErrResourceMismatch", err)
	}
	use = drv.WithID("test.mem.v1", map[string]int{"size": 2})
	evs := events(t, k2, id)
	if last := describe(evs[len(evs)-1]); last != "execution_failed resource_mismatch" {
		t.Fatalf("last event %q", last)
	}
	if _, err := k2.Run(ctx, id); !errors.Is(err, sdk.ErrResourceMismatch) {
		t.Fatalf("recorded failure = %v", err)
	}
}

// TestBodiesSerialized: with a resource bound, tool bodies called from many
// goroutines never overlap (DESIGN §8.8).
func TestBodiesSerialized(t *testing.T) {
	var inside, most atomic.Int64
	_, _, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			if _, err := sdk.Resource(ctx, "ws", testdriver.New(), sdk.EverySteps(3)); err != nil {
				return none{}, err
			}
			work := sdk.DefineTool("work", func(ctx context.Context, n int) (int, error) {
				now := inside.Add(1)
				for {
					m := most.Load()
					if now <= m || most.CompareAndSwap(m, now) {
						break
					}
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				return n, nil
			}, sdk.Affects("ws"))
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := work.Call(ctx, i); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			return none{}, <-errs
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if most.Load() != 1 {
		t.Fatalf("%d bodies overlapped", most.Load())
	}
}

// TestBodiesConcurrentWithoutResources: the one-at-a-time rule is for
// executions that have a resource (DESIGN §5); without one, tool and local
// bodies called from two goroutines run at the same time — each waits until
// the other has entered — and both are recorded.
func TestBodiesConcurrentWithoutResources(t *testing.T) {
	var entered sync.WaitGroup
	entered.Add(2)
	both := make(chan struct{})
	go func() { entered.Wait(); close(both) }()
	meet := func(ctx context.Context, who string) (string, error) {
		entered.Done()
		select {
		case <-both:
			return who, nil
		case <-time.After(5 * time.Second):
			return "", fmt.Errorf("%s ran alone: the other body did not start within 5 s", who)
		}
	}
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			tool := sdk.DefineTool("meet", func(ctx context.Context, _ none) (string, error) { return meet(ctx, "tool") })
			errs := make(chan error, 2)
			go func() { _, err := tool.Call(ctx, none{}); errs <- err }()
			go func() {
				_, err := sdk.Step(ctx, "meet", func(ctx context.Context) (string, error) { return meet(ctx, "step") })
				errs <- err
			}()
			return none{}, errors.Join(<-errs, <-errs)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	evs := strings.Join(describeAll(events(t, k, id)), ",")
	if strings.Count(evs, "started ") != 2 || strings.Count(evs, "succeeded") != 2 || !strings.HasSuffix(evs, "completed") {
		t.Fatalf("events %s, want two steps started and succeeded, then completed", evs)
	}
}

// TestBadInput: every bad input of DESIGN §7 gets a clear error and appends
// nothing.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	drv := testdriver.New()
	var handlerErr error
	var which string
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			var err error
			switch which {
			case "every0":
				_, err = sdk.Resource(ctx, "ws", drv, sdk.EverySteps(0))
			case "emptykey":
				_, err = sdk.Resource(ctx, "", drv)
			case "nildriver":
				var nilDrv *testdriver.Driver
				_, err = sdk.Resource(ctx, "ws", nilDrv)
			case "credentials":
				_, err = sdk.Resource(ctx, "ws", drv.WithID("test.mem.v1", map[string]string{"api_key": "sk-123"}))
			case "affects-unobtained":
				_, err = sdk.DefineTool("t", func(ctx context.Context, _ int) (int, error) { return 0, nil }, sdk.Affects("ws")).Call(ctx, 1)
			case "args-do-not-encode":
				_, err = sdk.DefineTool("t", func(ctx context.Context, _ chan int) (int, error) { return 0, nil }).Call(ctx, make(chan int))
			case "empty-tool-name":
				_, err = sdk.DefineTool("", func(ctx context.Context, _ int) (int, error) { return 0, nil }).Call(ctx, 1)
			}
			handlerErr = err
			return none{}, errors.New("stop")
		})
	})
	for _, which = range []string{"every0", "emptykey", "nildriver", "credentials", "affects-unobtained", "args-do-not-encode", "empty-tool-name"} {
		id, _ := k.Start(ctx, "a", none{})
		_, _ = k.Run(ctx, id)
		if handlerErr == nil || !strings.Contains(handlerErr.Error(), "") {
			t.Fatalf("%s: no error", which)
		}
		if which != "credentials" && !errors.Is(handlerErr, sdk.ErrInvalid) {
			t.Errorf("%s: %v is not ErrInvalid", which, handlerErr)
		}
		if which == "credentials" && !errors.Is(handlerErr, driver.ErrCredentials) {
			t.Errorf("%s: %v is not driver.ErrCredentials", which, handlerErr)
		}
		// created, dispatch, execution.failed: nothing from the bad call.
		if got := describeAll(events(t, k, id)); len(got) != 3 {
			t.Errorf("%s: events %v", which, got)
		}
	}

	id, _ := k.Start(ctx, "a", none{})
	head := len(events(t, k, id))
	checks := map[string]error{}
	_, checks["start unknown agent"] = k.Start(ctx, "nobody", none{})
	_, checks["fork at 0"] = k.Fork(ctx, id, 0)
	_, checks["fork past head"] = k.Fork(ctx, id, 99)
	_, checks["coverage at 0"] = k.Coverage(ctx, id, 0)
	_, checks["coverage past head"] = k.Coverage(ctx, id, 99)
	_, checks["register duplicate"] = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) { return none{}, nil })
	_, checks["resource outside a handler"] = sdk.Resource(ctx, "ws", drv)
	_, checks["step outside a handler"] = sdk.Step(ctx, "s", func(ctx context.Context) (int, error) { return 0, nil })
	for name, err := range checks {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if !errors.Is(checks["resource outside a handler"], sdk.ErrNotInExecution) {
		t.Errorf("resource outside a handler: %v", checks["resource outside a handler"])
	}
	var unknown eventlog.ID
	unknown[0] = 1
	if _, err := k.Run(ctx, unknown); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("run unknown: %v", err)
	}
	if _, err := k.Fork(ctx, unknown, 1); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("fork unknown: %v", err)
	}
	if n := len(events(t, k, id)); n != head {
		t.Errorf("bad input appended %d events", n-head)
	}
}

// TestResultNoLongerDecodes: a recorded result that does not decode into the
// caller's type is an error, not a zero value.
func TestResultNoLongerDecodes(t *testing.T) {
	ctx := context.Background()
	var asString bool
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			if asString {
				return sdk.Step(ctx, "s", func(ctx context.Context) (string, error) { return "x", nil })
			}
			n, err := sdk.Step(ctx, "s", func(ctx context.Context) (int, error) { return 7, nil })
			if err != nil {
				return "", err
			}
			return "", fmt.Errorf("stop after %d", n)
		})
	}
	store := newStore(t)
	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(3) // dispatch, started, succeeded
	k1 := newKernel(t, crash, register)
	id, _ := k1.Start(ctx, "a", none{})
	_, _ = k1.Run(ctx, id)
	asString = true
	k2 := newKernel(t, store, register)
	_, err := k2.Run(ctx, id)
	if err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("Run = %v, want a decode error", err)
	}
}

// TestHandlesClosedAfterDispatch: a handle that is an io.Closer is closed
// when the dispatch that obtained it ends.
func TestHandlesClosedAfterDispatch(t *testing.T) {
	drv := testdriver.New()
	var h *testdriver.Handle
	_, _, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			var err error
			h, err = sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return none{}, err
			}
			if h.Closes() != 0 {
				return none{}, errors.New("closed during the dispatch")
			}
			return none{}, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.Closes() != 1 {
		t.Fatalf("handle closed %d times, want 1", h.Closes())
	}
}

// TestErrorMessages: a denial names the call and, when the gate gave one,
// its reason, and is ErrDenied; a cancellation names the execution and,
// when one was given, the reason, and is ErrCancelled.
func TestErrorMessages(t *testing.T) {
	id := eventlog.ID{1}
	for _, c := range []struct {
		err  error
		is   error
		want string
	}{
		{&sdk.DeniedError{Target: "rm"}, sdk.ErrDenied, "sdk: call to rm denied"},
		{&sdk.DeniedError{Target: "rm", Reason: "no deleting"}, sdk.ErrDenied, "sdk: call to rm denied: no deleting"},
		{&sdk.CancelledError{ID: id}, sdk.ErrCancelled, "sdk: execution " + id.String() + " cancelled"},
		{&sdk.CancelledError{ID: id, Reason: "stop"}, sdk.ErrCancelled, "sdk: execution " + id.String() + " cancelled: stop"},
	} {
		if got := c.err.Error(); got != c.want || !errors.Is(c.err, c.is) {
			t.Errorf("%#v: %q (is %v: %v), want %q", c.err, got, c.is, errors.Is(c.err, c.is), c.want)
		}
	}
}
