package sdk

import (
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestServeRunsSkipsRunsEndedDuringAListing: issue 31's race. A run that
// ends after a listing began is not started from that listing (it may
// show the execution runnable though its run just ended); the next listing
// starts it if it shows it. A running one is always skipped.
func TestServeRunsSkipsRunsEndedDuringAListing(t *testing.T) {
	r := newServeRuns()
	id := eventlog.NewID()
	now := time.Now()
	r.begin(id)
	mark := r.mark()
	if !r.skip(id, mark, now) {
		t.Fatal("a running execution is not skipped")
	}
	r.end(id)
	if !r.skip(id, mark, now) {
		t.Fatal("a run that ended during the listing is started again from it")
	}
	if r.skip(id, r.mark(), now) {
		t.Fatal("a later listing skips an execution whose run ended before it began")
	}
}

// TestServeRunsBackoff: DESIGN §15½.11. The wait starts at the first
// given, doubles per failure up to a minute; a change of the error is
// reported (not a repeat); the execution is skipped until its retry time;
// recovered forgets it once.
func TestServeRunsBackoff(t *testing.T) {
	r := newServeRuns()
	id := eventlog.NewID()
	now := time.Now()
	var waits []time.Duration
	var changes []bool
	for i := range 8 {
		err := errors.New("reset")
		if i == 3 {
			err = errors.New("corrupt")
		}
		b, changed := r.failed(id, err, 10*time.Second, now)
		waits = append(waits, b.wait)
		changes = append(changes, changed)
	}
	wantWaits := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second,
		time.Minute, time.Minute, time.Minute, time.Minute, time.Minute}
	wantChanges := []bool{true, false, false, true, true, false, false, false}
	for i := range waits {
		if waits[i] != wantWaits[i] || changes[i] != wantChanges[i] {
			t.Fatalf("failure %d: wait %v changed %v; want %v %v", i, waits[i], changes[i], wantWaits[i], wantChanges[i])
		}
	}
	if !r.skip(id, r.mark(), now.Add(59*time.Second)) || r.skip(id, r.mark(), now.Add(time.Minute)) {
		t.Fatal("not skipped exactly until its retry time")
	}
	if !r.recovered(id) || r.recovered(id) {
		t.Fatal("recovered does not forget the backoff exactly once")
	}
}
