package sdk

import (
	"fmt"
	"time"
)

// Clock is the kernel's source of time: the Time of every event it
// appends, and every wait of a dispatch — a retry's backoff, a Sleep. Tests
// inject a fake one (WithClock) so that a resumed backoff or sleep is
// checked on the fake clock, never on wall time. The folds never read it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WithClock makes c the kernel's clock (default: the system clock). It
// dates every event the kernel appends and times every backoff and Sleep
// (DESIGN §10). Lease renewals, the deadline timer and Serve's polling
// stay on wall time.
func WithClock(c Clock) Option {
	return func(k *Kernel) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalid)
		}
		k.clock = c
		k.now = c.Now
		return nil
	}
}
