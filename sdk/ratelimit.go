package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
)

// Rate limits (DESIGN §17). A bundle rule's then.rate_limit caps how many
// of the calls it lets run may start in any window, counted per execution,
// per agent or globally, by the store's eventlog.Limiter — shared by every
// kernel on the store. The kernel applies it to a live gated attempt the
// rule allows (or, for a rule that asks an approval, once the approval is
// granted), just before the attempt's step.started:
//
//   - Under the limit, the attempt takes one call of the window and runs.
//   - Over it, when the limiter says a call would be admitted within the
//     rule's max_wait (counted from the first refusal of this dispatch),
//     the call waits on the kernel's clock and takes again; a wait longer
//     than ParkAfter parks the dispatch (dispatch.parked{Reason:
//     rate_limit, WakeAt}) and Serve runs it again at the wake time, where
//     the call asks anew.
//   - Otherwise the call is step.denied{Code: rate_limited, RuleID} and
//     returns a *DeniedError that is ErrRateLimited (and ErrDenied), live
//     and on replay.
//   - When the limiter fails (a store error), the rule's on_limiter_error
//     decides: open (the default) lets the call run, closed denies it as
//     above. A context that ended is no failure: nothing is recorded.
//
// A replayed call never takes a call of a window: only live attempts are
// admitted. A fork's live attempts are gated (DESIGN §8½), so they take.

// callOf is the policy's view of c in this dispatch.
func (d *dispatch) callOf(c call) policy.Call {
	return policy.Call{
		Agent:       d.state.Agent,
		Kind:        string(c.kind),
		Target:      c.target,
		Args:        c.args,
		InFork:      d.inFork(),
		Idempotency: string(c.idem),
	}
}

// limitGranted applies the bundle's rate limit to an attempt of c whose
// approval was granted: the rule the bundle matches now for c, when it has
// a rate limit. A grant without a bundle has none to apply.
func (d *dispatch) limitGranted(ctx context.Context, stepID string, c call) error {
	b := d.bundle()
	if b == nil {
		return nil
	}
	dec := b.Decide(d.callOf(c))
	return d.rateLimit(ctx, stepID, c, dec.RuleID, dec.RateLimit)
}

// rateLimit admits the live attempt of c (step stepID), which the rule
// ruleID allowed, under the rule's rate limit rl (nil: none): it returns
// nil once the attempt took a call of its window, or the recorded denial,
// or an error wrapping ErrWaiting when the dispatch parks, or ctx's error.
func (d *dispatch) rateLimit(ctx context.Context, stepID string, c call, ruleID string, rl *policy.RateLimit) error {
	if rl == nil {
		return nil
	}
	key := rl.Key(ruleID, d.callOf(c), d.id)
	var lim eventlog.Limiter
	if !eventlog.As(d.k.log, &lim) {
		return d.limiterFailed(stepID, c, ruleID, rl, key,
			errors.New("the log keeps no rate limits (eventlog.Limiter)"))
	}
	var deadline time.Time // the latest a call may wait for: first refusal + max_wait
	for {
		if err := notStarted(ctx, c); err != nil {
			return err
		}
		ok, retryAt, err := lim.TakeLimit(ctx, key, rl.MaxCalls, rl.Window)
		if err != nil {
			if cerr := notStarted(ctx, c); cerr != nil {
				return cerr
			}
			return d.limiterFailed(stepID, c, ruleID, rl, key, err)
		}
		if ok {
			return nil
		}
		now := d.k.now()
		if deadline.IsZero() {
			deadline = now.Add(rl.MaxWait)
		}
		// Denied when the limiter's next admission is past max_wait, or
		// when this call has already waited max_wait (a store whose clock
		// lags the kernel's may keep naming a time already past).
		if retryAt.After(deadline) || now.After(deadline) {
			reason := fmt.Sprintf("rate limit of %d calls per %v (%s) reached; the next call is admitted at %s, past max_wait %v",
				rl.MaxCalls, rl.Window, key, retryAt.UTC().Format(time.RFC3339Nano), rl.MaxWait)
			return d.deny(stepID, c, reason, eventlog.DenyRateLimited, ruleID)
		}
		// A store whose clock is behind the kernel's names a time already
		// past: wait a little rather than asking again at once.
		at := retryAt
		if soonest := now.Add(minLimitWait); at.Before(soonest) {
			at = soonest
		}
		what := fmt.Sprintf("%s %q: rate limit %s", c.kind, c.target, key)
		if err := d.waitUntil(ctx, at, eventlog.ParkRateLimit, what); err != nil {
			return err
		}
	}
}

// minLimitWait is the shortest wait between two takes of one call.
const minLimitWait = time.Millisecond

// limiterFailed applies the rule's on_limiter_error to a limiter that
// failed with err: closed records the call denied (Code rate_limited),
// open lets it run. Both are logged.
func (d *dispatch) limiterFailed(stepID string, c call, ruleID string, rl *policy.RateLimit, key string, err error) error {
	if !rl.FailClosed {
		d.k.logger.Warn("forkline: rate limiter failed; the call runs (on_limiter_error: open)", "execution", d.id.String(),
			"step", stepID, "rule", ruleID, "key", key, "error", err)
		return nil
	}
	d.k.logger.Warn("forkline: rate limiter failed; the call is denied (on_limiter_error: closed)", "execution", d.id.String(),
		"step", stepID, "rule", ruleID, "key", key, "error", err)
	return d.deny(stepID, c, fmt.Sprintf("rate limiter failed (on_limiter_error: closed): %v", err), eventlog.DenyRateLimited, ruleID)
}
