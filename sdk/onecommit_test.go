package sdk_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/sdk"
)

// countingPG is a Postgres log that counts the appends it commits (every
// capability of the store is promoted, CommitPerAppend included).
type countingPG struct {
	*pgstore.Store
	appends atomic.Int64
}

func (c *countingPG) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	c.appends.Add(1)
	return c.Store.Append(ctx, id, head, evs...)
}

func (c *countingPG) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	c.appends.Add(1)
	return c.Store.AppendUnsynced(ctx, id, head, evs...)
}

// TestOneCommitPerStep (DESIGN §21): on Postgres, which commits each
// append on its own, a safe_to_retry step that affects nothing is one
// commit: its step.started is written with its outcome, so the log shows
// nothing of it while the body runs, and the events and their order are
// those of two appends. An at_most_once step's intent is in the log before
// its body runs, as on Pebble, where every start is written at once. Two
// steps of one dispatch in flight at once: the second's outcome writes the
// first's start before its own events, and the first's outcome follows.
// A shutdown while a deferred body runs writes the start and the
// step.cancelled, and the next Run runs the step again.
func TestOneCommitPerStep(t *testing.T) {
	ctx := t.Context()
	type gate struct{ entered, release chan struct{} }
	newGate := func() gate { return gate{make(chan struct{}), make(chan struct{})} }
	var gates sync.Map // step name -> gate
	block := func(ctx context.Context, name string) (string, error) {
		if g, ok := gates.Load(name); ok {
			close(g.(gate).entered)
			select {
			case <-g.(gate).release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return name + " done", nil
	}
	safe := sdk.DefineTool("safe", block)
	once := sdk.DefineTool("once", block, sdk.AtMostOnce())
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "seq", func(ctx context.Context, names []string) (string, error) {
			var out []string
			for _, n := range names {
				tool := safe
				if strings.HasPrefix(n, "once") {
					tool = once
				}
				r, err := tool.Call(ctx, n)
				if err != nil {
					return "", err
				}
				out = append(out, r)
			}
			return strings.Join(out, ","), nil
		})
		_, _ = sdk.Register(k, "pair", func(ctx context.Context, _ int) (string, error) {
			var wg sync.WaitGroup
			res := make([]string, 2)
			errs := make([]error, 2)
			for i, n := range []string{"slow", "quick"} {
				wg.Go(func() { res[i], errs[i] = safe.Call(ctx, n) })
			}
			wg.Wait()
			return strings.Join(res, ","), errors.Join(errs...)
		})
	}
	pg := &countingPG{Store: openPG(t, 1)[0]}
	k := newKernel(t, pg, register)
	peb := newKernel(t, newStore(t), register)

	// A safe_to_retry step in flight is not in the Postgres log; on
	// Pebble it is. Then one append writes its start and outcome.
	for _, c := range []struct {
		name     string
		k        *sdk.Kernel
		inFlight []string
	}{
		{"postgres", k, []string{"created seq", "dispatch 1"}},
		{"pebble", peb, []string{"created seq", "dispatch 1", "started tool safe"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGate()
			gates.Store("a", g)
			defer gates.Delete("a")
			id, err := c.k.Start(ctx, "seq", []string{"a", "b"})
			if err != nil {
				t.Fatal(err)
			}
			done := runAsync(ctx, c.k, id)
			<-g.entered
			before := pg.appends.Load()
			if got := describeAll(events(t, c.k, id)); !slices.Equal(got, c.inFlight) {
				t.Fatalf("while the body runs the log is %q, want %q", got, c.inFlight)
			}
			close(g.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := []string{"created seq", "dispatch 1", "started tool safe", "succeeded", "started tool safe", "succeeded", "completed"}
			if got := describeAll(events(t, c.k, id)); !slices.Equal(got, want) {
				t.Fatalf("log %q, want %q", got, want)
			}
			if c.name == "postgres" {
				// a's start and outcome, b's start and outcome, the
				// completion: three commits.
				if n := pg.appends.Load() - before; n != 3 {
					t.Fatalf("%d appends after the first body began, want 3 (one per step, one for the completion)", n)
				}
			}
		})
	}

	t.Run("at_most_once", func(t *testing.T) {
		g := newGate()
		gates.Store("once-a", g)
		defer gates.Delete("once-a")
		id, err := k.Start(ctx, "seq", []string{"once-a"})
		if err != nil {
			t.Fatal(err)
		}
		done := runAsync(ctx, k, id)
		<-g.entered
		want := []string{"created seq", "dispatch 1", "started tool once at_most_once"}
		if got := describeAll(events(t, k, id)); !slices.Equal(got, want) {
			t.Fatalf("while the at_most_once body runs the log is %q, want %q (its intent first)", got, want)
		}
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})

	t.Run("two in flight", func(t *testing.T) {
		g := newGate()
		gates.Store("slow", g)
		defer gates.Delete("slow")
		// quick's body ends only once slow's has begun.
		gates.Store("quick", gate{entered: make(chan struct{}), release: g.entered})
		defer gates.Delete("quick")
		id, err := k.Start(ctx, "pair", 0)
		if err != nil {
			t.Fatal(err)
		}
		done := runAsync(ctx, k, id)
		<-g.entered
		// quick ends while slow runs: its append carries slow's start.
		deadline := time.Now().Add(30 * time.Second)
		for len(events(t, k, id)) < 5 {
			if time.Now().After(deadline) {
				t.Fatalf("quick's outcome never appended: %q", describeAll(events(t, k, id)))
			}
			time.Sleep(5 * time.Millisecond)
		}
		evs := events(t, k, id)
		// Both starts (in the order the calls began), then quick's outcome.
		stepOf := map[string]string{}
		for _, ev := range evs[2:] {
			if s, ok := ev.Data.(*eventlog.StepStarted); ok {
				stepOf[strings.Trim(string(s.Args), `"`)] = s.StepID
			}
		}
		if got := describeAll(evs); !slices.Equal(got, []string{"created pair", "dispatch 1", "started tool safe", "started tool safe", "succeeded"}) ||
			stepOf["slow"] == "" || stepOf["quick"] == "" || evs[4].Data.(*eventlog.StepSucceeded).StepID != stepOf["quick"] {
			t.Fatalf("while slow runs the log is %q (steps %v), want both starts and quick's outcome", got, stepOf)
		}
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		evs = events(t, k, id)
		if got := describeAll(evs); !slices.Equal(got, []string{"created pair", "dispatch 1", "started tool safe", "started tool safe", "succeeded", "succeeded", "completed"}) ||
			evs[5].Data.(*eventlog.StepSucceeded).StepID != stepOf["slow"] {
			t.Fatalf("log %q, want slow's outcome after quick's", got)
		}
		// The lineage replays: a fork at the end runs nothing live.
		fid, err := k.Fork(ctx, id, 6)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := k.Run(ctx, fid); err != nil || string(res.Output) != `"slow done,quick done"` {
			t.Fatalf("fork = %v, %v", res, err)
		}
		if got := describeAll(events(t, k, fid)[6:]); !slices.Equal(got, []string{"fork at=6", "dispatch 2", "completed"}) {
			t.Fatalf("the fork appended %q, want no live step", got)
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		g := newGate()
		gates.Store("c", g)
		id, err := k.Start(ctx, "seq", []string{"c"})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := runAsync(rctx, k, id)
		<-g.entered
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after its context ended = %v, want context.Canceled", err)
		}
		want := []string{"created seq", "dispatch 1", "started tool safe", "cancelled"}
		if got := describeAll(events(t, k, id)); !slices.Equal(got, want) {
			t.Fatalf("after the shutdown the log is %q, want %q", got, want)
		}
		gates.Delete("c")
		if res, err := k.Run(ctx, id); err != nil || string(res.Output) != `"c done"` {
			t.Fatalf("Run after the shutdown = %v, %v", res, err)
		}
		want = append(want, "dispatch 2", "started tool safe attempt=2", "succeeded", "completed")
		if got := describeAll(events(t, k, id)); !slices.Equal(got, want) {
			t.Fatalf("after the second Run the log is %q, want %q", got, want)
		}
	})
}
