package pebblestore_test

import (
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

func TestDelete(t *testing.T) {
	storetest.TestDelete(t, func(t *testing.T) storetest.DeleteStore { return openMem(t) })
}
