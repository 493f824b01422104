package webui

import (
	"errors"
	"net/http"

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

// decide records a person's decision on the approval that step (a form
// value) of execution {id} awaits, as a request the execution's owner
// records (Kernel.Approve, Kernel.Reject), then sends the browser to the
// execution's page. Deciding a step that awaits no decision is 409 and
// writes nothing.
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
		var err error
		if approve {
			err = s.k.Approve(r.Context(), info.ID, step, note)
		} else {
			err = s.k.Reject(r.Context(), info.ID, step, note)
		}
		if errors.Is(err, sdk.ErrNoPendingApproval) {
			http.Error(w, err.Error(), http.StatusConflict)
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
