package sdk_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// chainIn is the input of the chain agent.
type chainIn struct{ N, Seed int }

// chainArgs are the args of the chain agent's step t.
type chainArgs struct{ I, Prev int }

// chainKernel returns a kernel on a fresh in-memory store with agent
// "chain": N steps t, each given the previous one's result, and a step u
// after every result divisible by 3 — so that later calls depend on
// earlier results. force[i] is what step t of index i returns instead of
// its computed value: the way to record a chosen result in a root.
func chainKernel(t *rapid.T, force map[int]int) (*sdk.Kernel, func()) {
	st, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(st)
	if err != nil {
		t.Fatal(err)
	}
	step := sdk.DefineTool("t", func(ctx context.Context, a chainArgs) (int, error) {
		if v, ok := force[a.I]; ok {
			return v, nil
		}
		return (a.Prev*31 + a.I*7 + 1) % 1000, nil
	})
	extra := sdk.DefineTool("u", func(ctx context.Context, x int) (int, error) { return x + 1, nil })
	if _, err := sdk.Register(k, "chain", func(ctx context.Context, in chainIn) (int, error) {
		prev := in.Seed
		for i := range in.N {
			r, err := step.Call(ctx, chainArgs{I: i, Prev: prev})
			if err != nil {
				return 0, err
			}
			if r%3 == 0 {
				if _, err := extra.Call(ctx, r); err != nil {
					return 0, err
				}
			}
			prev = r
		}
		return prev, nil
	}); err != nil {
		t.Fatal(err)
	}
	return k, func() { _ = st.Close() }
}

// chainRun starts and runs the chain agent on in, returning the execution,
// its output and its events.
func chainRun(t *rapid.T, k *sdk.Kernel, in chainIn) (eventlog.ID, int, []eventlog.Event) {
	ctx := context.Background()
	id, err := k.Start(ctx, "chain", in)
	if err != nil {
		t.Fatal(err)
	}
	return id, runChain(t, k, id), lineage(t, k, id)
}

func runChain(t *rapid.T, k *sdk.Kernel, id eventlog.ID) int {
	res, err := k.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out int
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func lineage(t *rapid.T, k *sdk.Kernel, id eventlog.ID) []eventlog.Event {
	var out []eventlog.Event
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// calls renders the events of a run that say what it did — steps with
// their args and results, and how it ended — leaving out seqs, times and
// dispatch numbers.
func calls(evs []eventlog.Event) []string {
	var out []string
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			out = append(out, fmt.Sprintf("started %s %s %s #%d", p.StepKind, p.Target, p.Args, p.Attempt))
		case *eventlog.StepSucceeded:
			out = append(out, fmt.Sprintf("succeeded %s", p.Result))
		case *eventlog.DispatchStarted:
		default:
			out = append(out, describe(ev))
		}
	}
	return out
}

// TestPropertyWithResult: a fork with WithResult(s, v) at s's terminal
// event behaves as if the parent had recorded v for s: it makes the same
// later live calls, appends the same events and returns the same output as
// a root execution whose step s returned v (DESIGN §12).
func TestPropertyWithResult(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := chainIn{N: rapid.IntRange(1, 6).Draw(t, "steps"), Seed: rapid.IntRange(0, 999).Draw(t, "seed")}
		j := rapid.IntRange(0, in.N-1).Draw(t, "edited step")
		v := rapid.IntRange(0, 999).Draw(t, "value")
		force := map[int]int{}
		k, done := chainKernel(t, force)
		defer done()
		parent, _, pevs := chainRun(t, k, in)

		// Step j of the parent and its terminal event.
		var stepID string
		var at uint64
		n := 0
		for _, ev := range pevs {
			if p, ok := ev.Data.(*eventlog.StepStarted); ok && p.Target == "t" {
				if n == j {
					stepID = p.StepID
				}
				n++
			}
			if p, ok := ev.Data.(*eventlog.StepSucceeded); ok && p.StepID == stepID && at == 0 {
				at = ev.Seq
			}
		}
		fid, err := k.Fork(context.Background(), parent, at, sdk.WithResult(stepID, v))
		if err != nil {
			t.Fatal(err)
		}
		gotOut := runChain(t, k, fid)
		fevs := lineage(t, k, fid)

		// The reference: a root that recorded v for step j.
		force[j] = v
		ref, wantOut, revs := chainRun(t, k, in)
		delete(force, j)
		var refEnd uint64
		for _, ev := range revs {
			if p, ok := ev.Data.(*eventlog.StepSucceeded); ok && p.StepID == stepID {
				refEnd = ev.Seq
				if string(p.Result) != fmt.Sprint(v) {
					t.Fatalf("reference %s recorded %s for step %s, want %d", ref, p.Result, stepID, v)
				}
			}
		}
		if gotOut != wantOut {
			t.Fatalf("fork output %d, a parent that recorded %d for step %d returns %d", gotOut, v, j, wantOut)
		}
		if diff := cmp.Diff(calls(revs[refEnd:]), calls(fevs[at+1:])); diff != "" {
			t.Fatalf("after the edited step (-recorded v +fork):\n%s", diff)
		}
	})
}

// TestPropertyWithSameInput: a fork with WithInput of the recorded input
// appends the same events after fork.created as a plain fork at the same
// point, and nothing diverges (DESIGN §12).
func TestPropertyWithSameInput(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := chainIn{N: rapid.IntRange(0, 5).Draw(t, "steps"), Seed: rapid.IntRange(0, 999).Draw(t, "seed")}
		k, done := chainKernel(t, map[int]int{})
		defer done()
		parent, _, pevs := chainRun(t, k, in)
		at := rapid.Uint64Range(1, uint64(len(pevs)-1)).Draw(t, "fork at")
		ctx := context.Background()
		plain, err := k.Fork(ctx, parent, at)
		if err != nil {
			t.Fatal(err)
		}
		same, err := k.Fork(ctx, parent, at, sdk.WithInput(in))
		if err != nil {
			t.Fatal(err)
		}
		a, b := runChain(t, k, plain), runChain(t, k, same)
		if a != b {
			t.Fatalf("outputs %d and %d", a, b)
		}
		pa, pb := lineage(t, k, plain)[at+1:], lineage(t, k, same)[at+1:]
		if diff := cmp.Diff(calls(pa), calls(pb)); diff != "" {
			t.Fatalf("plain (-) and same-input (+) forks differ:\n%s", diff)
		}
		for _, ev := range pb {
			if ev.Kind() == eventlog.KindForkDiverged {
				t.Fatalf("a fork with the recorded input diverged at seq %d", ev.Seq)
			}
		}
	})
}
