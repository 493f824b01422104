package pebblestore_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/storetest"
)

// keyTamperer tampers with a store's event keys behind its back.
type keyTamperer struct{ s *pebblestore.Store }

func (p keyTamperer) Record(t testing.TB, id eventlog.ID, seq uint64) []byte {
	t.Helper()
	v, closer, err := pebblestore.DB(p.s).Get(pebblestore.EventKey(id, seq))
	if err != nil {
		t.Fatalf("get event %d of %s: %v", seq, id, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...)
}

func (p keyTamperer) SetRecord(t testing.TB, id eventlog.ID, seq uint64, rec []byte) {
	t.Helper()
	if err := pebblestore.DB(p.s).Set(pebblestore.EventKey(id, seq), rec, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func (p keyTamperer) DeleteRecord(t testing.TB, id eventlog.ID, seq uint64) {
	t.Helper()
	if err := pebblestore.DB(p.s).Delete(pebblestore.EventKey(id, seq), pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// TestTamper: keys swapped, copied from another execution, deleted or
// flipped read as corruption, and Fork refuses them (issue 30 item 3).
func TestTamper(t *testing.T) {
	storetest.TestTamper(t, func(t *testing.T) (eventlog.Log, storetest.Tamperer) {
		s := openMem(t)
		return s, keyTamperer{s}
	})
}

// A quarantine is a store record: it survives a reopen, and deleting the
// execution removes it with the rest.
func TestQuarantineSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	id, other := create(t, s, "coder"), create(t, s, "coder")
	if newly, err := s.Quarantine(t.Context(), id, "corrupt seq 3"); err != nil || !newly {
		t.Fatalf("Quarantine = %v, %v", newly, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir)
	info, err := s.Info(t.Context(), id)
	if err != nil || !info.Quarantined || info.QuarantineError != "corrupt seq 3" {
		t.Fatalf("Info after reopen = %+v, %v; want quarantined by corrupt seq 3", info, err)
	}
	if info, err := s.Info(t.Context(), other); err != nil || info.Quarantined {
		t.Fatalf("the other execution after reopen = %+v, %v", info, err)
	}
	if err := s.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if _, closer, err := pebblestore.DB(s).Get(append([]byte{'z'}, id[:]...)); err == nil {
		closer.Close()
		t.Fatal("the quarantine key outlived Delete")
	}
}
