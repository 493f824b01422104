package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// TestCollectAfterDelete (DESIGN §14): after the parent is deleted, Collect
// removes the parent's workspace and the checkpoints only the parent's
// deleted part named, and keeps every checkpoint the fork's lineage names
// (it still restores exactly) and the fork's own workspace. Collect
// before the delete removes nothing a kept execution needs.
func TestCollectAfterDelete(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d := dirfs.New(dirfs.Config{Store: filepath.Join(root, "store")})
	var a *sdk.Agent[int, int]
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		write := sdk.DefineTool("write", func(ctx context.Context, n int) (int, error) {
			ws, err := sdk.Resource(ctx, "ws", d, sdk.EverySteps(1))
			if err != nil {
				return 0, err
			}
			return n, ws.WriteFile(fmt.Sprintf("f%d.txt", n), []byte(fmt.Sprintf("file %d", n)))
		}, sdk.Affects("ws"))
		a, _ = sdk.Register(k, "writer", func(ctx context.Context, n int) (int, error) {
			if _, err := sdk.Resource(ctx, "ws", d, sdk.EverySteps(1)); err != nil {
				return 0, err
			}
			for i := range n {
				if _, err := write.Call(ctx, i); err != nil {
					return 0, err
				}
			}
			return n, nil
		})
	})
	id, _ := a.Start(ctx, 4)
	if _, err := a.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	// A baseline capture at the binding, then one per write.
	var captures []*eventlog.ResourceCaptured
	var firstWrite uint64
	var parentWS dirfs.Binding
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.ResourceCaptured:
			if p.Reason == eventlog.CaptureSteps && firstWrite == 0 {
				firstWrite = ev.Seq
			}
			captures = append(captures, p)
		case *eventlog.ResourceBound:
			_ = json.Unmarshal(p.Binding, &parentWS)
		}
	}
	if len(captures) < 3 {
		t.Fatalf("%d captures, want one per write", len(captures))
	}
	f, err := k.Fork(ctx, id, firstWrite)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sdk.Collect(ctx, k, d, 0); err != nil || got.Checkpoints != 0 || got.Resources != 0 {
		t.Fatalf("Collect with nothing deleted = %+v, %v; want nothing removed", got, err)
	}
	if _, err := sdk.Collect(ctx, k, d, -1); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("Collect with a negative grace = %v, want ErrInvalid", err)
	}
	live := deleteThenLive(t, k, id)
	want := []string{captures[0].Ref, captures[1].Ref} // the baseline and the fork's selection
	slices.Sort(want)
	if !cmp.Equal(live[dirfs.ID].Refs, want) {
		t.Errorf("live refs after the delete = %v, want the fork's lineage's %v", live[dirfs.ID].Refs, want)
	}
	got, err := sdk.Collect(ctx, k, d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checkpoints != len(captures)-2 || got.Resources != 1 {
		t.Errorf("Collect after the delete removed %+v; want %d checkpoints and the parent's workspace", got, len(captures)-2)
	}
	if _, err := d.Open(ctx, parentWS); err == nil {
		t.Errorf("the deleted parent's workspace still opens")
	}
	ws, _, err := d.Create(ctx, captures[1].Ref)
	if err != nil {
		t.Fatalf("the fork's selection no longer restores: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"f0.txt": "file 0"}, treeOf(t, ws.Dir())); diff != "" {
		t.Errorf("the fork's selection restores (-want +got):\n%s", diff)
	}
	if out, err := a.Run(ctx, f); err != nil || out != 4 {
		t.Fatalf("Run of the fork after Collect = %d, %v", out, err)
	}
	// The fork's own workspace is live: collecting again keeps it.
	if got, err := sdk.Collect(ctx, k, d, 0); err != nil || got.Resources != 1 {
		// the restore above made one more workspace, bound by nothing
		t.Errorf("second Collect = %+v, %v; want only the test's own restored workspace removed", got, err)
	}
	if _, err := a.Run(ctx, f); err != nil {
		t.Errorf("the fork after a second Collect: %v", err)
	}
}

// TestLiveForkAtAnUncheckpointedBinding (DESIGN §14): a fork at the
// parent's resource.bound itself inherits that event — the binding is the
// parent's, not the fork's — and, when the parent's baseline capture
// failed, selects the initial environment (an empty ref). Once the parent
// is deleted nothing of it is live: no binding, and no empty ref standing
// for the initial environment.
func TestLiveForkAtAnUncheckpointedBinding(t *testing.T) {
	ctx := context.Background()
	d := testdriver.New()
	d.FailCheckpoint = func() error { return errors.New("test: no checkpoints") }
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			_, err := sdk.Resource(ctx, "ws", d)
			return "bound", err
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := rwant(t, k, id, []string{"created a", "dispatch 1", "bound ws every=1", "capture_failed ws baseline", "capture_failed ws completion", "completed"})
	f, err := k.Fork(ctx, id, evs[2].Seq)
	if err != nil {
		t.Fatal(err)
	}
	fc := events(t, k, f)
	if sels := fc[len(fc)-1].Data.(*eventlog.ForkCreated).Selections; len(sels) != 1 || sels[0].Ref != "" {
		t.Fatalf("the fork at the binding selects %+v, want the initial environment", sels)
	}
	before, err := k.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ls := before[d.DriverID()]; ls == nil || len(ls.Refs) != 0 || len(ls.Bindings) != 1 {
		t.Fatalf("live before the delete = %+v, want the parent's one binding and no ref", ls)
	}
	after := deleteThenLive(t, k, id)
	if ls := after[d.DriverID()]; ls != nil && (len(ls.Refs) != 0 || len(ls.Bindings) != 0) {
		t.Fatalf("live after the parent's delete = refs %q, bindings %s; want none", ls.Refs, ls.Bindings)
	}
}

// deleteThenLive deletes id and returns the kernel's live sets after it.
func deleteThenLive(t *testing.T, k *sdk.Kernel, id eventlog.ID) map[string]*sdk.LiveSet {
	t.Helper()
	ctx := context.Background()
	if err := k.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	live, err := k.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return live
}
