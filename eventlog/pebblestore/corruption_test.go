package pebblestore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// corruptionSetup is a root with 10 events and a fork of it at 6 with 3
// events of its own (7..9).
func corruptionSetup(t *testing.T) (s *pebblestore.Store, root, fork eventlog.ID) {
	s = openMem(t)
	root = create(t, s, "coder")
	for range 9 {
		appendAll(t, s, root, dispatch(1))
	}
	fork, err := s.Fork(t.Context(), root, 6, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, fork, dispatch(2), dispatch(3))
	return s, root, fork
}

func setRaw(t *testing.T, s *pebblestore.Store, key, value []byte) {
	t.Helper()
	if err := pebblestore.DB(s).Set(key, value, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func getRaw(t *testing.T, s *pebblestore.Store, key []byte) []byte {
	t.Helper()
	v, closer, err := pebblestore.DB(s).Get(key)
	if err != nil {
		t.Fatalf("get %x: %v", key, err)
	}
	defer closer.Close()
	return slices.Clone(v)
}

// wantCorruption reads id's events and checks that the events before seq
// come out intact, then one error, last, that names exec and seq and is
// a *CorruptionError classified as ErrCorrupt. DESIGN §3: never a panic,
// never a silently skipped event.
func wantCorruption(t *testing.T, s *pebblestore.Store, id, exec eventlog.ID, seq uint64) {
	t.Helper()
	evs, err := collect(t, s.Events(t.Context(), id, 1))
	if err == nil {
		t.Fatalf("Events(%s) read %d events and no error", id, len(evs))
	}
	if !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("error %v is not ErrCorrupt", err)
	}
	var ce *eventlog.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *CorruptionError", err)
	}
	if ce.Execution != exec || ce.Seq != seq {
		t.Errorf("error names %s seq %d, want %s seq %d", ce.Execution, ce.Seq, exec, seq)
	}
	if !strings.Contains(err.Error(), exec.String()) {
		t.Errorf("message %q does not name the execution", err)
	}
	if uint64(len(evs)) != seq-1 {
		t.Errorf("%d events before the error, want %d", len(evs), seq-1)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
	}
}

func TestCorruptEvent(t *testing.T) {
	for _, c := range []struct {
		name    string
		inFork  bool // corrupt the fork's own event rather than the root's
		seq     uint64
		readFor string // "root" or "fork"
	}{
		{"root event read from the root", false, 4, "root"},
		{"root event read through the fork", false, 4, "fork"},
		{"fork's own event", true, 8, "fork"},
		{"fork.created", true, 7, "fork"},
		{"root's first event", false, 1, "root"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, root, fork := corruptionSetup(t)
			owner := root
			if c.inFork {
				owner = fork
			}
			key := pebblestore.EventKey(owner, c.seq)
			good := getRaw(t, s, key)
			for i := range good {
				bad := slices.Clone(good)
				bad[i] ^= 0x5a
				setRaw(t, s, key, bad)
				wantCorruption(t, s, reader(c.readFor, root, fork), owner, c.seq)
			}
			setRaw(t, s, key, good[:len(good)/2])
			wantCorruption(t, s, reader(c.readFor, root, fork), owner, c.seq)
			setRaw(t, s, key, append(slices.Clone(good), 0))
			wantCorruption(t, s, reader(c.readFor, root, fork), owner, c.seq)
		})
	}
}

// An event deleted from the middle of a range is an error naming the
// missing seq, in the root's part and in the fork's own part.
func TestMissingEvent(t *testing.T) {
	for _, c := range []struct {
		name   string
		inFork bool
		seq    uint64
	}{
		{"middle of the root", false, 5},
		{"last of the root's part of the fork", false, 6},
		{"middle of the fork's own part", true, 8},
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
			wantCorruption(t, s, fork, owner, c.seq)
			if !c.inFork {
				wantCorruption(t, s, root, root, c.seq)
			}
		})
	}
}

func TestCorruptHeader(t *testing.T) {
	s, root, fork := corruptionSetup(t)
	key := pebblestore.HeaderKey(fork)
	v := getRaw(t, s, key)
	v[len(v)-1] ^= 1
	setRaw(t, s, key, v)
	// A new store over the same database: no header cached.
	fresh := reopenMem(t, s)
	_, err := fresh.Info(t.Context(), fork)
	var ce *eventlog.CorruptionError
	if !errors.As(err, &ce) || ce.Execution != fork || ce.What != "header" || !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("Info with a corrupt header = %v", err)
	}
	if _, err := fresh.Info(t.Context(), root); err != nil {
		t.Errorf("the root is unreadable because of its fork's header: %v", err)
	}
}

// A header that names itself (or a cycle) as its parent is corruption, not
// an endless recursion.
func TestHeaderCycle(t *testing.T) {
	s, _, fork := corruptionSetup(t)
	hdr, err := pebblestore.EncodeHeader("coder", fork, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	setRaw(t, s, pebblestore.HeaderKey(fork), hdr)
	fresh := reopenMem(t, s)
	_, err = fresh.Head(t.Context(), fork)
	if !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("Head of a self-parented execution = %v, want ErrCorrupt", err)
	}

	// Two headers naming each other.
	s, root, fork := corruptionSetup(t)
	hdr, err = pebblestore.EncodeHeader("coder", fork, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	setRaw(t, s, pebblestore.HeaderKey(root), hdr)
	fresh = reopenMem(t, s)
	for _, id := range []eventlog.ID{root, fork} {
		if _, err := collect(t, fresh.Events(t.Context(), id, 1)); !errors.Is(err, eventlog.ErrCorrupt) {
			t.Errorf("Events of %s in a header cycle = %v, want ErrCorrupt", id, err)
		}
	}
}

func TestCorruptIndex(t *testing.T) {
	s := openMem(t)
	id := create(t, s, "coder")
	appendAll(t, s, id, boundEv("w", "", false), started("s", "tool"), succeeded("s"))
	key := pebblestore.IndexKey(id, "w", 3)
	v := getRaw(t, s, key)
	v[6] ^= 0x80
	setRaw(t, s, key, v)
	_, err := s.ResourceStates(t.Context(), id, 3)
	var ce *eventlog.CorruptionError
	if !errors.As(err, &ce) || ce.Execution != id || ce.Seq != 3 || !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("ResourceStates over a corrupt entry = %v", err)
	}
	_, err = collect(t, s.ResourceHistory(t.Context(), id, "w", 0))
	if !errors.As(err, &ce) || ce.Seq != 3 {
		t.Errorf("ResourceHistory over a corrupt entry = %v", err)
	}
	// Entries before it still read.
	if st, err := s.ResourceStates(t.Context(), id, 2); err != nil || len(st) != 1 {
		t.Errorf("ResourceStates(2) = %v, %v", st, err)
	}
}

func reader(which string, root, fork eventlog.ID) eventlog.ID {
	if which == "fork" {
		return fork
	}
	return root
}

// reopenMem makes s forget what it cached, as a reopen would.
func reopenMem(t *testing.T, s *pebblestore.Store) *pebblestore.Store {
	t.Helper()
	pebblestore.ForgetCache(s)
	return s
}
