package sdk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/testdriver"
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

	// A copy of the history without its end, replayed with one call more.
	evs := events(t, k, id)
	mem := newStore(t)
	cid, err := mem.Create(ctx, evs[0].Data.(*eventlog.ExecutionCreated), evs[0].Time)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Append(ctx, cid, 1, evs[1:len(evs)-1]...); err != nil {
		t.Fatal(err)
	}
	calls = 2
	rk := newKernel(t, mem, register, sdk.ReplayOnly())
	_, err = rk.Run(ctx, cid)
	if !errors.Is(err, sdk.ErrNotRecorded) || !errors.Is(lateErr, sdk.ErrNotRecorded) {
		t.Fatalf("Run = %v (call: %v), want ErrNotRecorded", err, lateErr)
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
