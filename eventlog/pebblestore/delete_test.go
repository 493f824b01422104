package pebblestore_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// ownKeys counts the keys of id in the event and index tables, and
// whether its state record is there.
func ownKeys(t *testing.T, s *pebblestore.Store, id eventlog.ID) (events, index int, state bool) {
	t.Helper()
	db := pebblestore.DB(s)
	for _, tag := range []byte{'e', 'i'} {
		lo := append([]byte{tag}, id[:]...)
		hi := append([]byte{tag}, id[:]...)
		hi = append(hi, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		it.Close()
		if tag == 'e' {
			events = n
		} else {
			index = n
		}
	}
	_, closer, err := db.Get(pebblestore.StateKey(id))
	if err == nil {
		closer.Close()
	}
	return events, index, err == nil
}

// TestDeleteKeepsOnlyWhatForksRead: the tombstone of a root keeps its
// events up to the furthest fork point of a surviving fork and nothing
// past it, and shrinks as those forks are deleted.
func TestDeleteKeepsOnlyWhatForksRead(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	root := create(t, s, "a")
	evs := []eventlog.Event{dispatch(1), boundEv("ws", "", false)}
	for i := range 5 {
		step := fmt.Sprintf("s%d", i)
		evs = append(evs, started(step, eventlog.StepTool, "ws"), succeeded(step), captured("ws", "r"+step, uint64(i+2)))
	}
	evs = append(evs, eventlog.Event{Data: &eventlog.ExecutionCompleted{Output: json.RawMessage(`"ok"`)}})
	head, err := s.Append(ctx, root, 1, evs...) // seqs 2..19
	if err != nil {
		t.Fatal(err)
	}
	forkAt := func(at uint64) eventlog.ID {
		states, err := s.ResourceStates(ctx, root, at)
		if err != nil {
			t.Fatal(err)
		}
		fc := &eventlog.ForkCreated{}
		for _, st := range states {
			fc.Selections = append(fc.Selections, eventlog.ForkSelection{Key: st.Key, Ref: st.Latest.Ref,
				CapturedAt: st.Latest.At, Generation: st.Generation, Covered: st.Latest.Generation == st.Generation})
		}
		id, err := s.Fork(ctx, root, at, fc, t0)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	near, far := forkAt(7), forkAt(13)
	e, i, _ := ownKeys(t, s, root)
	if e != int(head) {
		t.Fatalf("root has %d event keys before Delete, want %d", e, head)
	}
	indexBefore := i
	for _, c := range []struct {
		del        eventlog.ID
		keptEvents int
	}{
		{root, 13}, // far reads 1..13
		{far, 7},   // then near reads 1..7
		{near, 0},  // then nothing
	} {
		if err := s.Delete(ctx, c.del); err != nil {
			t.Fatal(err)
		}
		e, i, state := ownKeys(t, s, root)
		if e != c.keptEvents || state {
			t.Errorf("after deleting %s the root keeps %d events (state record %v), want %d and none", c.del, e, state, c.keptEvents)
		}
		if i > indexBefore || (c.keptEvents == 0) != (i == 0) {
			t.Errorf("after deleting %s the root keeps %d index entries (of %d)", c.del, i, indexBefore)
		}
	}
	for _, id := range []eventlog.ID{near, far} {
		if e, i, state := ownKeys(t, s, id); e != 0 || i != 0 || state {
			t.Errorf("deleted fork %s keeps %d events, %d index entries, state %v", id, e, i, state)
		}
	}
	// A reopen (no cache) still finds nothing.
	pebblestore.ForgetCache(s)
	if _, err := s.Info(ctx, root); err == nil {
		t.Error("Info of a deleted execution after the cache was dropped: no error")
	}
}

// TestFormat2Upgrade: a store of format 2 (before tombstones) opens
// read-only as it is, and a read-write open writes format 3.
func TestFormat2Upgrade(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	id := create(t, s, "a")
	b := pebblestore.DB(s).NewBatch()
	_ = b.Set(pebblestore.MetaFormatKey, []byte{2}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	format := func(s *pebblestore.Store) []byte {
		v, closer, err := pebblestore.DB(s).Get(pebblestore.MetaFormatKey)
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		return slices.Clone(v)
	}
	ro := openDir(t, dir, pebblestore.ReadOnly())
	if _, err := ro.Info(t.Context(), id); err != nil {
		t.Errorf("read-only Info on a format 2 store: %v", err)
	}
	if got := format(ro); !slices.Equal(got, []byte{2}) {
		t.Errorf("read-only open changed the format to %v", got)
	}
	ro.Close()
	rw := openDir(t, dir)
	if got := format(rw); !slices.Equal(got, []byte{3}) {
		t.Errorf("format after a read-write open = %v, want [3]", got)
	}
	if _, err := rw.Info(t.Context(), id); err != nil {
		t.Errorf("Info after the upgrade: %v", err)
	}
}
