package eventlog_test

import (
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

func TestCheckTake(t *testing.T) {
	if err := eventlog.CheckTake("k", 1, time.Second); err != nil {
		t.Fatalf("CheckTake of good input: %v", err)
	}
	for _, c := range []struct {
		key    string
		max    int
		window time.Duration
	}{{"", 1, time.Second}, {"k", 0, time.Second}, {"k", eventlog.MaxLimiterCalls + 1, time.Second}, {"k", 1, 0}, {"k", 1, -1}} {
		if err := eventlog.CheckTake(c.key, c.max, c.window); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("CheckTake(%q, %d, %v) = %v, want ErrInvalid", c.key, c.max, c.window, err)
		}
	}
}

// TestSlideWindow: times at or before now-window leave; a call is
// admitted while fewer than max remain; a refusal's retryAt is when
// enough of the kept calls have left, whatever their order.
func TestSlideWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const w = 10 * time.Second
	for _, tc := range []struct {
		name    string
		times   []time.Time
		now     time.Time
		max     int
		kept    int
		ok      bool
		retryAt time.Time
	}{
		{"empty", nil, at(0), 1, 1, true, time.Time{}},
		{"under max", []time.Time{at(1), at(2)}, at(3), 3, 3, true, time.Time{}},
		{"at max", []time.Time{at(1), at(2)}, at(3), 2, 2, false, at(11)},
		{"unordered", []time.Time{at(5), at(1), at(3)}, at(6), 3, 3, false, at(11)},
		{"max lowered: wait for two to leave", []time.Time{at(4), at(1), at(3)}, at(6), 2, 3, false, at(13)},
		{"the oldest left at exactly now-window", []time.Time{at(0), at(2)}, at(10), 2, 2, true, time.Time{}},
		{"all left", []time.Time{at(0), at(2)}, at(30), 1, 1, true, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, ok, retryAt := eventlog.SlideWindow(tc.times, tc.now, tc.max, w)
			if len(kept) != tc.kept || ok != tc.ok || !retryAt.Equal(tc.retryAt) {
				t.Fatalf("SlideWindow = %d kept, %v, %v; want %d, %v, %v", len(kept), ok, retryAt, tc.kept, tc.ok, tc.retryAt)
			}
			if ok && !kept[len(kept)-1].Equal(tc.now) {
				t.Fatalf("admitted, but now is not kept: %v", kept)
			}
		})
	}
}
