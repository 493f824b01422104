package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// leasingCrashLog is a crashLog that keeps the store's leases, so that the
// dying kernel's dispatch records its owner.
type leasingCrashLog struct {
	*crashLog
	eventlog.Leaser
}

// hostsAgent registers agent "h" on k: resource ws of drv, touch 1 (a
// safe_to_retry tool), send 2 (at_most_once), touch 3.
func hostsAgent(drv *testdriver.Driver) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "h", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			if _, err := touchTool(ws, "ws").Call(ctx, 1); err != nil {
				return "", err
			}
			if _, err := touchTool(ws, "ws", sdk.AtMostOnce()).Call(ctx, 2); err != nil {
				return "", err
			}
			return touchTool(ws, "ws").Call(ctx, 3)
		})
	}
}

// crashAt runs agent h on kernel owner "a" (or as opts name it) over store
// until budget events are written, and returns the execution and the events that survived.
func crashAt(t *testing.T, store eventlog.IndexedLog, drv *testdriver.Driver, budget int64, opts ...sdk.Option) (eventlog.ID, []eventlog.Event) {
	t.Helper()
	crash := &leasingCrashLog{crashLog: &crashLog{IndexedLog: store}, Leaser: store.(eventlog.Leaser)}
	crash.budget.Store(budget)
	dying := newKernel(t, crash, hostsAgent(drv), append([]sdk.Option{sdk.WithOwner("a")}, opts...)...)
	id, err := dying.Start(context.Background(), "h", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dying.Run(context.Background(), id); !errors.Is(err, errCrash) {
		t.Fatalf("Run = %v, want the crash", err)
	}
	return id, events(t, dying, id)
}

// DESIGN §11 (where a resource may be opened): worker a dies with the head
// covered; worker b takes over and binds anew from the covering
// checkpoint — it never opens a's resource, which stays as a left it.
func TestTakeoverBindsFromCoveringCheckpoint(t *testing.T) {
	store := newStore(t)
	drv := testdriver.New().WithoutPortable()
	// created, dispatch 1, bound+baseline, started touch 1, succeeded+captured.
	id, before := crashAt(t, store, drv, 6)
	if diff := cmp.Diff([]string{"created h", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=2"}, describeAll(before)); diff != "" {
		t.Fatalf("events before the takeover (-want +got):\n%s", diff)
	}
	var bd testdriver.Binding
	if err := decodeJSON(before[2].Data.(*eventlog.ResourceBound).Binding, &bd); err != nil {
		t.Fatal(err)
	}
	aRes, ok := drv.Resource(bd.ID)
	if !ok {
		t.Fatalf("worker a's resource %s is missing", bd.ID)
	}
	aFiles := aRes.Files()
	creates, opens, _ := drv.Counts()

	b := newKernel(t, store, hostsAgent(drv), sdk.WithOwner("b"))
	if _, err := b.Run(context.Background(), id); err != nil {
		t.Fatalf("worker b: %v", err)
	}
	ref := before[6].Data.(*eventlog.ResourceCaptured).Ref
	wantEvents(t, b, id, []string{"created h", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=2",
		"dispatch 2", "bound ws from=" + ref + " every=1",
		"started tool touch affects=ws at_most_once", "succeeded", "captured ws steps gen=4",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=5",
		"completed"})
	c2, o2, _ := drv.Counts()
	if got := o2 - opens; got != 0 {
		t.Errorf("worker b opened %d bindings, want none", got)
	}
	if got := c2 - creates; got != 1 {
		t.Errorf("worker b created %d resources, want 1 (from the checkpoint)", got)
	}
	if diff := cmp.Diff(aFiles, aRes.Files()); diff != "" {
		t.Errorf("worker a's resource changed after the takeover (-before +after):\n%s", diff)
	}
	// The run's own binding is b's now: b's next dispatch opens it. A
	// completed execution runs nothing, so check through the fold instead:
	// the newest binding is b's, made after b's dispatch started.
	evs := events(t, b, id)
	if bd, ok := evs[8].Data.(*eventlog.ResourceBound); !ok || bd.From != ref {
		t.Fatalf("seq 9 = %s, want the new binding", describe(evs[8]))
	}
}

// DESIGN §15½.4: with the head uncovered (an at_most_once step in flight
// against the resource), a new owner appends nothing — not even its
// dispatch.started — opens and creates nothing, and leaves the execution
// to the owner that made the binding: Run returns ErrResourceUnavailable
// naming it. That owner reopens the binding and, once the handler gets
// past the orphan, completes. A portable binding opens anywhere.
func TestTakeoverUncoveredAwaitsOwner(t *testing.T) {
	for _, c := range []struct {
		name     string
		owner    string
		portable bool
		refused  bool
	}{
		{"another owner", "b", false, true},
		{"the same owner", "a", false, false},
		{"another owner, portable driver", "b", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newStore(t)
			drv := testdriver.New()
			if !c.portable {
				drv = drv.WithoutPortable()
			}
			// ... succeeded+captured of touch 1, started send 2 (synced).
			id, before := crashAt(t, store, drv, 8)
			if got := describe(before[len(before)-1]); got != "started tool touch affects=ws at_most_once" {
				t.Fatalf("head = %s, want the at_most_once step in flight", got)
			}
			if bd := before[2].Data.(*eventlog.ResourceBound); bd.Portable != c.portable {
				t.Fatalf("resource.bound Portable = %v, want %v (the driver's at bind time)", bd.Portable, c.portable)
			}
			creates, opens, _ := drv.Counts()
			k := newKernel(t, store, tolerantHostsAgent(drv), sdk.WithOwner(c.owner))
			_, err := k.Run(context.Background(), id)
			evs := describeAll(events(t, k, id))
			if c.refused {
				var ae *sdk.AwaitingOwnerError
				if !errors.Is(err, sdk.ErrResourceUnavailable) || !errors.As(err, &ae) || ae.Owner != "a" || ae.Key != "ws" {
					t.Fatalf("Run = %v, want ErrResourceUnavailable awaiting owner a for ws", err)
				}
				if !strings.Contains(err.Error(), `awaiting owner "a"`) {
					t.Errorf("error %q does not name the owner", err)
				}
				if diff := cmp.Diff(describeAll(before), evs); diff != "" {
					t.Fatalf("the refused takeover appended (-before +after):\n%s", diff)
				}
				if c2, o2, _ := drv.Counts(); o2 != opens || c2 != creates {
					t.Fatalf("the refused takeover opened %d and created %d resources", o2-opens, c2-creates)
				}
				// Info's status is still running; AwaitedOwner (what forkline
				// ls shows) names the owner it waits for.
				if info, err := store.Info(context.Background(), id); err != nil || info.Status != eventlog.StatusRunning {
					t.Fatalf("Info = %+v, %v; want running", info, err)
				}
				if owner, ok, err := sdk.AwaitedOwner(context.Background(), store, id); err != nil || !ok || owner != "a" {
					t.Fatalf("AwaitedOwner = %q, %v, %v; want a", owner, ok, err)
				}
				// Again: still nothing appended, the same answer.
				if _, err := k.Run(context.Background(), id); !errors.As(err, &ae) || ae.Owner != "a" {
					t.Fatalf("second Run = %v, want awaiting owner a", err)
				}
				// The owner comes back and resumes: it reopens its binding.
				a := newKernel(t, store, tolerantHostsAgent(drv), sdk.WithOwner("a"))
				if _, err := a.Run(context.Background(), id); err != nil {
					t.Fatalf("owner a's Run = %v, want completed", err)
				}
				if c2, o2, _ := drv.Counts(); o2-opens != 1 || c2 != creates {
					t.Fatalf("owner a opened %d and created %d resources, want 1 and 0", o2-opens, c2-creates)
				}
				if _, ok, err := sdk.AwaitedOwner(context.Background(), store, id); err != nil || ok {
					t.Fatalf("AwaitedOwner of the completed execution = %v, %v; want none", ok, err)
				}
				wantEvents(t, a, id, append(describeAll(before), "dispatch 2",
					"failed indeterminate", "captured ws steps gen=3", "started tool touch affects=ws", "succeeded", "captured ws steps gen=4", "completed"))
				return
			}
			if err != nil {
				t.Fatalf("Run = %v, want completed", err)
			}
			if c2, o2, _ := drv.Counts(); o2-opens != 1 || c2 != creates {
				t.Fatalf("resume opened %d and created %d resources, want 1 and 0", o2-opens, c2-creates)
			}
			if strings.Contains(strings.Join(evs, ","), "bound ws from=") {
				t.Fatalf("resume bound anew: %v", evs)
			}
		})
	}
}

// tolerantHostsAgent is hostsAgent whose handler gets past an
// indeterminate send 2 (the orphan a crash left) and goes on.
func tolerantHostsAgent(drv *testdriver.Driver) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "h", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			if _, err := touchTool(ws, "ws").Call(ctx, 1); err != nil {
				return "", err
			}
			if _, err := touchTool(ws, "ws", sdk.AtMostOnce()).Call(ctx, 2); err != nil && !errors.Is(err, sdk.ErrIndeterminate) {
				return "", err
			}
			return touchTool(ws, "ws").Call(ctx, 3)
		})
	}
}

// claimCounter counts the claims of a store's Leaser.
type claimCounter struct {
	*pebblestore.Store
	claims atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration) (eventlog.Lease, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, id, owner, ttl)
}

// ClaimVersion counts too: the kernel claims through it (DESIGN §19).
func (c *claimCounter) ClaimVersion(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	c.claims.Add(1)
	return c.Store.ClaimVersion(ctx, id, owner, ttl, worker)
}

// ClaimToRun counts too: the kernel claims to run through it (DESIGN §19
// queues).
func (c *claimCounter) ClaimToRun(ctx context.Context, id eventlog.ID, owner string, ttl time.Duration, worker string) (eventlog.Lease, error) {
	c.claims.Add(1)
	return c.Store.ClaimToRun(ctx, id, owner, ttl, worker)
}

// DESIGN §15½.4: Serve on another owner does not spin on an execution it
// must leave to its owner: over a second of 10 ms polls it claims it at
// most twice (the first try and one backoff retry), appends nothing, and
// the execution stays running for its owner, which Info names.
func TestServeLeavesAwaitedExecutionAlone(t *testing.T) {
	store := newStore(t)
	drv := testdriver.New().WithoutPortable()
	id, before := crashAt(t, store, drv, 8)
	counted := &claimCounter{Store: store}
	b := newKernel(t, counted, tolerantHostsAgent(drv), sdk.WithOwner("b"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.Serve(ctx, sdk.PollEvery(10*time.Millisecond)); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if n := counted.claims.Load(); n < 1 || n > 2 {
		t.Errorf("Serve claimed the awaited execution %d times in 1s, want 1 or 2 (no busy loop)", n)
	}
	if diff := cmp.Diff(describeAll(before), describeAll(events(t, b, id))); diff != "" {
		t.Fatalf("Serve appended (-before +after):\n%s", diff)
	}
	info, err := store.Info(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != eventlog.StatusRunning {
		t.Errorf("status %s, want running", info.Status)
	}
	// The backoff is the store's note (eventlog.AwaitKeeper), so Info
	// says whom the execution awaits.
	if info.AwaitedOwner != "a" || !strings.Contains(info.LastError, `awaiting owner "a"`) || info.RetryAt.IsZero() {
		t.Errorf("Info: AwaitedOwner %q, LastError %q, RetryAt %v; want a, awaiting owner a, a RetryAt",
			info.AwaitedOwner, info.LastError, info.RetryAt)
	}
	serveAwaitedOwner(t, store, store, id, drv)
}

// serveAwaitedOwner notes that id, left to owner a, backs off for an hour
// (as a Serve on another owner would), then serves it on a kernel named a
// over log: the note does not hold a back, which completes the execution
// at once, and its claim clears the note.
func serveAwaitedOwner(t *testing.T, log eventlog.IndexedLog, keeper eventlog.AwaitKeeper, id eventlog.ID, drv *testdriver.Driver) {
	t.Helper()
	if err := keeper.SetAwaiting(t.Context(), id, "a", `awaiting owner "a"`, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	a := newKernel(t, log, tolerantHostsAgent(drv), sdk.WithOwner("a"))
	actx, stop := context.WithTimeout(t.Context(), 5*time.Second)
	defer stop()
	go func() { _ = a.Serve(actx, sdk.PollEvery(10*time.Millisecond)) }()
	if _, err := a.Wait(actx, id); err != nil {
		t.Fatalf("owner a's Serve, with the execution backed off for an hour for it: %v", err)
	}
	info, err := log.Info(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if info.AwaitedOwner != "" || info.LastError != "" || !info.RetryAt.IsZero() {
		t.Fatalf("after its owner ran it: AwaitedOwner %q, LastError %q, RetryAt %v; want no note",
			info.AwaitedOwner, info.LastError, info.RetryAt)
	}
}

// shutdownAgent registers agent "s": resource ws of drv (EverySteps 5),
// touch 1, then tool wait, which — when started is not nil — signals it
// and waits for its dispatch to end.
func shutdownAgent(drv *testdriver.Driver, started chan<- struct{}) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "s", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(5))
			if err != nil {
				return "", err
			}
			if _, err := touchTool(ws, "ws").Call(ctx, 1); err != nil {
				return "", err
			}
			wait := sdk.DefineTool("wait", func(ctx context.Context, _ int) (string, error) {
				if started == nil {
					return "ok", nil
				}
				started <- struct{}{}
				<-ctx.Done()
				return "", ctx.Err()
			})
			return wait.Call(ctx, 0)
		})
	}
}

// runUntilShutdown starts agent "s" on k and runs it until started says
// its wait tool runs, then cancels the dispatch (a shutdown): Run must
// return context.Canceled.
func runUntilShutdown(t *testing.T, k *sdk.Kernel, started <-chan struct{}) eventlog.ID {
	t.Helper()
	id, _ := k.Start(context.Background(), "s", none{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	if _, err := k.Run(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	return id
}

// DESIGN §11: a dispatch whose context ends (Serve stopping, a shutdown)
// captures its uncovered resources first, so the next owner binds from
// the head instead of failing.
func TestShutdownCapturesForHandoff(t *testing.T) {
	store := newStore(t)
	drv := testdriver.New().WithoutPortable()
	started := make(chan struct{}, 1)
	a := newKernel(t, store, shutdownAgent(drv, started), sdk.WithOwner("a"))
	id := runUntilShutdown(t, a, started)
	prefix := []string{"created s", "dispatch 1", "bound ws every=5", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "started tool wait", "cancelled",
		"captured ws shutdown gen=3"}
	wantEvents(t, a, id, prefix)
	ref := events(t, a, id)[8].Data.(*eventlog.ResourceCaptured).Ref

	b := newKernel(t, store, shutdownAgent(drv, nil), sdk.WithOwner("b"))
	if _, err := b.Run(context.Background(), id); err != nil {
		t.Fatalf("worker b: %v", err)
	}
	wantEvents(t, b, id, append(prefix, "dispatch 2", "bound ws from="+ref+" every=5",
		"started tool wait attempt=2", "succeeded", "captured ws completion gen=5", "completed"))
}

// TestShutdownCaptureFailureIsLogged: when the capture a shutdown makes for
// the next owner cannot be taken (the driver fails), the dispatch still
// ends as cancelled, records capture_failed, and says so at Warn — the
// next owner will fail with resource_unavailable, and the log is where an
// operator learns why.
func TestShutdownCaptureFailureIsLogged(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	drv := testdriver.New().WithoutPortable()
	var checkpoints atomic.Int64
	drv.FailCheckpoint = func() error {
		if checkpoints.Add(1) > 1 { // the baseline is taken; the rest fail
			return errors.New("disk full")
		}
		return nil
	}
	started := make(chan struct{}, 1)
	k := newKernel(t, newStore(t), shutdownAgent(drv, started), sdk.WithOwner("a"), sdk.WithLogger(logger))
	id := runUntilShutdown(t, k, started)
	wantEvents(t, k, id, []string{"created s", "dispatch 1", "bound ws every=5", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "started tool wait", "cancelled",
		"capture_failed ws shutdown"})
	logged := buf.String()
	if strings.Count(logged, "forkline: capture failed") != 1 || !strings.Contains(logged, "resource=ws") ||
		!strings.Contains(logged, "reason=shutdown") || !strings.Contains(logged, "disk full") {
		t.Fatalf("log:\n%s\nwant one Warn \"forkline: capture failed\" for ws (shutdown, disk full)", logged)
	}
}
