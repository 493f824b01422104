package pgstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
)

// TestDeltasAcrossStores (DESIGN §21½.4): deltas one store sends reach
// another store's Deltas on the same schema, in order, whole — a delta of
// exactly eventlog.MaxCarriedDelta (two notifications) included, a
// non-UTF-8 one byte for byte — while one byte longer is not carried;
// SyncDeltas returns only after what was sent before it was offered.
func TestDeltasAcrossStores(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	open := func() *pgstore.Store {
		s, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(), open()
	ch, err := b.Deltas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := eventlog.NewID()
	full := bytes.Repeat([]byte("0123456789abcdef"), eventlog.MaxCarriedDelta/16)
	sent := []eventlog.StreamDelta{
		{ID: id, StepID: "s1", Index: 0, Data: []byte("data: a\n\n"), Origin: "k1"},
		{ID: id, StepID: "s1", Index: 1, Data: full, Origin: "k1"},
		{ID: id, StepID: "s1", Index: 2, Data: append(full, 'x'), Origin: "k1"}, // over 8 KB
		{ID: id, StepID: "s1", Index: 3, Data: []byte{0xff, 0x00, 0xfe}, Origin: "k1"},
	}
	if err := a.SendDeltas(ctx, sent[:2]); err != nil {
		t.Fatal(err)
	}
	if err := a.SendDeltas(ctx, sent[2:]); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.SyncDeltas(sctx); err != nil {
		t.Fatalf("SyncDeltas: %v", err)
	}
	var got []eventlog.StreamDelta
	for done := false; !done; {
		select {
		case d := <-ch:
			got = append(got, d)
		default:
			done = true
		}
	}
	want := []eventlog.StreamDelta{sent[0], sent[1], sent[3]}
	if len(got) != len(want) {
		t.Fatalf("got %d deltas after SyncDeltas, want %d (indexes 0, 1, 3)", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.StepID != w.StepID || g.Index != w.Index || g.Origin != w.Origin || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("delta %d: got %s %s #%d from %s (%d bytes), want %s %s #%d from %s (%d bytes)",
				i, g.ID, g.StepID, g.Index, g.Origin, len(g.Data), w.ID, w.StepID, w.Index, w.Origin, len(w.Data))
		}
	}
	_ = a.Close()
	if err := a.SendDeltas(ctx, sent[:1]); err == nil {
		t.Fatal("SendDeltas after Close: no error")
	}
}
