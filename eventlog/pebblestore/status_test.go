package pebblestore_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/replay"
	"pgregory.net/rapid"
)

// Info's status is written with the event that changes it (DESIGN §9) and
// read back after a reopen; a fork's status starts as its own.
func TestStatusKeptByStore(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	dl := t0.Add(24 * time.Hour)
	root, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: "coder", Deadline: dl, Key: "k"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := func(id eventlog.ID, status eventlog.Status, wake, deadline time.Time) {
		t.Helper()
		info, err := s.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != status || !info.WakeAt.Equal(wake) || !info.Deadline.Equal(deadline) {
			t.Errorf("Info(%s) = %s wake %v deadline %v, want %s %v %v", id, info.Status, info.WakeAt, info.Deadline, status, wake, deadline)
		}
	}
	wantStatus(root, eventlog.StatusPending, time.Time{}, dl)
	appendAll(t, s, root, dispatch(1))
	wantStatus(root, eventlog.StatusRunning, time.Time{}, dl)
	wake := t0.Add(time.Hour)
	appendAll(t, s, root, eventlog.Event{Time: at(8), Data: &eventlog.DispatchParked{WakeAt: wake, Reason: eventlog.ParkTimer}})
	wantStatus(root, eventlog.StatusWaiting, wake, dl)
	fork, err := s.Fork(t.Context(), root, 3, nil, at(9))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(fork, eventlog.StatusPending, time.Time{}, time.Time{})
	appendAll(t, s, root, dispatch(2), eventlog.Event{Time: at(10), Data: &eventlog.ExecutionCancelled{Reason: "stop"}})
	wantStatus(root, eventlog.StatusCancelled, time.Time{}, dl)
	wantStatus(fork, eventlog.StatusPending, time.Time{}, time.Time{})

	s.Close()
	s = openDir(t, dir)
	wantStatus(root, eventlog.StatusCancelled, time.Time{}, dl)
	wantStatus(fork, eventlog.StatusPending, time.Time{}, time.Time{})
	info, err := s.Info(t.Context(), root)
	if err != nil || !info.Updated.Equal(at(10)) || info.Head != 5 {
		t.Errorf("Info(root) after reopen = %+v, %v; want head 5 updated %v", info, err, at(10))
	}
}

// The state record's head is checked against the events: a lost newest
// event (which the key range alone cannot reveal) is a corruption naming
// the execution and the seq, for a root and for a fork's own part, and so
// is an event past the recorded head.
func TestMissingNewestEvent(t *testing.T) {
	for _, c := range []struct {
		name   string
		inFork bool
		seq    uint64
	}{
		{"root", false, 10},
		{"fork", true, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, root, fork := corruptionSetup(t)
			owner := root
			if c.inFork {
				owner = fork
			}
			if err := pebblestore.DB(s).Delete(pebblestore.EventKey(owner, c.seq), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			// With the head cached, the read stops at the missing event.
			wantCorruption(t, s, owner, owner, c.seq)
			// After a reopen, the state record's head is checked before
			// anything is read.
			reopenMem(t, s)
			_, evErr := collect(t, s.Events(t.Context(), owner, 1))
			for _, err := range []error{evErr, infoErr(t, s, owner), headErr(t, s, owner)} {
				var ce *eventlog.CorruptionError
				if !errors.As(err, &ce) || ce.Execution != owner || ce.Seq != c.seq {
					t.Errorf("Info/Head = %v, want a corruption of %s seq %d", err, owner, c.seq)
				}
			}
		})
	}
	t.Run("event past the head", func(t *testing.T) {
		s, root, _ := corruptionSetup(t)
		rec, err := eventlog.AppendRecord(nil, root, eventlog.Event{Seq: 11, Time: t0, Data: &eventlog.DispatchStarted{Dispatch: 9}})
		if err != nil {
			t.Fatal(err)
		}
		setRaw(t, s, pebblestore.EventKey(root, 11), rec)
		reopenMem(t, s)
		var ce *eventlog.CorruptionError
		if err := infoErr(t, s, root); !errors.As(err, &ce) || ce.Execution != root || ce.Seq != 11 {
			t.Errorf("Info = %v, want a corruption of %s seq 11", err, root)
		}
	})
	t.Run("no state record", func(t *testing.T) {
		s, root, fork := corruptionSetup(t)
		if err := pebblestore.DB(s).Delete(pebblestore.StateKey(fork), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		reopenMem(t, s)
		var ce *eventlog.CorruptionError
		if err := infoErr(t, s, fork); !errors.As(err, &ce) || ce.Execution != fork || ce.What != "state" {
			t.Errorf("Info = %v, want a corrupt state of %s", err, fork)
		}
		if err := infoErr(t, s, root); err != nil {
			t.Errorf("the root is unreadable because of its fork's state: %v", err)
		}
	})
	t.Run("corrupt state record", func(t *testing.T) {
		s, root, _ := corruptionSetup(t)
		v := getRaw(t, s, pebblestore.StateKey(root))
		v[len(v)-1] ^= 1
		setRaw(t, s, pebblestore.StateKey(root), v)
		reopenMem(t, s)
		if err := infoErr(t, s, root); !errors.Is(err, eventlog.ErrCorrupt) {
			t.Errorf("Info = %v, want ErrCorrupt", err)
		}
	})
}

func infoErr(t *testing.T, s *pebblestore.Store, id eventlog.ID) error {
	_, err := s.Info(t.Context(), id)
	return err
}

func headErr(t *testing.T, s *pebblestore.Store, id eventlog.ID) error {
	_, err := s.Head(t.Context(), id)
	return err
}

// A store of format 1 (no state records, version 1 event records) is
// migrated when opened: every execution's state record is derived from its
// own events, the format byte becomes 2, and everything reads as before.
func TestMigrateFormat1(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	done := create(t, s, "coder")
	appendAll(t, s, done, dispatch(1), started("s1", eventlog.StepTool), succeeded("s1"),
		eventlog.Event{Time: at(7), Data: &eventlog.ExecutionCompleted{Output: []byte("ok")}})
	running := create(t, s, "coder")
	appendAll(t, s, running, dispatch(1))
	pending := create(t, s, "mailer")
	fork, err := s.Fork(t.Context(), done, 5, nil, at(9))
	if err != nil {
		t.Fatal(err)
	}
	forkDispatched, err := s.Fork(t.Context(), done, 3, nil, at(10))
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, forkDispatched, dispatch(2))
	ids := []eventlog.ID{done, running, pending, fork, forkDispatched}
	want := map[eventlog.ID]eventlog.Info{}
	for _, id := range ids {
		info, err := s.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = info
	}
	wantStatuses := []eventlog.Status{eventlog.StatusCompleted, eventlog.StatusRunning, eventlog.StatusPending,
		eventlog.StatusPending, eventlog.StatusRunning}
	for i, id := range ids {
		if want[id].Status != wantStatuses[i] {
			t.Fatalf("%s: status %s before the migration, want %s", id, want[id].Status, wantStatuses[i])
		}
	}
	evs := map[eventlog.ID][]eventlog.Event{}
	for _, id := range ids {
		evs[id] = events(t, s, id, 1)
	}
	s.Close()
	makeFormat1(t, dir)

	s = openDir(t, dir)
	db := pebblestore.DB(s)
	v, closer, err := db.Get(pebblestore.MetaFormatKey)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v, []byte{3}) {
		t.Errorf("store format after the migration = %v, want [3]", v)
	}
	closer.Close()
	for _, id := range ids {
		info, err := s.Info(t.Context(), id)
		if err != nil {
			t.Fatalf("Info(%s) after the migration: %v", id, err)
		}
		if d := diff(want[id], info); d != "" {
			t.Errorf("Info(%s) after the migration (-before +after):\n%s", id, d)
		}
		if d := diff(evs[id], events(t, s, id, 1)); d != "" {
			t.Errorf("Events(%s) after the migration (-before +after):\n%s", id, d)
		}
	}
	// The migrated store appends as any other.
	appendAll(t, s, running, eventlog.Event{Time: at(20), Data: &eventlog.ExecutionFailed{Code: eventlog.FailHandler}})
	if info, err := s.Info(t.Context(), running); err != nil || info.Status != eventlog.StatusFailed {
		t.Errorf("Info after an append to a migrated store = %+v, %v", info, err)
	}
}

// makeFormat1 turns the closed store in dir into what format 1 wrote: no
// state records, version 1 event records, format byte 1.
func makeFormat1(t *testing.T, dir string) {
	t.Helper()
	// A store of format 1 predates the files the store keeps beside
	// Pebble's, and the raw rewrite below would not match the clean-close
	// record anyway.
	for _, name := range []string{"FORKLINE", "FORKLINE-CLOSED"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for ok := it.First(); ok; ok = it.Next() {
		k := slices.Clone(it.Key())
		switch k[0] {
		case 's':
			_ = b.Delete(k, nil)
		case 'e':
			rec := slices.Clone(it.Value())
			rec[0] = 1
			sum := crc32.Update(crc32.Checksum(rec[0:2], castagnoli), castagnoli, rec[6:])
			binary.BigEndian.PutUint32(rec[2:6], sum)
			_ = b.Set(k, rec, nil)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	_ = b.Set(pebblestore.MetaFormatKey, []byte{1}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// TestStatusMatchesReplay: over generated well-formed lineages with forks,
// Info.Status and Info.Head equal the replay fold's status and head at
// every event, and WakeAt, Deadline and Updated the fold's StatusState
// (DESIGN §9: the store keeps the status the replay fold computes).
func TestStatusMatchesReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, err := pebblestore.Open("", pebblestore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		type exec struct {
			id  eventlog.ID
			lin []eventlog.Event
		}
		var execs []*exec
		clock := 0
		tick := func() time.Time { clock++; return at(clock) }
		check := func(e *exec) {
			st, err := replay.Fold(func(yield func(eventlog.Event, error) bool) {
				for _, ev := range e.lin {
					if !yield(ev, nil) {
						return
					}
				}
			})
			if err != nil {
				t.Fatalf("replay refuses the generated lineage: %v", err)
			}
			info, err := s.Info(t.Context(), e.id)
			if err != nil {
				t.Fatal(err)
			}
			want := st.StatusState()
			if info.Status != st.Status || info.Head != st.Head || !info.WakeAt.Equal(want.WakeAt) ||
				!info.Deadline.Equal(want.Deadline) || !info.Updated.Equal(want.Updated) {
				t.Fatalf("Info(%s) = %s head %d wake %v deadline %v updated %v; replay: %s head %d %+v",
					e.id, info.Status, info.Head, info.WakeAt, info.Deadline, info.Updated, st.Status, st.Head, want)
			}
		}
		newRoot := func() {
			var dl time.Time
			if rapid.Bool().Draw(t, "deadline") {
				dl = t0.Add(time.Duration(rapid.IntRange(1, 100).Draw(t, "dl")) * time.Hour)
			}
			created := &eventlog.ExecutionCreated{Agent: "a", Deadline: dl}
			tm := tick()
			id, err := s.Create(t.Context(), created, tm)
			if err != nil {
				t.Fatal(err)
			}
			e := &exec{id: id, lin: []eventlog.Event{{Seq: 1, Time: tm, Data: created}}}
			execs = append(execs, e)
			check(e)
		}
		newRoot()
		steps := 0
		for range rapid.IntRange(1, 60).Draw(t, "actions") {
			e := execs[rapid.IntRange(0, len(execs)-1).Draw(t, "exec")]
			st, err := replay.Fold(func(yield func(eventlog.Event, error) bool) {
				for _, ev := range e.lin {
					if !yield(ev, nil) {
						return
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			action := rapid.IntRange(0, 12).Draw(t, "action")
			if st.Status.Terminal() || action == 0 {
				// Fork anywhere, or a new root.
				if rapid.Bool().Draw(t, "root") {
					newRoot()
					continue
				}
				atSeq := uint64(rapid.IntRange(1, len(e.lin)).Draw(t, "at"))
				fc := &eventlog.ForkCreated{}
				if rapid.Bool().Draw(t, "fork deadline") {
					fc.Deadline = t0.Add(time.Duration(rapid.IntRange(1, 100).Draw(t, "fdl")) * time.Hour)
				}
				tm := tick()
				id, err := s.Fork(t.Context(), e.id, atSeq, fc, tm)
				if err != nil {
					t.Fatal(err)
				}
				written := *fc
				written.Parent, written.At = e.id, atSeq
				f := &exec{id: id, lin: append(slices.Clone(e.lin[:atSeq]), eventlog.Event{Seq: atSeq + 1, Time: tm, Data: &written})}
				execs = append(execs, f)
				check(f)
				continue
			}
			var p eventlog.Payload
			var started []string
			for _, step := range st.Steps() {
				if step.Status == replay.StepStarted {
					started = append(started, step.ID)
				}
			}
			switch action {
			case 1:
				p = &eventlog.DispatchStarted{Dispatch: st.Dispatches + 1}
			case 2:
				steps++
				p = &eventlog.StepStarted{StepID: fmt.Sprintf("s%d", steps), StepKind: eventlog.StepTool, Target: "t",
					Idempotency: eventlog.SafeToRetry, Attempt: 1}
			case 3:
				if len(started) == 0 {
					continue
				}
				p = &eventlog.StepSucceeded{StepID: rapid.SampledFrom(started).Draw(t, "land")}
			case 4:
				steps++
				p = &eventlog.ApprovalRequested{StepID: fmt.Sprintf("a%d", steps), StepKind: eventlog.StepTool, Target: "rm"}
			case 5:
				awaited := st.Awaited()
				if len(awaited) == 0 {
					continue
				}
				id := rapid.SampledFrom(awaited).Draw(t, "decide")
				if rapid.Bool().Draw(t, "grant") {
					p = &eventlog.ApprovalGranted{StepID: id}
				} else {
					p = &eventlog.ApprovalRejected{StepID: id}
				}
			case 6:
				if !st.StatusState().Dispatched || st.StatusState().Parked {
					continue
				}
				p = &eventlog.DispatchParked{WakeAt: tick(), Reason: eventlog.ParkTimer}
			case 7:
				p = &eventlog.CancelRequested{Reason: "stop"}
			case 8:
				p = &eventlog.MarkerRecorded{Name: "m"}
			case 9:
				p = &eventlog.ExecutionCompleted{}
			case 10:
				p = &eventlog.ExecutionFailed{Code: eventlog.FailDeadline}
			case 11:
				p = &eventlog.ExecutionCancelled{}
			default:
				steps++
				p = &eventlog.TimerStarted{TimerID: fmt.Sprintf("t%d", steps), WakeAt: tick()}
			}
			ev := eventlog.Event{Seq: uint64(len(e.lin)) + 1, Time: tick(), Data: p}
			if _, err := s.Append(t.Context(), e.id, uint64(len(e.lin)), ev); err != nil {
				t.Fatalf("Append %s: %v", ev.Kind(), err)
			}
			e.lin = append(e.lin, ev)
			check(e)
		}
		// After a reopen (the state records, not the cache), every execution
		// still agrees.
		pebblestore.ForgetCache(s)
		for _, e := range execs {
			check(e)
		}
	})
}
