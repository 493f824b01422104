package pgstore_test

import (
	"flag"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/eventlog/storetest"
	"github.com/forkline/forkline/internal/pgtest"
)

func TestConformance(t *testing.T) {
	storetest.TestStore(t, func(t *testing.T) storetest.Store { return openStore(t, pgstore.WithoutSync()) })
}

func TestDecider(t *testing.T) {
	storetest.TestDecider(t, func(t *testing.T) storetest.DecideStore { return openStore(t, pgstore.WithoutSync()) })
}

func TestLineage(t *testing.T) {
	// Every case makes a few hundred queries: 25 cases, unless
	// -rapid.checks asks for another number.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("25")
		t.Cleanup(func() { _ = f.Value.Set(f.DefValue) })
	}
	storetest.TestLineage(t, openStore(t, pgstore.WithoutSync()))
}

func TestConcurrency(t *testing.T) {
	storetest.TestConcurrency(t, openStore(t, pgstore.WithoutSync()))
}

func TestClose(t *testing.T) {
	storetest.TestClose(t, openStore(t, pgstore.WithoutSync()))
}

func TestDelete(t *testing.T) {
	storetest.TestDelete(t, func(t *testing.T) storetest.DeleteStore { return openStore(t, pgstore.WithoutSync()) })
}

func TestTokens(t *testing.T) {
	storetest.TestTokens(t, func(t *testing.T) (eventlog.IndexedLog, func() eventlog.IndexedLog) {
		url, schema := pgtest.Schema(t)
		open := func() *pgstore.Store {
			s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema), pgstore.WithoutSync())
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		s := open()
		return s, func() eventlog.IndexedLog {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s = open()
			return s
		}
	})
}

func TestVersions(t *testing.T) {
	storetest.TestVersions(t, func(t *testing.T) eventlog.IndexedLog { return openStore(t, pgstore.WithoutSync()) })
}

func TestQueues(t *testing.T) {
	storetest.TestQueues(t, func(t *testing.T) eventlog.Log { return openStore(t, pgstore.WithoutSync()) })
}
