package policy

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/forkline/forkline/eventlog"
)

// Call is a call the SDK is about to run live: what a [Gate] decides on
// (DESIGN §7). Replayed calls are never gated.
type Call struct {
	Agent  string // the agent of the execution
	Kind   string // "tool", "local", "llm" or "child"
	Target string // the tool name, step name or LLM endpoint
	// Args is the canonical encoding of the args: JSON (sdk's calls) that
	// a Bundle's args predicates read; anything else matches none.
	Args   []byte
	InFork bool // runs live in a fork, past its fork point
	// Idempotency is the call's: "safe_to_retry" or "at_most_once"
	// (eventlog.SafeToRetry, eventlog.AtMostOnce).
	Idempotency string
}

// Decision is a Gate's answer. A denied call is recorded as step.denied with
// Reason and never runs. A call whose decision asks for an Approval
// (DESIGN §12) is recorded as approval.requested with Reason and waits for
// a person's decision; Approval wins over Allow.
//
// A [Bundle]'s decision also says which rule made it (RuleID; empty for
// the bundle's default and for other gates) and carries that rule's
// settings for the kernel to apply: who may approve, when the request
// expires and what it tells them, and the rate limit of the calls it
// allows. These are shared with the bundle: read them, never change them.
type Decision struct {
	Allow    bool
	Approval bool
	Reason   string

	// RuleID is the id of the bundle rule that decided.
	RuleID string
	// ApprovalSettings is the deciding rule's then.approval (who may
	// decide, when the request expires, its message), nil when it has
	// none.
	ApprovalSettings *ApprovalSettings
	// RateLimit is the deciding rule's then.rate_limit, nil when it has
	// none.
	RateLimit *RateLimit
}

// Gate decides whether a call may run. The SDK asks it before each live
// attempt that DESIGN §8½ gates — every call's first attempt, and in a fork
// every attempt, retries and orphan re-runs included — before its
// step.started; a recorded denial or approval is replayed without asking
// again.
type Gate func(ctx context.Context, c Call) Decision

// ApproveForkEffects returns a Gate that asks for approval of every
// at_most_once call that runs live in a fork (DESIGN §12) and allows every
// other call: a fork replays its prefix freely, and a person approves each
// effect it would make that cannot be made twice safely.
func ApproveForkEffects() Gate {
	return Rules{{InFork: true, AtMostOnce: true, Approve: true,
		Reason: "an at_most_once call in a fork needs approval"}}.Gate()
}

// Rule is one rule of a [Rules] set. A rule matches a call when its Kind and
// Target patterns match, if InFork is set the call runs in a fork, and if
// AtMostOnce is set the call is at_most_once.
type Rule struct {
	// Kind is a path.Match pattern over the call's Kind; "" or "*" match any.
	Kind string
	// Target is a path.Match pattern over the call's Target; "" or "*" match
	// any target, including one that contains a slash.
	Target string
	// InFork restricts the rule to calls that run live in a fork.
	InFork bool
	// AtMostOnce restricts the rule to at_most_once calls.
	AtMostOnce bool
	// Allow is the decision of a matching rule, unless Approve is set.
	Allow bool
	// Approve makes a matching rule ask for approval (Decision.Approval);
	// it wins over Allow.
	Approve bool
	// Reason is the decision's reason; when empty, Decide says which rule
	// decided ("denied by rule 2: deny tool:rm").
	Reason string
}

// verb returns the rule's verb in its text form.
func (r Rule) verb() string {
	switch {
	case r.Approve:
		return "approve"
	case r.Allow:
		return "allow"
	}
	return "deny"
}

// String returns the rule in the text form that [ParseRules] reads, e.g.
// "deny tool:rm_* in-fork no deletions in forks". An Approve rule is
// written with the verb approve, whatever its Allow.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(r.verb())
	b.WriteByte(' ')
	b.WriteString(r.Kind)
	b.WriteByte(':')
	b.WriteString(r.Target)
	if r.InFork {
		b.WriteString(" in-fork")
	}
	if r.AtMostOnce {
		b.WriteString(" at-most-once")
	}
	if r.Reason != "" {
		b.WriteByte(' ')
		b.WriteString(r.Reason)
	}
	return b.String()
}

// matches reports whether the rule applies to c. A malformed pattern (only
// possible in a Rule not made by ParseRules) matches nothing.
func (r Rule) matches(c Call) bool {
	if r.InFork && !c.InFork || r.AtMostOnce && c.Idempotency != string(eventlog.AtMostOnce) {
		return false
	}
	return globMatch(r.Kind, c.Kind) && globMatch(r.Target, c.Target)
}

// globMatch reports whether name matches pattern, where "" and "*" match
// any name.
func globMatch(pattern, name string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return ok && err == nil
}

// Rules is an ordered rule set: the first rule that matches a call decides
// it, and a call that no rule matches is allowed. Its text form is described
// in the package documentation.
type Rules []Rule

// Decide returns the decision of the first rule that matches c, or an allow
// when none does.
func (r Rules) Decide(c Call) Decision {
	for i, rule := range r {
		if !rule.matches(c) {
			continue
		}
		d := Decision{Allow: rule.Allow && !rule.Approve, Approval: rule.Approve, Reason: rule.Reason}
		if d.Reason == "" {
			verb := "denied"
			switch {
			case rule.Approve:
				verb = "approval asked"
			case rule.Allow:
				verb = "allowed"
			}
			d.Reason = fmt.Sprintf("%s by rule %d: %s", verb, i+1, rule)
		}
		return d
	}
	return Decision{Allow: true, Reason: "allowed: no rule matched"}
}

// Gate returns a Gate that decides with a copy of r, so that later changes
// to r do not change its decisions.
func (r Rules) Gate() Gate {
	rules := slices.Clone(r)
	return func(_ context.Context, c Call) Decision { return rules.Decide(c) }
}

// String returns the rule set in the text form that [ParseRules] reads: one
// rule per line, each ending in a newline. ParseRules(r.String()) returns
// r for every r that ParseRules returned.
func (r Rules) String() string {
	var b strings.Builder
	for _, rule := range r {
		b.WriteString(rule.String())
		b.WriteByte('\n')
	}
	return b.String()
}
