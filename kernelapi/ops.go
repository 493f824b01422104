package kernelapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
)

// health answers {"status":"ok"} while the process serves.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready answers 503 when the store does not answer a read within 2 s.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	for _, err := range s.log.List(ctx, eventlog.Filter{Limit: 1}) {
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the store does not answer: "+err.Error(), nil)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

type forkBody struct {
	At uint64 `json:"at"`
}

// fork forks the execution at event at (forkline's addition): the new
// execution is dispatched to the same agent, which replays the prefix.
func (s *Server) fork(w http.ResponseWriter, r *http.Request, req *request) error {
	var b forkBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	if b.At == 0 || b.At > info.Head {
		return errorf(http.StatusBadRequest, "invalid_request", "at %d is not an event of execution %s (1 to %d)", b.At, info.ID, info.Head)
	}
	id, err := s.k.Fork(r.Context(), info.ID, b.At)
	if err != nil {
		return err
	}
	out, err := s.execution(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// coverage answers whether a fork at event at restores covered state, and
// each resource's selection (forkline's addition).
func (s *Server) coverage(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	at, err := strconv.ParseUint(r.URL.Query().Get("at"), 10, 64)
	if err != nil || at == 0 || at > info.Head {
		return errorf(http.StatusBadRequest, "invalid_request", "at %q is not an event of execution %s (1 to %d)", r.URL.Query().Get("at"), info.ID, info.Head)
	}
	p, err := s.k.Coverage(r.Context(), info.ID, at)
	if err != nil {
		return err
	}
	res := make([]map[string]any, 0, len(p.Resources))
	for _, sel := range p.Resources {
		res = append(res, map[string]any{"key": sel.Key, "ref": sel.Ref, "captured_at": sel.CapturedAt,
			"generation": sel.Generation, "covered": sel.Covered})
	}
	writeJSON(w, http.StatusOK, map[string]any{"seq": p.Seq, "covered": p.Covered, "resources": res})
	return nil
}

// diff compares the execution with the one named by with= (fork.Diff,
// forkline's addition): the prefix their lineages share, their other steps
// aligned by step ID with each side's outcome, their outputs and each
// resource's newest checkpoint. Step kinds are the wire's names.
func (s *Server) diff(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	a, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	with := r.URL.Query().Get("with")
	if with == "" {
		return errorf(http.StatusBadRequest, "invalid_request", "with= names the execution to compare with")
	}
	bid, err := eventlog.ParseID(with)
	if err != nil {
		return errorf(http.StatusBadRequest, "invalid_request", "with=%q is not an execution ID", with)
	}
	if _, err := s.log.Info(r.Context(), bid); err != nil {
		if isNotFound(err) {
			return errorf(http.StatusNotFound, "not_found", "no execution %s", bid)
		}
		return err
	}
	c, err := fork.Diff(r.Context(), s.log, a.ID, bid)
	if err != nil {
		return err
	}
	for i := range c.Prefix {
		c.Prefix[i].Kind = eventlog.StepKind(wireKind(c.Prefix[i].Kind))
	}
	for i := range c.Steps {
		c.Steps[i].Kind = eventlog.StepKind(wireKind(c.Steps[i].Kind))
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}
