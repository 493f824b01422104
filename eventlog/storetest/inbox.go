package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestInbox checks the eventlog.Inbox contract (DESIGN §8½) of the stores
// open makes (fresh and empty each call): requests round trip and are
// numbered 1, 2, 3… per execution, never twice; Take appends and removes
// in one write, under the same checks as Append (head, epoch) and refuses a
// number that is not pending; bad requests store nothing; concurrent
// requests all land; a request never conflicts with the owner's appends.
func TestInbox(t *testing.T, open func(t *testing.T) Store) {
	t.Run("RoundTrip", func(t *testing.T) { testInboxRoundTrip(t, open(t)) })
	t.Run("NumbersNeverReused", func(t *testing.T) { testInboxNumbers(t, open(t)) })
	t.Run("StaleHead", func(t *testing.T) { testTakeStaleHead(t, open(t)) })
	t.Run("NotPending", func(t *testing.T) { testTakeNotPending(t, open(t)) })
	t.Run("Fencing", func(t *testing.T) { testTakeFencing(t, open(t)) })
	t.Run("BadRequests", func(t *testing.T) { testBadRequests(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrentRequests(t, open(t)) })
	t.Run("BesideTheOwner", func(t *testing.T) { testRequestsBesideOwner(t, open(t)) })
	t.Run("EndedAndForked", func(t *testing.T) { testInboxEndedAndForked(t, open(t)) })
	t.Run("Message", func(t *testing.T) { testMessageRequest(t, open(t)) })
	t.Run("MessageIDs", func(t *testing.T) { testMessageIDs(t, open(t)) })
	t.Run("MessageIDRace", func(t *testing.T) { testMessageIDRace(t, open(t)) })
}

func sendMessage(t *testing.T, s Store, id eventlog.ID, m *eventlog.MessageReceived) uint64 {
	t.Helper()
	n, err := s.SendMessage(t.Context(), id, m, inboxT0)
	if err != nil {
		t.Fatalf("SendMessage(%s, %q): %v", id, m.MessageID, err)
	}
	return n
}

// testMessageIDs: SendMessage (eventlog.MessageInbox) stores a message
// once per MessageID: again with the same topic and value (whatever the
// sender) writes nothing and returns 0, with another topic or value is
// ErrConflict, pending or taken; bad input records no ID; MessageIDs are
// per execution, and a fork's are its own.
func testMessageIDs(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	msg := func(mid, topic, value, from string) *eventlog.MessageReceived {
		return &eventlog.MessageReceived{MessageID: mid, Topic: topic, Value: []byte(value), From: from}
	}
	m1 := msg("m1", "user", `"hi"`, "alice")
	if n := sendMessage(t, s, id, m1); n != 1 {
		t.Fatalf("first message got number %d, want 1", n)
	}
	conflicts := func(when string) {
		t.Helper()
		for _, m := range []*eventlog.MessageReceived{msg("m1", "user", `"bye"`, "alice"), msg("m1", "other", `"hi"`, "alice")} {
			if n, err := s.SendMessage(ctx, id, m, inboxT0); !errors.Is(err, eventlog.ErrConflict) || n != 0 {
				t.Fatalf("%s: m1 again with topic %q value %s = %d, %v; want ErrConflict", when, m.Topic, m.Value, n, err)
			}
		}
		if n, err := s.SendMessage(ctx, id, msg("m1", "user", `"hi"`, "bob"), inboxT0); err != nil || n != 0 {
			t.Fatalf("%s: m1 again with its topic and value = %d, %v; want 0, nil", when, n, err)
		}
	}
	conflicts("pending")
	rs := wantPending(t, s, id, 1)
	if got := rs[0].Data.(*eventlog.MessageReceived); got.From != "alice" || string(got.Value) != `"hi"` {
		t.Fatalf("pending message %+v, want the first one sent", got)
	}
	if _, err := s.Take(ctx, id, 1, []uint64{1}, asEvent(rs[0], 0)); err != nil {
		t.Fatalf("Take: %v", err)
	}
	conflicts("taken")
	wantPending(t, s, id)
	if h, err := s.Head(ctx, id); err != nil || h != 2 {
		t.Fatalf("head %d, %v; want 2 (one message.received)", h, err)
	}

	// Bad input records nothing: the ID is free afterwards.
	if _, err := s.SendMessage(ctx, id, msg("m2", "", `"x"`, ""), inboxT0); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("a message with an empty topic: %v, want ErrInvalid", err)
	}
	if _, err := s.SendMessage(ctx, id, nil, inboxT0); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("no message: %v, want ErrInvalid", err)
	}
	if _, err := s.SendMessage(ctx, eventlog.NewID(), msg("m2", "user", `"x"`, ""), inboxT0); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("a message to an unknown execution: %v, want ErrNotFound", err)
	}
	if n := sendMessage(t, s, id, msg("m2", "user", `"other"`, "")); n != 2 {
		t.Fatalf("m2 after its bad sends got number %d, want 2", n)
	}

	// Per execution, and a fork's own.
	other := newExecution(t, s)
	if n := sendMessage(t, s, other, msg("m1", "user", `"else"`, "")); n != 1 {
		t.Fatalf("m1 to another execution got %d, want 1", n)
	}
	fork, err := s.Fork(ctx, id, 2, nil, inboxT0)
	if err != nil {
		t.Fatal(err)
	}
	if n := sendMessage(t, s, fork, msg("m2", "user", `"fork"`, "")); n != 1 {
		t.Fatalf("m2 to a fork got %d, want 1: a fork's inbox is its own", n)
	}
	wantPending(t, s, id, 2)
	wantPending(t, s, other, 1)
	wantPending(t, s, fork, 1)
}

// testMessageIDRace: concurrent SendMessage calls of one MessageID, half
// with one value and half with another, store exactly one request; the
// others return 0 and nil when they carry its value, ErrConflict when not.
func testMessageIDRace(t *testing.T, s Store) {
	id := newExecution(t, s)
	const n = 16
	got := make([]uint64, n)
	errs := make([]error, n)
	value := func(i int) []byte { return []byte(fmt.Sprintf(`"v%d"`, i%2)) }
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = s.SendMessage(t.Context(), id, &eventlog.MessageReceived{MessageID: "race", Topic: "t", Value: value(i)}, inboxT0)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] == nil && got[i] != 0 {
			if winner >= 0 {
				t.Fatalf("sends %d and %d both stored (numbers %d, %d)", winner, i, got[winner], got[i])
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no send stored: %v", errs)
	}
	rs := wantPending(t, s, id, got[winner])
	if v := rs[0].Data.(*eventlog.MessageReceived).Value; string(v) != string(value(winner)) {
		t.Fatalf("pending value %s, the stored send's %s", v, value(winner))
	}
	for i := range n {
		switch {
		case i == winner:
		case i%2 == winner%2:
			if errs[i] != nil || got[i] != 0 {
				t.Fatalf("send %d, the stored value again: %d, %v; want 0, nil", i, got[i], errs[i])
			}
		default:
			if !errors.Is(errs[i], eventlog.ErrConflict) || got[i] != 0 {
				t.Fatalf("send %d, another value: %d, %v; want ErrConflict", i, got[i], errs[i])
			}
		}
	}
}

// testMessageRequest: a message (DESIGN §18) is a request: it round trips
// with its value and sender, and Take moves it into the lineage.
func testMessageRequest(t *testing.T, s Store) {
	id := newExecution(t, s)
	lineage := readEvents(t, s, id)
	msg := &eventlog.MessageReceived{MessageID: "m1", Topic: "user", Value: []byte(`{"text":"hi"}`), From: "alice"}
	if n := request(t, s, id, msg, inboxT0); n != 1 {
		t.Fatalf("message request number %d, want 1", n)
	}
	wantLineage(t, s, id, lineage)
	rs := wantPending(t, s, id, 1)
	if !sameEvents([]eventlog.Event{asEvent(rs[0], 1)}, []eventlog.Event{{Seq: 1, Time: inboxT0, Data: msg}}) {
		t.Fatalf("message read back as %+v, want %+v", rs[0].Data, msg)
	}
	head := uint64(len(lineage))
	if _, err := s.Take(t.Context(), id, head, []uint64{1}, asEvent(rs[0], 0)); err != nil {
		t.Fatalf("Take of the message: %v", err)
	}
	wantLineage(t, s, id, append(lineage, asEvent(rs[0], head+1)))
	wantPending(t, s, id)
}

var inboxT0 = time.Date(2026, 4, 5, 6, 7, 8, 9, time.UTC)

func cancelReq(reason string) *eventlog.CancelRequested {
	return &eventlog.CancelRequested{Reason: reason, By: "test"}
}

func request(t *testing.T, s Store, id eventlog.ID, p eventlog.Payload, at time.Time) uint64 {
	t.Helper()
	n, err := s.Request(t.Context(), id, p, at)
	if err != nil {
		t.Fatalf("Request(%s, %s): %v", id, p.Kind(), err)
	}
	return n
}

// pending returns id's requests, failing the test on an error.
func pending(t *testing.T, s Store, id eventlog.ID) []eventlog.Request {
	t.Helper()
	rs, err := s.Requests(t.Context(), id)
	if err != nil {
		t.Fatalf("Requests(%s): %v", id, err)
	}
	for i, r := range rs {
		if r.Execution != id || (i > 0 && r.N <= rs[i-1].N) {
			t.Fatalf("Requests(%s): request %d is %+v: wrong execution or not oldest first", id, i, r)
		}
	}
	return rs
}

// numbers returns the numbers of rs.
func numbers(rs []eventlog.Request) []uint64 {
	out := make([]uint64, len(rs))
	for i, r := range rs {
		out[i] = r.N
	}
	return out
}

// wantPending checks that id's pending requests are numbered ns.
func wantPending(t *testing.T, s Store, id eventlog.ID, ns ...uint64) []eventlog.Request {
	t.Helper()
	rs := pending(t, s, id)
	if got := numbers(rs); !slices.Equal(got, ns) && (len(got) != 0 || len(ns) != 0) {
		t.Fatalf("pending requests of %s: %v, want %v", id, got, ns)
	}
	return rs
}

// wantLineage checks that id's lineage is exactly want.
func wantLineage(t *testing.T, s Store, id eventlog.ID, want []eventlog.Event) {
	t.Helper()
	got := readEvents(t, s, id)
	if !sameEvents(got, want) {
		t.Fatalf("lineage of %s: %v, want %v", id, kinds(got), kinds(want))
	}
	if head, err := s.Head(t.Context(), id); err != nil || head != uint64(len(want)) {
		t.Fatalf("Head(%s) = %d, %v; want %d", id, head, err, len(want))
	}
}

// asEvent is the event an owner appends for r: its payload, at seq.
func asEvent(r eventlog.Request, seq uint64) eventlog.Event {
	return eventlog.Event{Seq: seq, Time: r.Time, Data: r.Data}
}

func testInboxRoundTrip(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	lineage := readEvents(t, s, id)
	wantPending(t, s, id)
	granted := &eventlog.ApprovalGranted{StepID: "s1", By: "ops", Note: "fine"}
	rejected := &eventlog.ApprovalRejected{StepID: "s2", By: "ops"}
	reqs := []eventlog.Payload{cancelReq("stop"), granted, rejected}
	for i, p := range reqs {
		if n := request(t, s, id, p, inboxT0.Add(time.Duration(i)*time.Second)); n != uint64(i+1) {
			t.Fatalf("request %d got number %d, want %d", i, n, i+1)
		}
	}
	// Requests write no event.
	wantLineage(t, s, id, lineage)
	rs := wantPending(t, s, id, 1, 2, 3)
	for i, r := range rs {
		if !r.Time.Equal(inboxT0.Add(time.Duration(i)*time.Second)) ||
			!sameEvents([]eventlog.Event{asEvent(r, 1)}, []eventlog.Event{{Seq: 1, Time: r.Time, Data: reqs[i]}}) {
			t.Fatalf("request %d read back as %+v (%+v), want %+v", i+1, r, r.Data, reqs[i])
		}
	}
	// Take the second and the first; the third stays.
	head, err := s.Take(ctx, id, 1, []uint64{2, 1}, asEvent(rs[1], 0), asEvent(rs[0], 0))
	if err != nil || head != 3 {
		t.Fatalf("Take = %d, %v; want head 3", head, err)
	}
	lineage = append(lineage, asEvent(rs[1], 2), asEvent(rs[0], 3))
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 3)
	// A Take of no request is an Append.
	head, err = s.Take(ctx, id, 3, nil, dispatchEvent(1))
	if err != nil || head != 4 {
		t.Fatalf("Take of no request = %d, %v; want head 4", head, err)
	}
	lineage = append(lineage, eventlog.Event{Seq: 4, Data: &eventlog.DispatchStarted{Dispatch: 1}})
	got := readEvents(t, s, id)
	if len(got) != 4 || got[3].Kind() != eventlog.KindDispatchStarted {
		t.Fatalf("lineage after a Take of no request: %v", kinds(got))
	}
	lineage[3].Time = got[3].Time // the store set it
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 3)
	if _, err := s.Take(ctx, id, 4, []uint64{3}, eventlog.Event{Seq: 5, Time: rs[2].Time, Data: rs[2].Data}); err != nil {
		t.Fatalf("Take of request 3 with its seq given: %v", err)
	}
	wantLineage(t, s, id, append(lineage, asEvent(rs[2], 5)))
	wantPending(t, s, id)
}

func testInboxNumbers(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	head := uint64(1)
	take := func(ns ...uint64) {
		t.Helper()
		var evs []eventlog.Event
		for range ns {
			evs = append(evs, eventlog.Event{Time: inboxT0, Data: &eventlog.MarkerRecorded{Name: "taken"}})
		}
		h, err := s.Take(ctx, id, head, ns, evs...)
		if err != nil {
			t.Fatalf("Take(%v): %v", ns, err)
		}
		head = h
	}
	next := uint64(1)
	want := func(n uint64) {
		t.Helper()
		if n != next {
			t.Fatalf("request got number %d, want %d", n, next)
		}
		next++
	}
	want(request(t, s, id, cancelReq("1"), inboxT0))
	take(1) // the only, newest request
	want(request(t, s, id, cancelReq("2"), inboxT0))
	want(request(t, s, id, cancelReq("3"), inboxT0))
	take(3) // the newest, not the oldest
	wantPending(t, s, id, 2)
	want(request(t, s, id, cancelReq("4"), inboxT0))
	take(2, 4)
	wantPending(t, s, id)
	want(request(t, s, id, cancelReq("5"), inboxT0))
	wantPending(t, s, id, 5)
	// Each execution has its own numbers.
	other := newExecution(t, s)
	if n := request(t, s, other, cancelReq("x"), inboxT0); n != 1 {
		t.Fatalf("first request of another execution got number %d, want 1", n)
	}
	wantPending(t, s, id, 5)
}

func testTakeStaleHead(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	request(t, s, id, cancelReq("stop"), inboxT0)
	if _, err := s.Append(ctx, id, 1, dispatchEvent(1)); err != nil {
		t.Fatal(err)
	}
	lineage := readEvents(t, s, id)
	rs := wantPending(t, s, id, 1)
	if _, err := s.Take(ctx, id, 1, []uint64{1}, asEvent(rs[0], 0)); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("Take at a stale head = %v, want ErrConflict", err)
	}
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 1)
}

func testTakeNotPending(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	lineage := readEvents(t, s, id)
	request(t, s, id, cancelReq("a"), inboxT0)
	request(t, s, id, cancelReq("b"), inboxT0)
	rs := wantPending(t, s, id, 1, 2)
	for _, ns := range [][]uint64{{3}, {1, 3}, {0}, {2, 7, 1}} {
		if _, err := s.Take(ctx, id, 1, ns, asEvent(rs[0], 0)); !errors.Is(err, eventlog.ErrConflict) {
			t.Fatalf("Take(%v) of requests not all pending = %v, want ErrConflict", ns, err)
		}
		wantLineage(t, s, id, lineage)
		wantPending(t, s, id, 1, 2)
	}
	if _, err := s.Take(ctx, id, 1, []uint64{1}, asEvent(rs[0], 0)); err != nil {
		t.Fatalf("Take(1): %v", err)
	}
	lineage = append(lineage, asEvent(rs[0], 2))
	// Taken already.
	if _, err := s.Take(ctx, id, 2, []uint64{1}, asEvent(rs[0], 0)); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("Take of a request taken already = %v, want ErrConflict", err)
	}
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 2)
	// An invalid event takes nothing either.
	if _, err := s.Take(ctx, id, 2, []uint64{2}, eventlog.Event{Data: &eventlog.ApprovalGranted{}}); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Take with an invalid event = %v, want ErrInvalid", err)
	}
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 2)
}

func testTakeFencing(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	a, err := s.Claim(ctx, id, "A", shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	actx := eventlog.WithEpoch(ctx, a.Epoch)
	// A request needs no lease, though A holds the execution.
	request(t, s, id, cancelReq("one"), inboxT0)
	rs := wantPending(t, s, id, 1)
	if _, err := s.Take(ctx, id, 1, []uint64{1}, asEvent(rs[0], 0)); !errors.Is(err, eventlog.ErrLeaseHeld) {
		t.Fatalf("Take without a lease while A holds the execution = %v, want ErrLeaseHeld", err)
	}
	if _, err := s.Take(actx, id, 1, []uint64{1}, asEvent(rs[0], 0)); err != nil {
		t.Fatalf("Take under A's lease: %v", err)
	}
	lineage := append(readEvents(t, s, id)[:1], asEvent(rs[0], 2))
	wantLineage(t, s, id, lineage)
	request(t, s, id, cancelReq("two"), inboxT0)
	rs = wantPending(t, s, id, 2)
	waitExpired(t, s, id)
	b, err := s.Claim(ctx, id, "B", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(actx, id, 2, []uint64{2}, asEvent(rs[0], 0)); !errors.Is(err, eventlog.ErrLeaseLost) {
		t.Fatalf("Take under the taken-over epoch = %v, want ErrLeaseLost", err)
	}
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 2)
	if _, err := s.Take(eventlog.WithEpoch(ctx, b.Epoch), id, 2, []uint64{2}, asEvent(rs[0], 0)); err != nil {
		t.Fatalf("Take under B's lease: %v", err)
	}
	wantLineage(t, s, id, append(lineage, asEvent(rs[0], 3)))
	wantPending(t, s, id)
}

func testBadRequests(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	lineage := readEvents(t, s, id)
	for _, c := range []struct {
		name string
		p    eventlog.Payload
	}{
		{"no payload", nil},
		{"a nil payload", (*eventlog.CancelRequested)(nil)},
		{"a kind that is not a request", &eventlog.DispatchStarted{Dispatch: 1}},
		{"execution.cancelled", &eventlog.ExecutionCancelled{Reason: "x"}},
		{"approval.requested", &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool, Target: "t"}},
		{"an invalid approval", &eventlog.ApprovalGranted{}},
		{"a message without a topic", &eventlog.MessageReceived{MessageID: "m"}},
	} {
		if n, err := s.Request(ctx, id, c.p, inboxT0); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Request of %s = %d, %v; want ErrInvalid", c.name, n, err)
		}
	}
	unknown := eventlog.NewID()
	if n, err := s.Request(ctx, unknown, cancelReq("x"), inboxT0); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("Request to an unknown execution = %d, %v; want ErrNotFound", n, err)
	}
	if _, err := s.Requests(ctx, unknown); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("Requests of an unknown execution = %v, want ErrNotFound", err)
	}
	if _, err := s.Take(ctx, unknown, 1, []uint64{1}, dispatchEvent(1)); !errors.Is(err, eventlog.ErrNotFound) {
		t.Errorf("Take from an unknown execution = %v, want ErrNotFound", err)
	}
	wantPending(t, s, id)
	wantLineage(t, s, id, lineage)
	// Nothing refused used a number.
	if n := request(t, s, id, cancelReq("ok"), inboxT0); n != 1 {
		t.Fatalf("first accepted request got number %d, want 1", n)
	}
	if infos := listAll(t, s, eventlog.Filter{}); len(infos) != 1 {
		t.Fatalf("%d executions after refused requests, want 1", len(infos))
	}
}

func testConcurrentRequests(t *testing.T, s Store) {
	id := newExecution(t, s)
	const n = 16
	got := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = s.Request(t.Context(), id, cancelReq(fmt.Sprint(i)), inboxT0) })
	}
	wg.Wait()
	reason := map[uint64]string{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Request %d: %v", i, errs[i])
		}
		if _, dup := reason[got[i]]; dup {
			t.Fatalf("number %d given twice", got[i])
		}
		reason[got[i]] = fmt.Sprint(i)
	}
	rs := pending(t, s, id)
	if len(rs) != n {
		t.Fatalf("%d requests pending, want %d", len(rs), n)
	}
	for i, r := range rs {
		if r.N != uint64(i+1) || r.Data.(*eventlog.CancelRequested).Reason != reason[r.N] {
			t.Fatalf("pending request %d = %d %+v; Request returned %d for reason %q", i, r.N, r.Data, r.N, reason[r.N])
		}
	}
}

// testRequestsBesideOwner runs an owner that appends under its lease and
// takes what arrives, while requesters write to the inbox: no append of
// the owner ever conflicts, and every request ends up in the lineage once.
func testRequestsBesideOwner(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	l, err := s.Claim(ctx, id, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	octx := eventlog.WithEpoch(ctx, l.Epoch)
	const requesters, each, appends = 4, 25, 200
	var wg sync.WaitGroup
	for r := range requesters {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Request(ctx, id, cancelReq(fmt.Sprintf("%d-%d", r, i)), time.Time{}); err != nil {
					t.Errorf("Request: %v", err)
					return
				}
			}
		})
	}
	head := uint64(1)
	takeAll := func() error {
		rs, err := s.Requests(ctx, id)
		if err != nil || len(rs) == 0 {
			return err
		}
		var evs []eventlog.Event
		for _, r := range rs {
			evs = append(evs, asEvent(r, 0))
		}
		head, err = s.Take(octx, id, head, numbers(rs), evs...)
		return err
	}
	var ownerErr error
	for i := range appends {
		marker := eventlog.Event{Data: &eventlog.MarkerRecorded{Name: fmt.Sprint(i)}}
		if i%2 == 0 {
			head, ownerErr = s.Append(octx, id, head, marker)
		} else {
			head, ownerErr = s.AppendUnsynced(octx, id, head, marker)
		}
		if ownerErr == nil && i%10 == 0 {
			ownerErr = takeAll()
		}
		if ownerErr != nil {
			ownerErr = fmt.Errorf("owner's step %d: %w", i, ownerErr)
			break
		}
	}
	wg.Wait()
	if ownerErr != nil {
		t.Fatal(ownerErr)
	}
	if err := takeAll(); err != nil {
		t.Fatalf("last Take: %v", err)
	}
	wantPending(t, s, id)
	seen := map[string]int{}
	markers := 0
	for _, ev := range readEvents(t, s, id)[1:] {
		switch p := ev.Data.(type) {
		case *eventlog.CancelRequested:
			seen[p.Reason]++
		case *eventlog.MarkerRecorded:
			if p.Name != fmt.Sprint(markers) {
				t.Fatalf("marker %q at seq %d, want %d", p.Name, ev.Seq, markers)
			}
			markers++
		default:
			t.Fatalf("unexpected %s at seq %d", ev.Kind(), ev.Seq)
		}
	}
	if markers != appends || len(seen) != requesters*each {
		t.Fatalf("lineage holds %d markers and %d requests, want %d and %d", markers, len(seen), appends, requesters*each)
	}
	for reason, k := range seen {
		if k != 1 {
			t.Fatalf("request %q is in the lineage %d times", reason, k)
		}
	}
}

func testInboxEndedAndForked(t *testing.T, s Store) {
	ctx := t.Context()
	id := newExecution(t, s)
	request(t, s, id, cancelReq("late"), inboxT0)
	head, err := s.Append(ctx, id, 1, dispatchEvent(1), eventlog.Event{Data: &eventlog.ExecutionCompleted{}})
	if err != nil {
		t.Fatal(err)
	}
	// Requests of an ended execution stay readable.
	rs := wantPending(t, s, id, 1)
	if rs[0].Data.(*eventlog.CancelRequested).Reason != "late" {
		t.Fatalf("request read back as %+v", rs[0].Data)
	}
	// A fork inherits events, not requests: its inbox is its own.
	fork, err := s.Fork(ctx, id, head, nil, inboxT0)
	if err != nil {
		t.Fatal(err)
	}
	wantPending(t, s, fork)
	if n := request(t, s, fork, cancelReq("fork"), inboxT0); n != 1 {
		t.Fatalf("first request of a fork got number %d, want 1", n)
	}
	wantPending(t, s, id, 1)
	if _, err := s.Take(ctx, fork, head+1, []uint64{1}, dispatchEvent(2)); err != nil {
		t.Fatalf("Take from the fork: %v", err)
	}
	wantPending(t, s, fork)
	wantPending(t, s, id, 1)
}
