package sdk_test

// The dispatch path's decisions, each checked by the exact events appended:
// captures beside concurrent LLM calls, identical calls, denials and orphans
// of affecting calls, replay after a crash past a capture point, and which
// appends are synced (DESIGN §4, §5).

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
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// syncLog records every append: whether it was synced and the events in it.
type syncLog struct {
	eventlog.IndexedLog
	mu      sync.Mutex
	appends []string // "synced: started tool x, succeeded" / "unsynced: ..."
}

func (l *syncLog) note(synced bool, evs []eventlog.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := "unsynced: "
	if synced {
		s = "synced: "
	}
	l.appends = append(l.appends, s+strings.Join(describeAll(evs), ", "))
}

func (l *syncLog) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	n, err := l.IndexedLog.Append(ctx, id, head, evs...)
	if err == nil {
		l.note(true, evs)
	}
	return n, err
}

func (l *syncLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	n, err := l.IndexedLog.AppendUnsynced(ctx, id, head, evs...)
	if err == nil {
		l.note(false, evs)
	}
	return n, err
}

// wantEvents compares id's lineage with want; hosts, if given, are written
// "HOST" in LLM targets.
func wantEvents(t *testing.T, k *sdk.Kernel, id eventlog.ID, want []string, hosts ...string) {
	t.Helper()
	got := describeAll(events(t, k, id))
	for i := range got {
		for _, h := range hosts {
			got[i] = strings.ReplaceAll(got[i], h, "HOST")
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// touchTool writes its argument into h and affects key.
func touchTool(h *testdriver.Handle, key string, opts ...sdk.CallOption) *sdk.Tool[int, string] {
	return sdk.DefineTool("touch", func(ctx context.Context, n int) (string, error) {
		return "ok", h.WriteFile(fmt.Sprint(n), []byte("x"))
	}, append([]sdk.CallOption{sdk.Affects(key)}, opts...)...)
}

// DESIGN §5: an LLM call advances a resource without CoverageReuse, so while
// it is in flight a tool that affects the resource finishes without its due
// capture (another advancing step is in flight), and completion captures it.
// With CoverageReuse the LLM call advances nothing and the capture is taken.
func TestLLMInFlightWhileAffectingToolFinishes(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reuse=%v", reuse), func(t *testing.T) {
			arrived := make(chan struct{})
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(arrived)
				<-release
				_, _ = io.WriteString(w, `{"ok":true}`)
			}))
			defer srv.Close()
			client := &http.Client{Transport: sdk.Transport(nil)}
			drv := testdriver.New()
			var d *testdriver.Driver = drv
			if reuse {
				d = drv.WithCoverageReuse()
			}
			k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
				_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
					ws, err := sdk.Resource(ctx, "ws", d)
					if err != nil {
						return "", err
					}
					llmErr := make(chan error, 1)
					go func() {
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat", strings.NewReader(`{"q":1}`))
						resp, err := client.Do(req)
						if err == nil {
							_, err = io.ReadAll(resp.Body)
							resp.Body.Close()
						}
						llmErr <- err
					}()
					<-arrived // the LLM call's step.started is written
					out, err := touchTool(ws, "ws").Call(ctx, 1)
					close(release)
					if err := <-llmErr; err != nil {
						return "", err
					}
					return out, err
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
				"started llm HOST/v1/chat", "started tool touch affects=ws", "succeeded", "succeeded",
				"captured ws completion gen=3", "completed"}
			if reuse {
				want = []string{"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
					"started llm HOST/v1/chat", "started tool touch affects=ws", "succeeded", "captured ws steps gen=2",
					"succeeded", "completed"}
			}
			wantEvents(t, k, id, want, srv.Listener.Addr().String())
		})
	}
}

// DESIGN §4, §5: two identical calls in one dispatch are two steps
// (occurrences 0 and 1), both run and both count; after a crash between
// them the first replays (appending nothing) and the second runs live.
func TestIdenticalCallsInOneDispatch(t *testing.T) {
	drv := testdriver.New() // the world outside: one driver for every dispatch
	ctx := context.Background()
	var runs atomic.Int64
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(2))
			if err != nil {
				return "", err
			}
			touch := sdk.DefineTool("touch", func(ctx context.Context, n int) (string, error) {
				return fmt.Sprint("run ", runs.Add(1)), ws.WriteFile(fmt.Sprint(n), nil)
			}, sdk.Affects("ws"))
			a, err := touch.Call(ctx, 7)
			if err != nil {
				return "", err
			}
			b, err := touch.Call(ctx, 7)
			return a + "," + b, err
		})
	}
	store := newStore(t)
	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(6) // dispatch, bound+baseline, started, succeeded, started
	k1 := newKernel(t, crash, register)
	id, _ := k1.Start(ctx, "a", none{})
	if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) {
		t.Fatalf("Run = %v, want the crash", err)
	}
	k2 := newKernel(t, store, register)
	res, err := k2.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The first call replays "run 1"; the second is an orphan run again.
	if string(res.Output) != `"run 1,run 3"` {
		t.Fatalf("output %s, want \"run 1,run 3\"", res.Output)
	}
	wantEvents(t, k2, id, []string{"created a", "dispatch 1", "bound ws every=2", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "started tool touch affects=ws",
		"dispatch 2", "started tool touch affects=ws attempt=2", "succeeded", "captured ws steps gen=4",
		"completed"})
	evs := events(t, k2, id)
	args := []byte("7")
	first, second := sdk.StepID(eventlog.StepTool, "touch", args, 0), sdk.StepID(eventlog.StepTool, "touch", args, 1)
	for seq, want := range map[int]string{5: first, 6: first, 7: second, 9: second, 10: second} {
		if got := evs[seq-1].StepID(); got != want {
			t.Errorf("seq %d is of step %s, want %s", seq, got, want)
		}
	}
}

// DESIGN §5: a denied call that names a resource in Affects never runs,
// never counts and advances nothing: with EverySteps 2 the capture comes
// after the second touch, of the generation the two touches made, and
// completion finds the resource covered.
func TestDeniedAffectingCall(t *testing.T) {
	var rmRuns atomic.Int64
	gate := policy.Gate(func(ctx context.Context, c policy.Call) policy.Decision {
		if c.Target == "rm" {
			return policy.Decision{Reason: "no deleting"}
		}
		return policy.Decision{Allow: true}
	})
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", testdriver.New(), sdk.EverySteps(2))
			if err != nil {
				return "", err
			}
			rm := sdk.DefineTool("rm", func(ctx context.Context, p string) (string, error) {
				rmRuns.Add(1)
				return "", ws.WriteFile(p, nil)
			}, sdk.Affects("ws"))
			if _, err := touchTool(ws, "ws").Call(ctx, 1); err != nil {
				return "", err
			}
			if _, err := rm.Call(ctx, "x"); !errors.Is(err, sdk.ErrDenied) {
				return "", fmt.Errorf("rm: %v, want a denial", err)
			}
			return touchTool(ws, "ws").Call(ctx, 2)
		})
	}, sdk.WithGate(gate))
	if err != nil {
		t.Fatal(err)
	}
	if rmRuns.Load() != 0 {
		t.Fatalf("a denied body ran %d times", rmRuns.Load())
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "bound ws every=2", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded",
		"denied tool rm: no deleting",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=3",
		"completed"})
}

// DESIGN §4, §5: an at_most_once orphan that affects a resource is
// resolved as indeterminate on the next dispatch without running; that
// terminal event is its attempt's counted call, so with EverySteps 1 the
// capture is committed with it (the orphan itself was the only step in
// flight for the resource).
func TestAtMostOnceOrphanAffectingResolvedIndeterminate(t *testing.T) {
	drv := testdriver.New() // the world outside: one driver for every dispatch
	ctx := context.Background()
	var runs atomic.Int64
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			send := sdk.DefineTool("send", func(ctx context.Context, n int) (string, error) {
				runs.Add(1)
				return "sent", ws.WriteFile("sent", nil)
			}, sdk.Affects("ws"), sdk.AtMostOnce())
			_, err = send.Call(ctx, 1)
			if !errors.Is(err, sdk.ErrIndeterminate) {
				return "", fmt.Errorf("send: %v, want indeterminate", err)
			}
			return "unknown", nil
		})
	}
	store := newStore(t)
	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(4) // dispatch, bound+baseline, started
	k1 := newKernel(t, crash, register)
	id, _ := k1.Start(ctx, "a", none{})
	if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) || !strings.Contains(err.Error(), "append at seq 6") {
		t.Fatalf("Run = %v, want the crash at the append of seq 6", err)
	}
	k2 := newKernel(t, store, register)
	if _, err := k2.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 {
		t.Fatalf("the at_most_once body ran %d times, want 1", runs.Load())
	}
	wantEvents(t, k2, id, []string{"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool send affects=ws at_most_once",
		"dispatch 2", "failed indeterminate", "captured ws steps gen=2",
		"completed"})
}

// DESIGN §5: each started attempt counts once, at its first terminal event.
// An at_most_once call that affects a resource is cancelled (counted: 1 of
// 2); the next dispatch fails it as indeterminate, which does not count
// again, so the capture is due only after the next touch.
func TestCancelledAtMostOnceCountsOnce(t *testing.T) {
	drv := testdriver.New() // the world outside: one driver for every dispatch
	var started atomic.Int64
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(2), sdk.OnCompletion(false))
			if err != nil {
				return "", err
			}
			send := sdk.DefineTool("send", func(ctx context.Context, n int) (string, error) {
				started.Add(1)
				<-ctx.Done()
				return "", ctx.Err()
			}, sdk.Affects("ws"), sdk.AtMostOnce())
			if _, err := send.Call(ctx, 1); !errors.Is(err, sdk.ErrIndeterminate) {
				return "", fmt.Errorf("send: %w", err)
			}
			return touchTool(ws, "ws").Call(ctx, 2)
		})
	})
	id, _ := k.Start(context.Background(), "a", none{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for started.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := k.Run(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if _, err := k.Run(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "bound ws every=2", "captured ws baseline gen=1",
		"started tool send affects=ws at_most_once", "cancelled",
		"dispatch 2", "failed indeterminate",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=3",
		"completed"})
}

// DESIGN §4, §5: a replay after a crash passes a capture point: the
// replayed calls append nothing (not even their captures) and keep their
// counts, so the first live call after them makes the capture due exactly
// as in an uninterrupted run.
func TestReplayAfterCrashPassesCapturePoint(t *testing.T) {
	drv := testdriver.New() // the world outside: one driver for every dispatch
	ctx := context.Background()
	var runs atomic.Int64
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(2), sdk.OnCompletion(false))
			if err != nil {
				return "", err
			}
			touch := sdk.DefineTool("touch", func(ctx context.Context, n int) (string, error) {
				runs.Add(1)
				return fmt.Sprint(n), ws.WriteFile(fmt.Sprint(n), nil)
			}, sdk.Affects("ws"))
			var out []string
			for n := 1; n <= 4; n++ {
				r, err := touch.Call(ctx, n)
				if err != nil {
					return "", err
				}
				out = append(out, r)
			}
			return strings.Join(out, ""), nil
		})
	}
	store := newStore(t)
	log := &syncLog{IndexedLog: store}
	crash := &crashLog{IndexedLog: log}
	// dispatch, bound+baseline, 1: started+succeeded, 2: started+succeeded+captured, 3: started+succeeded, 4: started
	crash.budget.Store(11)
	k1 := newKernel(t, crash, register)
	id, _ := k1.Start(ctx, "a", none{})
	if _, err := k1.Run(ctx, id); !errors.Is(err, errCrash) {
		t.Fatalf("Run = %v, want the crash", err)
	}
	if runs.Load() != 4 {
		t.Fatalf("%d bodies ran before the crash, want 4", runs.Load())
	}
	log.mu.Lock()
	log.appends = nil
	log.mu.Unlock()
	k2 := newKernel(t, log, register)
	res, err := k2.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"1234"` || runs.Load() != 5 {
		t.Fatalf("output %s after %d bodies; want \"1234\" after 5", res.Output, runs.Load())
	}
	wantEvents(t, k2, id, []string{"created a", "dispatch 1", "bound ws every=2", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=3",
		"started tool touch affects=ws", "succeeded",
		"started tool touch affects=ws",
		"dispatch 2",
		"started tool touch affects=ws attempt=2", "succeeded", "captured ws steps gen=6",
		"completed"})
	// The second dispatch appended nothing before its first live call.
	want := []string{
		"synced: dispatch 2",
		"unsynced: started tool touch affects=ws attempt=2",
		"synced: succeeded, captured ws steps gen=6",
		"synced: completed",
	}
	if diff := cmp.Diff(want, log.appends); diff != "" {
		t.Fatalf("appends of the second dispatch (-want +got):\n%s", diff)
	}
}

// DESIGN §4 "What must be durable when": an at_most_once intent is synced
// before its body runs, a safe_to_retry one (a tool, a local step, an LLM
// call) rides on the next sync; every terminal event, capture, binding,
// denial and execution event is synced.
func TestWhichAppendsAreSynced(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	client := &http.Client{Transport: sdk.Transport(nil)}
	gate := policy.Gate(func(ctx context.Context, c policy.Call) policy.Decision {
		return policy.Decision{Allow: c.Target != "rm", Reason: "no"}
	})
	log := &syncLog{IndexedLog: newStore(t)}
	k := newKernel(t, log, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", testdriver.New(), sdk.EverySteps(2))
			if err != nil {
				return "", err
			}
			if _, err := touchTool(ws, "ws").Call(ctx, 1); err != nil {
				return "", err
			}
			send := sdk.DefineTool("send", func(ctx context.Context, n int) (string, error) { return "sent", nil },
				sdk.Affects("ws"), sdk.AtMostOnce())
			if _, err := send.Call(ctx, 1); err != nil {
				return "", err
			}
			if _, err := sdk.Step(ctx, "note", func(ctx context.Context) (string, error) { return "", errors.New("nope") }); err == nil {
				return "", errors.New("note did not fail")
			}
			rm := sdk.DefineTool("rm", func(ctx context.Context, n int) (string, error) { return "", nil }, sdk.Affects("ws"))
			if _, err := rm.Call(ctx, 1); !errors.Is(err, sdk.ErrDenied) {
				return "", fmt.Errorf("rm: %v", err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat", strings.NewReader(`{}`))
			if err != nil {
				return "", err
			}
			resp, err := client.Do(req)
			if err != nil {
				return "", err
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			return "done", err
		})
	}, sdk.WithGate(gate))
	id, err := k.Start(context.Background(), "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"synced: dispatch 1",
		"synced: bound ws every=2, captured ws baseline gen=1",
		"unsynced: started tool touch affects=ws",
		"synced: succeeded",
		"synced: started tool send affects=ws at_most_once",
		"synced: succeeded, captured ws steps gen=3",
		"unsynced: started local note",
		"synced: failed nope",
		"synced: denied tool rm: no",
		"unsynced: started llm HOST/v1/chat",
		"synced: succeeded",
		"synced: captured ws completion gen=5, completed",
	}
	for i := range log.appends {
		log.appends[i] = strings.ReplaceAll(log.appends[i], srv.Listener.Addr().String(), "HOST")
	}
	if diff := cmp.Diff(want, log.appends); diff != "" {
		t.Fatalf("appends (-want +got):\n%s", diff)
	}
}

// DESIGN §4: a recorded value may be exactly MaxValueSize bytes; one byte
// more is ErrInvalid and writes nothing.
func TestMaxValueSizeBoundary(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, s string) (int, error) { return len(s), nil })
	})
	atLimit := strings.Repeat("a", sdk.MaxValueSize-2) // JSON adds the two quotes
	id, err := k.Start(ctx, "a", atLimit)
	if err != nil {
		t.Fatalf("Start with a %d-byte input: %v", sdk.MaxValueSize, err)
	}
	evs := events(t, k, id)
	if c, ok := evs[0].Data.(*eventlog.ExecutionCreated); !ok || len(c.Input) != sdk.MaxValueSize {
		t.Fatalf("execution.created holds %d bytes of input, want %d", len(c.Input), sdk.MaxValueSize)
	}
	if _, err := k.Start(ctx, "a", atLimit+"a"); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "MaxValueSize") {
		t.Fatalf("Start with a %d-byte input = %v, want ErrInvalid naming MaxValueSize", sdk.MaxValueSize+1, err)
	}
	n := 0
	for _, err := range store.List(ctx, eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d executions in the log after a refused Start, want 1", n)
	}
}

// DESIGN §5: when the handler returns, every resource that is uncovered is
// captured, each one, in key order, with execution.completed in one append.
func TestCompletionCapturesEveryUncoveredResource(t *testing.T) {
	log := &syncLog{IndexedLog: newStore(t)}
	k := newKernel(t, log, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", testdriver.New(), sdk.EverySteps(5))
			if err != nil {
				return "", err
			}
			if _, err := sdk.Resource(ctx, "db", testdriver.New(), sdk.EverySteps(5)); err != nil {
				return "", err
			}
			if _, err := sdk.Resource(ctx, "tmp", testdriver.New(), sdk.EverySteps(5), sdk.OnCompletion(false)); err != nil {
				return "", err
			}
			return touchTool(ws, "ws").Call(ctx, 1)
		})
	})
	id, _ := k.Start(context.Background(), "a", none{})
	if _, err := k.Run(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1",
		"bound ws every=5", "captured ws baseline gen=1",
		"bound db every=5", "captured db baseline gen=1",
		"bound tmp every=5", "captured tmp baseline gen=1",
		"started tool touch affects=ws", "succeeded",
		"captured db completion gen=2", "captured ws completion gen=2", "completed"})
	if last := log.appends[len(log.appends)-1]; last != "synced: captured db completion gen=2, captured ws completion gen=2, completed" {
		t.Fatalf("last append %q", last)
	}
}

// DESIGN §5 step 3: a fork whose selection for a resource is the initial
// environment (no capture of it existed) creates it from there, with a
// baseline of the generation its own binding starts.
func TestForkFromInitialEnvironment(t *testing.T) {
	ctx := context.Background()
	drv := testdriver.New()
	var checkpoints atomic.Int64
	drv.FailCheckpoint = func() error {
		if checkpoints.Add(1) == 1 {
			return errors.New("disk full") // the parent's baseline
		}
		return nil
	}
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			return touchTool(ws, "ws").Call(ctx, 1)
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "bound ws every=1", "capture_failed ws baseline",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=2", "completed"})
	fid, err := k.Fork(ctx, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, k, fid, []string{"created a", "dispatch 1", "bound ws every=1",
		"fork at=3", "dispatch 2", "bound ws every=1", "captured ws baseline gen=2",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=3", "completed"})
	evs := events(t, k, fid)
	if fc := evs[3].Data.(*eventlog.ForkCreated); len(fc.Selections) != 1 || fc.Selections[0].Ref != "" || fc.Selections[0].Covered {
		t.Fatalf("fork.created %+v, want ws selected from the initial environment", fc)
	}
	if b := evs[5].Data.(*eventlog.ResourceBound); b.From != "" {
		t.Fatalf("the fork's binding is from %q, want the initial environment", b.From)
	}
}

// DESIGN §5 step 1: within one dispatch the same key returns the same
// handle and appends nothing; asking for it with another driver is
// ErrResourceMismatch and appends nothing either.
func TestResourceTwiceInOneDispatch(t *testing.T) {
	drv := testdriver.New()
	other := drv.WithID("test.other.v1", nil)
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			a, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			b, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(3))
			if err != nil || a != b {
				return "", fmt.Errorf("second Resource: %p, %v; want the first handle %p", b, err, a)
			}
			if _, err := sdk.Resource(ctx, "ws", other); !errors.Is(err, sdk.ErrResourceMismatch) ||
				!strings.Contains(err.Error(), `driver "test.mem.v1", now "test.other.v1"`) {
				return "", fmt.Errorf("Resource with another driver: %v, want ErrResourceMismatch", err)
			}
			return "ok", nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1", "completed"})
}

// A step's body cannot call another tool or local step: the nested call is
// ErrNestedStep, does not run and appends nothing. An LLM call inside a
// body goes through unrecorded (the body's outcome is what replays).
func TestNestedCalls(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	client := &http.Client{Transport: sdk.Transport(nil)}
	var innerRuns atomic.Int64
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			inner := sdk.DefineTool("inner", func(ctx context.Context, n int) (int, error) { innerRuns.Add(1); return n, nil })
			outer := sdk.DefineTool("outer", func(ctx context.Context, n int) (string, error) {
				if _, err := inner.Call(ctx, n); !errors.Is(err, sdk.ErrNestedStep) {
					return "", fmt.Errorf("nested tool: %v, want ErrNestedStep", err)
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat", strings.NewReader(`{}`))
				if err != nil {
					return "", err
				}
				resp, err := client.Do(req)
				if err != nil {
					return "", fmt.Errorf("LLM call inside a body: %w", err)
				}
				resp.Body.Close()
				return "ok", nil
			})
			return outer.Call(ctx, 1)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if innerRuns.Load() != 0 {
		t.Fatalf("the nested tool ran %d times", innerRuns.Load())
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "started tool outer", "succeeded", "completed"})
}

// DESIGN §4: once the kernel fails the execution (a body panicked), later
// calls of the handler run nothing and append nothing; the execution fails.
func TestNoCallsAfterFatal(t *testing.T) {
	var touched atomic.Int64
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			_, err := sdk.Step(ctx, "boom", func(ctx context.Context) (string, error) { panic("kaboom") })
			var ee *sdk.ExecutionError
			if !errors.As(err, &ee) {
				return "", fmt.Errorf("panicking step: %v, want an ExecutionError", err)
			}
			touch := sdk.DefineTool("touch", func(ctx context.Context, n int) (int, error) { touched.Add(1); return n, nil })
			if _, err := touch.Call(ctx, 1); !errors.As(err, &ee) {
				return "", fmt.Errorf("call after the failure: %v, want the ExecutionError", err)
			}
			return "", nil
		})
	})
	var ee *sdk.ExecutionError
	if !errors.As(err, &ee) || ee.Code != eventlog.FailPanic {
		t.Fatalf("Run = %v, want an ExecutionError with code panic", err)
	}
	if touched.Load() != 0 {
		t.Fatalf("a call after the failure ran %d times", touched.Load())
	}
	got := describeAll(events(t, k, id))
	want := []string{"created a", "dispatch 1", "started local boom", "failed", "execution_failed panic"}
	if len(got) == len(want) && strings.HasPrefix(got[3], "failed ") && strings.Contains(got[3], "kaboom") {
		got[3] = "failed"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}
