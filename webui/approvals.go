package webui

import (
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// approvalsPage is the data of the approvals page and of an execution's
// list of awaited approvals: the calls a gate asked a person about
// (DESIGN §12).
type approvalsPage struct {
	Title   string
	Pending []sdk.PendingApproval
}

// pendingRows is the data of the "pending" template: the approvals, and
// the prefix that makes an execution's ID a link relative to the page.
func pendingRows(base string, list []sdk.PendingApproval) any {
	return struct {
		Base    string
		Pending []sdk.PendingApproval
	}{base, list}
}

// approvals lists every call that awaits a decision, each with the forms
// that approve or reject it.
func (s *server) approvals(w http.ResponseWriter, r *http.Request) {
	list, err := s.k.Approvals(r.Context(), sdk.Filter{Agent: r.FormValue("agent")})
	if err != nil {
		fail(w, err)
		return
	}
	render(w, "approvals", approvalsPage{Title: "forkline · approvals", Pending: list})
}

// decider is who decides, as the form's by field names them; when it is
// empty, "web page (HOST)" with the request's remote host, since the page
// knows nobody's name.
func decider(r *http.Request) string {
	if by := strings.TrimSpace(r.FormValue("by")); by != "" {
		return by
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host == "" {
		return "web page"
	}
	return "web page (" + host + ")"
}

// decide records a person's decision on the approval that step (a form
// value) of execution {id} awaits, as a request the execution's owner
// records (Kernel.Approve, Kernel.Reject), then sends the browser to the
// execution's page. Deciding a step that awaits no decision is 409, and
// a decider (by) not among the request's approvers 403; both write
// nothing.
func (s *server) decide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		info, ok := s.info(w, r)
		if !ok {
			return
		}
		step, note := r.FormValue("step"), r.FormValue("note")
		if step == "" {
			badRequest(w, "step: want the StepID of a call of %s that awaits an approval", info.ID)
			return
		}
		opts := []sdk.DecisionOption{sdk.By(decider(r)), sdk.Note(note)}
		var err error
		if approve {
			err = s.k.Approve(r.Context(), info.ID, step, opts...)
		} else {
			err = s.k.Reject(r.Context(), info.ID, step, opts...)
		}
		if errors.Is(err, sdk.ErrNoPendingApproval) {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		if errors.Is(err, sdk.ErrForbidden) {
			// Not one of the request's approvers (a guardrail, not
			// authentication: the page believes the name given).
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if errors.Is(err, sdk.ErrInvalid) {
			badRequest(w, "%v", err)
			return
		}
		if err != nil {
			fail(w, err)
			return
		}
		// Relative to /e/{id}/approve, so that the page works mounted under
		// any prefix.
		w.Header().Set("Location", "../"+info.ID.String())
		w.WriteHeader(http.StatusSeeOther)
	}
}

// policyDecision is one decision a policy recorded on a call (DESIGN §17):
// a step.denied or an approval.requested, with the rule that made it.
type policyDecision struct {
	Seq      uint64
	Decision string // "denied CODE" or "approval asked"
	Call     string // kind and target
	RuleID   string // "" for a gate's or the bundle default's decision
	Reason   string
}

// policyDecisions lists the step.denied and approval.requested events of
// evs, in order.
func policyDecisions(evs []eventlog.Event) []policyDecision {
	var out []policyDecision
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.StepDenied:
			d := "denied"
			if p.Code != "" {
				d += " " + string(p.Code)
			}
			out = append(out, policyDecision{Seq: ev.Seq, Decision: d, Call: string(p.StepKind) + " " + p.Target, RuleID: p.RuleID, Reason: p.Reason})
		case *eventlog.ApprovalRequested:
			out = append(out, policyDecision{Seq: ev.Seq, Decision: "approval asked", Call: string(p.StepKind) + " " + p.Target, RuleID: p.RuleID, Reason: p.Reason})
		}
	}
	return out
}
