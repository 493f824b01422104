package coverage_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// epoch is the time of every event the tests write.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testStore is one store of the metamorphic pair: the same histories are
// written to Pebble in memory and on disk and must give identical answers.
type testStore struct {
	name string
	s    *pebblestore.Store
}

func openStores(t testing.TB) []testStore {
	t.Helper()
	var out []testStore
	for _, c := range []struct{ name, dir string }{{"mem", ""}, {"disk", t.TempDir()}} {
		s, err := pebblestore.Open(c.dir, pebblestore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, testStore{c.name, s})
	}
	return out
}

// written is one execution that writeLineage made and its head: its lineage
// is the first head events of the history.
type written struct {
	id   eventlog.ID
	head uint64
}

// writeLineage writes a lineage to s the way a kernel would: Create for
// execution.created, Append in batches of batch(remaining) events, and each
// fork.created as a Fork of the execution written so far (so a lineage with
// two fork.created events becomes a fork of a fork). It returns every
// execution it made, the last being the whole lineage.
func writeLineage(ctx context.Context, s eventlog.Log, events []eventlog.Event, batch func(remaining int) int) ([]written, error) {
	ec, ok := events[0].Data.(*eventlog.ExecutionCreated)
	if !ok {
		return nil, fmt.Errorf("lineage starts with %s", events[0].Kind())
	}
	id, err := s.Create(ctx, ec, epoch)
	if err != nil {
		return nil, err
	}
	var out []written
	head := uint64(1)
	for i := 1; i < len(events); {
		if fc, ok := events[i].Data.(*eventlog.ForkCreated); ok {
			out = append(out, written{id, head})
			c := *fc
			c.Parent = id
			if id, err = s.Fork(ctx, id, fc.At, &c, epoch); err != nil {
				return nil, err
			}
			head++
			i++
			continue
		}
		j := i + 1
		for n := batch(len(events) - i); j < len(events) && j-i < n; j++ {
			if events[j].Kind() == eventlog.KindForkCreated {
				break
			}
		}
		if head, err = s.Append(ctx, id, head, events[i:j]...); err != nil {
			return nil, err
		}
		i = j
	}
	return append(out, written{id, head}), nil
}

// checkAt fails unless At on the store equals Fold.Point, at every seq of
// the execution, for the fold of the events read back from the store and
// for the fold of the history it was written from.
func checkAt(t tb, s *pebblestore.Store, w written, history []eventlog.Event) {
	t.Helper()
	ctx := context.Background()
	back, err := coverage.FoldEvents(s.Events(ctx, w.id, 1))
	if err != nil {
		t.Fatal(err)
	}
	orig := foldAll(t, history[:w.head])
	if back.Head() != w.head {
		t.Fatalf("store head %d, want %d", back.Head(), w.head)
	}
	for n := uint64(1); n <= w.head; n++ {
		got, err := coverage.At(ctx, s, w.id, n)
		if err != nil {
			t.Fatalf("At(%d): %v", n, err)
		}
		if got.InFlight != nil {
			t.Fatalf("At(%d) filled InFlight: %v", n, got.InFlight)
		}
		if got.InFlight, err = coverage.InFlightAt(s.Events(ctx, w.id, 1), n); err != nil {
			t.Fatalf("InFlightAt(%d): %v", n, err)
		}
		pb, _ := back.Point(n)
		po, _ := orig.Point(n)
		if diff := cmp.Diff(po, got); diff != "" {
			t.Fatalf("At(%d) of %s (-fold of the history +At):\n%s", n, w.id, diff)
		}
		if diff := cmp.Diff(pb, got); diff != "" {
			t.Fatalf("At(%d) of %s (-fold of the events read back +At):\n%s", n, w.id, diff)
		}
	}
}

// checkAtOnStores writes a lineage to in-memory and on-disk stores, one
// event per append, and checks At against Fold.Point on each execution it
// made. stores is nil for fresh ones.
func checkAtOnStores(t *testing.T, stores []testStore, events []eventlog.Event) {
	t.Helper()
	if stores == nil {
		stores = openStores(t)
	}
	for _, st := range stores {
		ws, err := writeLineage(context.Background(), st.s, events, func(int) int { return 1 })
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for _, w := range ws {
			checkAt(t, st.s, w, events)
		}
	}
}

// TestAtGolden: for every golden scenario — forks and forks of forks written
// with the store's Fork — At equals Fold.Point at every seq, in memory and
// on disk. DESIGN §8.3, §5.
func TestAtGolden(t *testing.T) {
	stores := openStores(t)
	for _, c := range goldenCases(t) {
		t.Run(c.where, func(t *testing.T) { checkAtOnStores(t, stores, c.events(t)) })
	}
}

// TestAtMatchesFold writes generated lineages (with forks and forks of forks
// inside them) to an in-memory and an on-disk store in random batches, then
// forks a random execution at a random seq (also in a prefix it shares with
// its parent) and goes on; At equals Fold.Point at every seq of every
// execution, on both stores. A fork made with At's selections has the
// parent's Point at the fork point. DESIGN §8.3, §8.5, metamorphic.
func TestAtMatchesFold(t *testing.T) {
	stores := openStores(t)
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		events := genHistory(t, genOpts{reuse: rapid.Bool(), forks: true}, 50)
		batches := rapid.SliceOfN(rapid.IntRange(1, 8), 1, 20).Draw(t, "batch sizes")
		type lineage struct {
			ws     [][]written // per store
			events []eventlog.Event
		}
		var lineages []lineage
		root := lineage{events: events}
		for _, st := range stores {
			k := 0
			ws, err := writeLineage(ctx, st.s, events, func(int) int { k++; return batches[k%len(batches)] })
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			root.ws = append(root.ws, ws)
		}
		lineages = append(lineages, root)

		// Fork a random execution written so far at a random seq.
		for range rapid.IntRange(0, 2).Draw(t, "forks") {
			from := rapid.SampledFrom(lineages).Draw(t, "parent lineage")
			x := rapid.IntRange(0, len(from.ws[0])-1).Draw(t, "parent execution")
			parentHead := from.ws[0][x].head
			at := rapid.Uint64Range(1, parentHead).Draw(t, "fork at")
			want, err := coverage.At(ctx, stores[0].s, from.ws[0][x].id, at)
			if err != nil {
				t.Fatal(err)
			}
			fc := &eventlog.ForkCreated{Parent: eventlog.ID{'P'}, At: at}
			for _, s := range want.Resources {
				fc.Selections = append(fc.Selections, eventlog.ForkSelection{Key: s.Key, Ref: s.Ref, CapturedAt: s.CapturedAt, Generation: s.Generation, Covered: s.Covered})
			}
			forked := append(from.events[:at:at], eventlog.Event{Seq: at + 1, Time: epoch, Data: fc})
			forked = genMore(t, forked, genOpts{reuse: rapid.Bool()}, rapid.IntRange(0, 20).Draw(t, "fork events"))
			l := lineage{events: forked}
			for i, st := range stores {
				c := *fc
				c.Parent = from.ws[i][x].id
				id, err := st.s.Fork(ctx, c.Parent, at, &c, epoch)
				if err != nil {
					t.Fatalf("%s: fork: %v", st.name, err)
				}
				// The fork's Point at its fork point is its parent's (DESIGN §8.5).
				got, err := coverage.At(ctx, st.s, id, at)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%s: fork's Point at its fork point (-parent +fork):\n%s", st.name, diff)
				}
				head := at + 1
				if len(forked) > int(head) {
					if head, err = st.s.Append(ctx, id, head, forked[head:]...); err != nil {
						t.Fatalf("%s: %v", st.name, err)
					}
				}
				l.ws = append(l.ws, []written{{id, head}})
			}
			lineages = append(lineages, l)
		}

		for _, l := range lineages {
			for i, st := range stores {
				for _, w := range l.ws[i] {
					checkAt(t, st.s, w, l.events)
				}
			}
		}
	})
}

// coderLineage writes the coder golden lineage into a fresh store and
// returns the store, the execution and its head.
func coderLineage(t *testing.T) (eventlog.IndexedLog, eventlog.ID, uint64) {
	t.Helper()
	st := openStores(t)[0].s
	ws, err := writeLineage(context.Background(), st, goldenEvents(t, "coder.txt", 0), func(int) int { return 7 })
	if err != nil {
		t.Fatal(err)
	}
	return st, ws[0].id, ws[0].head
}

// TestAtErrors: bad input to At is classified (DESIGN §7) and a broken
// index is refused rather than trusted.
func TestAtErrors(t *testing.T) {
	ctx := context.Background()
	st, id, head := coderLineage(t)
	for _, at := range []uint64{0, head + 1} {
		if _, err := coverage.At(ctx, st, id, at); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("At(%d) = %v, want an error wrapping eventlog.ErrInvalid", at, err)
		}
	}
	if _, err := coverage.At(ctx, st, eventlog.NewID(), 1); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("At(unknown execution) = %v, want an error wrapping eventlog.ErrNotFound", err)
	}
	if _, err := coverage.At(ctx, nil, id, 1); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("At(nil index) = %v, want an error wrapping eventlog.ErrInvalid", err)
	}

	// An index that is not a Log: At trusts ResourceStates for the range and
	// refuses states out of order.
	bad := brokenIndex{Index: st, mutate: func(s []eventlog.ResourceState) []eventlog.ResourceState {
		return append(s, s...)
	}}
	if _, err := coverage.At(ctx, bad, id, 10); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("At(duplicate states) = %v, want an error wrapping eventlog.ErrCorrupt", err)
	}
	boom := errors.New("index unreadable")
	bad = brokenIndex{Index: st, historyErr: boom}
	if _, err := coverage.At(ctx, bad, id, 26); !errors.Is(err, boom) {
		t.Errorf("At(history error) = %v, want an error wrapping %v", err, boom)
	}
	bad = brokenIndex{Index: st, historyBackwards: true}
	if _, err := coverage.At(ctx, bad, id, 26); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("At(history out of order) = %v, want an error wrapping eventlog.ErrCorrupt", err)
	}
}

// brokenIndex damages what an Index answers.
type brokenIndex struct {
	eventlog.Index
	mutate           func([]eventlog.ResourceState) []eventlog.ResourceState
	historyErr       error
	historyBackwards bool
}

func (b brokenIndex) ResourceStates(ctx context.Context, id eventlog.ID, at uint64) ([]eventlog.ResourceState, error) {
	s, err := b.Index.ResourceStates(ctx, id, at)
	if err == nil && b.mutate != nil {
		s = b.mutate(s)
	}
	return s, err
}

func (b brokenIndex) ResourceHistory(ctx context.Context, id eventlog.ID, key string, after uint64) iter.Seq2[eventlog.ResourceState, error] {
	return func(yield func(eventlog.ResourceState, error) bool) {
		switch {
		case b.historyErr != nil:
			yield(eventlog.ResourceState{}, b.historyErr)
		case b.historyBackwards:
			yield(eventlog.ResourceState{Key: key, Seq: after}, nil)
		default:
			for st, err := range b.Index.ResourceHistory(ctx, id, key, after) {
				if !yield(st, err) {
					return
				}
			}
		}
	}
}

// latestCoveredOf is what LatestCovered must answer from the fold of the
// same lineage: the newest seq at or before at whose Point is covered, and
// false when there is none.
func latestCoveredOf(t tb, f *coverage.Fold, at uint64) (uint64, bool) {
	t.Helper()
	for n := at; n >= 1; n-- {
		p, err := f.Point(n)
		if err != nil {
			t.Fatalf("Point(%d): %v", n, err)
		}
		if p.Covered {
			return n, true
		}
	}
	return 0, false
}

// TestLatestCovered writes generated lineages (forks and forks of forks
// written with the store's Fork, so a fork's answer may lie in its parent's
// prefix) and asks LatestCovered at every seq of every execution: it is the
// newest covered Point of the fold at or before the seq, or an error
// wrapping ErrUncovered when there is none. DESIGN §12.
func TestLatestCovered(t *testing.T) {
	st := openStores(t)[0].s
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		events := genHistory(t, genOpts{reuse: rapid.Bool(), forks: true}, 40)
		ws, err := writeLineage(ctx, st, events, func(int) int { return rapid.IntRange(1, 6).Draw(t, "batch") })
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			f := foldAll(t, events[:w.head])
			for n := uint64(1); n <= w.head; n++ {
				got, err := coverage.LatestCovered(ctx, st, w.id, n)
				want, ok := latestCoveredOf(t, f, n)
				switch {
				case !ok && !errors.Is(err, coverage.ErrUncovered):
					t.Fatalf("LatestCovered(%d) = %d, %v; want an error wrapping ErrUncovered", n, got, err)
				case ok && (err != nil || got != want):
					t.Fatalf("LatestCovered(%d) = %d, %v; want %d", n, got, err, want)
				}
			}
		}
	})
}

// TestLatestCoveredGolden pins LatestCovered on a golden lineage whose
// answer is not the seq asked: in coder.txt's first case the workspace is
// uncovered while a step runs, and the answer is the point before it
// started. The seqs are those of the golden file's table.
func TestLatestCoveredGolden(t *testing.T) {
	ctx := context.Background()
	st := openStores(t)[0].s
	events := goldenEvents(t, "coder.txt", 0)
	ws, err := writeLineage(ctx, st, events, func(int) int { return 3 })
	if err != nil {
		t.Fatal(err)
	}
	f := foldAll(t, events)
	var uncovered []uint64
	for n := uint64(1); n <= f.Head(); n++ {
		if p, _ := f.Point(n); !p.Covered {
			uncovered = append(uncovered, n)
		}
	}
	if len(uncovered) == 0 {
		t.Fatal("coder.txt has no uncovered point")
	}
	for _, n := range uncovered {
		want, ok := latestCoveredOf(t, f, n)
		got, err := coverage.LatestCovered(ctx, st, ws[0].id, n)
		if !ok {
			if !errors.Is(err, coverage.ErrUncovered) {
				t.Errorf("LatestCovered(%d) = %d, %v; want ErrUncovered", n, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("LatestCovered(%d) = %d, %v; want %d", n, got, err, want)
		}
	}
}

// TestLatestCoveredErrors: a seq outside 1..head and an unknown execution are
// classified as At classifies them, and an index whose states change between
// two reads of the same seq (no newest entry at or before it, or one after
// it) is refused as corrupt rather than walked.
func TestLatestCoveredErrors(t *testing.T) {
	ctx := context.Background()
	st, id, head := coderLineage(t)
	for _, at := range []uint64{0, head + 1} {
		if _, err := coverage.LatestCovered(ctx, st, id, at); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("LatestCovered(%d) = %v, want an error wrapping eventlog.ErrInvalid", at, err)
		}
	}
	if _, err := coverage.LatestCovered(ctx, st, eventlog.NewID(), 1); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("LatestCovered(unknown execution) = %v, want an error wrapping eventlog.ErrNotFound", err)
	}

	// An uncovered seq of the lineage.
	f := foldAll(t, goldenEvents(t, "coder.txt", 0))
	var at uint64
	for n := head; n >= 1 && at == 0; n-- {
		if p, _ := f.Point(n); !p.Covered {
			at = n
		}
	}
	if at == 0 {
		t.Fatal("coder.txt has no uncovered point")
	}
	boom := errors.New("index unreadable")
	for _, c := range []struct {
		name   string
		second func([]eventlog.ResourceState) ([]eventlog.ResourceState, error)
		want   error
	}{
		{"no entries", func([]eventlog.ResourceState) ([]eventlog.ResourceState, error) { return nil, nil }, eventlog.ErrCorrupt},
		{"an entry after the seq", func(s []eventlog.ResourceState) ([]eventlog.ResourceState, error) {
			s[len(s)-1].Seq = at + 1
			return s, nil
		}, eventlog.ErrCorrupt},
		{"read error", func([]eventlog.ResourceState) ([]eventlog.ResourceState, error) { return nil, boom }, boom},
	} {
		idx := &rereadIndex{Index: st, second: c.second}
		if got, err := coverage.LatestCovered(ctx, idx, id, at); !errors.Is(err, c.want) {
			t.Errorf("%s: LatestCovered(%d) = %d, %v; want an error wrapping %v", c.name, at, got, err, c.want)
		}
	}
}

// rereadIndex answers the second ResourceStates query through second: the
// first is At's, the second LatestCovered's own.
type rereadIndex struct {
	eventlog.Index
	calls  int
	second func([]eventlog.ResourceState) ([]eventlog.ResourceState, error)
}

func (r *rereadIndex) ResourceStates(ctx context.Context, id eventlog.ID, at uint64) ([]eventlog.ResourceState, error) {
	s, err := r.Index.ResourceStates(ctx, id, at)
	r.calls++
	if err != nil || r.calls != 2 {
		return s, err
	}
	return r.second(s)
}
