package sdk_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// The SDK under misuse (issue 19, items 8–11): a handler that leaves a
// goroutine calling tools, two kernels on one store, a cancelled context,
// args that are not valid UTF-8.

// TestCallAfterHandlerReturned: a goroutine the handler left behind, whose
// tool call is in flight when the handler returns, has its call cancelled
// and recorded before execution.completed; its next call returns
// ErrNotInExecution and appends nothing; the completed execution runs again
// without error.
func TestCallAfterHandlerReturned(t *testing.T) {
	ctx := context.Background()
	entered := make(chan struct{})
	leaked := make(chan error, 2)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		slow := sdk.DefineTool("slow", func(ctx context.Context, n int) (int, error) {
			if n == 1 {
				close(entered)
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return n, nil
		})
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			go func() {
				_, err := slow.Call(ctx, 1)
				leaked <- err
				_, err = slow.Call(ctx, 2)
				leaked <- err
			}()
			<-entered
			return "done", nil
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	res, err := k.Run(ctx, id)
	if err != nil || string(res.Output) != `"done"` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	if err := <-leaked; !errors.Is(err, context.Canceled) {
		t.Fatalf("in-flight call = %v, want context.Canceled", err)
	}
	if err := <-leaked; !errors.Is(err, sdk.ErrNotInExecution) {
		t.Fatalf("call after the handler returned = %v, want ErrNotInExecution", err)
	}
	want := []string{"created a", "dispatch 1", "started tool slow", "cancelled", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if res, err := k.Run(ctx, id); err != nil || string(res.Output) != `"done"` {
		t.Fatalf("second Run = %v, %v", res, err)
	}
}

// TestCallAfterRunReturned: a call made with the handler's context after
// Run returned is refused and appends nothing.
func TestCallAfterRunReturned(t *testing.T) {
	ctx := context.Background()
	kept := make(chan context.Context, 1)
	var ran atomic.Int64
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			kept <- ctx
			return none{}, nil
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	hctx := <-kept
	_, err := sdk.Step(hctx, "late", func(context.Context) (int, error) { ran.Add(1); return 1, nil })
	if !errors.Is(err, sdk.ErrNotInExecution) || ran.Load() != 0 {
		t.Fatalf("late step = %v (ran %d), want ErrNotInExecution", err, ran.Load())
	}
	_, err = sdk.Resource(hctx, "ws", testdriver.New(), sdk.EverySteps(1))
	if !errors.Is(err, sdk.ErrNotInExecution) {
		t.Fatalf("late Resource = %v, want ErrNotInExecution", err)
	}
	want := []string{"created a", "dispatch 1", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestCancelledContextStartsNothing: once the handler's context is
// cancelled, the next call is not started (no step.started), Run returns
// the context's error, and the execution resumes on the next Run.
func TestCancelledContextStartsNothing(t *testing.T) {
	var bRuns atomic.Int64
	var cancelRun context.CancelFunc
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			if _, err := sdk.Step(ctx, "A", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
			if cancelRun != nil {
				cancelRun()
			}
			return sdk.Step(ctx, "B", func(context.Context) (int, error) { bRuns.Add(1); return 2, nil })
		})
	})
	id, _ := k.Start(context.Background(), "a", none{})
	ctx, cancel := context.WithCancel(context.Background())
	cancelRun = cancel
	if _, err := k.Run(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if bRuns.Load() != 0 {
		t.Fatal("step B ran after the context was cancelled")
	}
	want := []string{"created a", "dispatch 1", "started local A", "succeeded"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	cancelRun = nil
	res, err := k.Run(context.Background(), id)
	if err != nil || string(res.Output) != "2" || bRuns.Load() != 1 {
		t.Fatalf("resume = %v, %v (B ran %d times)", res, err, bRuns.Load())
	}
}

// TestCancelledContextCreatesNoResource: Resource with a cancelled context
// creates nothing and appends nothing.
func TestCancelledContextCreatesNoResource(t *testing.T) {
	k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (none, error) {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := sdk.Resource(cctx, "ws", testdriver.New(), sdk.EverySteps(1))
			if !errors.Is(err, context.Canceled) {
				return none{}, errors.New("Resource with a cancelled context: " + errString(err))
			}
			return none{}, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"created a", "dispatch 1", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestInvalidUTF8Args: args holding a string that is not valid UTF-8 are
// refused with ErrInvalid and append nothing, so two different invalid
// strings never share a StepID; LLM request bodies that are not valid UTF-8
// are recorded raw and keep distinct identities.
func TestInvalidUTF8Args(t *testing.T) {
	var runs atomic.Int64
	echo := sdk.DefineTool("echo", func(ctx context.Context, s any) (string, error) { runs.Add(1); return "ok", nil })
	for _, args := range []any{
		"a\xffb",
		"a\xfeb",
		map[string]string{"k": "\xc3"},
		map[string]int{"\xff": 1},
		[]any{"ok", "bad\x80"},
	} {
		k, id, _, err := runOnce(t, func(k *sdk.Kernel) {
			_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
				return echo.Call(ctx, args)
			})
		})
		if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("args %q: Run = %v, want ErrInvalid naming UTF-8", args, err)
		}
		for _, ev := range events(t, k, id) {
			if ev.Kind() == eventlog.KindStepStarted {
				t.Fatalf("args %q: a step.started was appended", args)
			}
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("the tool ran %d times", runs.Load())
	}
	type inner struct{ S string }
	// A bad string as deep as encoding/json goes is found: 1,500 nested
	// lists put it 3,000 values down.
	var deep any = "\xff"
	for range 1500 {
		deep = []any{deep}
	}
	// Unexported embedded types whose MarshalText methods are not promoted
	// (two at one depth): the walk must not call them (reflect would
	// panic) and finds the bad string beside them.
	type clash struct {
		//lint:ignore U1000 embedded for its unpromoted MarshalText
		textA
		//lint:ignore U1000 embedded for its unpromoted MarshalText
		textB
		S string
	}
	for _, args := range []any{struct{ In inner }{inner{"x\xff"}}, []*string{ptr("ok"), ptr("\xff")}, badText{}, deep, clash{S: "x\xff"}} {
		if err := runEcho(t, args); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("args %#v: Run = %v, want ErrInvalid naming UTF-8", args, err)
		}
	}
	// JSON written by the caller may hold the \ufffd escape: that is valid
	// text (U+FFFD), accepted, and the same call as the character itself.
	escaped, _ := callEcho(t, json.RawMessage(`{"q":"\ufffd"}`))
	plain, _ := callEcho(t, map[string]string{"q": "\uFFFD"})
	if escaped != plain {
		t.Fatalf("the \\ufffd escape and U+FFFD are two calls: %s, %s", escaped, plain)
	}

	// LLM bodies: recorded raw, two invalid bodies are two calls.
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(b))}, nil
	})
	client := &http.Client{Transport: sdk.Transport(base)}
	k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			var out []string
			for _, body := range []string{"{\"model\":\"m\",\"q\":\"a\xffb\"}", "{\"model\":\"m\",\"q\":\"a\xfeb\"}"} {
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://model/v1/chat", strings.NewReader(body))
				resp, err := client.Do(req)
				if err != nil {
					return "", err
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				out = append(out, hex.EncodeToString(b))
			}
			return strings.Join(out, "|"), nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := res.Decode(&got); err != nil || got != hex.EncodeToString([]byte("{\"model\":\"m\",\"q\":\"a\xffb\"}"))+"|"+hex.EncodeToString([]byte("{\"model\":\"m\",\"q\":\"a\xfeb\"}")) {
		t.Fatalf("output %q, %v", got, err)
	}
	ids := map[string]bool{}
	for _, ev := range events(t, k, id) {
		if st, ok := ev.Data.(*eventlog.StepStarted); ok {
			ids[st.StepID] = true
		}
	}
	if len(ids) != 2 {
		t.Fatalf("%d distinct LLM StepIDs, want 2", len(ids))
	}
}

func ptr[T any](v T) *T { return &v }

// badText marshals to text that is not valid UTF-8.
type badText struct{}

func (badText) MarshalText() ([]byte, error) { return []byte("\xfe"), nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTwoKernelsOneStore: two kernels on one store agree on who runs an
// execution. While the first runs an at_most_once body, the second's Run is
// ErrBusy and appends nothing (before leases it resolved the step as an
// indeterminate orphan and failed the execution); afterwards it returns the
// recorded output.
func TestTwoKernelsOneStore(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	entered, release, runs, register := heldCharge()
	kA := newKernel(t, store, register, sdk.WithOwner("A"))
	kB := newKernel(t, store, register, sdk.WithOwner("B"))
	id, _ := kA.Start(ctx, "a", none{})
	done := make(chan error, 1)
	go func() { _, err := kA.Run(ctx, id); done <- err }()
	<-entered
	head, _ := store.Head(ctx, id)
	_, err := kB.Run(ctx, id)
	if !errors.Is(err, sdk.ErrBusy) || !strings.Contains(err.Error(), `"A"`) {
		t.Fatalf("second kernel's Run = %v, want ErrBusy naming owner A", err)
	}
	if h, _ := store.Head(ctx, id); h != head {
		t.Fatalf("the second kernel appended: head %d → %d", head, h)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := kB.Run(ctx, id)
	if err != nil || string(res.Output) != "7" {
		t.Fatalf("second kernel after the first ended: %v, %v", res, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("the at_most_once body ran %d times", runs.Load())
	}
	want := []string{"created a", "dispatch 1", "started tool charge at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, kA, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// heldCharge registers agent "a", which calls the at_most_once tool
// "charge" once; the first body closes entered and waits for release, and
// runs counts the bodies.
func heldCharge() (entered, release chan struct{}, runs *atomic.Int64, register func(*sdk.Kernel)) {
	entered, release, runs = make(chan struct{}), make(chan struct{}), new(atomic.Int64)
	register = func(k *sdk.Kernel) {
		charge := sdk.DefineTool("charge", func(ctx context.Context, n int) (int, error) {
			if runs.Add(1) == 1 {
				close(entered)
				<-release
			}
			return n, nil
		}, sdk.AtMostOnce())
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) { return charge.Call(ctx, 7) })
	}
	return entered, release, runs, register
}

// stalledLeases is a store whose renewals fail as if the kernel were
// partitioned from it: its lease lapses while its body runs.
type stalledLeases struct{ *pebblestore.Store }

func (s stalledLeases) Renew(context.Context, eventlog.Lease, time.Duration) (eventlog.Lease, error) {
	return eventlog.Lease{}, errors.New("test: store unreachable")
}

// TestLeaseTakeoverFences: a kernel whose lease lapsed while its body ran
// (it could not renew) is taken over by another, and never writes again:
// its append is refused with ErrLeaseLost, and the lineage holds only the
// new owner's events after the takeover.
func TestLeaseTakeoverFences(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	entered, release, runs, register := heldCharge()
	kA := newKernel(t, stalledLeases{store}, register, sdk.WithOwner("A"), sdk.WithLeaseTTL(30*time.Millisecond))
	kB := newKernel(t, store, register, sdk.WithOwner("B"))
	id, _ := kA.Start(ctx, "a", none{})
	done := make(chan error, 1)
	go func() { _, err := kA.Run(ctx, id); done <- err }()
	<-entered
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err = kB.Run(ctx, id); !errors.Is(err, sdk.ErrBusy) {
			break
		}
	}
	// B found A's at_most_once step in flight with no live owner: it may
	// have taken effect, so it is indeterminate and the handler fails.
	if !errors.Is(err, sdk.ErrIndeterminate) {
		t.Fatalf("takeover Run = %v, want the indeterminate failure", err)
	}
	close(release)
	if err := <-done; !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("stalled kernel's Run = %v, want ErrLeaseLost", err)
	}
	if runs.Load() != 1 {
		t.Fatalf("the at_most_once body ran %d times, want once", runs.Load())
	}
	want := []string{"created a", "dispatch 1", "started tool charge at_most_once",
		"dispatch 2", "failed indeterminate", "execution_failed handler"}
	if diff := cmp.Diff(want, describeAll(events(t, kA, id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// countedLeases counts the renewals that reach the store.
type countedLeases struct {
	*pebblestore.Store
	renewals *atomic.Int64
}

func (s countedLeases) Renew(ctx context.Context, l eventlog.Lease, ttl time.Duration) (eventlog.Lease, error) {
	s.renewals.Add(1)
	return s.Store.Renew(ctx, l, ttl)
}

// TestLeaseRenewedWithinItsTTL: a dispatch renews its lease every third of
// the TTL, so a body that runs for several TTLs keeps it: with a TTL of
// 300 ms, a body of a second sees about ten renewals (a renewal every TTL
// or later would let the lease lapse between two).
func TestLeaseRenewedWithinItsTTL(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	var renewals atomic.Int64
	k := newKernel(t, countedLeases{store, &renewals}, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return sdk.Step(ctx, "long", func(context.Context) (string, error) {
				time.Sleep(time.Second)
				return "done", nil
			})
		})
	}, sdk.WithOwner("A"), sdk.WithLeaseTTL(300*time.Millisecond))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := renewals.Load(); n < 3 {
		t.Errorf("%d renewals in a one-second body under a 300 ms TTL, want about ten (every 100 ms)", n)
	}
	wantEvents(t, k, id, []string{"created a", "dispatch 1", "started local long", "succeeded", "completed"})
}

// textA and textB are only embedded, unexported, in clash: staticcheck
// sees no use of their methods, which the test needs to exist.
//
//lint:ignore U1000 embedded in clash; its method must exist unpromoted
type textA struct{}

//lint:ignore U1000 see textA
func (textA) MarshalText() ([]byte, error) { return []byte("a"), nil }

//lint:ignore U1000 see textA
type textB struct{}

//lint:ignore U1000 see textA
func (textB) MarshalText() ([]byte, error) { return []byte("b"), nil }
