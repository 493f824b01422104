package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// failingList is a store whose List fails while fails is positive (each
// failure uses one), with err, or always when forever is set.
type failingList struct {
	eventlog.IndexedLog
	err     error
	fails   atomic.Int64
	forever bool
}

func (f *failingList) List(ctx context.Context, flt eventlog.Filter) iter.Seq2[eventlog.Info, error] {
	if f.forever || f.fails.Add(-1) >= 0 {
		return func(yield func(eventlog.Info, error) bool) { yield(eventlog.Info{}, f.err) }
	}
	return f.IndexedLog.List(ctx, flt)
}

// syncBuffer is a bytes.Buffer safe for a logger used by several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveLines returns the "forkline: serve:" lines logged, without times.
func serveLines(buf *syncBuffer) []string {
	var out []string
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if strings.Contains(line, "forkline: serve:") {
			out = append(out, line)
		}
	}
	return out
}

func textLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func registerDouble(k *sdk.Kernel) {
	_, _ = sdk.Register(k, "double", func(ctx context.Context, n int) (int, error) {
		return sdk.Step(ctx, "double", func(context.Context) (int, error) { return 2 * n, nil })
	})
}

// TestServeRetriesAFailingStore: a store that fails four times in a row
// does not stop Serve: it logs each failure at Warn with a doubling wait,
// logs that the store answers again, and runs what was waiting, which
// appends exactly one dispatch.
func TestServeRetriesAFailingStore(t *testing.T) {
	ctx := context.Background()
	store := &failingList{IndexedLog: newStore(t), err: errors.New("connection reset by peer")}
	var logs syncBuffer
	k := newKernel(t, store, registerDouble, sdk.WithLogger(textLogger(&logs)))
	id, err := k.Start(ctx, "double", 21)
	if err != nil {
		t.Fatal(err)
	}
	store.fails.Store(4)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(time.Millisecond)) }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := k.Wait(wctx, id)
	cancel()
	if err != nil || string(res.Output) != "42" {
		t.Fatalf("Wait = %+v, %v; want 42", res, err)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v, want nil (a clean stop)", err)
	}
	want := []string{
		`level=WARN msg="forkline: serve: the store failed; retrying" error="connection reset by peer" attempt=1 retry_in=1ms`,
		`level=WARN msg="forkline: serve: the store failed; retrying" error="connection reset by peer" attempt=2 retry_in=2ms`,
		`level=WARN msg="forkline: serve: the store failed; retrying" error="connection reset by peer" attempt=3 retry_in=4ms`,
		`level=WARN msg="forkline: serve: the store failed; retrying" error="connection reset by peer" attempt=4 retry_in=8ms`,
		`level=INFO msg="forkline: serve: the store answers again" failed_attempts=4`,
	}
	if diff := cmp.Diff(want, serveLines(&logs)); diff != "" {
		t.Fatalf("Serve's log lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"created double", "dispatch 1", "started local double", "succeeded", "completed"},
		describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestServeStopsOnErrorsRetriesCannotMend: a closed, corrupt or refusing
// store ends Serve at once with that error, and nothing is appended.
func TestServeStopsOnErrorsRetriesCannotMend(t *testing.T) {
	for _, cause := range []error{eventlog.ErrClosed, eventlog.ErrCorrupt, eventlog.ErrInvalid} {
		t.Run(cause.Error(), func(t *testing.T) {
			ctx := context.Background()
			store := &failingList{IndexedLog: newStore(t), err: fmt.Errorf("list: %w", cause), forever: true}
			var logs syncBuffer
			k := newKernel(t, store, registerDouble, sdk.WithLogger(textLogger(&logs)))
			id, err := k.Start(ctx, "double", 1)
			if err != nil {
				t.Fatal(err)
			}
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err = k.Serve(tctx, sdk.PollEvery(time.Millisecond))
			if !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "sdk: serve: list: ") {
				t.Fatalf("Serve = %v, want sdk: serve: wrapping %v", err, cause)
			}
			if lines := serveLines(&logs); len(lines) != 0 {
				t.Fatalf("Serve retried: %q", lines)
			}
			if diff := cmp.Diff([]string{"created double"}, describeAll(events(t, k, id))); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServeGiveUpAfter: with GiveUpAfter, a store that keeps failing ends
// Serve with its error once the time has passed, after retrying meanwhile.
func TestServeGiveUpAfter(t *testing.T) {
	ctx := context.Background()
	down := errors.New("connection refused")
	store := &failingList{IndexedLog: newStore(t), err: down, forever: true}
	var logs syncBuffer
	k := newKernel(t, store, registerDouble, sdk.WithLogger(textLogger(&logs)))
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := k.Serve(tctx, sdk.PollEvery(time.Millisecond), sdk.GiveUpAfter(30*time.Millisecond))
	if !errors.Is(err, down) || tctx.Err() != nil {
		t.Fatalf("Serve = %v, want the store's error before the test's timeout", err)
	}
	if lines := serveLines(&logs); len(lines) < 2 {
		t.Fatalf("Serve gave up after %d attempts, want it to retry first: %q", len(lines), lines)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if err := k.Serve(ctx, sdk.GiveUpAfter(d)); !errors.Is(err, sdk.ErrInvalid) {
			t.Fatalf("GiveUpAfter(%v) = %v, want ErrInvalid", d, err)
		}
	}
}

// outageStore is a Pebble store (its Leaser and Inbox included) whose
// appends of a step.succeeded fail with a transient error failN times once
// skip of them have been written: an outage that cuts a tool's dispatch
// after its body ran.
type outageStore struct {
	*pebblestore.Store
	mu            sync.Mutex
	skip, failN   int
	succeededSeen int
}

var errReset = errors.New("connection reset by peer")

func (s *outageStore) down(evs []eventlog.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		if _, ok := ev.Data.(*eventlog.StepSucceeded); !ok {
			continue
		}
		if s.succeededSeen >= s.skip && s.failN > 0 {
			s.failN--
			return true
		}
		s.succeededSeen++
	}
	return false
}

func (s *outageStore) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if s.down(evs) {
		return 0, errReset
	}
	return s.Store.Append(ctx, id, head, evs...)
}

func (s *outageStore) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if s.down(evs) {
		return 0, errReset
	}
	return s.Store.AppendUnsynced(ctx, id, head, evs...)
}

// TestServeKeepsItsLeaseThroughAStoreError: a dispatch cut short by a store
// error while a tool that affects a non-portable resource is in flight (the
// head uncovered) is resumed by the same Serve under the same lease, which
// it never released: another kernel serving the same store never gets it
// (a takeover would have failed it with resource_unavailable), and each
// resumed dispatch reopens the binding instead of binding anew.
func TestServeKeepsItsLeaseThroughAStoreError(t *testing.T) {
	ctx := context.Background()
	pebble := newStore(t)
	drv := testdriver.New().WithoutPortable()
	// touch 3's step.succeeded fails twice: two dispatches are cut short.
	store := &outageStore{Store: pebble, skip: 2, failN: 2}
	var logs syncBuffer
	a := newKernel(t, store, hostsAgent(drv), sdk.WithOwner("a"), sdk.WithLogger(textLogger(&logs)))
	b := newKernel(t, pebble, hostsAgent(drv), sdk.WithOwner("b"))
	id, err := a.Start(ctx, "h", none{})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 2)
	go func() { served <- a.Serve(sctx, sdk.PollEvery(time.Millisecond)) }()
	// b serves too, once a holds the execution: from then on only a
	// release would let b have it.
	for deadline := time.Now().Add(10 * time.Second); len(events(t, a, id)) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a never started a dispatch")
		}
	}
	go func() { served <- b.Serve(sctx, sdk.PollEvery(time.Millisecond)) }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := a.Wait(wctx, id)
	cancel()
	if err != nil || string(res.Output) != `"ok"` {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	stop()
	for range 2 {
		if err := <-served; err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	}
	evs := events(t, a, id)
	want := []string{"created h", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool touch affects=ws", "succeeded", "captured ws steps gen=2",
		"started tool touch affects=ws at_most_once", "succeeded", "captured ws steps gen=3",
		"started tool touch affects=ws",                         // touch 3: its succeeded is refused
		"dispatch 2", "started tool touch affects=ws attempt=2", // refused again
		"dispatch 3", "started tool touch affects=ws attempt=3", "succeeded", "captured ws steps gen=6",
		"completed"}
	if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	for _, ev := range evs {
		if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok && (ds.Owner != "a" || ds.Epoch != 1) {
			t.Fatalf("dispatch %d by %q under epoch %d; want every dispatch by a under its first lease", ds.Dispatch, ds.Owner, ds.Epoch)
		}
	}
	if creates, opens, _ := drv.Counts(); creates != 1 || opens != 2 {
		t.Fatalf("the driver created %d and opened %d resources; want 1 created, reopened by each resumed dispatch", creates, opens)
	}
	if n := strings.Count(logs.String(), "forkline: serve: resuming under the same lease after a store error"); n != 2 {
		t.Fatalf("logged %d resumptions, want 2:\n%s", n, logs.String())
	}
}

// TestServeLogsFailedRunsAtDebug: Serve says at Debug which of the runs it
// started ended with an error (the execution's failure), naming the
// execution, and says nothing of the runs that succeeded.
func TestServeLogsFailedRunsAtDebug(t *testing.T) {
	ctx := context.Background()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, fail bool) (string, error) {
			if fail {
				return "", errors.New("boom")
			}
			return "ok", nil
		})
	}, sdk.WithLogger(logger))
	bad, _ := k.Start(ctx, "a", true)
	good, _ := k.Start(ctx, "a", false)
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(5*time.Millisecond)) }()
	for _, id := range []eventlog.ID{bad, good} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _ = k.Wait(wctx, id)
		cancel()
	}
	stop()
	<-served
	var lines []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "run ended with an error") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=DEBUG") || !strings.Contains(lines[0], "execution="+bad.String()) || !strings.Contains(lines[0], "boom") {
		t.Fatalf("Serve's run-ended lines: %q; want one at Debug, for %s, quoting boom", lines, bad)
	}
}
