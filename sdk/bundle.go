package sdk

import (
	"context"
	"fmt"
	"maps"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
)

// WithBundle makes the policy bundle b decide on every call before it runs
// live (DESIGN §17), like [WithGate] and together with it: b is asked about
// every gated attempt with the call's kind, target, canonical args, the
// execution's agent, whether it runs in a fork and its idempotency. A
// denial is recorded as step.denied{Code: policy} with the rule's id
// (RuleID; "" for the bundle's default) and reason, and the call returns a
// *[DeniedError] carrying them (errors.Is(err, [ErrDenied])); an approve
// decision records approval.requested with the rule's id, its reason and
// its approval settings — message, approvers, and an ExpiresAt from its
// timeout (see Kernel.Approve) — and waits for a decision as any approval
// does; past ExpiresAt undecided the call is step.denied{Code:
// approval_expired} ([ErrApprovalExpired]). A
// replayed call never asks again: a recorded denial returns the same
// *DeniedError, Code and RuleID included.
//
// With both a gate and a bundle a call must pass both (DESIGN §21½.11):
// deny beats approve beats allow, and one approval is asked — the
// bundle's, when both ask. The bundle is asked first; when it denies, the
// gate is not asked.
//
// A rule's then.rate_limit is applied with the store's eventlog.Limiter,
// shared by every kernel on the store (DESIGN §17): a live attempt the
// rule allows (or whose approval it asked was granted) takes one call of
// the rule's window for its scope (key [policy.RateLimit.Key]) just before
// its step.started. Over the limit, a call that would be admitted within
// max_wait waits — parking past [ParkAfter] with dispatch.parked{Reason:
// rate_limit}, run again by Serve at the wake time — and any other is
// step.denied{Code: rate_limited, RuleID}, returning a *DeniedError that
// is [ErrRateLimited]. A limiter that fails lets the call run
// (on_limiter_error: open, the default) or denies it so (closed). A
// replayed call never takes a call of a window; a fork's live attempts
// do. A bundle with a rate limit on a log that keeps none (no
// eventlog.Limiter through its wrappers) is refused with [ErrInvalid],
// rather than installed and silently not enforced. A nil bundle is
// ErrInvalid too.
func WithBundle(b *policy.Bundle) Option {
	return func(k *Kernel) error {
		if b == nil {
			return fmt.Errorf("%w: nil bundle", ErrInvalid)
		}
		if err := k.checkLimits(b); err != nil {
			return err
		}
		k.bundle = b
		return nil
	}
}

// checkLimits refuses a bundle with a rate limit on a log that keeps none.
func (k *Kernel) checkLimits(b *policy.Bundle) error {
	var lim eventlog.Limiter
	for _, r := range b.Rules() {
		if r.RateLimit != nil && !eventlog.As(k.log, &lim) {
			return fmt.Errorf("%w: bundle rule %q (line %d): then.rate_limit needs a log that keeps rate limits (eventlog.Limiter); this one does not", ErrInvalid, r.ID, r.Line)
		}
	}
	return nil
}

// SetAgentBundle makes b the policy bundle of agent's calls from now on,
// in place of the kernel's own ([WithBundle]) for that agent; a nil b
// removes it, and the kernel's applies again. It decides as WithBundle
// describes (with the gate, rate limits, approvals) on every live call
// gated after it returns — a call already recorded replays as recorded —
// and is refused, changing nothing, as WithBundle refuses a bundle. A
// kernel for agents over HTTP (package kernelapi) sets each agent's
// bundle so, from its admin route.
func (k *Kernel) SetAgentBundle(agent string, b *policy.Bundle) error {
	if agent == "" {
		return fmt.Errorf("%w: agent bundle of an empty agent name", ErrInvalid)
	}
	if b != nil {
		if err := k.checkLimits(b); err != nil {
			return err
		}
	}
	k.bundleMu.Lock()
	defer k.bundleMu.Unlock()
	next := map[string]*policy.Bundle{}
	if cur := k.agentBundles.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	if b == nil {
		delete(next, agent)
	} else {
		next[agent] = b
	}
	k.agentBundles.Store(&next)
	return nil
}

// AgentBundle returns the bundle SetAgentBundle set for agent, or nil.
func (k *Kernel) AgentBundle(agent string) *policy.Bundle {
	if m := k.agentBundles.Load(); m != nil {
		return (*m)[agent]
	}
	return nil
}

// bundle is the bundle that decides the dispatch's calls: its agent's,
// else the kernel's (nil: none).
func (d *dispatch) bundle() *policy.Bundle {
	if b := d.k.AgentBundle(d.state.Agent); b != nil {
		return b
	}
	return d.k.bundle
}

// policed reports whether the dispatch's calls are decided on: the kernel
// has a gate or there is a bundle.
func (d *dispatch) policed() bool { return d.k.gate != nil || d.bundle() != nil }

// decide asks the bundle and the gate about c (DESIGN §21½.11): deny beats
// approve beats allow, and when both ask for an approval the bundle's
// decision is the one recorded. A panicking gate denies.
func (d *dispatch) decide(ctx context.Context, c call) policy.Decision {
	pc := policy.Call{
		Agent:       d.state.Agent,
		Kind:        string(c.kind),
		Target:      c.target,
		Args:        c.args,
		InFork:      d.inFork(),
		Idempotency: string(c.idem),
	}
	b := d.bundle()
	if b == nil {
		return d.askGate(ctx, pc)
	}
	fromBundle := b.Decide(pc)
	if denies(fromBundle) || d.k.gate == nil {
		return fromBundle
	}
	fromGate := d.askGate(ctx, pc)
	switch {
	case denies(fromGate):
		return fromGate
	case fromBundle.Approval:
		return fromBundle
	case fromGate.Approval:
		return fromGate
	}
	return fromBundle
}

// denies reports whether dec refuses its call: neither an allow nor an
// approval.
func denies(dec policy.Decision) bool { return !dec.Allow && !dec.Approval }

// askGate asks the kernel's gate; a panicking gate denies.
func (d *dispatch) askGate(ctx context.Context, pc policy.Call) (dec policy.Decision) {
	defer func() {
		if r := recover(); r != nil {
			dec = policy.Decision{Allow: false, Reason: fmt.Sprintf("gate panicked: %v", r)}
		}
	}()
	return d.k.gate(ctx, pc)
}
