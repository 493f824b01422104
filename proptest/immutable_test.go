package proptest

import (
	"bytes"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"pgregory.net/rapid"
)

// DESIGN §8.7: appending and forking never change an existing event. Before
// every action of the generated world the encoded records of every
// execution's own events are snapshot; after it, each execution's own
// events must start with exactly its snapshot. (A fork's inherited prefix is
// its ancestors' own events, checked there; genWorld also reads every
// lineage through its fork at the end and compares it with what was
// written.)
func TestAppendAndForkNeverChangeEvents(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snapshot := map[eventlog.ID][][]byte{}
		genWorld(t, nil, func(t *rapid.T, w *World) {
			for _, e := range w.Execs {
				now, err := w.encodedOwn(e)
				if err != nil {
					t.Fatalf("read %v: %v", e, err)
				}
				before := snapshot[e.ID]
				if len(now) < len(before) {
					t.Fatalf("%v: lineage shrank from %d to %d events", e, len(before), len(now))
				}
				for i, rec := range before {
					if !bytes.Equal(now[i], rec) {
						t.Fatalf("%v: event %d changed\nbefore %x\nafter  %x\n%s", e, i+1, rec, now[i], dump(e.Lineage))
					}
				}
				snapshot[e.ID] = now
			}
		})
		if len(snapshot) == 0 {
			t.Fatalf("no execution was ever checked")
		}
	})
}
