package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestReplayAwareLogger: a handler's progress lines logged while it replays
// are dropped; IsReplaying is true exactly until the
// dispatch has reached every recorded step; the kernel logs each dispatch's
// start and end and nothing per replayed step.
func TestReplayAwareLogger(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	var replaying []bool
	var stop context.CancelFunc
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			sum := 0
			for i := range 3 {
				replaying = append(replaying, sdk.IsReplaying(ctx))
				n, err := sdk.Step(ctx, "step", func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return 0, err
				}
				sum += n
				sdk.Logger(ctx).Info("progress", "step", i)
				if i == 1 && stop != nil {
					stop() // the first dispatch is cancelled here: it resumes
					stop = nil
					return 0, ctx.Err()
				}
			}
			return sum, nil
		})
	}, sdk.WithLogger(logger))
	if sdk.IsReplaying(context.Background()) {
		t.Fatal("IsReplaying outside a handler")
	}
	ctx := context.Background()
	id, _ := k.Start(ctx, "a", none{})
	cctx, cancel := context.WithCancel(ctx)
	stop = cancel
	if _, err := k.Run(cctx, id); err == nil {
		t.Fatal("the cancelled dispatch completed")
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	// First dispatch: live, live. Second: replays steps 0 and 1, then live.
	if diff := cmp.Diff([]bool{false, false, true, true, false}, replaying); diff != "" {
		t.Fatalf("IsReplaying before each step (-want +got):\n%s", diff)
	}
	var progress []string
	var kernel []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "msg=progress") {
			progress = append(progress, line[strings.Index(line, "step="):])
		} else {
			kernel = append(kernel, line[:strings.Index(line, " execution=")])
		}
	}
	// DESIGN §13: replaying ends when the last recorded step is reached
	// again, so the line logged after it (step=1) prints on both
	// dispatches; step=0's, logged between two recorded steps, prints once.
	if diff := cmp.Diff([]string{"step=0", "step=1", "step=1", "step=2"}, progress); diff != "" {
		t.Fatalf("progress lines (-want +got):\n%s\nlog:\n%s", diff, buf.String())
	}
	want := []string{
		`level=INFO msg="forkline: dispatch started"`,
		`level=INFO msg="forkline: dispatch stopped by its caller; the execution can resume"`,
		`level=INFO msg="forkline: dispatch started"`,
		`level=INFO msg="forkline: execution completed"`,
	}
	if diff := cmp.Diff(want, kernel); diff != "" {
		t.Fatalf("kernel lines (-want +got):\n%s\nlog:\n%s", diff, buf.String())
	}
}

// TestReplayingCountsOnlyStepsTheLineageHolds: a fork that overrides two
// steps forks at the first one's end, so its lineage does not hold the
// second; that override is not a recorded step of the lineage (DESIGN
// §13), and reaching it first must not end replaying while a step the
// lineage holds is still to be reached. The fork's handler calls s2 (held
// only by its override) first, then s0 and s1 (held).
func TestReplayingCountsOnlyStepsTheLineageHolds(t *testing.T) {
	ctx := context.Background()
	var reorder atomic.Bool
	var replaying []bool
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			order := []int{0, 1, 2}
			if reorder.Load() {
				order = []int{2, 0, 1}
			}
			sum := 0
			for _, i := range order {
				replaying = append(replaying, sdk.IsReplaying(ctx))
				n, err := sdk.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return 0, err
				}
				sum = sum*10 + n
			}
			replaying = append(replaying, sdk.IsReplaying(ctx))
			return sum, nil
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	var s1End uint64
	for _, ev := range events(t, k, id) {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			ids[p.Target] = p.StepID
		case *eventlog.StepSucceeded:
			if p.StepID == ids["s1"] {
				s1End = ev.Seq
			}
		}
	}
	fid, err := k.Fork(ctx, id, s1End, sdk.WithResult(ids["s1"], 5), sdk.WithResult(ids["s2"], 7))
	if err != nil {
		t.Fatal(err)
	}
	reorder.Store(true)
	replaying = nil
	res, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	var out int
	if err := res.Decode(&out); err != nil || out != 705 {
		t.Fatalf("fork output %d, %v; want 705 (s2's override, s0 recorded, s1's override)", out, err)
	}
	// Replaying until s1, the last step the lineage holds, is reached.
	if diff := cmp.Diff([]bool{true, true, true, false}, replaying); diff != "" {
		t.Fatalf("IsReplaying before s2, s0, s1 and after, in the fork (-want +got):\n%s", diff)
	}
}

// TestDispatchEndLogs: how a dispatch ended is logged at Info, one line
// each: the execution completed; it failed (with its failure code and
// message); or the dispatch stopped and the execution can resume.
func TestDispatchEndLogs(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	stopping := make(chan struct{})
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, how string) (string, error) {
			switch how {
			case "fail":
				return "", errors.New("boom")
			case "stop":
				close(stopping)
				<-ctx.Done()
				return "", ctx.Err()
			}
			return "ok", nil
		})
	}, sdk.WithLogger(logger))
	ended := func(how string) string {
		t.Helper()
		buf.Reset()
		id, _ := k.Start(ctx, "a", how)
		rctx, cancel := context.WithCancel(ctx)
		if how == "stop" {
			go func() { <-stopping; cancel() }()
		}
		_, _ = k.Run(rctx, id)
		cancel()
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if !strings.Contains(line, "dispatch started") {
				lines = append(lines, line)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "execution="+id.String()) {
			t.Fatalf("%s: log %q, want one line naming %s", how, lines, id)
		}
		return lines[0]
	}
	if l := ended("ok"); !strings.Contains(l, `msg="forkline: execution completed"`) {
		t.Errorf("completed: %s", l)
	}
	if l := ended("fail"); !strings.Contains(l, `msg="forkline: execution failed"`) || !strings.Contains(l, "code=handler") || !strings.Contains(l, "error=boom") {
		t.Errorf("failed: %s", l)
	}
	if l := ended("stop"); !strings.Contains(l, `msg="forkline: dispatch stopped by its caller; the execution can resume"`) {
		t.Errorf("stopped: %s", l)
	}
}

// logLine is one record a JSON slog handler wrote.
type logLine map[string]any

// captureLogs returns a Debug-level logger and a function that returns the
// records it received so far, decoded.
func captureLogs(t *testing.T) (*slog.Logger, func() []logLine) {
	t.Helper()
	var mu sync.Mutex
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(h), func() []logLine {
		mu.Lock()
		defer mu.Unlock()
		var out []logLine
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var l logLine
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			out = append(out, l)
		}
		return out
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// linesWith returns the records whose msg is msg.
func linesWith(lines []logLine, msg string) []logLine {
	var out []logLine
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// TestTakeoverLogsOldAndNewOwner: a dispatch of owner host-b that resumes
// an execution whose dispatch by host-a never ended logs one Info line,
// "forkline: takeover", naming both owners; the lineage records both
// dispatch.started owners. A first dispatch logs no takeover.
func TestTakeoverLogsOldAndNewOwner(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	logger, lines := captureLogs(t)
	started := make(chan struct{}, 1)
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			if _, err := sdk.Step(ctx, "s", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
			select {
			case started <- struct{}{}:
				<-ctx.Done() // host-a's dispatch stops here, unended
				return 0, ctx.Err()
			default:
			}
			return 2, nil
		})
	}
	ka := newKernel(t, store, register, sdk.WithOwner("host-a"), sdk.WithLogger(logger))
	kb := newKernel(t, store, register, sdk.WithOwner("host-b"), sdk.WithLogger(logger))
	id, err := ka.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	go func() { <-started; cancel() }()
	if _, err := ka.Run(rctx, id); err == nil {
		t.Fatal("host-a's stopped dispatch completed")
	}
	started <- struct{}{} // host-b's handler completes
	if len(linesWith(lines(), "forkline: takeover")) != 0 {
		t.Fatalf("a first dispatch logged a takeover: %v", lines())
	}
	if _, err := kb.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	tk := linesWith(lines(), "forkline: takeover")
	if len(tk) != 1 {
		t.Fatalf("takeover lines %v, want one; log %v", tk, lines())
	}
	if tk[0]["level"] != "INFO" || tk[0]["previous_owner"] != "host-a" || tk[0]["owner"] != "host-b" || tk[0]["execution"] != id.String() {
		t.Fatalf("takeover line %v, want INFO naming previous_owner host-a, owner host-b, execution %s", tk[0], id)
	}
	var owners []string
	for _, ev := range events(t, kb, id) {
		if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			owners = append(owners, ds.Owner)
		}
	}
	if diff := cmp.Diff([]string{"host-a", "host-b"}, owners); diff != "" {
		t.Fatalf("dispatch.started owners (-want +got):\n%s", diff)
	}
}

// TestParkLogsAtDebug: a dispatch that parks (a Sleep past the park
// threshold) logs one Debug line "forkline: dispatch parked" with the
// reason and wake time, and no "dispatch stopped" line or error attribute;
// the lineage ends with dispatch.parked.
func TestParkLogsAtDebug(t *testing.T) {
	ctx := context.Background()
	logger, lines := captureLogs(t)
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			if err := sdk.Sleep(ctx, time.Hour); err != nil {
				return 0, err
			}
			return 1, nil
		})
	}, sdk.WithLogger(logger))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run: %v, want ErrWaiting", err)
	}
	evs := events(t, k, id)
	if p, ok := evs[len(evs)-1].Data.(*eventlog.DispatchParked); !ok || p.Reason != eventlog.ParkTimer {
		t.Fatalf("last event %s, want dispatch.parked{timer}", describe(evs[len(evs)-1]))
	}
	all := lines()
	parked := linesWith(all, "forkline: dispatch parked")
	if len(parked) != 1 || parked[0]["level"] != "DEBUG" || parked[0]["reason"] != "timer" || parked[0]["wake_at"] == nil {
		t.Fatalf("park lines %v, want one DEBUG line with reason timer and wake_at; log %v", parked, all)
	}
	for _, l := range all {
		if strings.Contains(fmt.Sprint(l["msg"]), "dispatch stopped") || l["error"] != nil {
			t.Fatalf("a park logged %v", l)
		}
	}
}
