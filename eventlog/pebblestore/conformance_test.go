package pebblestore_test

import (
	"github.com/forkline/forkline/eventlog/pebblestore"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/storetest"
)

// The conformance kit's checks beside TestLeaser (lease_test.go):
// storetest.TestStore would run that one again.

func TestCreateKeys(t *testing.T) {
	storetest.TestCreateKeys(t, func(t *testing.T) eventlog.Log { return openMem(t) })
}

func TestList(t *testing.T) {
	storetest.TestList(t, func(t *testing.T) eventlog.Log { return openMem(t) })
}

func TestInbox(t *testing.T) {
	storetest.TestInbox(t, func(t *testing.T) storetest.Store { return openMem(t) })
}

func TestDecider(t *testing.T) {
	storetest.TestDecider(t, func(t *testing.T) storetest.DecideStore { return openMem(t) })
}

func TestChildEnded(t *testing.T) {
	storetest.TestChildEnded(t, func(t *testing.T) storetest.Store { return openMem(t) })
}

func TestRetryKeeper(t *testing.T) {
	storetest.TestRetryKeeper(t, func(t *testing.T) storetest.Store { return openMem(t) })
}

func TestLimiter(t *testing.T) {
	storetest.TestLimiter(t, func(t *testing.T) eventlog.Log { return openMem(t) })
}

func TestScheduler(t *testing.T) {
	storetest.TestScheduler(t, func(t *testing.T) eventlog.Log { return openMem(t) })
}

func TestQuarantiner(t *testing.T) {
	storetest.TestQuarantiner(t, func(t *testing.T) storetest.Store { return openMem(t) })
}

func TestDelete(t *testing.T) {
	storetest.TestDelete(t, func(t *testing.T) storetest.DeleteStore { return openMem(t) })
}

func TestLineage(t *testing.T) {
	storetest.TestLineage(t, openMem(t))
}

func TestConcurrency(t *testing.T) {
	storetest.TestConcurrency(t, openMem(t))
}

func TestClose(t *testing.T) {
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	storetest.TestClose(t, s)
}

func TestTokens(t *testing.T) {
	storetest.TestTokens(t, func(t *testing.T) (eventlog.IndexedLog, func() eventlog.IndexedLog) {
		dir := t.TempDir()
		s := openDir(t, dir, pebblestore.WithoutSync())
		return s, func() eventlog.IndexedLog {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s = openDir(t, dir, pebblestore.WithoutSync())
			return s
		}
	})
}

func TestVersions(t *testing.T) {
	storetest.TestVersions(t, func(t *testing.T) eventlog.IndexedLog { return openMem(t) })
}

func TestQueues(t *testing.T) {
	storetest.TestQueues(t, func(t *testing.T) eventlog.Log { return openMem(t) })
}
