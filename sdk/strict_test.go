package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// versioned registers agent "a" whose handler is the current *v of
// handlers: the test changes the code between dispatches.
func versioned(v *atomic.Int64, handlers ...func(context.Context) (string, error)) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return handlers[v.Load()](ctx)
		})
	}
}

// crashThenRun runs id's first dispatch on a log that fails after budget
// more events (Start's execution.created is not counted), then returns a kernel on the store for the next dispatch.
func crashThenRun(t *testing.T, register func(*sdk.Kernel), budget int64, opts ...sdk.Option) (*sdk.Kernel, eventlog.ID) {
	t.Helper()
	ctx := context.Background()
	store := newStore(t)
	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(budget)
	k1 := newKernel(t, crash, register)
	id, err := k1.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) {
		t.Fatalf("first Run = %v, want the simulated crash", err)
	}
	return newKernel(t, store, register, opts...), id
}

func write(ctx context.Context, path string) error {
	_, err := sdk.DefineTool("write", func(ctx context.Context, p string) (string, error) { return "wrote " + p, nil }).Call(ctx, path)
	return err
}

// DESIGN §15: a call with no record at a position where the lineage
// recorded another call fails with ErrNonDeterministic, naming both; it
// appends nothing, and the execution fails with Code nondeterministic.
func TestStrictChangedArgs(t *testing.T) {
	ctx := context.Background()
	var v atomic.Int64
	var callErr error
	register := versioned(&v,
		func(ctx context.Context) (string, error) {
			if err := write(ctx, "a"); err != nil {
				return "", err
			}
			return "", write(ctx, "b")
		},
		func(ctx context.Context) (string, error) {
			callErr = write(ctx, "A") // changed code: other args at position write#0
			return "ignored", nil
		})
	k, id := crashThenRun(t, register, 3, sdk.Strict()) // dispatch, started, succeeded
	v.Store(1)
	_, err := k.Run(ctx, id)
	var nd *sdk.NonDeterministicError
	if !errors.As(callErr, &nd) || !errors.Is(callErr, sdk.ErrNonDeterministic) {
		t.Fatalf("call error = %v, want a *NonDeterministicError", callErr)
	}
	if len(nd.Expected) != 1 || nd.Expected[0].Args != `"a"` || nd.Expected[0].Seq != 3 || nd.Got == nil || nd.Got.Args != `"A"` ||
		nd.Expected[0].Kind != eventlog.StepTool || nd.Expected[0].Target != "write" || nd.Got.Position != 0 {
		t.Fatalf("error = %+v (expected %+v, got %+v)", nd, nd.Expected, nd.Got)
	}
	const msg = `the handler called tool "write" "A" #0 where the lineage recorded tool "write" "a" #0 (seq 3)`
	if !strings.Contains(callErr.Error(), msg) {
		t.Errorf("message %q does not contain %q", callErr, msg)
	}
	var ee *sdk.ExecutionError
	if !errors.As(err, &ee) || ee.Code != eventlog.FailNondeterministic || !errors.Is(err, sdk.ErrNonDeterministic) {
		t.Fatalf("Run = %v, want the execution failed nondeterministic", err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "started tool write", "succeeded",
		"dispatch 2", "execution_failed nondeterministic"})
	// Read back, the recorded failure still classifies.
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrNonDeterministic) {
		t.Errorf("Run of the failed execution = %v, want ErrNonDeterministic", err)
	}
}

// DESIGN §15: a dispatch that completes while recorded calls remain
// unconsumed (a renamed step) fails, naming them; without Strict the same
// dispatch completes and the renamed step runs live.
func TestStrictRenamedStep(t *testing.T) {
	ctx := context.Background()
	handlers := []func(context.Context) (string, error){
		func(ctx context.Context) (string, error) {
			if _, err := sdk.Step(ctx, "fetch", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return "", err
			}
			return "", write(ctx, "x")
		},
		func(ctx context.Context) (string, error) {
			if _, err := sdk.Step(ctx, "download", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return "", err
			}
			return "done", nil
		},
	}
	for _, strict := range []bool{true, false} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			var v atomic.Int64
			var opts []sdk.Option
			if strict {
				opts = append(opts, sdk.Strict())
			}
			k, id := crashThenRun(t, versioned(&v, handlers...), 3, opts...) // dispatch, started, succeeded
			v.Store(1)
			_, err := k.Run(ctx, id)
			if !strict {
				if err != nil {
					t.Fatal(err)
				}
				wantEvents(t, k, id, []string{"created a", "dispatch 1", "started local fetch", "succeeded",
					"dispatch 2", "started local download", "succeeded", "completed"})
				return
			}
			var nd *sdk.NonDeterministicError
			if !errors.As(err, &nd) || nd.Got != nil || len(nd.Expected) != 1 || nd.Expected[0].Target != "fetch" || nd.Expected[0].Seq != 3 {
				t.Fatalf("Run = %v, want a NonDeterministicError naming local fetch", err)
			}
			const msg = `the handler returned without making 1 recorded call(s): local "fetch" () #0 (seq 3)`
			if !strings.Contains(err.Error(), msg) {
				t.Errorf("message %q does not contain %q", err, msg)
			}
			// "download" has no recorded call at its position (local
			// download #0), so it runs; the completion check catches fetch.
			wantEvents(t, k, id, []string{"created a", "dispatch 1", "started local fetch", "succeeded",
				"dispatch 2", "started local download", "succeeded", "execution_failed nondeterministic"})
		})
	}
}

// DESIGN §15: positions count per (kind, target), so parallel LLM calls in
// goroutines, each to its own model, never trip Strict when the code did
// not change: not on a resumed dispatch, not in a fork at any event.
func TestStrictParallelLLMCalls(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: sdk.Transport(nil)}
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			var wg sync.WaitGroup
			errs := make(chan error, 12)
			for g := range 3 {
				wg.Go(func() {
					for turn := range 4 {
						body := fmt.Sprintf(`{"model":"m%d","turn":%d}`, g, turn)
						req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat", strings.NewReader(body))
						resp, err := client.Do(req)
						if err != nil {
							errs <- err
							return
						}
						_ = resp.Body.Close()
					}
				})
			}
			wg.Wait()
			close(errs)
			return "ok", <-errs
		})
	}
	k, id := crashThenRun(t, register, 9, sdk.Strict())
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatalf("resumed Run under Strict = %v", err)
	}
	evs := events(t, k, id)
	for at := uint64(1); at < uint64(len(evs)); at++ {
		fid, err := k.Fork(ctx, id, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, fid); err != nil {
			t.Fatalf("fork at %d (%s) under Strict: %v", at, describe(evs[at-1]), err)
		}
	}
}

// orphanRig is the case: EverySteps(1), an at_most_once step that
// affects the workspace orphaned by a crash, then a handler that never
// calls it again.
func orphanRig(t *testing.T, opts ...sdk.Option) (*sdk.Kernel, eventlog.ID, *atomic.Int64) {
	t.Helper()
	drv := testdriver.New()
	var v atomic.Int64
	touch := func(ctx context.Context, ws *testdriver.Handle, name string, o ...sdk.CallOption) error {
		_, err := sdk.DefineTool(name, func(ctx context.Context, n int) (int, error) {
			return n, ws.WriteFile(name, nil)
		}, append(o, sdk.Affects("ws"))...).Call(ctx, 1)
		return err
	}
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(1))
			if err != nil {
				return "", err
			}
			if v.Load() == 0 {
				if err := touch(ctx, ws, "send", sdk.AtMostOnce()); err != nil {
					return "", err
				}
			}
			return "done", touch(ctx, ws, "edit")
		})
	}
	k, id := crashThenRun(t, register, 4, opts...) // dispatch, bound+baseline, started send
	v.Store(1)
	return k, id, &v
}

// DESIGN §15: without Strict, the orphan the new code never reaches is
// abandoned before the completion captures: it lands, the capture it makes
// due is taken, and coverage resumes. (Before, the orphan stayed in flight
// forever: no capture, not even capture_failed, and every later point
// uncovered.)
func TestUnreachedOrphanAbandoned(t *testing.T) {
	ctx := context.Background()
	k, id, _ := orphanRig(t)
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool send affects=ws at_most_once",
		"dispatch 2", "started tool edit affects=ws", "succeeded", // the orphan is in flight: no capture yet
		"step.abandoned", "captured ws steps gen=3", // counted like an ended attempt: EverySteps(1) is due
		"completed"})
	evs := events(t, k, id)
	for at, want := range map[uint64]bool{8: false, 9: true, 10: true, 11: true} {
		p, err := k.Coverage(ctx, id, at)
		if err != nil {
			t.Fatal(err)
		}
		if p.Covered != want {
			t.Errorf("Coverage at %d (%s) = %v, want %v", at, describe(evs[at-1]), p.Covered, want)
		}
	}
	if ab, ok := evs[8].Data.(*eventlog.StepAbandoned); !ok || ab.StepID != evs[4].Data.(*eventlog.StepStarted).StepID {
		t.Errorf("event 9 = %v, want step.abandoned of the orphan", evs[8].Data)
	}
}

// DESIGN §15: under Strict, the unreached orphan fails the dispatch
// instead, naming it.
func TestUnreachedOrphanStrict(t *testing.T) {
	ctx := context.Background()
	k, id, _ := orphanRig(t, sdk.Strict())
	_, err := k.Run(ctx, id)
	var nd *sdk.NonDeterministicError
	if !errors.As(err, &nd) || len(nd.Expected) != 1 || nd.Expected[0].Target != "send" || nd.Expected[0].Seq != 5 {
		t.Fatalf("Run = %v, want a NonDeterministicError naming tool send", err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool send affects=ws at_most_once",
		"dispatch 2", "started tool edit affects=ws", "succeeded", "execution_failed nondeterministic"})
}

// The nonce trap (AtMostOnce): args with a fresh nonce give the call a new
// identity after a crash. Without Strict the body runs twice and the
// orphan is abandoned; under Strict the new call fails before its body
// runs.
func TestAtMostOnceNonceTrap(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			ctx := context.Background()
			var nonce, runs atomic.Int64
			var callErr error
			register := func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					pay := sdk.DefineTool("pay", func(ctx context.Context, n int64) (string, error) {
						runs.Add(1)
						return "paid", nil
					}, sdk.AtMostOnce())
					_, callErr = pay.Call(ctx, nonce.Add(1)) // a fresh value on every dispatch: the trap
					return "done", nil
				})
			}
			var opts []sdk.Option
			if strict {
				opts = append(opts, sdk.Strict())
			}
			k, id := crashThenRun(t, register, 2, opts...) // dispatch, started pay (synced)
			_, err := k.Run(ctx, id)
			if !strict {
				if err != nil || callErr != nil || runs.Load() != 2 {
					t.Fatalf("Run = %v, call = %v, body ran %d times; want the trap: twice", err, callErr, runs.Load())
				}
				wantEvents(t, k, id, []string{"created a", "dispatch 1", "started tool pay at_most_once",
					"dispatch 2", "started tool pay at_most_once", "succeeded", "step.abandoned", "completed"})
				return
			}
			if !errors.Is(callErr, sdk.ErrNonDeterministic) || !errors.Is(err, sdk.ErrNonDeterministic) || runs.Load() != 1 {
				t.Fatalf("call = %v, Run = %v, body ran %d times; want ErrNonDeterministic and one run", callErr, err, runs.Load())
			}
			if !strings.Contains(callErr.Error(), `called tool "pay" 2 #0 where the lineage recorded tool "pay" 1 #0 (seq 3)`) {
				t.Errorf("message: %v", callErr)
			}
			wantEvents(t, k, id, []string{"created a", "dispatch 1", "started tool pay at_most_once",
				"dispatch 2", "execution_failed nondeterministic"})
		})
	}
}

// DESIGN §12: Strict is off in an edited fork (here one with a new input),
// whose prefix another input recorded: the unconsumed step of the prefix
// does not fail it; the fork records fork.diverged before its live call
// instead.
func TestStrictOffInEditedFork(t *testing.T) {
	ctx := context.Background()
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, name string) (string, error) {
			return sdk.Step(ctx, name, func(context.Context) (string, error) { return name, nil })
		})
	}
	store := newStore(t)
	k := newKernel(t, store, register, sdk.Strict())
	id, _ := k.Start(ctx, "a", "first")
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, edited := range []bool{false, true} {
		fc := &eventlog.ForkCreated{Parent: id, At: 4}
		if edited {
			fc.Input = []byte(`"second"`)
		}
		fid, err := store.Fork(ctx, id, 4, fc, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, fid); err != nil {
			t.Fatalf("fork (edited %v) under Strict: %v, want it to complete", edited, err)
		}
		want := []string{"created a", "dispatch 1", "started local first", "succeeded", "fork at=4", "dispatch 2", "completed"}
		if edited {
			want = []string{"created a", "dispatch 1", "started local first", "succeeded", "fork at=4", "dispatch 2",
				"fork.diverged", "started local second", "succeeded", "completed"}
		}
		wantEvents(t, k, fid, want)
	}
}

// TestNonDeterministicErrorMessage: the message names the call made and the
// first recorded call it replaced, and counts the other recorded calls not
// made — only when there are any.
func TestNonDeterministicErrorMessage(t *testing.T) {
	a := sdk.RecordedCall{Kind: eventlog.StepTool, Target: "write", Args: `"a"`, Seq: 3}
	b := sdk.RecordedCall{Kind: eventlog.StepTool, Target: "write", Args: `"b"`, Position: 1, Seq: 5}
	got := &sdk.RecordedCall{Kind: eventlog.StepTool, Target: "write", Args: `"A"`}
	const head = `the handler called tool "write" "A" #0 where the lineage recorded tool "write" "a" #0 (seq 3)`
	for _, tc := range []struct {
		expected []sdk.RecordedCall
		tail     string
	}{
		{[]sdk.RecordedCall{a}, ""},
		{[]sdk.RecordedCall{a, b}, " (and 1 more recorded call(s) not made)"},
	} {
		msg := (&sdk.NonDeterministicError{Expected: tc.expected, Got: got}).Error()
		if !strings.HasSuffix(msg, head+tc.tail) {
			t.Errorf("%d expected: message %q, want it to end %q", len(tc.expected), msg, head+tc.tail)
		}
	}
}

// TestStrictOnInPlainFork: Strict stays on in a fork with no edit (no new
// input, no override): a handler that calls another step there than the
// lineage recorded fails the fork nondeterministic.
func TestStrictOnInPlainFork(t *testing.T) {
	ctx := context.Background()
	var name atomic.Value
	name.Store("first")
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			n := name.Load().(string)
			return sdk.Step(ctx, n, func(context.Context) (string, error) { return n, nil })
		})
	}, sdk.Strict())
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	fid, err := k.Fork(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	name.Store("other")
	if _, err := k.Run(ctx, fid); !errors.Is(err, sdk.ErrNonDeterministic) {
		t.Fatalf("Run of the plain fork = %v, want ErrNonDeterministic", err)
	}
}

// TestStrictUnreachedAtSecondPosition: a handler that returns before the
// second recorded call of a (kind, target) fails naming that call at its
// position, #1, among the recorded calls of its pair.
func TestStrictUnreachedAtSecondPosition(t *testing.T) {
	ctx := context.Background()
	var v atomic.Int64
	register := versioned(&v,
		func(ctx context.Context) (string, error) {
			if err := write(ctx, "a"); err != nil {
				return "", err
			}
			if err := write(ctx, "b"); err != nil {
				return "", err
			}
			return "", write(ctx, "c")
		},
		func(ctx context.Context) (string, error) {
			return "changed", write(ctx, "a")
		})
	k, id := crashThenRun(t, register, 5, sdk.Strict()) // dispatch, then write a and b: started, succeeded
	v.Store(1)
	_, err := k.Run(ctx, id)
	const msg = `the handler returned without making 1 recorded call(s): tool "write" "b" #1 (seq 5)`
	if !errors.Is(err, sdk.ErrNonDeterministic) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("Run = %v, want ErrNonDeterministic containing %q", err, msg)
	}
}
