package pebblestore_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

func cancelAt(reason string, i int) (eventlog.Payload, eventlog.Event) {
	p := &eventlog.CancelRequested{Reason: reason, By: "test"}
	return p, eventlog.Event{Time: at(i), Data: p}
}

func request(t *testing.T, s *pebblestore.Store, id eventlog.ID, reason string, i int) uint64 {
	t.Helper()
	p, ev := cancelAt(reason, i)
	n, err := s.Request(t.Context(), id, p, ev.Time)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	return n
}

func pendingNs(t *testing.T, s *pebblestore.Store, id eventlog.ID) []uint64 {
	t.Helper()
	rs, err := s.Requests(t.Context(), id)
	if err != nil {
		t.Fatalf("Requests: %v", err)
	}
	var ns []uint64
	for _, r := range rs {
		ns = append(ns, r.N)
	}
	return ns
}

func take(t *testing.T, s *pebblestore.Store, id eventlog.ID, ns ...uint64) {
	t.Helper()
	head, err := s.Head(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]eventlog.Event, len(ns))
	for i := range ns {
		evs[i] = eventlog.Event{Time: at(50), Data: &eventlog.MarkerRecorded{Name: "taken"}}
	}
	if _, err := s.Take(t.Context(), id, head, ns, evs...); err != nil {
		t.Fatalf("Take(%v): %v", ns, err)
	}
}

// Request numbers survive a reopen of an on-disk store, whichever
// requests Take removed, and whether or not the inbox was read before the
// next append: the state record keeps the newest number.
func TestInboxNumbersAcrossReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	s := openDir(t, dir)
	reopen := func() {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openDir(t, dir)
	}
	id := create(t, s, "coder")
	want := func(n, next uint64) {
		t.Helper()
		if n != next {
			t.Fatalf("request got number %d, want %d", n, next)
		}
	}
	for i := range 3 {
		want(request(t, s, id, "r", i), uint64(i+1))
	}
	take(t, s, id, 3, 1) // the newest among them
	for _, n := range []uint64{1, 3} {
		if _, closer, err := pebblestore.DB(s).Get(pebblestore.RequestKey(id, n)); !errors.Is(err, pebble.ErrNotFound) {
			if err == nil {
				closer.Close()
			}
			t.Fatalf("request %d still stored after Take: %v", n, err)
		}
	}
	reopen()
	if got := pendingNs(t, s, id); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("pending after reopen: %v, want [2]", got)
	}
	want(request(t, s, id, "r", 4), 4)
	take(t, s, id, 2, 4) // all of them
	reopen()
	if got := pendingNs(t, s, id); len(got) != 0 {
		t.Fatalf("pending after reopen: %v, want none", got)
	}
	want(request(t, s, id, "r", 5), 5)
	take(t, s, id, 5)
	reopen()
	// An append made before the inbox is read keeps the newest number.
	appendAll(t, s, id, dispatch(1))
	reopen()
	want(request(t, s, id, "r", 6), 6)
	reopen()
	// No Take since: the newest key gives the number.
	want(request(t, s, id, "r", 7), 7)
	if got := pendingNs(t, s, id); !slices.Equal(got, []uint64{6, 7}) {
		t.Fatalf("pending: %v, want [6 7]", got)
	}
}

// A request is stored as its record (time and payload) under its key,
// bound to its execution and number: the bytes are eventlog.AppendRequest's.
func TestRequestStoredAsRecord(t *testing.T) {
	s := openMem(t)
	id := create(t, s, "coder")
	p, ev := cancelAt("stop", 3)
	n, err := s.Request(t.Context(), id, p, ev.Time)
	if err != nil {
		t.Fatal(err)
	}
	want, err := eventlog.AppendRequest(nil, id, n, ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := getRaw(t, s, pebblestore.RequestKey(id, n)); !slices.Equal(got, want) {
		t.Fatalf("stored request %x, want %x", got, want)
	}
}

// Once an execution's inbox was read, Requests answers from memory while
// none is pending: a key written behind the store's back is not seen
// until the cache is dropped. This is what lets an owner poll Requests.
func TestRequestsFromMemory(t *testing.T) {
	s := openMem(t)
	id := create(t, s, "coder")
	if got := pendingNs(t, s, id); len(got) != 0 {
		t.Fatalf("pending: %v", got)
	}
	_, ev := cancelAt("behind", 1)
	rec, err := eventlog.AppendRequest(nil, id, 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	setRaw(t, s, pebblestore.RequestKey(id, 1), rec)
	if got := pendingNs(t, s, id); len(got) != 0 {
		t.Fatalf("Requests read the store: %v", got)
	}
	pebblestore.ForgetCache(s)
	if got := pendingNs(t, s, id); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("pending after the cache was dropped: %v, want [1]", got)
	}
	if n := request(t, s, id, "next", 2); n != 2 {
		t.Fatalf("next request got number %d, want 2", n)
	}
}

// Take refuses a number named twice and an empty list of events; either
// way nothing is written.
func TestTakeRejects(t *testing.T) {
	s := openMem(t)
	id := create(t, s, "coder")
	request(t, s, id, "a", 1)
	request(t, s, id, "b", 2)
	before := events(t, s, id, 1)
	marker := eventlog.Event{Data: &eventlog.MarkerRecorded{Name: "m"}}
	for _, c := range []struct {
		name string
		ns   []uint64
		evs  []eventlog.Event
	}{
		{"a number twice", []uint64{1, 2, 1}, []eventlog.Event{marker, marker, marker}},
		{"no events", []uint64{1}, nil},
	} {
		if _, err := s.Take(t.Context(), id, 1, c.ns, c.evs...); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Take with %s = %v, want ErrInvalid", c.name, err)
		}
	}
	if d := diff(before, events(t, s, id, 1)); d != "" {
		t.Errorf("lineage changed:\n%s", d)
	}
	if got := pendingNs(t, s, id); !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("pending: %v, want [1 2]", got)
	}
}

// A damaged request is a *CorruptionError naming the execution and the
// request, never a panic or a request read as another.
func TestCorruptRequest(t *testing.T) {
	s := openMem(t)
	id := create(t, s, "coder")
	other := create(t, s, "coder")
	request(t, s, id, "a", 1)
	request(t, s, id, "b", 2)
	request(t, s, other, "c", 3)
	key := pebblestore.RequestKey(id, 2)
	good := getRaw(t, s, key)
	wantCorrupt := func(what string) {
		t.Helper()
		_, err := s.Requests(t.Context(), id)
		var ce *eventlog.CorruptionError
		if !errors.Is(err, eventlog.ErrCorrupt) || !errors.As(err, &ce) {
			t.Fatalf("Requests over a damaged request = %v, want a *CorruptionError", err)
		}
		if ce.Execution != id || ce.What != what || !strings.Contains(err.Error(), id.String()) {
			t.Fatalf("error %q names %s %q, want %s %q", err, ce.Execution, ce.What, id, what)
		}
		if got := pendingNs(t, s, other); !slices.Equal(got, []uint64{1}) {
			t.Fatalf("another execution's inbox: %v, want [1]", got)
		}
	}
	for i := range good {
		for _, flip := range []byte{0x01, 0x80} {
			bad := slices.Clone(good)
			bad[i] ^= flip
			setRaw(t, s, key, bad)
			wantCorrupt("request 2")
		}
	}
	setRaw(t, s, key, good[:len(good)-1])
	wantCorrupt("request 2")
	// A sound record of a kind that is not a request.
	rec, err := eventlog.AppendRequest(nil, id, 2, dispatch(1))
	if err != nil {
		t.Fatal(err)
	}
	setRaw(t, s, key, rec)
	wantCorrupt("request 2")
	// A sound request moved over request 2: request 1 of the same
	// execution, and request 1 of another (the record binds both).
	for _, moved := range [][]byte{getRaw(t, s, pebblestore.RequestKey(id, 1)), getRaw(t, s, pebblestore.RequestKey(other, 1))} {
		setRaw(t, s, key, moved)
		wantCorrupt("request 2")
	}
	// A request lost behind the store's back.
	if err := pebblestore.DB(s).Delete(key, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	wantCorrupt("request 2")
	// A key that is no request key, read when the inbox is loaded.
	setRaw(t, s, pebblestore.RequestKey(id, 2)[:21], good)
	pebblestore.ForgetCache(s)
	wantCorrupt("request key")
}

// BenchmarkRequestsNonePending is the owner's poll of an empty inbox: it
// answers from memory.
func BenchmarkRequestsNonePending(b *testing.B) {
	s := openMem(b)
	id := create(b, s, "coder")
	ctx := b.Context()
	if _, err := s.Requests(ctx, id); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if rs, err := s.Requests(ctx, id); err != nil || len(rs) != 0 {
			b.Fatal(rs, err)
		}
	}
}
