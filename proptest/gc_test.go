package proptest

// DESIGN §14: deletion and checkpoint garbage collection never take what a
// kept execution needs. After any sequence of runs, forks, deletes and
// gcs (sdk.Collect on both resources' drivers), every kept execution reads
// the same coverage at every event as before, every checkpoint that
// coverage names still restores — exactly the state at the fork point
// where it is covered — and a fork of a kept execution still runs.

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// expected is what a fork of one execution at one seq must restore,
// recorded before anything was deleted.
type expected struct {
	point  coverage.Point
	states map[string]map[string]string // covered resource key → state at the fork point
}

func TestGCKeepsWhatKeptExecutionsNeed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		p := genProgram(t)
		w := newWorld(t)
		defer w.llm.Close()
		store, _ := pebblestore.Open("")
		defer store.Close()
		log := newRecLog(store, w)
		k := w.kernel(t, log)
		expect := map[eventlog.ID][]expected{}
		// physical[id][i][key] is the state of resource key of id's
		// lineage right after event i+1: what log.stateAt says, kept so
		// that it is known after id's ancestors are deleted.
		physical := map[eventlog.ID][]map[string]map[string]string{}
		var kept []eventlog.ID
		// run runs id and records what every fork point of it restores;
		// a fork's points up to its fork point are its source's (whose
		// ancestors may be deleted by now).
		run := func(id, src eventlog.ID, forkAt uint64) {
			if _, err := k.Run(ctx, id); err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
			evs := sdkLineage(t, k, id)
			exp := make([]expected, len(evs))
			copy(exp, expect[src][:forkAt])
			phys := make([]map[string]map[string]string, len(evs))
			copy(phys, physical[src][:forkAt])
			for i := int(forkAt); i < len(evs); i++ {
				phys[i] = map[string]map[string]string{}
				for _, key := range []string{"ws", "db"} {
					log.mu.Lock()
					st, own := log.snaps[id][uint64(i+1)][key]
					log.mu.Unlock()
					switch {
					case own:
						phys[i][key] = st
					case forkAt > 0:
						if st, ok := physical[src][forkAt-1][key]; ok {
							phys[i][key] = st
						}
					}
				}
			}
			physical[id] = phys
			for i := int(forkAt); i < len(evs); i++ {
				at := uint64(i + 1)
				pt, err := k.Coverage(ctx, id, at)
				if err != nil {
					t.Fatal(err)
				}
				exp[i] = expected{point: pt, states: map[string]map[string]string{}}
				for _, r := range pt.Resources {
					if r.Covered {
						st, ok := phys[i][r.Key]
						if !ok {
							t.Fatalf("no recorded state of %s at %d of %s", r.Key, at, id)
						}
						exp[i].states[r.Key] = st
					}
				}
			}
			expect[id] = exp
			kept = append(kept, id)
		}
		root, err := k.Start(ctx, "prog", p)
		if err != nil {
			t.Fatal(err)
		}
		run(root, eventlog.ID{}, 0)
		fork := func(label string) {
			src := rapid.SampledFrom(kept).Draw(t, label+" of")
			at := uint64(rapid.IntRange(1, len(expect[src])).Draw(t, label+" at"))
			id, err := k.Fork(ctx, src, at)
			if err != nil {
				t.Fatalf("fork %s at %d: %v", src, at, err)
			}
			run(id, src, at)
		}
		steps := rapid.IntRange(1, 8).Draw(t, "steps")
		for i := range steps {
			switch rapid.SampledFrom([]string{"fork", "fork", "delete", "gc"}).Draw(t, fmt.Sprintf("step %d", i)) {
			case "fork":
				fork(fmt.Sprintf("fork %d", i))
			case "delete":
				if len(kept) < 2 {
					continue
				}
				id := rapid.SampledFrom(kept).Draw(t, fmt.Sprintf("delete %d", i))
				if err := k.Delete(ctx, id); err != nil {
					t.Fatalf("delete %s: %v", id, err)
				}
				kept = slices.DeleteFunc(kept, func(x eventlog.ID) bool { return x == id })
			case "gc":
				for _, d := range w.drivers() {
					if _, err := sdk.Collect(ctx, k, d, 0); err != nil {
						t.Fatalf("collect: %v", err)
					}
				}
				checkKept(t, k, w, kept, expect)
			}
		}
		for _, d := range w.drivers() {
			if _, err := sdk.Collect(ctx, k, d, 0); err != nil {
				t.Fatalf("collect: %v", err)
			}
		}
		checkKept(t, k, w, kept, expect)
		fork("last fork") // a kept execution still forks and runs
	})
}

// checkKept checks every fork point of every kept execution against what
// was recorded before any delete or gc.
func checkKept(t *rapid.T, k *sdk.Kernel, w *world, kept []eventlog.ID, expect map[eventlog.ID][]expected) {
	ctx := context.Background()
	for _, id := range kept {
		for i, exp := range expect[id] {
			at := uint64(i + 1)
			pt, err := k.Coverage(ctx, id, at)
			if err != nil {
				t.Fatalf("coverage of kept %s at %d: %v", id, at, err)
			}
			if diff := cmp.Diff(exp.point, pt); diff != "" {
				t.Fatalf("coverage of kept %s at %d changed (-before +after):\n%s", id, at, diff)
			}
			for _, r := range pt.Resources {
				if r.Ref == "" {
					continue
				}
				drv := w.ws
				if r.Key == "db" {
					drv = w.db
				}
				restored, ok := drv.Restore(r.Ref)
				if !ok {
					t.Fatalf("kept %s at %d: checkpoint %s of %s was collected", id, at, r.Ref, r.Key)
				}
				if want, covered := exp.states[r.Key]; covered {
					if diff := cmp.Diff(want, restored, cmpEmpty); diff != "" {
						t.Fatalf("kept %s at %d: %s restores another state (-at fork point +restored):\n%s", id, at, r.Key, diff)
					}
				}
			}
		}
	}
}

// drivers are the world's two resource drivers.
func (w *world) drivers() []*testdriver.Driver { return []*testdriver.Driver{w.ws, w.db} }

// Delete passes eventlog.Deleter through to the store.
func (l *recLog) Delete(ctx context.Context, id eventlog.ID) error {
	d, ok := l.IndexedLog.(eventlog.Deleter)
	if !ok {
		return fmt.Errorf("%T cannot delete", l.IndexedLog)
	}
	return d.Delete(ctx, id)
}
