package sdk

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestOutageBackoff: Serve's wait starts at the poll interval and doubles
// up to 5 s (or the poll interval, when that is longer); GiveUpAfter
// counts from the first failure.
func TestOutageBackoff(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	down := errors.New("down")
	waits := func(opts serveOptions, n int) []time.Duration {
		var o outage
		var out []time.Duration
		for i := range n {
			w, stop := o.failed(down, opts, t0.Add(time.Duration(i)*time.Millisecond))
			if stop {
				t.Fatalf("attempt %d stopped with no GiveUpAfter", i+1)
			}
			out = append(out, w)
		}
		return out
	}
	s := time.Second
	if got, want := waits(serveOptions{poll: s}, 5), []time.Duration{s, 2 * s, 4 * s, 5 * s, 5 * s}; !slices.Equal(got, want) {
		t.Errorf("poll 1s: waits %v, want %v", got, want)
	}
	if got, want := waits(serveOptions{poll: 7 * s}, 3), []time.Duration{7 * s, 7 * s, 7 * s}; !slices.Equal(got, want) {
		t.Errorf("poll 7s: waits %v, want %v", got, want)
	}

	o := outage{}
	opts := serveOptions{poll: time.Millisecond, giveUpAfter: time.Minute}
	for _, at := range []time.Duration{0, 30 * time.Second, time.Minute - 1} {
		if _, stop := o.failed(down, opts, t0.Add(at)); stop {
			t.Fatalf("stopped at %v, before GiveUpAfter", at)
		}
	}
	if _, stop := o.failed(down, opts, t0.Add(time.Minute)); !stop {
		t.Fatal("did not stop once GiveUpAfter had passed since the first failure")
	}
	if o.attempts != 4 || !o.since.Equal(t0) {
		t.Fatalf("outage %+v, want 4 attempts since %v", o, t0)
	}
}
