package sdk

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/replay"
)

// Approvals (DESIGN §12). A gate that answers policy.Decision{Approval:
// true} makes the kernel append approval.requested (synced) instead of
// running the call: the execution is waiting and the call blocks until
// someone decides with Kernel.Approve or Kernel.Reject. Those are inbox
// requests (DESIGN §8½) that the owner moves into the lineage as
// approval.granted or approval.rejected; with no live owner the requester
// appends the decision itself, and the decision wakes a parked execution
// (its WakeAt becomes the decision's time, eventlog.StatusState), so Serve
// runs it again. A granted call runs live; a rejected one ends as a denied
// call does — step.denied with the rejection as its reason, and a
// *DeniedError (ErrDenied) for the caller, live and on replay.
//
// Approvals that expire and name who decides (DESIGN §17, §21½.10): the
// deciding rule's approval settings (policy.ApprovalSettings: a bundle
// rule's then.approval, or a gate's Decision) are recorded in
// approval.requested — Approvers, Message, and ExpiresAt, the kernel's
// clock plus the Timeout. Past ExpiresAt with no decision the call is
// denied: the owner waiting in process, or the dispatch Serve runs at the
// expiry (a parked execution's wake time is the earliest ExpiresAt it
// awaits), first takes the inbox's requests — a decision already there
// wins over the expiry — then appends step.denied{Code:
// approval_expired, RuleID}, and the call returns a *DeniedError that is
// ErrApprovalExpired (and ErrDenied), live and on replay. Only a dispatch
// appends the expiry, so only an owner that may open the execution's
// resources does (DESIGN §15½.4); Approvals, Approve and the listings
// never do. Until the expiry is recorded a decision is still accepted. A
// pending request of a fork's prefix does not apply past fork.created:
// the fork asks again, with a fresh ExpiresAt.
//
// Approvers is a guardrail, not authentication: Approve and Reject refuse
// a decider (By) that is not listed with ErrForbidden and write nothing,
// but they believe the name they are given.
//
// Nothing is asked twice: a recorded approval.requested is awaited again
// on replay (after a crash, or when Serve runs a parked execution), and a
// recorded decision is followed, whatever the gate would say now. A fork
// never inherits an approval of its prefix, and every live attempt in a
// fork — its retries, the re-run of an orphan — is gated again.

// ErrNoPendingApproval is wrapped by the error of Approve or Reject for a
// step that awaits no decision: none was requested by this execution's
// run, or it was decided already (in the log, or by a request waiting in
// the inbox), or the execution ended. Nothing is written.
var ErrNoPendingApproval = errors.New("sdk: no approval awaits a decision")

// PendingApproval is a call that awaits a decision (Kernel.Approvals).
type PendingApproval struct {
	Execution   eventlog.ID
	Agent       string
	StepID      string
	StepKind    eventlog.StepKind
	Target      string
	Args        []byte    // the call's canonical args
	Reason      string    // the gate's reason for asking
	RuleID      string    // the policy rule that asked; "" for none
	Message     string    // the rule's message for the approvers
	Approvers   []string  // who may decide; none means anyone
	ExpiresAt   time.Time // when the call is denied undecided (approval_expired); zero for never
	RequestedAt uint64    // seq of the approval.requested
	Time        time.Time // when it was requested
}

// DecisionOption configures Approve and Reject: By names who decided,
// Note says why.
type DecisionOption func(*decisionOptions) error

// decisionOptions is what the DecisionOptions of one decision set.
type decisionOptions struct {
	by   string // "" until By: the default decider (defaultDecider)
	note string
}

// maxDeciderLen bounds the name By records.
const maxDeciderLen = 256

// By names who decides: the person or system recorded as
// approval.granted/rejected.By and shown by forkline approvals, forkline
// events and the live page. Without By the decision is recorded as made by
// the OS user running the process (os/user; "user:NAME"), or, when the
// process has none, by the kernel's owner name (WithOwner). An empty name,
// one longer than 256 bytes, one with control characters or one that is not
// valid UTF-8 is ErrInvalid, and nothing is written. It is a label, not
// authentication: the kernel believes it. When the request names its
// Approvers, a decider not among them is refused with ErrForbidden.
func By(name string) DecisionOption {
	return func(o *decisionOptions) error {
		switch {
		case name == "":
			return fmt.Errorf("%w: By: empty name", ErrInvalid)
		case len(name) > maxDeciderLen:
			return fmt.Errorf("%w: By: a name of %d bytes, more than %d", ErrInvalid, len(name), maxDeciderLen)
		case !utf8.ValidString(name):
			return fmt.Errorf("%w: By: name %q is not valid UTF-8", ErrInvalid, name)
		case strings.IndexFunc(name, unicode.IsControl) >= 0:
			return fmt.Errorf("%w: By: name %q holds a control character", ErrInvalid, name)
		}
		o.by = name
		return nil
	}
}

// Note records text with the decision (approval.granted/rejected.Note):
// a rejection's note is the denied call's reason (DeniedError.Note), a
// grant's is what ApprovalNote returns inside the approved call's body.
// Text that is not valid UTF-8 is ErrInvalid. Without Note the decision
// has none.
func Note(text string) DecisionOption {
	return func(o *decisionOptions) error {
		if !utf8.ValidString(text) {
			return fmt.Errorf("%w: Note: text %q is not valid UTF-8", ErrInvalid, text)
		}
		o.note = text
		return nil
	}
}

// decisionOpts applies opts over the defaults.
func (k *Kernel) decisionOpts(opts []DecisionOption) (decisionOptions, error) {
	var o decisionOptions
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil decision option", ErrInvalid)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.by == "" {
		o.by = k.defaultDecider()
	}
	return o, nil
}

// defaultDecider is who decides when By is not given: the OS user running
// the process, else the kernel's owner name.
func (k *Kernel) defaultDecider() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "user:" + u.Username
	}
	return k.owner
}

// ApprovalNote returns, inside the body of a call that ran because its
// approval was granted, the grant's note (Note); "" outside such a body or
// when the grant has none. A re-run of the approved step (after a crash,
// or a retry that was not asked about again) sees the same note. In a fork,
// only a grant of the fork's own run counts: an approval of the prefix
// never approves the fork's live call (DESIGN §8½).
func ApprovalNote(ctx context.Context) string {
	if si, ok := ctx.Value(stepKey{}).(*stepInfo); ok {
		return si.note
	}
	return ""
}

// Approve grants the approval that step stepID of execution id awaits
// (DESIGN §12, §21½.10): the call runs live. By names who decided (its
// default is the OS user), Note records why; the body reads the note with
// ApprovalNote. The decision is a request (DESIGN §8½): the execution's
// owner records approval.granted{By, Note} within 100 ms while it runs;
// with no live owner this call records it, and Serve runs the execution
// again. A step that awaits no decision — never asked, decided already,
// or of an ended execution — is an error wrapping ErrNoPendingApproval,
// and nothing is written; of decisions of one step made at once (an
// Approve racing a Reject, from any process), exactly one is stored — on
// a store that implements eventlog.Decider, as both of forkline's do —
// and the others get ErrNoPendingApproval; an unknown execution is ErrNotFound; a bad
// option is ErrInvalid. When the request names its Approvers (a policy
// rule's approval.approvers), a decider (By, or the default decider) not
// among them gets an error wrapping ErrForbidden and nothing is written —
// a guardrail against a mistaken decision, not authentication: the name
// is believed as given. An expired request (step.denied approval_expired
// recorded) awaits no decision.
func (k *Kernel) Approve(ctx context.Context, id eventlog.ID, stepID string, opts ...DecisionOption) error {
	o, err := k.decisionOpts(opts)
	if err != nil {
		return fmt.Errorf("sdk: approve step %s of %s: %w", stepID, id, err)
	}
	return k.decideApproval(ctx, id, &eventlog.ApprovalGranted{StepID: stepID, By: o.by, Note: o.note})
}

// Reject refuses the approval that step stepID of execution id awaits
// (DESIGN §12, §21½.10): the call never runs and returns a *DeniedError
// (ErrDenied) whose Note and By are the rejection's, live and on replay;
// its text ends with the note. It is recorded and refused as Approve is.
func (k *Kernel) Reject(ctx context.Context, id eventlog.ID, stepID string, opts ...DecisionOption) error {
	o, err := k.decisionOpts(opts)
	if err != nil {
		return fmt.Errorf("sdk: reject step %s of %s: %w", stepID, id, err)
	}
	return k.decideApproval(ctx, id, &eventlog.ApprovalRejected{StepID: stepID, By: o.by, Note: o.note})
}

// decideApproval checks that p decides an awaited approval and requests
// it; with no live owner it settles the request at once.
func (k *Kernel) decideApproval(ctx context.Context, id eventlog.ID, p eventlog.Payload) error {
	stepID := decisionStep(p)
	verb := "approve"
	if p.Kind() == eventlog.KindApprovalRejected {
		verb = "reject"
	}
	if stepID == "" {
		return fmt.Errorf("%w: %s step of %s: empty step ID", ErrInvalid, verb, id)
	}
	var inbox eventlog.Inbox
	ok := eventlog.As(k.log, &inbox)
	if !ok {
		return fmt.Errorf("%w: the log keeps no inbox (eventlog.Inbox): %s needs one", ErrInvalid, verb)
	}
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return err
	}
	if info.Status.Terminal() {
		return fmt.Errorf("sdk: %s step %s of %s: the execution ended (%s): %w", verb, stepID, id, info.Status, ErrNoPendingApproval)
	}
	st, err := replay.Fold(k.log.Events(ctx, id, 1))
	if err != nil {
		return fmt.Errorf("sdk: %s step %s of %s: %w", verb, stepID, id, err)
	}
	a, ok := st.Approval(stepID)
	switch {
	case !ok:
		return fmt.Errorf("sdk: %s step %s of %s: no approval of it was requested: %w", verb, stepID, id, ErrNoPendingApproval)
	case !a.Own:
		return fmt.Errorf("sdk: %s step %s of %s: its approval was requested at seq %d, before the fork point %d; a fork asks again: %w",
			verb, stepID, id, a.RequestedAt, st.ForkAt, ErrNoPendingApproval)
	case a.Decision != "":
		return fmt.Errorf("sdk: %s step %s of %s: it was %s at seq %d already: %w", verb, stepID, id, a.Decision, a.DecidedAt, ErrNoPendingApproval)
	case len(a.Approvers) > 0 && !slices.Contains(a.Approvers, decisionBy(p)):
		return fmt.Errorf("sdk: %s step %s of %s: %q may not decide it (approvers: %s): %w",
			verb, stepID, id, decisionBy(p), strings.Join(a.Approvers, ", "), ErrForbidden)
	}
	if err := k.requestDecision(ctx, inbox, id, p); err != nil {
		if errors.Is(err, eventlog.ErrNotAwaited) {
			return fmt.Errorf("sdk: %s step %s of %s: %w: %w", verb, stepID, id, ErrNoPendingApproval, err)
		}
		return fmt.Errorf("sdk: %s step %s of %s: %w", verb, stepID, id, err)
	}
	if err := k.settle(ctx, id); err != nil {
		return err
	}
	k.notify()
	return nil
}

// requestDecision writes decision p into id's inbox. A store that decides
// atomically (eventlog.Decider: both of forkline's) checks in the same
// write that the step still awaits a decision, so of an Approve racing a
// Reject exactly one is stored and the other is refused (ErrNotAwaited).
// On an Inbox without Decide the check of the pending requests and the
// write are two steps, and such a race may store both.
func (k *Kernel) requestDecision(ctx context.Context, inbox eventlog.Inbox, id eventlog.ID, p eventlog.Payload) error {
	var d eventlog.Decider
	if eventlog.As(k.log, &d) {
		_, err := d.Decide(ctx, id, p, k.now())
		return err
	}
	stepID := decisionStep(p)
	reqs, err := inbox.Requests(ctx, id)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if decisionStep(r.Data) == stepID {
			return fmt.Errorf("a decision (%s) awaits its owner already: %w", r.Data.Kind(), eventlog.ErrNotAwaited)
		}
	}
	_, err = inbox.Request(ctx, id, p, k.now())
	return err
}

// decisionStep returns the StepID an approval decision decides; "" for any
// other payload.
func decisionStep(p eventlog.Payload) string {
	switch p := p.(type) {
	case *eventlog.ApprovalGranted:
		return p.StepID
	case *eventlog.ApprovalRejected:
		return p.StepID
	}
	return ""
}

// decisionBy returns who made decision p; "" for any other payload.
func decisionBy(p eventlog.Payload) string {
	switch p := p.(type) {
	case *eventlog.ApprovalGranted:
		return p.By
	case *eventlog.ApprovalRejected:
		return p.By
	}
	return ""
}

// Approvals returns the calls that await a decision, of the executions f
// selects (f.Status is ignored: only waiting executions await one), in
// execution order and, within one, by StepID.
func (k *Kernel) Approvals(ctx context.Context, f Filter) ([]PendingApproval, error) {
	f.Status = []eventlog.Status{eventlog.StatusWaiting}
	infos, err := k.List(ctx, f)
	if err != nil {
		return nil, err
	}
	var out []PendingApproval
	for _, info := range infos {
		some, err := k.awaited(ctx, info)
		if err != nil {
			return nil, err
		}
		out = append(out, some...)
	}
	return out, nil
}

// AwaitedApprovals returns the calls of execution id that await a
// decision, by StepID; none when it is not waiting. An unknown id is
// ErrNotFound.
func (k *Kernel) AwaitedApprovals(ctx context.Context, id eventlog.ID) ([]PendingApproval, error) {
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.Status != eventlog.StatusWaiting {
		return nil, nil
	}
	return k.awaited(ctx, info)
}

// awaited folds info's lineage for the approvals it awaits.
func (k *Kernel) awaited(ctx context.Context, info eventlog.Info) ([]PendingApproval, error) {
	st, err := replay.Fold(k.log.Events(ctx, info.ID, 1))
	if err != nil {
		return nil, fmt.Errorf("sdk: approvals of %s: %w", info.ID, err)
	}
	var out []PendingApproval
	for _, stepID := range st.Awaited() {
		a, _ := st.Approval(stepID)
		at, err := k.eventTime(ctx, info.ID, a.RequestedAt)
		if err != nil {
			return nil, err
		}
		out = append(out, PendingApproval{
			Execution: info.ID, Agent: info.Agent, StepID: a.StepID, StepKind: a.StepKind, Target: a.Target,
			Args: a.Args, Reason: a.Reason, RuleID: a.RuleID, Message: a.Message, Approvers: a.Approvers,
			ExpiresAt: a.ExpiresAt, RequestedAt: a.RequestedAt, Time: at,
		})
	}
	return out, nil
}

// eventTime returns the Time of event seq of id.
func (k *Kernel) eventTime(ctx context.Context, id eventlog.ID, seq uint64) (time.Time, error) {
	for ev, err := range k.log.Events(ctx, id, seq) {
		if err != nil {
			return time.Time{}, err
		}
		return ev.Time, nil
	}
	return time.Time{}, fmt.Errorf("sdk: execution %s has no event %d: %w", id, seq, eventlog.ErrNotFound)
}

// takeDecisionLocked says whether the inbox's decision p is to be moved
// into the lineage: it decides an approval this run awaits, and no earlier
// request of the same take decided it (taken lists those). A decision
// that awaits nothing (a second one that raced the first past Approve's
// checks) is removed from the inbox without an event.
func (d *dispatch) takeDecisionLocked(p eventlog.Payload, taken []string) bool {
	stepID := decisionStep(p)
	a, ok := d.state.Approval(stepID)
	return ok && a.Pending() && !slices.Contains(taken, stepID)
}

// decidedLocked returns a channel closed when the next approval decision
// is folded into the dispatch's state.
func (d *dispatch) decidedLocked() <-chan struct{} {
	if d.decided == nil {
		d.decided = make(chan struct{})
	}
	return d.decided
}

// foldedDecisionLocked wakes the calls that await a decision.
func (d *dispatch) foldedDecisionLocked() {
	if d.decided != nil {
		close(d.decided)
		d.decided = nil
	}
}

// approvalForLocked returns the recorded approval that applies to the
// next live attempt of step stepID: requested by this run (after the
// lineage's newest fork.created) and after the step's newest event, so
// that an approval of an earlier attempt never approves a retry or a
// re-run that the gate asks about again.
func (d *dispatch) approvalForLocked(stepID string) (replay.Approval, bool) {
	a, ok := d.state.Approval(stepID)
	if !ok || !a.Own {
		return replay.Approval{}, false
	}
	if st, ok := d.state.Step(stepID); ok && a.RequestedAt < max(st.StartedAt, st.EndedAt) {
		return replay.Approval{}, false
	}
	return a, true
}

// admit decides whether the next live attempt of c (step stepID) runs
// (DESIGN §7, §12): it follows a recorded approval of the attempt, else
// asks the gate when gated says this attempt is gated; an allowed or
// granted attempt then takes a call of its rule's rate limit (DESIGN §17,
// ratelimit.go). It returns nil when the attempt may run; otherwise the
// recorded denial (a *DeniedError), or an error wrapping ErrWaiting when
// the dispatch parks waiting for a decision or a rate limit, or ctx's
// error.
func (d *dispatch) admit(ctx context.Context, stepID string, c call, gated bool) error {
	d.mu.Lock()
	a, ok := d.approvalForLocked(stepID)
	d.mu.Unlock()
	if !ok {
		spent, over := d.overBudget(c)
		if !over && (!gated || !d.policed()) {
			return nil
		}
		if err := notStarted(ctx, c); err != nil {
			return err
		}
		dec := policy.Decision{Allow: true}
		if gated && d.policed() {
			dec = d.decide(ctx, c)
		}
		if over {
			if denied, err := d.budgetDecision(stepID, c, spent, &dec); denied {
				return err
			}
		}
		switch {
		case dec.Approval:
			var err error
			if a, err = d.requestApproval(stepID, c, dec); err != nil {
				return err
			}
		case dec.Allow:
			return d.rateLimit(ctx, stepID, c, dec.RuleID, dec.RateLimit)
		default:
			return d.deny(stepID, c, dec.Reason, eventlog.DenyPolicy, dec.RuleID)
		}
	}
	if a.Decision == "" {
		var err error
		if a, err = d.awaitDecision(ctx, stepID, c); err != nil {
			return err
		}
	}
	if a.Decision == replay.ApprovalGranted {
		return d.limitGranted(ctx, stepID, c)
	}
	reason := "approval rejected"
	if a.Note != "" {
		reason += ": " + a.Note
	}
	err := d.deny(stepID, c, reason, eventlog.DenyApprovalRejected, a.RuleID)
	if de := (*DeniedError)(nil); errors.As(err, &de) {
		de.By, de.Note = a.By, a.Note
	}
	return err
}

// recordedDenial is the error a recorded step.denied of step stepID
// replays as: the gate's reason, and for a rejected approval its By and
// Note, as the live call returned them.
func (d *dispatch) recordedDenial(stepID string, c call, rec replay.Step) *DeniedError {
	de := &DeniedError{Target: c.target, Reason: rec.Reason, Code: rec.Code, RuleID: rec.RuleID}
	d.mu.Lock()
	a, ok := d.state.Approval(stepID)
	d.mu.Unlock()
	if ok && a.Decision == replay.ApprovalRejected && a.DecidedAt < rec.EndedAt {
		de.By, de.Note = a.By, a.Note
	}
	return de
}

// grantNoteLocked returns the note of the grant that lets the next live
// attempt of step stepID run: the newest approval of this run's (Own),
// granted. d.mu is held.
func (d *dispatch) grantNoteLocked(stepID string) string {
	if a, ok := d.state.Approval(stepID); ok && a.Own && a.Decision == replay.ApprovalGranted {
		return a.Note
	}
	return ""
}

// requestApproval appends approval.requested for c as dec asks it: the
// deciding rule's ID ("" for none), and its approval settings — the
// message and approvers, and ExpiresAt, now on the kernel's clock plus
// the timeout (none without one). The execution is waiting.
func (d *dispatch) requestApproval(stepID string, c call, dec policy.Decision) (replay.Approval, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usableLocked(); err != nil {
		return replay.Approval{}, err
	}
	req := &eventlog.ApprovalRequested{
		StepID: stepID, StepKind: c.kind, Target: c.target, Args: c.args, Reason: dec.Reason, RuleID: dec.RuleID,
	}
	if as := dec.ApprovalSettings; as != nil {
		req.Message, req.Approvers = as.Message, slices.Clone(as.Approvers)
		if as.Timeout > 0 {
			req.ExpiresAt = eventlog.WakeAfter(d.k.now(), as.Timeout)
		}
	}
	if err := d.appendLocked(false, req); err != nil {
		return replay.Approval{}, err
	}
	d.k.logger.Info("forkline: approval requested", "execution", d.id.String(), "step", stepID,
		"kind", string(c.kind), "target", c.target, "reason", dec.Reason)
	a, _ := d.state.Approval(stepID)
	return a, nil
}

// awaitDecision waits until the approval of step stepID is decided and
// returns it. Past the request's ExpiresAt (on the kernel's clock) it
// denies the call as expired (expireLocked) and returns that denial.
// Past ParkAfter the dispatch parks (ParkApproval) until the expiry, and
// it returns an error wrapping ErrWaiting; when ctx ends first, ctx's
// error, and nothing is appended.
func (d *dispatch) awaitDecision(ctx context.Context, stepID string, c call) (replay.Approval, error) {
	park := d.k.clock.After(d.k.parkAfter)
	var expiry <-chan time.Time
	expired := false // the expiry's timer fired
	for {
		d.mu.Lock()
		a, _ := d.state.Approval(stepID)
		if a.Decision != "" {
			d.mu.Unlock()
			return a, nil
		}
		if err := d.usableLocked(); err != nil {
			if d.parked != "" {
				d.awaiting = append(d.awaiting, stepID)
				d.parkUntilLocked(d.parked, a.ExpiresAt)
			}
			d.mu.Unlock()
			return replay.Approval{}, err
		}
		if !a.ExpiresAt.IsZero() {
			if expired || !d.k.now().Before(a.ExpiresAt) {
				decided, err := d.expireLocked(stepID, c, a)
				d.mu.Unlock()
				if decided {
					continue // a decision taken from the inbox wins over the expiry
				}
				return replay.Approval{}, err
			}
			if expiry == nil {
				expiry = d.k.clock.After(a.ExpiresAt.Sub(d.k.now()))
			}
		}
		decided := d.decidedLocked()
		d.mu.Unlock()
		select {
		case <-decided:
		case <-expiry:
			expired = true
		case <-park:
			d.mu.Lock()
			d.parkUntilLocked(eventlog.ParkApproval, a.ExpiresAt)
			d.awaiting = append(d.awaiting, stepID)
			d.mu.Unlock()
			return replay.Approval{}, fmt.Errorf("sdk: %s %q: approval of step %s: %w", c.kind, c.target, stepID, ErrWaiting)
		case <-ctx.Done():
			return replay.Approval{}, fmt.Errorf("sdk: %s %q: wait for approval cancelled: %w", c.kind, c.target, context.Cause(ctx))
		}
	}
}

// expireLocked ends the wait for approval a of step stepID, past its
// ExpiresAt (DESIGN §17, §21½.10): it first takes the inbox's requests,
// and when that brings the step's decision it reports decided — a
// decision already in the inbox wins over the expiry. Otherwise it
// appends step.denied{Code: approval_expired} with the request's rule and
// returns the *DeniedError (ErrApprovalExpired). d.mu is held.
func (d *dispatch) expireLocked(stepID string, c call, a replay.Approval) (decided bool, err error) {
	if err := d.takeRequestsLocked(); err != nil {
		return false, err
	}
	if now, _ := d.state.Approval(stepID); now.Decision != "" {
		return true, nil
	}
	reason := "approval expired at " + a.ExpiresAt.UTC().Format(time.RFC3339) + " undecided"
	d.k.logger.Info("forkline: approval expired", "execution", d.id.String(), "step", stepID,
		"kind", string(c.kind), "target", c.target, "expires_at", a.ExpiresAt)
	return false, d.denyLocked(stepID, c, reason, eventlog.DenyApprovalExpired, a.RuleID)
}

// deny records that c (step stepID) does not run: step.denied with
// reason, code and the deciding rule's ID. The re-run of an orphan (started or cancelled on an earlier
// dispatch) first abandons the orphan's attempt (DESIGN §15: it lands and
// is counted, with any capture that makes due), so that the step ends
// denied.
func (d *dispatch) deny(stepID string, c call, reason string, code eventlog.DenialCode, ruleID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.denyLocked(stepID, c, reason, code, ruleID)
}

// denyLocked is deny with d.mu held.
func (d *dispatch) denyLocked(stepID string, c call, reason string, code eventlog.DenialCode, ruleID string) error {
	if err := d.usableLocked(); err != nil {
		return err
	}
	var payloads []eventlog.Payload
	if st, ok := d.state.Step(stepID); ok && (st.Status == replay.StepStarted || st.Status == replay.StepCancelled) {
		payloads = append(payloads, &eventlog.StepAbandoned{StepID: stepID})
		payloads = append(payloads, d.dueCapturesLocked(stepID, c)...)
	}
	payloads = append(payloads, &eventlog.StepDenied{StepID: stepID, StepKind: c.kind, Target: c.target, Reason: reason, Code: code, RuleID: ruleID})
	if err := d.appendLocked(false, payloads...); err != nil {
		return err
	}
	d.logCaptures(payloads[:len(payloads)-1])
	d.k.tel.stepEnded(nil, c.kind, "denied", nil, time.Time{})
	return &DeniedError{Target: c.target, Reason: reason, Code: code, RuleID: ruleID}
}

// wakeDecidedLocked makes a parking dispatch wake at once when a call
// parked waiting for a decision that has arrived since (the owner took it
// after the call gave up): its dispatch.parked would otherwise follow the
// decision, and nothing would wake it.
func (d *dispatch) wakeDecidedLocked() {
	for _, stepID := range d.awaiting {
		if a, ok := d.state.Approval(stepID); ok && !a.Pending() {
			d.parkUntilLocked(eventlog.ParkApproval, d.k.now())
			return
		}
	}
}
