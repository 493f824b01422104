package pebblestore_test

import (
	"testing"

	"github.com/forkline/forkline/eventlog/storetest"
)

func TestLeaser(t *testing.T) {
	storetest.TestLeaser(t, func(t *testing.T) storetest.LeaseStore { return openMem(t) })
}
