package sdk

import (
	"fmt"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
)

// Limits is an execution's budget (DESIGN §17): at most MaxTokens tokens
// (input plus output, as the llm calls' responses reported them),
// MaxLLMCalls llm calls and MaxToolCalls tool calls over the whole
// lineage, a fork's prefix included. 0 is no limit; a negative limit is
// ErrInvalid.
//
// A call counts when it starts live: every attempt's step.started of an
// llm or tool step is one call, a retry and an orphan's re-run included;
// a replayed call and a denied one count nothing. Local steps, child
// steps and Recv are not limited.
type Limits struct {
	MaxTokens    int64
	MaxLLMCalls  int64
	MaxToolCalls int64
}

// Spend is what a lineage spent against its budget (a fold of its events,
// replay.State): the tokens its llm calls' responses reported and the
// llm and tool calls that started live, a fork's prefix included.
type Spend struct {
	Tokens    eventlog.Tokens
	LLMCalls  uint64
	ToolCalls uint64
}

// Budget limits what the execution may spend (DESIGN §17, §21½.9). Given
// to Start it is recorded in execution.created's Budget; given to Fork, in
// fork.created's Budget, and it replaces the parent's. A fork made
// without Budget inherits its parent's budget — the one run setting a
// fork inherits — and its spend includes its prefix's.
//
// A live llm or tool call that would start when the spend has reached a
// limit that applies to it (tokens and llm calls limit llm calls, tool
// calls limit tool calls; tokens cannot be known before a call, so the
// call that crosses a limit runs and the next one is refused) does not
// run: the kernel appends step.denied{Code: budget} whose reason names
// the limit, and the call returns a *DeniedError wrapping [ErrBudget] (and
// [ErrDenied]), live and on replay. When the kernel's bundle says
// `on_budget: approve` ([WithBundle]) it asks an approval instead
// (approval.requested with the limit as its reason, no rule id), and a
// granted approval lets that one call run.
//
// A negative limit is ErrInvalid. Given to Start, Limits{} is no budget;
// given to Fork it is ErrInvalid (it would replace nothing: give the fork
// limits of its own).
func Budget(l Limits) RunOption { return budgetOption(l) }

// budgetOption is Budget's RunOption.
type budgetOption Limits

// limits returns the budget to record, or why it is refused.
func (b budgetOption) limits() (eventlog.Limits, error) {
	for _, f := range []struct {
		n    int64
		name string
	}{{b.MaxTokens, "MaxTokens"}, {b.MaxLLMCalls, "MaxLLMCalls"}, {b.MaxToolCalls, "MaxToolCalls"}} {
		if f.n < 0 {
			return eventlog.Limits{}, fmt.Errorf("%w: Budget: %s %d is negative", ErrInvalid, f.name, f.n)
		}
	}
	return eventlog.Limits{MaxTokens: uint64(b.MaxTokens), MaxLLMCalls: uint64(b.MaxLLMCalls), MaxToolCalls: uint64(b.MaxToolCalls)}, nil
}

func (b budgetOption) applyStart(o *startOptions) (err error) {
	o.budget, err = b.limits()
	return err
}

func (b budgetOption) applyFork(e *forkEdit) error {
	l, err := b.limits()
	if err != nil {
		return err
	}
	if l == (eventlog.Limits{}) {
		return fmt.Errorf("%w: Budget on a fork without a limit: a fork inherits its parent's budget, give limits to replace it", ErrInvalid)
	}
	e.budget = l
	return nil
}

// budgetOf converts a recorded budget to Limits.
func budgetOf(l eventlog.Limits) Limits {
	return Limits{MaxTokens: clampInt64(l.MaxTokens), MaxLLMCalls: clampInt64(l.MaxLLMCalls), MaxToolCalls: clampInt64(l.MaxToolCalls)}
}

// clampInt64 is n, or the largest int64 when n is larger.
func clampInt64(n uint64) int64 {
	if n > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(n)
}

// overBudget reports whether the execution's spend has reached a limit of
// its budget that applies to a live attempt of c, and which (its text is
// the denial's or the approval's reason). The spend is the dispatch's
// fold of the whole lineage up to the head (DESIGN §21½.9); calls started
// at once are each checked against what was recorded before them.
func (d *dispatch) overBudget(c call) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state.BudgetReached(c.kind)
}

// budgetDecision applies a reached budget (spent names it) to dec, the
// policy's decision about c (an allow when c is not gated): a policy
// denial stands; otherwise, unless the bundle says on_budget: approve,
// the call is denied with Code budget — budgetDecision appends the
// step.denied and returns true with the call's error — and with it dec
// becomes an approval whose reason names the budget first (one approval
// is asked, DESIGN §21½.11; a rule that asked too keeps its id and
// settings).
func (d *dispatch) budgetDecision(stepID string, c call, spent string, dec *policy.Decision) (bool, error) {
	if denies(*dec) {
		return false, nil
	}
	if b := d.bundle(); b == nil || b.OnBudget() != policy.VerdictApprove {
		return true, d.deny(stepID, c, spent, eventlog.DenyBudget, "")
	}
	reason := spent
	if dec.Approval {
		if dec.Reason != "" {
			reason += "; " + dec.Reason
		}
	} else {
		dec.RuleID, dec.ApprovalSettings = "", nil
	}
	dec.Allow, dec.Approval, dec.Reason = false, true, reason
	return false, nil
}
