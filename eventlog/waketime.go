package eventlog

import (
	"math"
	"time"
)

// MaxWakeTime is the latest time forkline records as a wake time, a retry
// time, a deadline or an expiry: 2262-01-01 UTC, about 236 years after this
// was written and just inside what int64 Unix nanoseconds (the form both
// stores keep such times in) can hold. A later time — a Sleep of
// math.MaxInt64 meant as "forever", a retry backoff with no cap, a deadline
// in the year 3000 — saturates to it instead of overflowing into the past,
// where it would make the execution always due. Use [WakeAfter] and
// [ClampWake].
var MaxWakeTime = time.Date(2262, time.January, 1, 0, 0, 0, 0, time.UTC)

// minStoredTime is the earliest time int64 Unix nanoseconds can hold.
var minStoredTime = time.Unix(0, math.MinInt64+1).UTC()

// WakeAfter returns now plus d, saturated at [MaxWakeTime]; a negative d
// counts as zero.
func WakeAfter(now time.Time, d time.Duration) time.Time {
	return ClampWake(now.Add(max(d, 0)))
}

// ClampWake returns t, or [MaxWakeTime] when t is later. The zero time
// (no wake time) is returned as it is.
func ClampWake(t time.Time) time.Time {
	if t.After(MaxWakeTime) {
		return MaxWakeTime
	}
	return t
}

// StoredNanos is t in Unix nanoseconds as a store keeps a wake time,
// deadline or update time: 0 for the zero time, saturated at
// [MaxWakeTime] and at the earliest time int64 nanoseconds hold, so that
// no time overflows into another. Both stores use it.
func StoredNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.After(MaxWakeTime):
		return MaxWakeTime.UnixNano()
	case t.Before(minStoredTime):
		return minStoredTime.UnixNano()
	}
	return t.UnixNano()
}
