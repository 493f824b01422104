package pebblestore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/workload"
)

func llmCall(step string, req []byte) []eventlog.Event {
	return []eventlog.Event{
		{Time: t0, Data: &eventlog.StepStarted{StepID: step, StepKind: eventlog.StepLLM, Target: "chat", Args: req,
			Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		{Time: t0, Data: &eventlog.StepSucceeded{StepID: step, Result: json.RawMessage(`{"choices":[]}`)}},
	}
}

// TestChunkedRoundTrip: long records are stored as manifests of shared
// chunks and read back whole; a growing conversation stores its text about
// once, not once per call.
func TestChunkedRoundTrip(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	id := create(t, s, "a")
	head := uint64(1)
	var want []eventlog.Event
	const turns = 60
	reqs, unique := workload.Conversation(turns, 1)
	for i, req := range reqs {
		evs := llmCall(fmt.Sprintf("llm-%d", i), req)
		var err error
		if head, err = s.Append(ctx, id, head, evs...); err != nil {
			t.Fatal(err)
		}
		want = append(want, evs...)
	}
	got := events(t, s, id, 2)
	if len(got) != len(want) {
		t.Fatalf("read %d events, appended %d", len(got), len(want))
	}
	for i := range want {
		a, _ := eventlog.AppendRecord(nil, eventlog.ID{}, eventlog.Event{Time: want[i].Time, Data: want[i].Data})
		b, _ := eventlog.AppendRecord(nil, eventlog.ID{}, eventlog.Event{Time: got[i].Time, Data: got[i].Data})
		if string(a) != string(b) {
			t.Fatalf("event %d reads back different", i+2)
		}
	}
	// The stored values of long records are manifests.
	v, closer, err := pebblestore.DB(s).Get(pebblestore.EventKey(id, head-1))
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != 0xC5 || len(v) > 1000 {
		t.Errorf("the newest request is stored as %d bytes starting %#x, want a short manifest", len(v), v[0])
	}
	closer.Close()
	_, chunkBytes, err := s.ChunkUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var own int64
	for u, err := range s.Usage(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		own += u.Bytes
	}
	stored := own + chunkBytes
	if ratio := float64(stored) / float64(unique); ratio > 3 {
		t.Errorf("%d calls of a growing conversation store %d bytes, %.1f× the %d unique; want ≤ 3×", turns, stored, ratio, unique)
	}
	t.Logf("%d calls, %d unique bytes of conversation: stored %d (%.2f×); unchunked the requests alone would be %d",
		turns, unique, stored, float64(stored)/float64(unique), sumLen(reqs))
}

func sumLen(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}

// TestChunkMissingIsCorruption: a lost chunk is reported with the
// execution and the seq, not read as another value.
func TestChunkMissingIsCorruption(t *testing.T) {
	s := openMem(t)
	id := create(t, s, "a")
	if _, err := s.Append(t.Context(), id, 1, llmCall("x", conversationAfter(10))...); err != nil {
		t.Fatal(err)
	}
	db := pebblestore.DB(s)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'c'}, UpperBound: []byte{'d'}})
	if err != nil {
		t.Fatal(err)
	}
	it.Last()
	k := append([]byte(nil), it.Key()...)
	it.Close()
	if err := db.Delete(k, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	pebblestore.ForgetCache(s)
	var ce *eventlog.CorruptionError
	for _, err := range s.Events(t.Context(), id, 1) {
		if err != nil {
			if !errors.As(err, &ce) || ce.Execution != id || ce.Seq != 2 {
				t.Errorf("reading past a lost chunk: %v; want a CorruptionError at seq 2", err)
			}
			return
		}
	}
	t.Error("reading past a lost chunk gave no error")
}

// TestSweepAfterDelete: Sweep removes the chunks only a deleted
// execution's records used and keeps those another execution shares.
func TestSweepAfterDelete(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	a, b := create(t, s, "a"), create(t, s, "b")
	if _, err := s.Append(ctx, a, 1, llmCall("x", conversationAfter(20))...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, b, 1, llmCall("x", conversationAfter(12))...); err != nil {
		t.Fatal(err)
	}
	before, _, _ := s.ChunkUsage(ctx)
	if st, err := s.Sweep(ctx); err != nil || st.Removed != 0 {
		t.Fatalf("Sweep with nothing deleted = %+v, %v", st, err)
	}
	if err := s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, _, _ := s.ChunkUsage(ctx)
	if st.Removed == 0 || after != before-st.Removed || st.Kept != after {
		t.Errorf("Sweep = %+v; chunks %d → %d", st, before, after)
	}
	if got := events(t, s, b, 1); len(got) != 3 {
		t.Errorf("the surviving execution reads %d events after the sweep, want 3", len(got))
	}
}

// TestChunkPolynomial: the Rabin polynomial the store cuts with is
// irreducible, as the chunker requires.
func TestChunkPolynomial(t *testing.T) {
	if !pebblestore.ChunkPol.Irreducible() {
		t.Fatal("chunkPol is not irreducible")
	}
}

// conversationAfter is the request of a conversation's call n.
func conversationAfter(n int) []byte {
	reqs, _ := workload.Conversation(n+1, 1)
	return reqs[n]
}
