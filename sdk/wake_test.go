package sdk

import (
	"context"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// TestStartWakesServe: a Start that creates an execution signals the
// kernel's wake channel, so a Serve asleep until its next poll runs the new
// execution at once; a refused Start signals nothing. (Serve's own tests
// cannot tell: their poll would find the execution anyway, only later.)
func TestStartWakesServe(t *testing.T) {
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	k, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Register(k, "echo", func(_ context.Context, in string) (string, error) { return in, nil }); err != nil {
		t.Fatal(err)
	}
	woken := func() bool {
		select {
		case <-k.wake:
			return true
		default:
			return false
		}
	}
	woken() // drop any signal from New or Register
	ctx := context.Background()
	if _, err := k.Start(ctx, "nobody", "x"); err == nil {
		t.Fatal("Start of an unknown agent succeeded")
	}
	if woken() {
		t.Fatal("a refused Start woke Serve")
	}
	id, err := k.Start(ctx, "echo", "x")
	if err != nil {
		t.Fatal(err)
	}
	if !woken() {
		t.Fatal("Start created an execution without waking Serve")
	}
	var kinds []eventlog.Kind
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind())
	}
	if len(kinds) != 1 || kinds[0] != eventlog.KindExecutionCreated {
		t.Fatalf("events after Start = %v, want one execution.created", kinds)
	}
}
