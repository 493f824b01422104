package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os/user"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Issue 29, DESIGN §21½.10, §15½.7, §15½.9, §15½.10.

// noteAgent registers agent "a": it calls pay (safe to retry, failing its
// first attempt so that it is retried) and returns what pay's body saw as
// ApprovalNote on each attempt, or the denial's Note and By.
func noteAgent(notes *[]string) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		var attempts atomic.Int64
		pay := sdk.DefineTool("pay", func(ctx context.Context, a payArgs) (int, error) {
			*notes = append(*notes, sdk.ApprovalNote(ctx))
			if attempts.Add(1) == 1 {
				return 0, errors.New("flaky")
			}
			return a.Amount, nil
		}, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2}))
		_, _ = sdk.Register(k, "a", func(ctx context.Context, amount int) (string, error) {
			n, err := pay.Call(ctx, payArgs{Amount: amount})
			var de *sdk.DeniedError
			if errors.As(err, &de) {
				return "refused by " + de.By + ": " + de.Note + " | " + err.Error(), nil
			}
			if err != nil {
				return "", err
			}
			return strings.Repeat("$", n), nil
		})
	}
}

// decide runs id until it waits for the approval of pay, lets decide
// record the decision, and returns the dispatch's output.
func decideAndRun(t *testing.T, k *sdk.Kernel, store eventlog.Log, id eventlog.ID, decide func(step string) error) string {
	t.Helper()
	done := make(chan error, 1)
	var res *sdk.Result
	go func() {
		var err error
		res, err = k.Run(t.Context(), id)
		done <- err
	}()
	awaitStatus(t, store, id, eventlog.StatusWaiting)
	if err := decide(pendingStep(t, k, id).StepID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestApproveByAndNote: By and Note are recorded in approval.granted; the
// body of the approved call reads the note with ApprovalNote, on its
// first attempt and on its retry (DESIGN §21½.10).
func TestApproveByAndNote(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var asked atomic.Int64
	var notes []string
	k := newKernel(t, store, noteAgent(&notes), sdk.WithGate(countingGate(&asked)))
	id, _ := k.Start(ctx, "a", 2)
	out := decideAndRun(t, k, store, id, func(step string) error {
		return k.Approve(ctx, id, step, sdk.By("alice"), sdk.Note("ship it"))
	})
	if out != "$$" {
		t.Fatalf("output %q", out)
	}
	if diff := cmp.Diff([]string{"ship it", "ship it"}, notes); diff != "" {
		t.Fatalf("ApprovalNote in pay's body (-want +got):\n%s", diff)
	}
	evs := rwant(t, k, id, []string{"created a", "dispatch 1", "approval.requested", "approval.granted",
		"started tool pay", "retrying flaky", "started tool pay attempt=2", "succeeded", "completed"})
	want := &eventlog.ApprovalGranted{StepID: pendingStepID(evs), By: "alice", Note: "ship it"}
	if diff := cmp.Diff(want, evs[3].Data); diff != "" {
		t.Fatalf("approval.granted (-want +got):\n%s", diff)
	}
	if sdk.ApprovalNote(ctx) != "" {
		t.Fatal("ApprovalNote outside a body")
	}
}

// pendingStepID is the StepID of the approval.requested among evs.
func pendingStepID(evs []eventlog.Event) string {
	for _, ev := range evs {
		if r, ok := ev.Data.(*eventlog.ApprovalRequested); ok {
			return r.StepID
		}
	}
	return ""
}

// TestDecisionDefaultsAndBadOptions: without By, the decider recorded is
// the OS user ("user:NAME"); a bad By or Note is ErrInvalid and writes
// nothing, not even an inbox request.
func TestDecisionDefaultsAndBadOptions(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var asked atomic.Int64
	var notes []string
	k := newKernel(t, store, noteAgent(&notes), sdk.WithGate(countingGate(&asked)))
	id, _ := k.Start(ctx, "a", 1)
	out := decideAndRun(t, k, store, id, func(step string) error {
		for _, bad := range [][]sdk.DecisionOption{{sdk.By("")}, {sdk.By("a\nb")}, {sdk.Note("\xff")}, {nil}} {
			if err := k.Reject(ctx, id, step, bad...); !errors.Is(err, sdk.ErrInvalid) {
				t.Errorf("Reject with a bad option = %v, want ErrInvalid", err)
			}
		}
		if reqs, err := store.Requests(ctx, id); err != nil || len(reqs) != 0 {
			t.Errorf("inbox after bad options: %v, %v", reqs, err)
		}
		return k.Approve(ctx, id, step)
	})
	if out != "$" {
		t.Fatalf("output %q", out)
	}
	u, err := user.Current()
	if err != nil {
		t.Skip("no OS user:", err)
	}
	evs := events(t, k, id)
	if g := evs[3].Data.(*eventlog.ApprovalGranted); g.By != "user:"+u.Username || g.Note != "" {
		t.Fatalf("approval.granted = %+v, want By user:%s and no note", g, u.Username)
	}
	if diff := cmp.Diff([]string{"", ""}, notes); diff != "" {
		t.Fatalf("ApprovalNote without a note (-want +got):\n%s", diff)
	}
}

// TestRejectNoteReachesTheCaller: the denied call's *DeniedError carries
// the rejection's Note and By, in its text too, live and when a fork
// replays the denial.
func TestRejectNoteReachesTheCaller(t *testing.T) {
	ctx := t.Context()
	store := newStore(t)
	var asked atomic.Int64
	var notes []string
	k := newKernel(t, store, noteAgent(&notes), sdk.WithGate(countingGate(&asked)))
	id, _ := k.Start(ctx, "a", 5)
	out := decideAndRun(t, k, store, id, func(step string) error {
		return k.Reject(ctx, id, step, sdk.By("bob"), sdk.Note("too expensive"))
	})
	want := "refused by bob: too expensive | sdk: call to pay denied: approval rejected: too expensive"
	if out != want {
		t.Fatalf("live output %q, want %q", out, want)
	}
	evs := rwant(t, k, id, []string{"created a", "dispatch 1", "approval.requested", "approval.rejected",
		"denied tool pay: approval rejected: too expensive", "completed"})
	if diff := cmp.Diff(&eventlog.ApprovalRejected{StepID: pendingStepID(evs), By: "bob", Note: "too expensive"}, evs[3].Data); diff != "" {
		t.Fatalf("approval.rejected (-want +got):\n%s", diff)
	}
	// A fork at the denial replays it: the same error, note and all.
	f, err := k.Fork(ctx, id, 5)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	var replayed string
	if err := res.Decode(&replayed); err != nil || replayed != want {
		t.Fatalf("replayed output %q, %v; want %q", replayed, err, want)
	}
	if len(notes) != 0 || asked.Load() != 1 {
		t.Fatalf("pay ran %d times, the gate was asked %d times; want 0 and 1", len(notes), asked.Load())
	}
}

// TestChildRetryStartsANewChild: a child call under Retry whose child
// fails once is retried; the retry's key counts the failed attempt, so it
// starts a second child, which succeeds (DESIGN §15½.7).
func TestChildRetryStartsANewChild(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(*sdk.Kernel) {})
	var runs atomic.Int64
	child, _ := sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) {
		if runs.Add(1) == 1 {
			return 0, errors.New("child broke")
		}
		return n * 2, nil
	})
	parent, _ := sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
		return child.Call(ctx, n, sdk.Retry(sdk.RetryPolicy{MaxAttempts: 2}))
	})
	id, _ := parent.Start(ctx, 4)
	out, err := parent.Run(ctx, id)
	if err != nil || out != 8 {
		t.Fatalf("parent = %v, %v", out, err)
	}
	evs := events(t, k, id)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = rdescribe(ev)
		if strings.HasPrefix(got[i], "retrying ") && strings.HasSuffix(got[i], "child broke") {
			got[i] = "retrying …child broke"
		}
	}
	want := []string{"created parent", "dispatch 1", "started child child", "retrying …child broke",
		"started child child attempt=2", "succeeded", "completed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("parent events (-want +got):\n%s", diff)
	}
	kids, err := k.List(ctx, sdk.Filter{Caller: id})
	if err != nil || len(kids) != 2 {
		t.Fatalf("children %+v, %v; want two", kids, err)
	}
	if kids[0].Status != eventlog.StatusFailed || kids[1].Status != eventlog.StatusCompleted {
		t.Fatalf("children ended %s, %s; want failed, completed", kids[0].Status, kids[1].Status)
	}
	if runs.Load() != 2 {
		t.Fatalf("the child's handler ran %d times, want 2", runs.Load())
	}
	if _, err := child.Call(ctx, 1, sdk.AtMostOnce()); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("Call with AtMostOnce = %v, want ErrInvalid", err)
	}
}

// TestReplayingEndsAtFirstLiveCall: a dispatch whose handler makes a new
// call before reaching every recorded step stops replaying at that call
// (DESIGN §15½.9): the line it logs after the new call prints although a
// recorded step is still to come; after the handler returns, IsReplaying
// is false.
func TestReplayingEndsAtFirstLiveCall(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	var changed atomic.Bool
	var stop context.CancelFunc
	var last context.Context
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			last = ctx
			step := func(name string) {
				_, _ = sdk.Step(ctx, name, func(context.Context) (int, error) { return 1, nil })
				sdk.Logger(ctx).Info("after " + name)
			}
			step("s0")
			if changed.Load() {
				step("new") // the code changed: a call the record does not hold
			}
			step("s1")
			if stop != nil {
				stop()
				stop = nil
				return 0, ctx.Err()
			}
			step("s2")
			return 0, nil
		})
	}, sdk.WithLogger(logger))
	id, _ := k.Start(ctx, "a", none{})
	cctx, cancel := context.WithCancel(ctx)
	stop = cancel
	if _, err := k.Run(cctx, id); err == nil {
		t.Fatal("the cancelled dispatch completed")
	}
	changed.Store(true)
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sdk.IsReplaying(last) {
		t.Fatal("IsReplaying after the handler returned")
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if i := strings.Index(line, `msg="after `); i >= 0 {
			lines = append(lines, line[i+5:i+5+strings.Index(line[i+5:], `"`)+1])
		}
	}
	// First dispatch: s0, s1 live. Second: s0 replays (dropped), new is
	// live, so s1 (recorded) no longer replays, nor its line.
	want := []string{`after s0"`, `after s1"`, `after new"`, `after s1"`, `after s2"`}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Fatalf("logged lines (-want +got):\n%s\nlog:\n%s", diff, buf.String())
	}
}

// TestLiveResultEqualsReplayed: a tool whose string result is not valid
// UTF-8 returns, live, the value decoded from its record (U+FFFD for the
// bad byte), as a replay does (DESIGN §15½.10).
func TestLiveResultEqualsReplayed(t *testing.T) {
	ctx := context.Background()
	var got []string
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		bad := sdk.DefineTool("bad", func(context.Context, none) (string, error) { return "a\xffb", nil })
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			s, err := bad.Call(ctx, none{})
			got = append(got, s)
			return s, err
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	f, err := k.Fork(ctx, id, 4) // after the tool's step.succeeded: it replays
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, f); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a\uFFFDb", "a\uFFFDb"}, got); diff != "" {
		t.Fatalf("live and replayed results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"created a", "dispatch 1", "started tool bad", "succeeded", "fork at=4", "dispatch 2", "completed"},
		describeAll(events(t, k, f))); diff != "" {
		t.Fatalf("fork events (-want +got):\n%s", diff)
	}
}

// TestLookupByKey: Lookup finds the execution started with a key, with
// the key in its Info; a key nobody started is ErrNotFound and creates
// nothing; an empty key is ErrInvalid.
func TestLookupByKey(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(context.Context, none) (int, error) { return 1, nil })
	})
	id, err := k.Start(ctx, "a", none{}, sdk.WithKey("order-1"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := k.Lookup(ctx, "order-1")
	if err != nil || info.ID != id || info.Key != "order-1" || info.Agent != "a" {
		t.Fatalf("Lookup(order-1) = %+v, %v; want %s with its key", info, err, id)
	}
	if _, err := k.Lookup(ctx, "order-2"); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Lookup of a key nobody started = %v, want ErrNotFound", err)
	}
	if _, err := k.Lookup(ctx, ""); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("Lookup of an empty key = %v, want ErrInvalid", err)
	}
	infos, err := k.List(ctx, sdk.Filter{})
	if err != nil || len(infos) != 1 {
		t.Fatalf("executions after the lookups: %d, %v; want 1 (a lookup never creates)", len(infos), err)
	}
}
