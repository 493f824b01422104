package kernelapi

import (
	"net/http"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// approvalJSON is a pending approval as the API shows it; its id is
// "<execution id>.<step id>".
type approvalJSON struct {
	ID          string `json:"id"`
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`
	AgentID     string `json:"agent_id"`
	Kind        string `json:"kind"`
	Target      string `json:"target"`
	Status      string `json:"status"`
	Message     string `json:"message"`
}

func pendingJSON(p sdk.PendingApproval) approvalJSON {
	return approvalJSON{ID: approvalID(p.Execution, p.StepID), ExecutionID: p.Execution.String(), StepID: p.StepID,
		AgentID: p.Agent, Kind: wireKind(p.StepKind), Target: p.Target, Status: "pending", Message: p.Reason}
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	ps, err := s.k.Approvals(r.Context(), eventlog.Filter{})
	if err != nil {
		return err
	}
	out := make([]approvalJSON, 0, len(ps))
	for _, p := range ps {
		out = append(out, pendingJSON(p))
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": out})
	return nil
}

// pendingNamed finds the pending approval of the path's {approval}.
func (s *Server) pendingNamed(r *http.Request) (sdk.PendingApproval, error) {
	name := r.PathValue("approval")
	exec, step, ok := strings.Cut(name, ".")
	id, err := eventlog.ParseID(exec)
	if !ok || err != nil || step == "" {
		return sdk.PendingApproval{}, errorf(http.StatusNotFound, "not_found", "no approval %q", name)
	}
	ps, err := s.k.AwaitedApprovals(r.Context(), id)
	if err != nil && !isNotFound(err) {
		return sdk.PendingApproval{}, err
	}
	for _, p := range ps {
		if p.StepID == step {
			return p, nil
		}
	}
	return sdk.PendingApproval{}, errorf(http.StatusNotFound, "not_found", "no pending approval %q", name)
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	p, err := s.pendingNamed(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pendingJSON(p))
	return nil
}

type decideBody struct {
	DecidedBy string `json:"decided_by"`
	Rationale string `json:"rationale"`
}

// decide grants or denies a pending approval: the execution is dispatched
// again and the call proceeds, or is denied.
func (s *Server) decide(grant bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, req *request) error {
		var b decideBody
		if err := decode(req.body, &b); err != nil {
			return err
		}
		if err := validName("decided_by", b.DecidedBy); err != nil {
			return err
		}
		p, err := s.pendingNamed(r)
		if err != nil {
			return err
		}
		opts := []sdk.DecisionOption{sdk.By(b.DecidedBy)}
		if b.Rationale != "" {
			opts = append(opts, sdk.Note(b.Rationale))
		}
		if grant {
			err = s.k.Approve(r.Context(), p.Execution, p.StepID, opts...)
		} else {
			err = s.k.Reject(r.Context(), p.Execution, p.StepID, opts...)
		}
		if err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}
