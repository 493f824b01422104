package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

func TestOpenInMemory(t *testing.T) {
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir() != "" {
		t.Errorf("Dir() = %q, want \"\"", s.Dir())
	}
	id := create(t, s, "coder")
	if head := appendAll(t, s, id, dispatch(1)); head != 2 {
		t.Errorf("head = %d, want 2", head)
	}
	if evs := events(t, s, id, 1); len(evs) != 2 {
		t.Errorf("read %d events, want 2", len(evs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Two in-memory stores are independent.
	a, b := openMem(t), openMem(t)
	id = create(t, a, "coder")
	if _, err := b.Head(t.Context(), id); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("second in-memory store sees the first's execution: %v", err)
	}
}

// Events come back in seq order with the seqs Append assigned, the times
// given, or the time of the Append where none was given.
func TestAppendAssignsSeqsAndTimes(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	id := create(t, s, "coder")
	given := []eventlog.Event{dispatch(1), {Data: &eventlog.StepStarted{StepID: "s", StepKind: "tool", Idempotency: "safe_to_retry", Attempt: 1}}}
	given[1].Seq = 3 // an explicit seq equal to its position is fine
	before := time.Now()
	head, err := s.Append(ctx, id, 1, given...)
	after := time.Now()
	if err != nil || head != 3 {
		t.Fatalf("Append = %d, %v; want 3", head, err)
	}
	if given[0].Seq != 0 || !given[1].Time.IsZero() {
		t.Errorf("Append changed the caller's events: %+v", given)
	}
	head, err = s.AppendUnsynced(ctx, id, 3, succeeded("s"), dispatch(2))
	if err != nil || head != 5 {
		t.Fatalf("AppendUnsynced = %d, %v; want 5", head, err)
	}
	evs := events(t, s, id, 1)
	if len(evs) != 5 {
		t.Fatalf("read %d events, want 5", len(evs))
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
	}
	if !evs[0].Time.Equal(t0) || !evs[1].Time.Equal(at(1)) {
		t.Errorf("given times not kept: %v, %v", evs[0].Time, evs[1].Time)
	}
	if tm := evs[2].Time; tm.Before(before.Truncate(time.Nanosecond)) || tm.After(after) {
		t.Errorf("assigned time %v is not the time of the Append (%v..%v)", tm, before, after)
	}
	if d := diff(given[1].Data, evs[2].Data); d != "" {
		t.Errorf("payload changed (-appended +read):\n%s", d)
	}
	if got := events(t, s, id, 4); len(got) != 2 || got[0].Seq != 4 {
		t.Errorf("Events from 4 = %v", got)
	}
	if got := events(t, s, id, 6); len(got) != 0 {
		t.Errorf("Events past the head = %v", got)
	}
	if got := events(t, s, id, 0); len(got) != 5 {
		t.Errorf("Events from 0 read %d events, want all 5", len(got))
	}
}

// snapshot is everything readable about one execution.
type snapshot struct {
	Head   uint64
	Events []eventlog.Event
	States []eventlog.ResourceState
}

func snap(t *testing.T, s *pebblestore.Store, id eventlog.ID) snapshot {
	t.Helper()
	head, err := s.Head(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	states, err := s.ResourceStates(t.Context(), id, head)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot{head, events(t, s, id, 1), states}
}

// Every refused Append writes nothing: the head, the events and the index
// are as before, and the next valid Append works. DESIGN §7 (bad input
// appends nothing), §8.7.
func TestAppendRejects(t *testing.T) {
	bad := eventlog.Event{Data: &eventlog.StepStarted{StepID: "s"}} // no kind, no attempt
	for _, c := range []struct {
		name     string
		expected uint64 // added to the head
		below    bool   // expected head is head-1
		evs      []eventlog.Event
		want     error
	}{
		{"no events", 0, false, nil, eventlog.ErrInvalid},
		{"seq not its position", 0, false, withSeqs(9, dispatch(1)), eventlog.ErrInvalid},
		{"second seq not its position", 0, false, []eventlog.Event{dispatch(1), {Seq: 1, Data: &eventlog.DispatchStarted{Dispatch: 2}}}, eventlog.ErrInvalid},
		{"invalid payload", 0, false, []eventlog.Event{dispatch(1), bad}, eventlog.ErrInvalid},
		{"no payload", 0, false, []eventlog.Event{{}}, eventlog.ErrInvalid},
		{"execution.created", 0, false, []eventlog.Event{{Data: &eventlog.ExecutionCreated{Agent: "x"}}}, eventlog.ErrInvalid},
		{"fork.created", 0, false, []eventlog.Event{{Data: &eventlog.ForkCreated{Parent: eventlog.NewID(), At: 1}}}, eventlog.ErrInvalid},
		{"capture of an unbound key", 0, false, []eventlog.Event{dispatch(1), captured("db", "r", 1)}, eventlog.ErrInvalid},
		{"capture past the generation", 0, false, []eventlog.Event{captured("w", "r", 9)}, eventlog.ErrInvalid},
		{"step affecting an unbound key", 0, false, []eventlog.Event{started("s9", "tool", "db")}, eventlog.ErrInvalid},
		{"binding then a refused capture", 0, false, []eventlog.Event{boundEv("db", "", false), captured("db", "r", 5)}, eventlog.ErrInvalid},
		{"a step then a refused capture", 0, false, []eventlog.Event{started("s9", "tool"), captured("w", "r", 9)}, eventlog.ErrInvalid},
		{"key too long for the index", 0, false, []eventlog.Event{boundEv(strings.Repeat("k", math.MaxUint16+1), "", false)}, eventlog.ErrInvalid},
		{"unrepresentable time", 0, false, []eventlog.Event{{Time: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), Data: &eventlog.DispatchStarted{Dispatch: 1}}}, eventlog.ErrInvalid},
		{"expected head too high", 1, false, []eventlog.Event{dispatch(1)}, eventlog.ErrConflict},
		{"expected head too low", 0, true, []eventlog.Event{dispatch(1)}, eventlog.ErrConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openMem(t)
			id := create(t, s, "coder")
			appendAll(t, s, id, boundEv("w", "", false), started("s1", "tool"), succeeded("s1"))
			before := snap(t, s, id)
			expected := before.Head + c.expected
			if c.below {
				expected--
			}
			_, err := s.Append(t.Context(), id, expected, c.evs...)
			if !errors.Is(err, c.want) {
				t.Fatalf("Append = %v, want %v", err, c.want)
			}
			if d := diff(before, snap(t, s, id)); d != "" {
				t.Fatalf("a refused Append changed the execution (-before +after):\n%s", d)
			}
			// The refusal left no trace in the store's cached index either: a
			// capture of "db" (bound by nothing that was written) is refused,
			// and a valid append lands at the old head.
			if _, err := s.Append(t.Context(), id, before.Head, captured("db", "r", 1)); !errors.Is(err, eventlog.ErrInvalid) {
				t.Errorf("capture of a key only a refused append bound: %v", err)
			}
			if head := appendAll(t, s, id, captured("w", "r", 2)); head != before.Head+1 {
				t.Errorf("next append ends at %d, want %d", head, before.Head+1)
			}
		})
	}
}

func TestCreateRejects(t *testing.T) {
	s := openMem(t)
	for _, c := range []*eventlog.ExecutionCreated{nil, {}} {
		if id, err := s.Create(t.Context(), c, t0); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Create(%v) = %s, %v; want ErrInvalid", c, id, err)
		}
	}
	if n := countList(t, s); n != 0 {
		t.Errorf("refused Creates left %d executions", n)
	}
	// A zero time is the time of the call.
	before := time.Now()
	id, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: "a"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, s, id, 1)
	info, _ := s.Info(t.Context(), id)
	if evs[0].Time.Before(before) || info.Created.Before(before) {
		t.Errorf("zero time became %v / %v, want now", evs[0].Time, info.Created)
	}
}

func countList(t *testing.T, s *pebblestore.Store) int {
	t.Helper()
	infos, err := collect(t, s.List(t.Context(), eventlog.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	return len(infos)
}

func TestUnknownExecution(t *testing.T) {
	s := openMem(t)
	real := create(t, s, "coder")
	ctx := t.Context()
	for _, id := range []eventlog.ID{{}, eventlog.NewID()} {
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, eventlog.ErrNotFound) {
				t.Errorf("%s(%s) = %v, want ErrNotFound", what, id, err)
			}
		}
		_, err := s.Head(ctx, id)
		check("Head", err)
		_, err = s.Info(ctx, id)
		check("Info", err)
		_, err = s.Append(ctx, id, 1, dispatch(1))
		check("Append", err)
		_, err = s.AppendUnsynced(ctx, id, 1, dispatch(1))
		check("AppendUnsynced", err)
		_, err = collect(t, s.Events(ctx, id, 1))
		check("Events", err)
		_, err = s.Fork(ctx, id, 1, nil, t0)
		check("Fork", err)
		_, err = s.ResourceStates(ctx, id, 1)
		check("ResourceStates", err)
		_, err = collect(t, s.ResourceHistory(ctx, id, "w", 0))
		check("ResourceHistory", err)
	}
	if n := countList(t, s); n != 1 {
		t.Errorf("List has %d executions, want only %s", n, real)
	}
}

// After Close every method returns an error wrapping ErrClosed, Close too.
func TestClosed(t *testing.T) {
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id := create(t, s, "coder")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, eventlog.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", what, err)
		}
	}
	_, err = s.Create(ctx, &eventlog.ExecutionCreated{Agent: "a"}, t0)
	check("Create", err)
	_, err = s.Head(ctx, id)
	check("Head", err)
	_, err = s.Info(ctx, id)
	check("Info", err)
	_, err = s.Append(ctx, id, 1, dispatch(1))
	check("Append", err)
	_, err = s.AppendUnsynced(ctx, id, 1, dispatch(1))
	check("AppendUnsynced", err)
	_, err = collect(t, s.Events(ctx, id, 1))
	check("Events", err)
	_, err = collect(t, s.List(ctx, eventlog.Filter{}))
	check("List", err)
	_, err = s.Fork(ctx, id, 1, nil, t0)
	check("Fork", err)
	_, err = s.ResourceStates(ctx, id, 1)
	check("ResourceStates", err)
	_, err = collect(t, s.ResourceHistory(ctx, id, "w", 0))
	check("ResourceHistory", err)
	check("Close", s.Close())
}

func TestCancelledContext(t *testing.T) {
	s := openMem(t)
	id := create(t, s, "coder")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Append(ctx, id, 1, dispatch(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with a cancelled context = %v", err)
	}
	if _, err := collect(t, s.Events(ctx, id, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Events with a cancelled context = %v", err)
	}
	if head, _ := s.Head(t.Context(), id); head != 1 {
		t.Errorf("head %d after a cancelled Append", head)
	}
}

// Breaking out of a read releases it: the store stays usable and closes
// without leaked Pebble iterators.
func TestBreakReleases(t *testing.T) {
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	id := create(t, s, "coder")
	appendAll(t, s, id, boundEv("w", "", false), dispatch(1), started("s", "tool"), succeeded("s"))
	fork, err := s.Fork(t.Context(), id, 3, &eventlog.ForkCreated{Selections: []eventlog.ForkSelection{{Key: "w", Generation: 1}}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, fork, dispatch(2))
	for range s.Events(t.Context(), fork, 1) {
		break
	}
	for range s.List(t.Context(), eventlog.Filter{}) {
		break
	}
	for range s.ResourceHistory(t.Context(), fork, "w", 0) {
		break
	}
	appendAll(t, s, fork, dispatch(3))
	if err := s.Close(); err != nil {
		t.Fatalf("Close after broken reads: %v", err)
	}
}

// A store on disk keeps every synced event across Close and Open, and
// resumes appending (head and index read back from disk). DESIGN §4 (what
// must be durable when).
func TestReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	s, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	root := create(t, s, "coder")
	appendAll(t, s, root, boundEv("w", "", false), started("s1", "tool", "w"), succeeded("s1"), captured("w", "r1", 2))
	fork, err := s.Fork(ctx, root, 3, &eventlog.ForkCreated{Selections: []eventlog.ForkSelection{
		{Key: "w", Ref: "r1", CapturedAt: 5, Generation: 2, Covered: true}}}, at(9))
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, fork, boundEv("w", "r1", false), started("s2", "llm"))
	other := create(t, s, "other")
	ids := []eventlog.ID{root, fork, other}
	want := map[eventlog.ID]snapshot{}
	for _, id := range ids {
		want[id] = snap(t, s, id)
	}
	wantList, err := collect(t, s.List(ctx, eventlog.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDir(t, dir)
	for _, id := range ids {
		if d := diff(want[id], snap(t, s, id)); d != "" {
			t.Errorf("%s after reopen (-before +after):\n%s", id, d)
		}
	}
	gotList, err := collect(t, s.List(ctx, eventlog.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(wantList, gotList); d != "" {
		t.Errorf("List after reopen (-before +after):\n%s", d)
	}
	// Appending resumes from the stored head and index: s2 is in flight for
	// w, so its success lands it.
	appendAll(t, s, fork, succeeded("s2"))
	st, err := s.ResourceStates(ctx, fork, want[fork].Head+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Generation != 4 || len(st[0].InFlight) != 0 || st[0].Seq != want[fork].Head+1 {
		t.Errorf("index after reopen and append: %+v", st)
	}
}

func TestOpenRefusesForeignFolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := pebblestore.Open(dir); !errors.Is(err, pebblestore.ErrNotALog) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open(folder with a file) = %v, want ErrNotALog", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("Open wrote into a foreign folder: %d entries", len(entries))
	}
	// A file where the folder should be.
	if _, err := pebblestore.Open(filepath.Join(dir, "notes.txt")); err == nil {
		t.Error("Open(a file) succeeded")
	}
}

func TestOpenRefusesForeignPebble(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("someone else's key"), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := pebblestore.Open(dir); !errors.Is(err, pebblestore.ErrNotALog) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open(foreign Pebble database) = %v, want ErrNotALog", err)
	}
	// It was left as it was, and unlocked.
	db, err = pebble.Open(dir, &pebble.Options{Logger: quiet{}})
	if err != nil {
		t.Fatalf("foreign database unusable after the refused Open: %v", err)
	}
	defer db.Close()
	if _, closer, err := db.Get(pebblestore.MetaFormatKey); err == nil {
		closer.Close()
		t.Error("Open wrote its format key into a foreign database")
	}
}

func TestOpenRefusesOtherStoreFormat(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	if err := pebblestore.DB(s).Set(pebblestore.MetaFormatKey, []byte{99}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := pebblestore.Open(dir); err == nil || !strings.HasPrefix(err.Error(), "pebblestore: ") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open(store format 99) = %v, want an error", err)
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	if s2, err := pebblestore.Open(dir); !errors.Is(err, pebblestore.ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open of %s = %v, want ErrLocked", dir, err)
	}
	id := create(t, s, "coder")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir) // the lock went with Close
	if head, err := s.Head(t.Context(), id); err != nil || head != 1 {
		t.Errorf("Head after reopen = %d, %v", head, err)
	}
}

// lineage records, for a test, every execution's expected events.
type lineage map[eventlog.ID][]eventlog.Event

func (l lineage) create(t *testing.T, s *pebblestore.Store) eventlog.ID {
	id := create(t, s, "coder")
	l[id] = []eventlog.Event{{Seq: 1, Time: t0, Data: &eventlog.ExecutionCreated{Agent: "coder", Input: []byte("coder")}}}
	return id
}

func (l lineage) append(t *testing.T, s *pebblestore.Store, id eventlog.ID, n int) {
	t.Helper()
	for range n {
		seq := uint64(len(l[id]) + 1)
		ev := eventlog.Event{Seq: seq, Time: at(int(seq)), Data: &eventlog.StepDenied{StepID: id.String(), StepKind: "tool", Target: "t", Reason: "r"}}
		if _, err := s.Append(t.Context(), id, seq-1, ev); err != nil {
			t.Fatal(err)
		}
		l[id] = append(l[id], ev)
	}
}

func (l lineage) fork(t *testing.T, s *pebblestore.Store, parent eventlog.ID, at uint64) eventlog.ID {
	t.Helper()
	tm := t0.Add(time.Hour)
	id, err := s.Fork(t.Context(), parent, at, nil, tm)
	if err != nil {
		t.Fatalf("Fork(%d): %v", at, err)
	}
	l[id] = append(slices.Clone(l[parent][:at]), eventlog.Event{Seq: at + 1, Time: tm, Data: &eventlog.ForkCreated{Parent: parent, At: at}})
	return id
}

// Reading a fork yields its parent's first `at` events, then its own, for
// nested forks whose point lies anywhere (DESIGN §3, §5 "Forking").
func TestLineageReads(t *testing.T) {
	s := openMem(t)
	l := lineage{}
	root := l.create(t, s)
	l.append(t, s, root, 9) // root: 1..10
	type fork struct {
		name   string
		parent *eventlog.ID
		at     uint64
		own    int
		id     eventlog.ID
	}
	f1 := &fork{name: "fork of the root", parent: &root, at: 6, own: 5}
	f1.id = l.fork(t, s, root, f1.at)
	l.append(t, s, f1.id, f1.own) // f1: root 1..6, own 7..12
	cases := []*fork{
		f1,
		{name: "fork of a fork in the grandparent's part", parent: &f1.id, at: 4, own: 2},
		{name: "fork of a fork at its fork.created", parent: &f1.id, at: 7, own: 1},
		{name: "fork of a fork in its own part", parent: &f1.id, at: 9, own: 3},
		{name: "fork of a fork at its head", parent: &f1.id, at: 12, own: 0},
		{name: "fork at the head", parent: &root, at: 10, own: 2},
		{name: "fork at 1", parent: &root, at: 1, own: 2},
	}
	for _, c := range cases[1:] {
		c.id = l.fork(t, s, *c.parent, c.at)
		l.append(t, s, c.id, c.own)
	}
	// A fork of a fork of a fork, in the great-grandparent's part.
	deep := &fork{name: "three levels, in the root's part", parent: &cases[1].id, at: 3, own: 1}
	deep.id = l.fork(t, s, cases[1].id, deep.at)
	l.append(t, s, deep.id, deep.own)
	cases = append(cases, deep)
	// Appending to forks changed none of their ancestors.
	l.append(t, s, root, 1)
	l.append(t, s, f1.id, 1)

	for _, c := range append(cases, &fork{name: "root", id: root}) {
		t.Run(c.name, func(t *testing.T) {
			want := l[c.id]
			for from := uint64(0); from <= uint64(len(want))+1; from++ {
				got := events(t, s, c.id, from)
				first := max(from, 1) - 1
				if d := diff(want[min(first, uint64(len(want))):], got); d != "" {
					t.Fatalf("Events(from %d) (-want +got):\n%s", from, d)
				}
			}
			info, err := s.Info(t.Context(), c.id)
			if err != nil {
				t.Fatal(err)
			}
			wantInfo := eventlog.Info{ID: c.id, Agent: "coder", Head: uint64(len(want)), Created: t0}
			if c.parent != nil {
				wantInfo.Parent, wantInfo.ForkSeq, wantInfo.Created = *c.parent, c.at, t0.Add(time.Hour)
			}
			// No dispatch: every execution is pending, updated by its newest event.
			wantInfo.Status, wantInfo.Updated = eventlog.StatusPending, want[len(want)-1].Time
			if d := diff(wantInfo, info); d != "" {
				t.Errorf("Info (-want +got):\n%s", d)
			}
		})
	}
	// List: every execution once, in ID (creation) order, agreeing with Info.
	infos, err := collect(t, s.List(t.Context(), eventlog.Filter{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(l) {
		t.Errorf("List has %d executions, want %d", len(infos), len(l))
	}
	for i, info := range infos {
		if i > 0 && info.ID.String() <= infos[i-1].ID.String() {
			t.Errorf("List not in ID order at %d", i)
		}
		if info.Head != uint64(len(l[info.ID])) {
			t.Errorf("List: %s head %d, want %d", info.ID, info.Head, len(l[info.ID]))
		}
	}
}

func TestForkRejects(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	root := create(t, s, "coder")
	appendAll(t, s, root, boundEv("w", "", false), dispatch(1))
	other := create(t, s, "other")
	for _, c := range []struct {
		name string
		at   uint64
		fc   *eventlog.ForkCreated
	}{
		{"at 0", 0, nil},
		{"past the head", 4, nil},
		{"far past the head", math.MaxUint64, nil},
		{"names another parent", 2, &eventlog.ForkCreated{Parent: other, Selections: []eventlog.ForkSelection{{Key: "w", Generation: 1}}}},
		{"names another point", 2, &eventlog.ForkCreated{At: 1, Selections: []eventlog.ForkSelection{{Key: "w", Generation: 1}}}},
		{"misses a selection", 2, nil},
		{"selects an unbound key", 2, &eventlog.ForkCreated{Selections: []eventlog.ForkSelection{{Key: "w", Generation: 1}, {Key: "x", Generation: 1}}}},
		{"selects at another generation", 2, &eventlog.ForkCreated{Selections: []eventlog.ForkSelection{{Key: "w", Generation: 2}}}},
		{"selects before the binding", 1, &eventlog.ForkCreated{Selections: []eventlog.ForkSelection{{Key: "w", Generation: 1}}}},
		{"unsorted selections", 2, &eventlog.ForkCreated{Selections: []eventlog.ForkSelection{{Key: "w", Generation: 1}, {Key: "a"}}}},
	} {
		if id, err := s.Fork(ctx, root, c.at, c.fc, t0); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("%s: Fork = %s, %v; want ErrInvalid", c.name, id, err)
		}
	}
	if n := countList(t, s); n != 2 {
		t.Errorf("refused forks left executions: List has %d", n)
	}
	// The given selection's fields and the fork point are written as given.
	fc := &eventlog.ForkCreated{Parent: root, At: 2, Selections: []eventlog.ForkSelection{{Key: "w", Generation: 1}}}
	id, err := s.Fork(ctx, root, 2, fc, t0)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, s, id, 3)
	if len(evs) != 1 || diff(fc, evs[0].Data) != "" {
		t.Errorf("fork.created read back as %+v", evs)
	}
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(f string, args ...any) {
	panic(fmt.Sprintf(f, args...))
}
