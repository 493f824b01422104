package sdk

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// timerKind is the kind that TimerIDs are computed with: a timer is not a
// step, but its identity is made like one (DESIGN §8½).
const timerKind eventlog.StepKind = "timer"

// Sleep sleeps d durably inside a handler (DESIGN §10): it appends
// timer.started{TimerID, WakeAt} and, once the kernel's clock has reached
// WakeAt, timer.fired. On replay a fired timer returns at once; a dispatch
// that died mid-sleep sleeps only what is left. A sleep with more than
// ParkAfter left parks the dispatch: Sleep returns an error wrapping
// ErrWaiting (return it from the handler), the execution is waiting, and
// Serve runs it again at WakeAt, when the replayed Sleep finishes it.
//
// The TimerID is StepID-like — kind "timer", the duration, and the
// occurrence of that duration's sleep in the dispatch — so two sleeps
// never match each other. A timer has no body: it advances no resource and
// is never counted. A wake time past eventlog.MaxWakeTime (a Sleep of
// math.MaxInt64 meant as "forever") saturates to it. A negative d is
// ErrInvalid and appends nothing; Sleep
// inside a step's body is ErrNestedStep. When ctx ends first, Sleep
// returns ctx's error and the timer stays started.
func Sleep(ctx context.Context, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: Sleep %v; it must not be negative", ErrInvalid, d)
	}
	disp, err := dispatchFrom(ctx)
	if err != nil {
		return fmt.Errorf("sleep: %w", err)
	}
	return disp.sleep(ctx, d)
}

func (d *dispatch) sleep(ctx context.Context, dur time.Duration) error {
	target := dur.String()
	if si, ok := ctx.Value(stepKey{}).(*stepInfo); ok {
		return fmt.Errorf("%w: Sleep(%s) called inside the body of %q", ErrNestedStep, target, si.target)
	}
	args := []byte(strconv.FormatInt(int64(dur), 10))
	d.mu.Lock()
	if err := d.enterCallLocked("sleep", target); err != nil {
		d.mu.Unlock()
		return err
	}
	defer d.calls.Done()
	if err := d.usableLocked(); err != nil {
		d.mu.Unlock()
		return err
	}
	id := callIdentity(d.occ, timerKind, "sleep", args)
	t, ok := d.state.Timer(id)
	switch {
	case ok && t.FiredAt != 0:
		d.mu.Unlock()
		return nil
	case !ok:
		if err := ctx.Err(); err != nil {
			d.mu.Unlock()
			return fmt.Errorf("sdk: sleep %s not started: %w", target, err)
		}
		wake := eventlog.WakeAfter(d.k.clock.Now(), dur)
		if err := d.appendLocked(false, &eventlog.TimerStarted{TimerID: id, WakeAt: wake}); err != nil {
			d.mu.Unlock()
			return err
		}
		t.WakeAt = wake
	}
	d.mu.Unlock()

	if err := d.waitUntil(ctx, t.WakeAt, eventlog.ParkTimer, "sleep "+target); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usableLocked(); err != nil {
		return err
	}
	return d.appendLocked(false, &eventlog.TimerFired{TimerID: id})
}
