package kernelapi

import (
	"errors"
	"net/http"

	"github.com/forkline/forkline/policy"
)

// putPolicy sets the agent's policy bundle (DESIGN §17) from the body, the
// bundle's YAML text: from now on it decides that agent's live calls, in
// place of the kernel's own bundle. A bundle ParseBundle refuses is 400
// with the line and field in details, and nothing changes.
func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request, req *request) error {
	a, err := s.agentNamed(r.PathValue("agent"))
	if err != nil {
		return err
	}
	b, err := policy.ParseBundle(req.body)
	if err != nil {
		var be *policy.BundleError
		if errors.As(err, &be) {
			e := errorf(http.StatusBadRequest, "invalid_request", "%v", err)
			e.details = map[string]any{"line": be.Line, "field": be.Field}
			return e
		}
		return errorf(http.StatusBadRequest, "invalid_request", "%v", err)
	}
	if err := s.k.SetAgentBundle(a.ID, b); err != nil {
		return errorf(http.StatusBadRequest, "invalid_request", "%v", err)
	}
	writeJSON(w, http.StatusOK, policyJSON(a.ID, b))
	return nil
}

// policyJSON is an agent's bundle as the API shows it: its canonical text
// and its rules by priority.
func policyJSON(agent string, b *policy.Bundle) map[string]any {
	rules := []map[string]any{}
	for _, r := range b.Rules() {
		rules = append(rules, map[string]any{"id": r.ID, "priority": r.Priority, "decision": string(r.Verdict)})
	}
	return map[string]any{"agent_id": agent, "bundle": b.String(), "default": string(b.Default()), "rules": rules}
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	a, err := s.agentNamed(r.PathValue("agent"))
	if err != nil {
		return err
	}
	b := s.k.AgentBundle(a.ID)
	if b == nil {
		return errorf(http.StatusNotFound, "not_found", "agent %q has no policy bundle", a.ID)
	}
	writeJSON(w, http.StatusOK, policyJSON(a.ID, b))
	return nil
}

// deletePolicy removes the agent's bundle: the kernel's own decides again.
func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	a, err := s.agentNamed(r.PathValue("agent"))
	if err != nil {
		return err
	}
	if s.k.AgentBundle(a.ID) == nil {
		return errorf(http.StatusNotFound, "not_found", "agent %q has no policy bundle", a.ID)
	}
	if err := s.k.SetAgentBundle(a.ID, nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
