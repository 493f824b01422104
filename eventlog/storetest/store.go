package storetest

import (
	"bytes"
	"iter"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// Store is what the whole kit needs of a store: the log, leases and the
// inbox, with its MessageIDs.
type Store interface {
	eventlog.Log
	eventlog.Leaser
	eventlog.MessageInbox
}

// TestStore runs every check of the kit on the stores open makes; open
// returns a fresh, empty store each call and closes it at cleanup.
func TestStore(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Leaser", func(t *testing.T) { TestLeaser(t, func(t *testing.T) LeaseStore { return open(t) }) })
	t.Run("CreateKeys", func(t *testing.T) { TestCreateKeys(t, func(t *testing.T) eventlog.Log { return open(t) }) })
	t.Run("List", func(t *testing.T) { TestList(t, func(t *testing.T) eventlog.Log { return open(t) }) })
	t.Run("Inbox", func(t *testing.T) { TestInbox(t, open) })
	t.Run("RetryKeeper", func(t *testing.T) { TestRetryKeeper(t, open) })
	t.Run("Limiter", func(t *testing.T) { TestLimiter(t, func(t *testing.T) eventlog.Log { return open(t) }) })
	t.Run("Scheduler", func(t *testing.T) { TestScheduler(t, func(t *testing.T) eventlog.Log { return open(t) }) })
	t.Run("Queues", func(t *testing.T) { TestQueues(t, func(t *testing.T) eventlog.Log { return open(t) }) })
	t.Run("ChildEnded", func(t *testing.T) { TestChildEnded(t, open) })
	t.Run("Quarantiner", func(t *testing.T) { TestQuarantiner(t, open) })
}

// collect reads seq to its end: the values, and the error, which must
// come last and at most once.
func collect[V any](t *testing.T, seq iter.Seq2[V, error]) ([]V, error) {
	t.Helper()
	var out []V
	var err error
	for v, e := range seq {
		if err != nil {
			t.Fatalf("a value after the error %v", err)
		}
		if e != nil {
			err = e
			continue
		}
		out = append(out, v)
	}
	return out, err
}

// readEvents returns id's whole lineage.
func readEvents(t *testing.T, s eventlog.Log, id eventlog.ID) []eventlog.Event {
	t.Helper()
	evs, err := collect(t, s.Events(t.Context(), id, 1))
	if err != nil {
		t.Fatalf("Events(%s): %v", id, err)
	}
	return evs
}

// listAll returns what List yields for f, failing the test on an error.
func listAll(t *testing.T, s eventlog.Log, f eventlog.Filter) []eventlog.Info {
	t.Helper()
	infos, err := collect(t, s.List(t.Context(), f))
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	return infos
}

// sameEvents reports whether a and b hold the same seqs, times and
// payloads (compared by their encoded records, both encoded as records of
// the zero ID: the comparison is of content, not place).
func sameEvents(a, b []eventlog.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ra, erra := eventlog.AppendRecord(nil, eventlog.ID{}, a[i])
		rb, errb := eventlog.AppendRecord(nil, eventlog.ID{}, b[i])
		if a[i].Seq != b[i].Seq || erra != nil || errb != nil || !bytes.Equal(ra, rb) {
			return false
		}
	}
	return true
}

// kinds lists the kinds of evs, for messages.
func kinds(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind().String()
	}
	return out
}
