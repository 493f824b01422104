package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// ReplayOnly (DESIGN §15, proptest.Replay): Resource returns the zero
// handle without calling the driver, recorded calls replay, and a call past
// the recorded history does not run: ErrNotRecorded.
func TestReplayOnly(t *testing.T) {
	ctx := context.Background()
	drv := testdriver.New()
	var handles []*testdriver.Handle
	var lateErr error
	calls := 1
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			handles = append(handles, ws)
			put := sdk.DefineTool("put", func(ctx context.Context, n int) (int, error) { return n, ws.WriteFile("f", nil) }, sdk.Affects("ws"))
			for i := range calls {
				if _, err := put.Call(ctx, i); err != nil {
					lateErr = err
					return "", err
				}
			}
			return "ok", nil
		})
	}
	store := newStore(t)
	k := newKernel(t, store, register)
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	creates, opens, checkpoints := drv.Counts()

	// A copy of the history without its end, replayed with one call more:
	// the recorded call replays, the new one is refused.
	mem, cid := copyWithoutEnd(t, k, id)
	calls = 2
	rk := newKernel(t, mem, register, sdk.ReplayOnly())
	_, err := rk.Run(ctx, cid)
	if !errors.Is(err, sdk.ErrNotRecorded) || !errors.Is(lateErr, sdk.ErrNotRecorded) ||
		!strings.Contains(lateErr.Error(), `tool "put" 1: past the end of the recorded history`) {
		t.Fatalf("Run = %v (call: %v), want ErrNotRecorded for the second put", err, lateErr)
	}
	if len(handles) != 2 || handles[1] != nil {
		t.Errorf("handles %v: want the zero handle on the replay", handles)
	}
	if c, o, ck := drv.Counts(); c != creates || o != opens || ck != checkpoints {
		t.Errorf("the replay called the driver: creates %d→%d, opens %d→%d, checkpoints %d→%d", creates, c, opens, o, checkpoints, ck)
	}
	wantEvents(t, rk, cid, []string{"created a", "dispatch 1", "bound ws every=1", "captured ws baseline gen=1",
		"started tool put affects=ws", "succeeded", "captured ws steps gen=2",
		"dispatch 2", "execution_failed nondeterministic"})
}

// copyWithoutEnd copies id's lineage but its last event (the end) into a
// fresh store, as a new root execution.
func copyWithoutEnd(t *testing.T, k *sdk.Kernel, id eventlog.ID) (*pebblestore.Store, eventlog.ID) {
	t.Helper()
	ctx := context.Background()
	evs := events(t, k, id)
	mem := newStore(t)
	cid, err := mem.Create(ctx, evs[0].Data.(*eventlog.ExecutionCreated), evs[0].Time)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Append(ctx, cid, 1, evs[1:len(evs)-1]...); err != nil {
		t.Fatal(err)
	}
	return mem, cid
}

// TestReplayOnlyReplaysEveryOutcome: a ReplayOnly kernel replays each kind
// of recorded outcome — a failure, a denial, a success — as the live run
// saw it, without asking the gate, and ends the execution as before.
func TestReplayOnlyReplaysEveryOutcome(t *testing.T) {
	ctx := context.Background()
	var asked int
	gate := policy.Gate(func(_ context.Context, c policy.Call) policy.Decision {
		asked++
		return policy.Decision{Allow: c.Target != "rm", Reason: "no deleting"}
	})
	register := func(k *sdk.Kernel) {
		rm := sdk.DefineTool("rm", func(ctx context.Context, p string) (string, error) { return p, nil })
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			_, boom := sdk.Step(ctx, "boom", func(context.Context) (int, error) { return 0, errors.New("boom") },
				sdk.Retry(sdk.RetryPolicy{MaxAttempts: 1}))
			_, denied := rm.Call(ctx, "/")
			n, err := sdk.Step(ctx, "ok", func(context.Context) (int, error) { return 1, nil })
			return fmt.Sprintf("%v | %v | %d %v", boom, denied, n, err), nil
		})
	}
	k := newKernel(t, newStore(t), register, sdk.WithGate(gate))
	id, _ := k.Start(ctx, "a", none{})
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	live := string(res.Output)
	if !strings.Contains(live, "boom") || !strings.Contains(live, "denied: no deleting") || !strings.HasSuffix(live, `| 1 \u003cnil\u003e"`) {
		t.Fatalf("live output %s", live)
	}
	mem, cid := copyWithoutEnd(t, k, id)
	asked = 0
	rk := newKernel(t, mem, register, sdk.ReplayOnly(), sdk.WithGate(gate))
	res, err = rk.Run(ctx, cid)
	if err != nil || string(res.Output) != live || asked != 0 {
		t.Fatalf("ReplayOnly Run = %v, %v (gate asked %d times); want %s, the gate not asked", res, err, asked, live)
	}
	wantEvents(t, rk, cid, []string{"created a", "dispatch 1", "started local boom", "failed boom",
		"denied tool rm: no deleting", "started local ok", "succeeded", "dispatch 2", "completed"})
}
