package kernelapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

type createBody struct {
	AgentID      string          `json:"agent_id"`
	Input        json.RawMessage `json:"input"`
	AgentVersion string          `json:"agent_version"`
	DeadlineAt   *time.Time      `json:"deadline_at"`
}

func (s *Server) createExecution(w http.ResponseWriter, r *http.Request, req *request) error {
	var b createBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	if err := validName("agent_id", b.AgentID); err != nil {
		return err
	}
	if _, err := s.agentNamed(b.AgentID); err != nil {
		return err
	}
	if len(b.Input) == 0 {
		b.Input = json.RawMessage("null")
	}
	var opts []sdk.StartOption
	if b.DeadlineAt != nil {
		if !b.DeadlineAt.After(s.opts.Now()) {
			return errorf(http.StatusBadRequest, "invalid_request", "deadline_at %s is not in the future", b.DeadlineAt.Format(time.RFC3339))
		}
		opts = append(opts, sdk.Deadline(*b.DeadlineAt))
	}
	id, err := s.k.StartByName(r.Context(), b.AgentID, b.Input, opts...)
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

// executionJSON is an execution as the API shows it.
type executionJSON struct {
	ID            string          `json:"id"`
	AgentID       string          `json:"agent_id"`
	Status        string          `json:"status"`
	Input         json.RawMessage `json:"input"`
	Output        json.RawMessage `json:"output"`
	FailureReason string          `json:"failure_reason"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	DeadlineAt    *time.Time      `json:"deadline_at"`
	ParentID      string          `json:"parent_id,omitempty"`
	ForkSeq       uint64          `json:"fork_seq,omitempty"`
}

func infoJSON(info eventlog.Info) executionJSON {
	e := executionJSON{
		ID: info.ID.String(), AgentID: info.Agent, Status: info.Status.String(),
		Input: json.RawMessage("null"), Output: json.RawMessage("null"),
		CreatedAt: info.Created, UpdatedAt: info.Updated,
	}
	if !info.Deadline.IsZero() {
		dl := info.Deadline
		e.DeadlineAt = &dl
	}
	if !info.Parent.IsZero() {
		e.ParentID, e.ForkSeq = info.Parent.String(), info.ForkSeq
	}
	return e
}

// execution reads id's info and its lineage's input and outcome.
func (s *Server) execution(r *http.Request, id eventlog.ID) (executionJSON, error) {
	info, err := s.log.Info(r.Context(), id)
	if err != nil {
		return executionJSON{}, err
	}
	return s.executionFrom(r, info)
}

func (s *Server) executionFrom(r *http.Request, info eventlog.Info) (executionJSON, error) {
	e := infoJSON(info)
	for ev, err := range s.log.Events(r.Context(), info.ID, 1) {
		if err != nil {
			return executionJSON{}, err
		}
		switch p := ev.Data.(type) {
		case *eventlog.ExecutionCreated:
			e.Input = value(p.Input)
		case *eventlog.ForkCreated:
			if p.Input != nil {
				e.Input = value(p.Input)
			}
		case *eventlog.ExecutionCompleted:
			e.Output = value(p.Output)
		case *eventlog.ExecutionFailed:
			e.FailureReason = p.Error
		case *eventlog.ExecutionCancelled:
			e.FailureReason = "cancelled: " + p.Reason
		}
	}
	return e, nil
}

// value is a recorded JSON value, null when empty.
func value(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

func (s *Server) getExecution(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	out, err := s.executionFrom(r, info)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listExecutions pages in execution ID order (IDs are time-ordered, so
// oldest first): next_cursor is the last ID of a full page.
func (s *Server) listExecutions(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	q := r.URL.Query()
	f := eventlog.Filter{Agent: q.Get("agent_id"), Limit: 100}
	if v := q.Get("status"); v != "" {
		st, err := eventlog.ParseStatus(v)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid_request", "%v", err)
		}
		f.Status = []eventlog.Status{st}
	}
	if v := q.Get("cursor"); v != "" {
		id, err := eventlog.ParseID(v)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid_request", "cursor %q is not an execution ID", v)
		}
		f.After = id
	}
	limit, err := intParam(q.Get("limit"), 100, 1000)
	if err != nil {
		return err
	}
	f.Limit = int(limit)
	infos, err := s.k.List(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]executionJSON, 0, len(infos))
	for _, info := range infos {
		out = append(out, infoJSON(info))
	}
	next := ""
	if len(infos) == f.Limit {
		next = infos[len(infos)-1].ID.String()
	}
	writeJSON(w, http.StatusOK, map[string]any{"executions": out, "next_cursor": next})
	return nil
}

// intParam parses a positive query parameter up to max; "" is def.
func intParam(v string, def, max uint64) (uint64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 || n > max {
		return 0, errorf(http.StatusBadRequest, "invalid_request", "%q is not a number from 1 to %d", v, max)
	}
	return n, nil
}

// eventJSON is an event as the API shows it.
type eventJSON struct {
	ExecutionID string          `json:"execution_id"`
	EventSeq    uint64          `json:"event_seq"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	OccurredAt  time.Time       `json:"occurred_at"`
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var after uint64
	if v := q.Get("after_seq"); v != "" {
		after, err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid_request", "after_seq %q is not a number", v)
		}
	}
	limit, err := intParam(q.Get("limit"), 100, 1000)
	if err != nil {
		return err
	}
	out := []eventJSON{}
	for ev, err := range s.log.Events(r.Context(), info.ID, after+1) {
		if err != nil {
			return err
		}
		p, err := json.Marshal(ev.Data)
		if err != nil {
			return err
		}
		out = append(out, eventJSON{ExecutionID: info.ID.String(), EventSeq: ev.Seq, Type: ev.Kind().String(), Payload: p, OccurredAt: ev.Time})
		if uint64(len(out)) == limit {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type cancelBody struct {
	Reason string `json:"reason"`
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, req *request) error {
	var b cancelBody
	if len(req.body) != 0 {
		if err := decode(req.body, &b); err != nil {
			return err
		}
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	if b.Reason == "" {
		b.Reason = "cancelled over the API"
	}
	if err := s.k.Cancel(r.Context(), info.ID, b.Reason); err != nil {
		if errors.Is(err, sdk.ErrCancelled) {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stepJSON is a step as the API shows it: a fold of the lineage's step
// events.
type stepJSON struct {
	StepID      string          `json:"step_id"`
	ExecutionID string          `json:"execution_id"`
	Kind        string          `json:"kind"`
	Target      string          `json:"target"`
	Status      string          `json:"status"`
	Idempotency string          `json:"idempotency"`
	Attempt     uint32          `json:"attempt"`
	Args        json.RawMessage `json:"args"`
	Result      json.RawMessage `json:"result"`
	Error       any             `json:"error"`
}

// steps folds the lineage of info into its steps, in the order they
// first appeared.
func (s *Server) steps(r *http.Request, info eventlog.Info) ([]*stepJSON, error) {
	var order []*stepJSON
	byID := map[string]*stepJSON{}
	get := func(id string) *stepJSON {
		st := byID[id]
		if st == nil {
			st = &stepJSON{StepID: id, ExecutionID: info.ID.String(), Args: json.RawMessage("null"), Result: json.RawMessage("null")}
			byID[id] = st
			order = append(order, st)
		}
		return st
	}
	for ev, err := range s.log.Events(r.Context(), info.ID, 1) {
		if err != nil {
			return nil, err
		}
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			st := get(p.StepID)
			st.Kind, st.Target, st.Idempotency, st.Attempt = wireKind(p.StepKind), p.Target, string(p.Idempotency), p.Attempt
			st.Args, st.Status, st.Error = value(p.Args), "started", nil
		case *eventlog.StepSucceeded:
			st := get(p.StepID)
			st.Status, st.Result = "succeeded", value(p.Result)
		case *eventlog.StepFailed:
			st := get(p.StepID)
			st.Status, st.Error = "failed", map[string]any{"message": p.Error, "indeterminate": p.Indeterminate}
			if !p.RetryAt.IsZero() {
				st.Status = "retrying"
			}
		case *eventlog.StepCancelled:
			get(p.StepID).Status = "cancelled"
		case *eventlog.StepDenied:
			st := get(p.StepID)
			st.Kind, st.Target, st.Status, st.Error = wireKind(p.StepKind), p.Target, "denied", map[string]any{"message": p.Reason}
		}
	}
	return order, nil
}

func terminalStep(status string) bool {
	return status == "succeeded" || status == "failed" || status == "denied"
}

func (s *Server) listSteps(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	filter := r.URL.Query().Get("status")
	if filter != "" && filter != "terminal" {
		return errorf(http.StatusBadRequest, "invalid_request", "status %q: the one filter is terminal", filter)
	}
	all, err := s.steps(r, info)
	if err != nil {
		return err
	}
	out := []*stepJSON{}
	for _, st := range all {
		if filter == "" || terminalStep(st.Status) {
			out = append(out, st)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"steps": out})
	return nil
}

func (s *Server) getStep(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	all, err := s.steps(r, info)
	if err != nil {
		return err
	}
	for _, st := range all {
		if st.StepID == r.PathValue("step") {
			writeJSON(w, http.StatusOK, st)
			return nil
		}
	}
	return errorf(http.StatusNotFound, "not_found", "execution %s has no step %q", info.ID, r.PathValue("step"))
}

// Wire names of step kinds (Rebuno's) and the log's.
var (
	toWire   = map[eventlog.StepKind]string{eventlog.StepTool: "tool_call", eventlog.StepLLM: "llm_call", eventlog.StepLocal: "local"}
	fromWire = map[string]eventlog.StepKind{"tool_call": eventlog.StepTool, "llm_call": eventlog.StepLLM, "local": eventlog.StepLocal}
)

func wireKind(k eventlog.StepKind) string {
	if w, ok := toWire[k]; ok {
		return w
	}
	return string(k)
}
