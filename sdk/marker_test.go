package sdk_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// patchedRig: v0 runs steps "old" then "tail"; v1 guards the change with
// Patched("use-new"): "new" instead of "old".
func patchedRig() (register func(*sdk.Kernel), version *int, paths *[]bool) {
	v, got := 0, []bool{}
	step := func(ctx context.Context, name string) error {
		_, err := sdk.Step(ctx, name, func(context.Context) (string, error) { return name, nil })
		return err
	}
	register = func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			name := "old"
			if v == 1 {
				p := sdk.Patched(ctx, "use-new")
				got = append(got, p)
				if p {
					name = "new"
				}
			}
			if err := step(ctx, name); err != nil {
				return "", err
			}
			return name, step(ctx, "tail")
		})
	}
	return register, &v, &got
}

// DESIGN §15: Patched is false while a dispatch replays a history recorded
// before the patch (the old path replays it, nothing is recorded), true
// and recorded in a new execution, and true in a fork past the marker.
func TestPatched(t *testing.T) {
	ctx := context.Background()
	register, v, paths := patchedRig()
	k, old := crashThenRun(t, register, 3, sdk.Strict()) // dispatch, started old, succeeded: recorded before the patch
	*v = 1
	res, err := k.Run(ctx, old)
	if err != nil || string(res.Output) != `"old"` {
		t.Fatalf("Run of the pre-patch execution = %v, %v; want the old path under Strict", res, err)
	}
	wantEvents(t, k, old, []string{"created a", "dispatch 1", "started local old", "succeeded",
		"dispatch 2", "started local tail", "succeeded", "completed"})

	fresh, err := k.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := k.Run(ctx, fresh); err != nil || string(res.Output) != `"new"` {
		t.Fatalf("Run of a new execution = %v, %v; want the new path", res, err)
	}
	evs := events(t, k, fresh)
	wantEvents(t, k, fresh, []string{"created a", "dispatch 1", "marker.recorded", "started local new", "succeeded",
		"started local tail", "succeeded", "completed"})
	if m, ok := evs[2].Data.(*eventlog.MarkerRecorded); !ok || m.Name != "use-new" {
		t.Fatalf("event 3 = %v, want marker.recorded use-new", evs[2].Data)
	}

	// A fork past the marker holds it in its prefix: the new path,
	// replayed; the marker is not recorded again.
	f, err := k.Fork(ctx, fresh, 5)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := k.Run(ctx, f); err != nil || string(res.Output) != `"new"` {
		t.Fatalf("fork past the marker = %v, %v; want the new path", res, err)
	}
	wantEvents(t, k, f, []string{"created a", "dispatch 1", "marker.recorded", "started local new", "succeeded",
		"fork at=5", "dispatch 2", "started local tail", "succeeded", "completed"})

	// A fork of the pre-patch history replays its prefix by the old path.
	g, err := k.Fork(ctx, old, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := k.Run(ctx, g); err != nil || string(res.Output) != `"old"` {
		t.Fatalf("fork of the pre-patch history = %v, %v; want the old path", res, err)
	}
	if want := []bool{false, true, true, false}; !slices.Equal(*paths, want) {
		t.Errorf("Patched returned %v, want %v", *paths, want)
	}
	// Outside a handler it is the new path, and nothing is recorded.
	if !sdk.Patched(ctx, "use-new") {
		t.Error("Patched outside a handler = false")
	}
}

// TestPatchedTwiceWithOneName: each call of Patched with one name is its
// own occurrence — a marker recorded per call, matched in order on replay
// — so a fork past both replays both as true and records neither again.
func TestPatchedTwiceWithOneName(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			out := ""
			for i := range 2 {
				if sdk.Patched(ctx, "p") {
					out += "new "
				} else {
					out += "old "
				}
				if _, err := sdk.Step(ctx, fmt.Sprint("s", i), func(context.Context) (int, error) { return i, nil }); err != nil {
					return "", err
				}
			}
			return out, nil
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	if res, err := k.Run(ctx, id); err != nil || string(res.Output) != `"new new "` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	recorded := []string{"created a", "dispatch 1", "marker.recorded", "started local s0", "succeeded",
		"marker.recorded", "started local s1", "succeeded"}
	wantEvents(t, k, id, append(recorded, "completed"))
	f, err := k.Fork(ctx, id, 8)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := k.Run(ctx, f); err != nil || string(res.Output) != `"new new "` {
		t.Fatalf("Run of the fork past both markers = %v, %v; want both new", res, err)
	}
	wantEvents(t, k, f, append(recorded, "fork at=8", "dispatch 2", "completed"))
}
