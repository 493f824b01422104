package pebblestore_test

import (
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// TestSweptChunksWrittenAgain: after a Sweep removed the chunks of a
// deleted execution, a new append of the same content writes those chunks
// again (the store's memory of which chunks it holds is forgotten with
// them) and reads back whole; a second sweep keeps them.
func TestSweptChunksWrittenAgain(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	evs := llmCall("x", conversationAfter(20))
	a := create(t, s, "a")
	if _, err := s.Append(ctx, a, 1, evs...); err != nil {
		t.Fatal(err)
	}
	held, heldBytes, err := s.ChunkUsage(ctx)
	if err != nil || held == 0 {
		t.Fatalf("ChunkUsage after a long record = %d, %v; want chunks", held, err)
	}
	if err := s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	st, err := s.Sweep(ctx)
	if err != nil || st.Removed != held || st.Kept != 0 {
		t.Fatalf("Sweep = %+v, %v; want all %d chunks removed", st, err, held)
	}
	if n, _, _ := s.ChunkUsage(ctx); n != 0 {
		t.Fatalf("%d chunks left after the sweep, want none", n)
	}

	b := create(t, s, "b")
	if _, err := s.Append(ctx, b, 1, evs...); err != nil {
		t.Fatal(err)
	}
	if n, nb, _ := s.ChunkUsage(ctx); n != held || nb != heldBytes {
		t.Fatalf("the same content appended again holds %d chunks (%d bytes), want %d (%d bytes) written again", n, nb, held, heldBytes)
	}
	got := events(t, s, b, 2)
	if len(got) != len(evs) {
		t.Fatalf("read %d events, appended %d", len(got), len(evs))
	}
	for i := range evs {
		want, _ := eventlog.AppendRecord(nil, eventlog.ID{}, eventlog.Event{Time: evs[i].Time, Data: evs[i].Data})
		have, _ := eventlog.AppendRecord(nil, eventlog.ID{}, eventlog.Event{Time: got[i].Time, Data: got[i].Data})
		if string(want) != string(have) {
			t.Fatalf("event %d reads back different after the sweep", i+2)
		}
	}
	if st, err := s.Sweep(ctx); err != nil || st.Removed != 0 || st.Kept != held {
		t.Fatalf("second Sweep = %+v, %v; want the %d chunks kept", st, err, held)
	}
}
