package eventlog

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Limiter keeps sliding-window rate limits shared by every kernel on a
// store (DESIGN §17): a policy bundle's rate_limit names a key (the rule
// id and its scope: an execution, an agent, or global), and every live call
// the rule matches takes one call of that key's window first. Kernels find
// it with As; a store without one has no shared limits.
//
// The window slides: TakeLimit admits a call at time t when fewer than max
// calls of key were admitted in (t-window, t]. So no span of length window
// ever holds more than max admitted calls of one key, whichever kernels
// and processes made them. Times are the store's clock, not the caller's:
// the database's now() on Postgres, the process's clock on Pebble (one
// process owns a Pebble store).
//
// DESIGN §17 names the method Take; it is TakeLimit because a store
// implements Inbox too, whose Take it would clash with.
type Limiter interface {
	// TakeLimit admits one call of key when fewer than max calls of key were
	// admitted in the window that ends now, and records it (ok true,
	// retryAt zero). Otherwise it records nothing and returns ok false
	// with retryAt, the store's time at which a call of key would next be
	// admitted if nobody else takes one first.
	//
	// max ≤ 0, window ≤ 0 or an empty key wraps ErrInvalid, and nothing
	// is written. Calls of one key with different max or window values
	// share one record: each TakeLimit counts the calls of key admitted in its
	// own window against its own max.
	TakeLimit(ctx context.Context, key string, max int, window time.Duration) (ok bool, retryAt time.Time, err error)
}

// MaxLimiterCalls bounds a TakeLimit's max: a store keeps the times of up
// to max admitted calls per key, rewritten by every TakeLimit of the key.
const MaxLimiterCalls = 100_000

// CheckTake validates a TakeLimit's arguments: a non-empty key, 0 < max ≤
// MaxLimiterCalls, window > 0. Its error wraps ErrInvalid.
func CheckTake(key string, max int, window time.Duration) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: limiter take with an empty key", ErrInvalid)
	case max <= 0 || max > MaxLimiterCalls:
		return fmt.Errorf("%w: limiter take of %q with max %d; it must be in 1..%d", ErrInvalid, key, max, MaxLimiterCalls)
	case window <= 0:
		return fmt.Errorf("%w: limiter take of %q with a window of %v; it must be positive", ErrInvalid, key, window)
	}
	return nil
}

// SlideWindow is the sliding-window rule every store applies, on the times
// of admitted calls of one key (in any order): it drops the times at or
// before now-window, and admits a call at now when fewer than max remain,
// appending now. When it refuses, retryAt is the time at which enough of
// the remaining calls will have left the window for one more. It returns
// the kept times (reusing times' array).
func SlideWindow(times []time.Time, now time.Time, max int, window time.Duration) (kept []time.Time, ok bool, retryAt time.Time) {
	cut := now.Add(-window)
	kept = times[:0]
	for _, t := range times {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	if len(kept) < max {
		return append(kept, now), true, time.Time{}
	}
	// The call is admitted once len(kept)-max+1 of the kept calls have
	// left: at the (len(kept)-max)th oldest's time plus window.
	sorted := make([]time.Time, len(kept))
	copy(sorted, kept)
	slices.SortFunc(sorted, time.Time.Compare)
	return kept, false, sorted[len(kept)-max].Add(window)
}
