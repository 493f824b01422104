package sdk

import (
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// parkUntilLocked parks the dispatch (DESIGN §10): every later call
// returns ErrWaiting, and the dispatch ends with dispatch.parked. The
// first reason wins; the wake time is the earliest one asked for, so no
// wait oversleeps. d.mu is held.
func (d *dispatch) parkUntilLocked(reason eventlog.ParkReason, at time.Time) {
	if d.parked == "" {
		d.parked = reason
	}
	if !at.IsZero() && (d.wakeAt.IsZero() || at.Before(d.wakeAt)) {
		d.wakeAt = at
	}
}

// parkedLocked returns what ends a parking dispatch: a capture of every
// resource it holds that is uncovered (DESIGN §10, §11: parking hands the
// execution off, perhaps to another host, which binds anew from the
// checkpoint covering the head), then dispatch.parked with the wake time.
// Its captures are recorded with reason park (DESIGN §15½.8). A resource
// with a step in flight (the awaited child's, without CoverageReuse)
// cannot be captured and stays uncovered.
func (d *dispatch) parkedLocked() []eventlog.Payload {
	d.wakeDecidedLocked()
	d.wakeReceivedLocked()
	payloads := d.uncoveredCapturesLocked(func(*bound) bool { return true }, eventlog.CapturePark)
	return append(payloads, &eventlog.DispatchParked{WakeAt: d.wakeAt, Reason: d.parked})
}

// uncoveredCapturesLocked checkpoints, with reason, every obtained
// resource that want selects and that is uncovered now, and that no step
// advancing it is in flight for (DESIGN §5), in key order.
func (d *dispatch) uncoveredCapturesLocked(want func(*bound) bool, reason eventlog.CaptureReason) []eventlog.Payload {
	var out []eventlog.Payload
	for _, key := range slices.Sorted(mapsKeys(d.res)) {
		b := d.res[key]
		if !want(b) || d.cov.Covered(key) {
			continue
		}
		st, ok := d.cov.State(key)
		if !ok || len(st.InFlight) > 0 {
			continue // a capture is only taken when nothing advancing R is in flight
		}
		ctx, cancel := d.ownCtxLocked()
		out = append(out, d.k.capture(ctx, d.exec, b.driver, b.handle, key, st.Generation, reason))
		cancel()
	}
	return out
}

// parkErr is the error Run returns for a dispatch that parked.
func (d *dispatch) parkErr() error {
	if d.wakeAt.IsZero() {
		return fmt.Errorf("sdk: execution %s: %w (%s)", d.id, ErrWaiting, d.parked)
	}
	return fmt.Errorf("sdk: execution %s: %w (%s) until %s", d.id, ErrWaiting, d.parked, d.wakeAt.Format(time.RFC3339Nano))
}
