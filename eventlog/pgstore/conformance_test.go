package pgstore_test

import (
	"github.com/forkline/forkline/eventlog/pgstore"
	"testing"

	"github.com/forkline/forkline/eventlog/storetest"
)

func TestConformance(t *testing.T) {
	storetest.TestStore(t, func(t *testing.T) storetest.Store { return openStore(t, pgstore.WithoutSync()) })
}
