package pebblestore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// TestLimiterSurvivesReopen: an admitted call is in the store, not only in
// the process — a reopened store refuses a call its window still holds.
func TestLimiterSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	if ok, _, err := s.TakeLimit(t.Context(), "r", 1, time.Hour); err != nil || !ok {
		t.Fatalf("first take = %v, %v; want admitted", ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir)
	ok, retryAt, err := s.TakeLimit(t.Context(), "r", 1, time.Hour)
	if err != nil || ok || time.Until(retryAt) < 59*time.Minute {
		t.Fatalf("take after reopen = %v, %v, %v; want refused until about an hour from now", ok, retryAt, err)
	}
	if ok, _, err := s.TakeLimit(t.Context(), "other", 1, time.Hour); err != nil || !ok {
		t.Fatalf("take of another key after reopen = %v, %v; want admitted", ok, err)
	}
}

// TestLimiterCorruptRecord: a limiter record that does not decode is
// corruption naming the key, and is not overwritten.
func TestLimiterCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	bad := []byte{1, 2, 3}
	if err := pebblestore.DB(s).Set(pebblestore.LimitKey("broken"), bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.TakeLimit(t.Context(), "broken", 5, time.Minute)
	var ce *eventlog.CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("take of a damaged record = %v; want a CorruptionError", err)
	}
	v, closer, err := pebblestore.DB(s).Get(pebblestore.LimitKey("broken"))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if string(v) != string(bad) {
		t.Fatalf("the damaged record was rewritten: %x", v)
	}
}
