package sdk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
)

// ErrNotStarted is the body's own word that its call took no effect: an
// at_most_once body that returns an error wrapping it (it refused before
// doing anything, or its request never left the process) may be retried
// under the call's RetryPolicy; any other error of an at_most_once call is
// final (DESIGN §10). It changes nothing for safe_to_retry calls.
var ErrNotStarted = errors.New("sdk: the call took no effect")

// RetryPolicy says how a failed attempt of a call is retried (DESIGN §10).
// An attempt that will be retried is recorded as step.failed with RetryAt,
// the time of the next attempt; the delay is chosen live — exponential,
// with jitter, by github.com/cenkalti/backoff — and recorded, never
// recomputed on replay. The final failure has no RetryAt.
type RetryPolicy struct {
	// MaxAttempts is the most step.started events the step may have: every
	// attempt counts, the re-run of an orphan (an attempt a dead dispatch
	// left unfinished) too. It must be at least 1; 1 means no retry.
	MaxAttempts int
	// Initial is the backoff before the second attempt (default
	// DefaultRetryInitial when zero). Later backoffs grow by Multiplier up
	// to Max. Each is randomized by ±50 % (backoff's default jitter), so a
	// randomized delay may exceed Max by half.
	Initial time.Duration
	// Max caps the backoff's growth (default DefaultRetryMax when zero; at
	// least Initial).
	Max time.Duration
	// Multiplier is the backoff's growth per attempt (default 2 when zero;
	// otherwise at least 1).
	Multiplier float64
	// Retryable reports whether a failed attempt's error may be retried
	// (nil: every error). A timed-out attempt's error is the body's. A
	// panicking Retryable means no.
	Retryable func(error) bool
}

// The defaults of a RetryPolicy's zero fields.
const (
	DefaultRetryInitial    = time.Second
	DefaultRetryMax        = time.Minute
	DefaultRetryMultiplier = 2.0
)

// check validates p and fills its defaults.
func (p RetryPolicy) check() (RetryPolicy, error) {
	switch {
	case p.MaxAttempts < 1:
		return p, fmt.Errorf("%w: retry policy with MaxAttempts %d; it must be at least 1", ErrInvalid, p.MaxAttempts)
	case p.Initial < 0:
		return p, fmt.Errorf("%w: retry policy with a negative Initial backoff %v", ErrInvalid, p.Initial)
	case p.Max < 0:
		return p, fmt.Errorf("%w: retry policy with a negative Max backoff %v", ErrInvalid, p.Max)
	case math.IsNaN(p.Multiplier) || p.Multiplier != 0 && p.Multiplier < 1 || math.IsInf(p.Multiplier, 0):
		return p, fmt.Errorf("%w: retry policy with Multiplier %v; it must be at least 1 (0: the default %v)", ErrInvalid, p.Multiplier, DefaultRetryMultiplier)
	}
	if p.Initial == 0 {
		p.Initial = DefaultRetryInitial
	}
	if p.Max == 0 {
		p.Max = max(DefaultRetryMax, p.Initial)
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultRetryMultiplier
	}
	if p.Max < p.Initial {
		return p, fmt.Errorf("%w: retry policy with Max backoff %v below Initial %v", ErrInvalid, p.Max, p.Initial)
	}
	return p, nil
}

// maxBackoff caps Initial and Max before the jitter: backoff randomizes an
// interval by up to +50 % in float64, and an interval near math.MaxInt64
// overflowed into a negative delay — an immediate retry instead of a wait
// of centuries. Two thirds of MaxInt64 (about 195 years) times 1.5 still
// fits; the wake time then saturates at eventlog.MaxWakeTime.
const maxBackoff = time.Duration(math.MaxInt64 / 3 * 2)

// delay returns the backoff after failed attempt n (1-based): backoff's
// n-th interval, jitter included. Initial and Max above maxBackoff count
// as maxBackoff.
func (p *RetryPolicy) delay(n uint32) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     min(p.Initial, maxBackoff),
		RandomizationFactor: backoff.DefaultRandomizationFactor,
		Multiplier:          p.Multiplier,
		MaxInterval:         min(p.Max, maxBackoff),
	}
	b.Reset()
	var d time.Duration
	for range n {
		d = b.NextBackOff()
	}
	return d
}

// retryable asks p.Retryable, recovering a panic as no.
func (p *RetryPolicy) retryable(err error) (ok bool) {
	if p.Retryable == nil {
		return true
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return p.Retryable(err)
}

// Retry retries a tool's, local step's or child's failed attempts under p
// (DESIGN §10), overriding the kernel's WithRetry. A bad policy makes the
// call fail with ErrInvalid before anything is appended. An AtMostOnce
// call is retried only when its body's error wraps ErrNotStarted.
func Retry(p RetryPolicy) CallOption {
	return func(o *callOptions) error {
		p, err := p.check()
		if err != nil {
			return err
		}
		o.retry = &p
		return nil
	}
}

// WithRetry makes p the kernel's default retry policy for every call that
// has none of its own (Retry, TransportRetry). Without it no call is
// retried: a failed attempt is the call's outcome.
func WithRetry(p RetryPolicy) Option {
	return func(k *Kernel) error {
		p, err := p.check()
		if err != nil {
			return err
		}
		k.retry = &p
		return nil
	}
}

// Timeout gives each attempt of a call d to run: the body's context has
// that deadline. The kernel always waits for the body to return — bodies
// never overlap, even past a timeout — and then records the attempt as
// failed (retried under the call's policy); a timed-out AtMostOnce call is
// recorded Indeterminate and never retried (DESIGN §10). d must be
// positive.
func Timeout(d time.Duration) CallOption {
	return func(o *callOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: Timeout %v; it must be positive", ErrInvalid, d)
		}
		o.timeout = d
		return nil
	}
}

// policy returns the retry policy of c: its own, else the kernel's; nil
// for none. A child call (Agent.Call) has only its own (Retry): a failed
// child is an agent's whole run, not a transient fault, so the kernel's
// WithRetry does not re-run it. Its retry starts a new child (childKey
// counts the failed attempts, DESIGN §15½.7).
func (d *dispatch) policy(c call) *RetryPolicy {
	if c.retry != nil {
		return c.retry
	}
	if c.kind == eventlog.StepChild {
		return nil
	}
	return d.k.retry
}

// usedAttempts is how many of c's MaxAttempts attempt n (of a step whose
// retried failed attempts are retried) has used: n for a tool, local step
// or LLM call, whose every step.started counts (DESIGN §10); for a child
// only its failed attempts and this one, since re-running a child step
// after its dispatch parked, or after a crash, finds the same child again
// and is no new attempt.
func usedAttempts(c call, n, retried uint32) uint32 {
	if c.kind == eventlog.StepChild {
		return retried + 1
	}
	return n
}

// attemptError is a body's error that says more about the failed attempt:
// the response to record as the step's result if the attempt is not
// retried (Transport's 429 and 5xx: only the final response is the
// result), and the least delay before the next (a Retry-After).
type attemptError struct {
	err    error
	final  []byte          // the result to record when no retry follows; nil: the failure is recorded
	after  time.Duration   // the least backoff before the next attempt
	tokens eventlog.Tokens // the usage the failed response carried, recorded with it (DESIGN §21½.9)
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// outcome decides how a live attempt that returned berr (not panicked, not
// cancelled) ends: the terminal event to record, and the time of the next
// attempt (zero when none follows). timedOut says the attempt ran past
// its Timeout.
func (d *dispatch) outcome(stepID string, attempt uint32, c call, berr error, timedOut bool) (eventlog.Payload, time.Time) {
	msg := berr.Error()
	if timedOut {
		msg = fmt.Sprintf("timed out after %v: %s", c.timeout, msg)
		if c.idem == eventlog.AtMostOnce {
			// Its effect may or may not have happened (DESIGN §10).
			return &eventlog.StepFailed{StepID: stepID, Error: msg, Indeterminate: true}, time.Time{}
		}
	}
	ae := (*attemptError)(nil)
	errors.As(berr, &ae)
	var tokens eventlog.Tokens
	if ae != nil {
		tokens = ae.tokens
	}
	if at := d.nextAttempt(c, attempt, berr); !at.IsZero() {
		return &eventlog.StepFailed{StepID: stepID, Error: msg, RetryAt: at, Tokens: tokens}, at
	}
	if ae != nil && ae.final != nil {
		return &eventlog.StepSucceeded{StepID: stepID, Result: ae.final, Tokens: tokens}, time.Time{}
	}
	return &eventlog.StepFailed{StepID: stepID, Error: msg, Tokens: tokens}, time.Time{}
}

// nextAttempt returns when the attempt after failed attempt n of c runs,
// or zero if none does: no policy, no attempts left, an at_most_once body
// that did not say ErrNotStarted, an error the policy does not retry. The
// delay is chosen here, live, and recorded as step.failed's RetryAt.
func (d *dispatch) nextAttempt(c call, n uint32, berr error) time.Time {
	p := d.policy(c)
	switch {
	case p == nil || int64(n) >= int64(p.MaxAttempts):
		return time.Time{}
	case c.idem == eventlog.AtMostOnce && !errors.Is(berr, ErrNotStarted):
		return time.Time{}
	case !p.retryable(berr):
		return time.Time{}
	}
	delay := p.delay(n)
	if ae := (*attemptError)(nil); errors.As(berr, &ae) && ae.after > delay {
		delay = ae.after
	}
	// A zero delay still needs a RetryAt: the time itself marks the retry.
	// A delay past eventlog.MaxWakeTime saturates to it.
	return eventlog.WakeAfter(d.k.clock.Now(), max(delay, time.Nanosecond))
}

// exhausted reports whether an orphaned or cancelled attempt of c (rec)
// may not run again: c has a policy and rec used its MaxAttempts (every
// step.started counts, DESIGN §10). Without a policy an orphan of a
// safe_to_retry call always runs again (DESIGN §4).
func (d *dispatch) exhausted(c call, rec replay.Step) bool {
	p := d.policy(c)
	// A child's unfinished attempt run again finds the same child: it
	// uses no attempt of its own (usedAttempts).
	return p != nil && c.kind != eventlog.StepChild && int64(rec.Attempts) >= int64(p.MaxAttempts)
}

// giveUp records the final failure of a step whose unfinished attempt was
// its last: its outcome is unknown, so it is recorded Indeterminate.
func (d *dispatch) giveUp(stepID string, rec replay.Step, c call) error {
	msg := fmt.Sprintf("attempt %d of at most %d started on an earlier dispatch and never finished; no attempt is left",
		rec.Attempts, d.policy(c).MaxAttempts)
	return d.resolveIndeterminateMsg(stepID, c, msg)
}

// attempts runs c live from attempt n — after waiting until retryAt when it
// is set — and every retry its policy allows, each after its recorded
// backoff. A wait longer than ParkAfter parks the dispatch.
func (d *dispatch) attempts(ctx context.Context, stepID string, n uint32, retryAt time.Time, c call) ([]byte, error) {
	for {
		if !retryAt.IsZero() {
			what := fmt.Sprintf("attempt %d of %s %q", n, c.kind, c.target)
			if err := d.waitUntil(ctx, retryAt, eventlog.ParkRetry, what); err != nil {
				return nil, err
			}
			if err := d.gateRetry(ctx, stepID, c); err != nil {
				return nil, err
			}
		}
		res, next, err := d.live(ctx, stepID, n, c)
		if next.IsZero() {
			return res, err
		}
		n, retryAt = n+1, next
	}
}

// gateRetry asks the gate about a retry in a fork: every live attempt in
// a fork is gated (DESIGN §8½), and may need an approval (DESIGN §12); a
// denied or rejected retry ends the step denied (step.denied of the
// retrying step) and returns a *DeniedError. In a root execution only the
// first attempt is gated.
func (d *dispatch) gateRetry(ctx context.Context, stepID string, c call) error {
	return d.admit(ctx, stepID, c, d.inFork())
}

// waitUntil waits on the kernel's clock until at, or parks the dispatch
// when that is more than ParkAfter away: then, and when ctx ends first, it
// returns an error (wrapping ErrWaiting when parked) and nothing is
// appended.
func (d *dispatch) waitUntil(ctx context.Context, at time.Time, reason eventlog.ParkReason, what string) error {
	left := at.Sub(d.k.clock.Now())
	if left <= 0 {
		return nil
	}
	if left > d.k.parkAfter {
		d.mu.Lock()
		d.parkUntilLocked(reason, at)
		d.mu.Unlock()
		return fmt.Errorf("sdk: %s: %w until %s", what, ErrWaiting, at.Format(time.RFC3339Nano))
	}
	select {
	case <-d.k.clock.After(left):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sdk: %s: wait cancelled: %w", what, ctx.Err())
	}
}

// liveOutcome returns what the caller of a live attempt gets for its
// recorded terminal event: what a replay of it returns.
func liveOutcome(stepID, target string, terminal eventlog.Payload) ([]byte, error) {
	switch t := terminal.(type) {
	case *eventlog.StepSucceeded:
		return t.Result, nil
	case *eventlog.StepFailed:
		return nil, &StepError{StepID: stepID, Target: target, Message: t.Error, Indeterminate: t.Indeterminate}
	}
	return nil, fmt.Errorf("sdk: %s: unexpected outcome %s", target, terminal.Kind())
}

// withTimeout gives a body's context the call's Timeout (none when d is
// 0). end releases the timer and reports whether the body's attempt ran
// past its deadline.
func withTimeout(ctx context.Context, d time.Duration) (_ context.Context, end func() (timedOut bool)) {
	if d <= 0 {
		return ctx, func() bool { return false }
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	return tctx, func() bool {
		timedOut := errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		return timedOut
	}
}
