package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// tagged is the input of the edit agent.
type tagged struct{ Tag string }

// registerEdit registers agent "a": it obtains resource ws, greets its
// tag (a tool that writes a file), then works twice, and returns what the
// greeting and the work returned.
func registerEdit(drv *testdriver.Driver) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, in tagged) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			greet := sdk.DefineTool("greet", func(ctx context.Context, tag string) (string, error) {
				return "hello " + tag, ws.WriteFile("greet", []byte(tag))
			}, sdk.Affects("ws"))
			work := sdk.DefineTool("work", func(ctx context.Context, n int) (int, error) {
				return 10 * n, ws.WriteFile(fmt.Sprint("work", n), nil)
			}, sdk.Affects("ws"))
			g, err := greet.Call(ctx, in.Tag)
			if err != nil {
				return "", err
			}
			a, err := work.Call(ctx, 1)
			if err != nil {
				return "", err
			}
			b, err := work.Call(ctx, 2)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s %d %d", g, a, b), nil
		})
	}
}

// stepEvents returns the StepID of the n-th step.started of target in evs
// (from 0) and the seq of its step.succeeded.
func stepEvents(t *testing.T, evs []eventlog.Event, target string, n int) (string, uint64) {
	t.Helper()
	id := ""
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if p.Target == target && id == "" {
				if n == 0 {
					id = p.StepID
				}
				n--
			}
		case *eventlog.StepSucceeded:
			if id != "" && p.StepID == id {
				return id, ev.Seq
			}
		}
	}
	t.Fatalf("no succeeded step %d of %q", n, target)
	return "", 0
}

// describeEdit renders an event for the tests of this file: describe, plus
// the fork.created edit and fork.diverged's steps.
func describeEdit(ev eventlog.Event) string {
	switch p := ev.Data.(type) {
	case *eventlog.ForkCreated:
		s := fmt.Sprintf("fork at=%d", p.At)
		if len(p.Input) > 0 {
			s += " input=" + string(p.Input)
		}
		for _, o := range p.Overrides {
			s += fmt.Sprintf(" override=%s:%s", o.StepID[:8], o.Result)
		}
		return s
	case *eventlog.ForkDiverged:
		s := "diverged"
		for _, id := range p.Unconsumed {
			s += " " + id[:8]
		}
		return s
	case *eventlog.StepSucceeded:
		return "succeeded " + string(p.Result)
	}
	return describe(ev)
}

func describeEdits(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = describeEdit(ev)
	}
	return out
}

// runEditParent runs agent "a" with tag x to completion.
func runEditParent(t *testing.T) (*sdk.Kernel, *testdriver.Driver, eventlog.ID, []eventlog.Event) {
	t.Helper()
	drv := testdriver.New()
	k := newKernel(t, newStore(t), registerEdit(drv))
	id, err := k.Start(context.Background(), "a", tagged{Tag: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	return k, drv, id, events(t, k, id)
}

// forkAndRun forks id at at with opts, runs the fork to its end and
// returns it and its output, a string.
func forkAndRun(t *testing.T, k *sdk.Kernel, id eventlog.ID, at uint64, opts ...sdk.ForkOption) (eventlog.ID, string) {
	t.Helper()
	ctx := context.Background()
	fid, err := k.Fork(ctx, id, at, opts...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil {
		t.Fatalf("output of the fork: %v", err)
	}
	return fid, out
}

// TestForkWithResult: a fork at a step's terminal event with WithResult
// records the override in fork.created and replays it as the step's
// result; the restored workspace is the state right after the step
// (DESIGN §12).
func TestForkWithResult(t *testing.T) {
	k, drv, parent, pevs := runEditParent(t)
	workID, at := stepEvents(t, pevs, "work", 0)
	fid, out := forkAndRun(t, k, parent, at, sdk.WithResult(workID, 99))
	if out != "hello x 99 20" {
		t.Fatalf("output %q; want the overridden work result", out)
	}
	got := describeEdits(events(t, k, fid)[at:])
	want := []string{
		fmt.Sprintf("fork at=%d override=%s:99", at, workID[:8]),
		"dispatch 2", // the count is lineage-wide
		"bound ws from=" + restoredRef(t, k, fid) + " every=1",
		"started tool work affects=ws", "succeeded 20", "captured ws steps gen=5",
		"completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}
	// The restored workspace held the state right after the edited step.
	b := boundRef(t, k, fid)
	files, ok := drv.Restore(b)
	if !ok || files["work1"] != "" || len(files) != 2 {
		t.Fatalf("restored %v (%v), want greet and work1", files, ok)
	}
}

// restoredRef returns the From of fid's own resource.bound.
func restoredRef(t *testing.T, k *sdk.Kernel, fid eventlog.ID) string {
	t.Helper()
	return boundRef(t, k, fid)
}

// boundRef returns the From of the newest resource.bound of fid.
func boundRef(t *testing.T, k *sdk.Kernel, fid eventlog.ID) string {
	t.Helper()
	from := ""
	for _, ev := range events(t, k, fid) {
		if p, ok := ev.Data.(*eventlog.ResourceBound); ok {
			from = p.From
		}
	}
	return from
}

// TestForkWithResultInherited: a fork of an edited fork inherits its
// override, and a newer override of the same step wins.
func TestForkWithResultInherited(t *testing.T) {
	ctx := context.Background()
	k, _, parent, pevs := runEditParent(t)
	workID, at := stepEvents(t, pevs, "work", 0)
	f1, err := k.Fork(ctx, parent, at, sdk.WithResult(workID, 99))
	if err != nil {
		t.Fatal(err)
	}
	// A plain fork of f1 at its fork.created inherits the override.
	f2, err := k.Fork(ctx, f1, at+1)
	if err != nil {
		t.Fatal(err)
	}
	// A fork of f1 at the same terminal event overrides it again.
	f3, err := k.Fork(ctx, f1, at, sdk.WithResult(workID, 7))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   eventlog.ID
		want string
	}{{f2, "hello x 99 20"}, {f3, "hello x 7 20"}} {
		res, err := k.Run(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		var out string
		if err := res.Decode(&out); err != nil || out != c.want {
			t.Errorf("fork %s: output %q, %v; want %q", c.id, out, err, c.want)
		}
	}
}

// TestForkEditRefused: bad edits return a clear error wrapping ErrInvalid
// (or ErrUncovered) and write nothing: no execution, no event.
func TestForkEditRefused(t *testing.T) {
	ctx := context.Background()
	k, _, parent, pevs := runEditParent(t)
	greetID, greetEnd := stepEvents(t, pevs, "greet", 0)
	workID, workEnd := stepEvents(t, pevs, "work", 0)
	before, err := k.List(ctx, sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		at   uint64
		opts []sdk.ForkOption
		is   error
	}{
		{"at not the terminal event", workEnd - 1, []sdk.ForkOption{sdk.WithResult(workID, 1)}, sdk.ErrInvalid},
		{"at after the terminal event", workEnd + 1, []sdk.ForkOption{sdk.WithResult(workID, 1)}, sdk.ErrInvalid},
		{"not the earliest override", workEnd, []sdk.ForkOption{sdk.WithResult(workID, 1), sdk.WithResult(greetID, "g")}, sdk.ErrInvalid},
		{"unknown step", workEnd, []sdk.ForkOption{sdk.WithResult("nosuchstep", 1)}, sdk.ErrInvalid},
		{"value that does not encode", workEnd, []sdk.ForkOption{sdk.WithResult(workID, make(chan int))}, sdk.ErrInvalid},
		{"same step twice", workEnd, []sdk.ForkOption{sdk.WithResult(workID, 1), sdk.WithResult(workID, 2)}, sdk.ErrInvalid},
		{"input of the wrong type", greetEnd, []sdk.ForkOption{sdk.WithInput(42)}, sdk.ErrInvalid},
		{"input that does not encode", greetEnd, []sdk.ForkOption{sdk.WithInput(func() {})}, sdk.ErrInvalid},
		{"nil option", greetEnd, []sdk.ForkOption{nil}, sdk.ErrInvalid},
		{"uncovered point", greetEnd - 1, []sdk.ForkOption{sdk.RequireCovered()}, sdk.ErrUncovered},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := k.Fork(ctx, parent, c.at, c.opts...)
			if !errors.Is(err, c.is) {
				t.Fatalf("Fork: %v, want %v", err, c.is)
			}
			t.Log(err)
		})
	}
	after, err := k.List(ctx, sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("%d executions after refused forks, want %d", len(after), len(before))
	}
	if got := events(t, k, parent); len(got) != len(pevs) {
		t.Fatalf("parent has %d events, want %d", len(got), len(pevs))
	}
	// The covered point is accepted with RequireCovered.
	if _, err := k.Fork(ctx, parent, greetEnd+1, sdk.RequireCovered()); err != nil {
		t.Fatalf("RequireCovered at the covered seq %d: %v", greetEnd+1, err)
	}
}

// TestForkWithResultNotEnded: a step that started and never ended (an
// orphan) cannot be overridden.
func TestForkWithResultNotEnded(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	k := newKernel(t, st, func(*sdk.Kernel) {})
	id, err := st.Create(ctx, &eventlog.ExecutionCreated{Agent: "a", Input: []byte("{}")}, testTime)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, id, 1,
		eventlog.Event{Seq: 2, Time: testTime, Data: &eventlog.DispatchStarted{Dispatch: 1}},
		eventlog.Event{Seq: 3, Time: testTime, Data: &eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1}},
	); err != nil {
		t.Fatal(err)
	}
	_, err = k.Fork(ctx, id, 3, sdk.WithResult("s1", 1))
	if !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("Fork: %v, want ErrInvalid", err)
	}
	if h, _ := st.Head(ctx, id); h != 3 {
		t.Fatalf("head %d, want 3", h)
	}
}

// TestForkWithInputDiverges: a fork with a new input replays the recorded
// steps whose identity is unchanged; its first live call, made while
// recorded steps of the prefix remain unconsumed, is preceded by
// fork.diverged naming them, once; coverage reports the fork uncovered
// from that event on (DESIGN §12).
func TestForkWithInputDiverges(t *testing.T) {
	ctx := context.Background()
	k, _, parent, pevs := runEditParent(t)
	greetID, _ := stepEvents(t, pevs, "greet", 0)
	workID, at := stepEvents(t, pevs, "work", 0)
	fid, err := k.Fork(ctx, parent, at, sdk.WithInput(tagged{Tag: "y"}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil || out != "hello y 10 20" {
		t.Fatalf("output %q, %v", out, err)
	}
	evs := events(t, k, fid)
	got := describeEdits(evs[at:])
	want := []string{
		fmt.Sprintf(`fork at=%d input={"Tag":"y"}`, at),
		"dispatch 2",
		"bound ws from=" + boundRef(t, k, fid) + " every=1",
		// greet("y") is new; greet("x") and work(1) were not consumed yet.
		"diverged " + greetID[:8] + " " + workID[:8],
		"started tool greet affects=ws", `succeeded "hello y"`, "captured ws steps gen=5",
		// work(1) replays; work(2) runs live without a second fork.diverged.
		"started tool work affects=ws", "succeeded 20", "captured ws steps gen=6",
		"completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}
	diverged := uint64(0)
	for _, ev := range evs {
		if ev.Kind() == eventlog.KindForkDiverged {
			diverged = ev.Seq
		}
	}
	for seq := uint64(at + 1); seq <= uint64(len(evs)); seq++ {
		p, err := k.Coverage(ctx, fid, seq)
		if err != nil {
			t.Fatal(err)
		}
		if p.Covered != (seq < diverged) {
			t.Errorf("Coverage(fork, %d).Covered = %t; fork.diverged is at %d", seq, p.Covered, diverged)
		}
	}
	latest, err := k.LatestCovered(ctx, fid, uint64(len(evs)))
	if err != nil || latest != diverged-1 {
		t.Fatalf("LatestCovered = %d, %v; want %d", latest, err, diverged-1)
	}
	// A fork of the fork past the divergence is uncovered from its start.
	p, err := k.Coverage(ctx, fid, uint64(len(evs)))
	if err != nil || p.Covered {
		t.Fatalf("Coverage at the fork's head: %+v, %v", p, err)
	}
	if _, err := k.Fork(ctx, fid, uint64(len(evs)), sdk.RequireCovered()); !errors.Is(err, sdk.ErrUncovered) {
		t.Fatalf("RequireCovered past the divergence: %v", err)
	}
}

// TestForkWithInputAtStart: at seq 1 or 2 a fork with a new input is a
// clean re-run: every call runs live and nothing diverges.
func TestForkWithInputAtStart(t *testing.T) {
	ctx := context.Background()
	k, _, parent, _ := runEditParent(t)
	for _, at := range []uint64{1, 2} {
		fid, err := k.Fork(ctx, parent, at, sdk.WithInput(tagged{Tag: "z"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, fid); err != nil {
			t.Fatal(err)
		}
		got := describeEdits(events(t, k, fid)[at:])
		want := []string{
			fmt.Sprintf(`fork at=%d input={"Tag":"z"}`, at),
			fmt.Sprintf("dispatch %d", at), // at 1 no dispatch is inherited
			"bound ws every=1", "captured ws baseline gen=1",
			"started tool greet affects=ws", `succeeded "hello z"`, "captured ws steps gen=2",
			"started tool work affects=ws", "succeeded 10", "captured ws steps gen=3",
			"started tool work affects=ws", "succeeded 20", "captured ws steps gen=4",
			"completed",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("fork at %d (-want +got):\n%s", at, diff)
		}
	}
}

// TestForkWithSameInput: a fork with WithInput of the recorded input
// appends the same events after fork.created as a plain fork.
func TestForkWithSameInput(t *testing.T) {
	ctx := context.Background()
	k, _, parent, pevs := runEditParent(t)
	for at := uint64(1); at <= uint64(len(pevs)-1); at++ {
		plain, err := k.Fork(ctx, parent, at)
		if err != nil {
			t.Fatal(err)
		}
		same, err := k.Fork(ctx, parent, at, sdk.WithInput(tagged{Tag: "x"}))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []eventlog.ID{plain, same} {
			if _, err := k.Run(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		a, b := events(t, k, plain)[at+1:], events(t, k, same)[at+1:]
		if diff := cmp.Diff(describeAll(a), describeAll(b)); diff != "" {
			t.Fatalf("fork at %d: plain (-) and same input (+) differ:\n%s", at, diff)
		}
	}
}

// TestForkWithResultLLM: for an LLM call, WithResult replaces the
// response body; the recorded status and headers stay.
func TestForkWithResultLLM(t *testing.T) {
	ctx := context.Background()
	srv := newLLMServer(t)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			return askLLM(ctx, srv)
		})
	})
	id, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	var stepID string
	var at uint64
	for _, ev := range evs {
		if p, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			stepID, at = p.StepID, ev.Seq
		}
	}
	// A body given as any other value is its JSON encoding; one that does
	// not encode is refused, and writes nothing.
	if _, err := k.Fork(ctx, id, at, sdk.WithResult(stepID, make(chan int))); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "does not encode") {
		t.Fatalf("Fork with a body that does not encode = %v, want ErrInvalid", err)
	}
	if all, _ := k.List(ctx, sdk.Filter{}); len(all) != 1 {
		t.Fatalf("%d executions after a refused fork, want 1", len(all))
	}
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]string{"reply": "mapped"}, `200 text/x-test {"reply":"mapped"}`},
		{json.RawMessage(`{"reply":"edited"}`), `200 text/x-test {"reply":"edited"}`},
	} {
		if _, out := forkAndRun(t, k, id, at, sdk.WithResult(stepID, c.body)); out != c.want {
			t.Fatalf("body %T: output %q; want %q", c.body, out, c.want)
		}
	}
}

// TestForkNoEdit: Fork without options writes a fork.created without
// Input or Overrides, as before.
func TestForkNoEdit(t *testing.T) {
	ctx := context.Background()
	k, _, parent, _ := runEditParent(t)
	fid, err := k.Fork(ctx, parent, 3)
	if err != nil {
		t.Fatal(err)
	}
	fc := events(t, k, fid)[3].Data.(*eventlog.ForkCreated)
	if fc.Input != nil || fc.Overrides != nil || fc.Parent != parent || fc.At != 3 {
		t.Fatalf("fork.created %+v", fc)
	}
}

// lineageReads is a store that counts reads of a lineage (Events).
type lineageReads struct {
	*pebblestore.Store
	n atomic.Int64
}

func (s *lineageReads) Events(ctx context.Context, id eventlog.ID, from uint64) iter.Seq2[eventlog.Event, error] {
	s.n.Add(1)
	return s.Store.Events(ctx, id, from)
}

// TestForkReadsNoLineage: a fork is planned from the checkpoint index
// (fork.PlanFromIndex), so Fork without WithResult reads none of the
// parent's lineage however long it is — with or without a new input. Only
// WithResult reads it, to check the override against the step's end.
func TestForkReadsNoLineage(t *testing.T) {
	ctx := context.Background()
	store := &lineageReads{Store: newStore(t)}
	k := newKernel(t, store, registerEdit(testdriver.New()))
	id, _ := k.Start(ctx, "a", tagged{Tag: "x"})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	workID, at := stepEvents(t, evs, "work", 0)
	for _, c := range []struct {
		name  string
		opts  []sdk.ForkOption
		reads bool
	}{
		{"plain", nil, false},
		{"WithInput", []sdk.ForkOption{sdk.WithInput(tagged{Tag: "y"})}, false},
		{"RequireCovered", []sdk.ForkOption{sdk.RequireCovered()}, false},
		{"WithResult", []sdk.ForkOption{sdk.WithResult(workID, 99)}, true},
	} {
		store.n.Store(0)
		if _, err := k.Fork(ctx, id, at, c.opts...); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := store.n.Load(); (n > 0) != c.reads {
			t.Errorf("Fork %s read the lineage %d times; want reads: %v", c.name, n, c.reads)
		}
	}
}

// testTime is the time of hand-written events.
var testTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newLLMServer serves a fixed reply with a custom content type.
func newLLMServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/x-test")
		_, _ = io.WriteString(w, `{"reply":"recorded"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// askLLM posts one request through sdk.Transport and returns the status,
// content type and body it got.
func askLLM(ctx context.Context, srv *httptest.Server) (string, error) {
	c := &http.Client{Transport: sdk.Transport(nil)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat", strings.NewReader(`{"model":"m","q":"hi"}`))
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b), nil
}

// divergeAgent registers agent "a" on a kernel that denies tool rm: with
// input "x" it calls echo("x") and then rm, which is denied; with any other
// input it calls echo("x") and then echo(input).
func divergeAgent(t *testing.T, store eventlog.IndexedLog) *sdk.Kernel {
	gate := policy.Gate(func(ctx context.Context, c policy.Call) policy.Decision {
		if c.Target == "rm" {
			return policy.Decision{Reason: "no deleting"}
		}
		return policy.Decision{Allow: true}
	})
	return newKernel(t, store, func(k *sdk.Kernel) {
		echo := sdk.DefineTool("echo", func(ctx context.Context, s string) (string, error) { return s, nil })
		rm := sdk.DefineTool("rm", func(ctx context.Context, s string) (string, error) { return s, nil })
		_, _ = sdk.Register(k, "a", func(ctx context.Context, in string) (string, error) {
			if _, err := echo.Call(ctx, "x"); err != nil {
				return "", err
			}
			if in == "x" {
				if _, err := rm.Call(ctx, in); !errors.Is(err, sdk.ErrDenied) {
					return "", fmt.Errorf("rm: %v, want a denial", err)
				}
				return "denied", nil
			}
			return echo.Call(ctx, in)
		})
	}, sdk.WithGate(gate))
}

// TestForkDivergedAtADenial: a denied step never started, so fork.diverged
// places it in the prefix by its step.denied — and a fork at that very
// event holds it (DESIGN §12: the prefix is at or before the fork point).
func TestForkDivergedAtADenial(t *testing.T) {
	ctx := context.Background()
	k := divergeAgent(t, newStore(t))
	id, _ := k.Start(ctx, "a", "x")
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	var rmID string
	var at uint64
	for _, ev := range events(t, k, id) {
		if p, ok := ev.Data.(*eventlog.StepDenied); ok {
			rmID, at = p.StepID, ev.Seq
		}
	}
	if at == 0 {
		t.Fatal("no step.denied in the parent")
	}
	fid, err := k.Fork(ctx, id, at, sdk.WithInput("y"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf(`fork at=%d input="y"`, at), "dispatch 2", "diverged " + rmID[:8],
		"started tool echo", `succeeded "y"`, "completed"}
	if diff := cmp.Diff(want, describeEdits(events(t, k, fid)[at:])); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}
}

// TestForkDivergedIgnoresTheForksOwnSteps: fork.diverged names only steps
// of the prefix. A step the fork itself started after its fork point — an
// orphan of a dispatch that died in it, which the next dispatch does not
// reach — has no end, but is not the prefix's and is not named.
func TestForkDivergedIgnoresTheForksOwnSteps(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := divergeAgent(t, store)
	id, _ := k.Start(ctx, "a", "z")
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, at := stepEvents(t, events(t, k, id), "echo", 0) // the prefix holds echo("x")
	fid, err := k.Fork(ctx, id, at, sdk.WithInput("y"))
	if err != nil {
		t.Fatal(err)
	}
	// A dispatch of the fork that started a step and died.
	if _, err := store.Append(ctx, fid, at+1,
		eventlog.Event{Seq: at + 2, Time: testTime, Data: &eventlog.DispatchStarted{Dispatch: 2}},
		eventlog.Event{Seq: at + 3, Time: testTime, Data: &eventlog.StepStarted{StepID: "orphan-of-the-fork", StepKind: eventlog.StepTool, Target: "gone", Idempotency: eventlog.SafeToRetry, Attempt: 1}},
	); err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil || out != "y" {
		t.Fatalf("output %q, %v", out, err)
	}
	// The orphan, never reached, is abandoned when the execution completes.
	want := []string{"dispatch 3", "started tool echo", `succeeded "y"`, "step.abandoned", "completed"}
	if diff := cmp.Diff(want, describeEdits(events(t, k, fid)[at+3:])); diff != "" {
		t.Fatalf("fork events after the orphan (-want +got):\n%s", diff)
	}
}

// TestForkWithoutInputNeverDiverges: fork.diverged belongs to forks with a
// new input (DESIGN §12). A plain fork whose handler makes a live call
// while recorded steps of its prefix remain unconsumed (here it calls a new
// echo("b") before the recorded echo("x") and echo("a")) records none.
func TestForkWithoutInputNeverDiverges(t *testing.T) {
	ctx := context.Background()
	var first atomic.Value
	first.Store("")
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		echo := sdk.DefineTool("echo", func(ctx context.Context, s string) (string, error) { return s, nil })
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			out := ""
			for _, s := range []string{first.Load().(string), "x", "a"} {
				if s == "" {
					continue
				}
				r, err := echo.Call(ctx, s)
				if err != nil {
					return "", err
				}
				out += r
			}
			return out, nil
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	at := uint64(len(events(t, k, id)) - 1) // echo("a")'s step.succeeded
	fid, err := k.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	first.Store("b")
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("fork at=%d", at), "dispatch 2", "started tool echo", `succeeded "b"`, "completed"}
	if diff := cmp.Diff(want, describeEdits(events(t, k, fid)[at:])); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}
}

// TestForkInputDecodes: a fork's new input that the registered agent
// cannot decode into its input type ("x", null, [], {"Task":123}, an
// unknown field, trailing data) is ErrInvalid and writes nothing; null is
// accepted for an agent whose input type has it; a good input forks.
func TestForkInputDecodes(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	type task struct {
		Task string `json:"task"`
	}
	k := newKernel(t, st, func(k *sdk.Kernel) {
		if _, err := sdk.Register(k, "tasker", func(ctx context.Context, in task) (string, error) { return in.Task, nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := sdk.Register(k, "maybe", func(ctx context.Context, in *task) (string, error) { return "", nil }); err != nil {
			t.Fatal(err)
		}
	})
	id, err := k.Start(ctx, "tasker", task{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	snapshot := func() []string {
		var out []string
		infos, err := k.List(ctx, sdk.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			for _, ev := range events(t, k, info.ID) {
				out = append(out, fmt.Sprintf("%s %d %s", info.ID, ev.Seq, ev.Kind()))
			}
		}
		return out
	}
	before := snapshot()
	for _, in := range []string{`"x"`, `null`, ` null `, `[]`, `{"Task":123}`, `{"task":"a","extra":1}`, `{"task":"a"} {}`} {
		if _, err := k.Fork(ctx, id, 2, sdk.WithInput(json.RawMessage(in))); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Fork with input %s: %v, want ErrInvalid", in, err)
		}
	}
	if _, err := k.Fork(ctx, id, 2, sdk.WithInput(nil)); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("Fork with a nil input: %v, want ErrInvalid", err)
	}
	if after := snapshot(); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("refused forks wrote:\n%s\nwas\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	fid, err := k.Fork(ctx, id, 2, sdk.WithInput(json.RawMessage(`{"task":"u"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := events(t, k, fid); len(got) != 3 || got[2].Kind() != eventlog.KindForkCreated {
		t.Fatalf("the good fork's events: %v", got)
	}
	mid, err := k.Start(ctx, "maybe", &task{Task: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Fork(ctx, mid, 1, sdk.WithInput(json.RawMessage(`null`))); err != nil {
		t.Errorf("Fork with null for a pointer input: %v", err)
	}
}
