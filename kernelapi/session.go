package kernelapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// session is one dispatch of a remote agent's execution, in the process
// that runs it: the proxy handler waits on it, the agent's requests feed it.
type session struct {
	id  eventlog.ID
	n   uint64          // the dispatch number: dispatch_attempt
	ctx context.Context // the handler's context: calls run under it

	mu       sync.Mutex
	inflight map[string]*liveStep       // by StepID: proceeded, outcome not yet reported
	amo      map[string]string          // identity → StepID of an in-flight at_most_once step
	parked   bool                       // a call parked the dispatch (an approval)
	res      map[string]*remoteResource // the resources bound in this dispatch, by key

	touched chan struct{}  // an agent request arrived (stall timer)
	done    chan endReport // the agent completed or failed the execution
	waiting chan error     // a call parked the dispatch
	gone    chan struct{}  // closed when the handler returned
}

type liveStep struct {
	outcome  chan stepOutcome // the agent's report
	recorded chan error       // the call's return once its outcome is appended
	identity string           // at_most_once identity; "" otherwise
}

type stepOutcome struct {
	result []byte
	err    error
}

type endReport struct {
	output []byte
	err    string
}

func (ss *session) touch() {
	select {
	case ss.touched <- struct{}{}:
	default:
	}
}

// proxy is the handler of remote agent name: it delivers the dispatch's
// webhook and serves the agent's requests until the agent ends the
// execution, stalls, or the dispatch is stopped.
func (s *Server) proxy(name string) func(context.Context, json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		info, ok := sdk.Info(ctx)
		if !ok {
			return nil, fmt.Errorf("kernelapi: proxy outside a dispatch")
		}
		ss := &session{
			id: info.ID, n: info.Dispatch, ctx: ctx,
			inflight: map[string]*liveStep{}, amo: map[string]string{}, res: map[string]*remoteResource{},
			touched: make(chan struct{}, 1), done: make(chan endReport, 1),
			waiting: make(chan error, 1), gone: make(chan struct{}),
		}
		s.mu.Lock()
		s.sessions[info.ID] = ss
		var hook, secret = "", []byte(nil)
		if a := s.agents[name]; a != nil {
			hook, secret = a.WebhookURL, a.secret
		}
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			if s.sessions[info.ID] == ss {
				delete(s.sessions, info.ID)
			}
			s.mu.Unlock()
			close(ss.gone)
		}()

		failures, err := s.failedAttempts(ctx, info.ID)
		if err != nil {
			return nil, err
		}
		if err := s.deliver(ctx, hook, secret, ss); err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			s.opts.Logger.Warn("kernelapi: webhook not delivered", "execution", info.ID.String(), "agent", name,
				"attempt", info.Dispatch, "error", err.Error())
			if failures+1 >= s.opts.MaxAttempts {
				return nil, sdk.FailExecution(ctx, FailDispatchExhausted,
					fmt.Sprintf("the webhook of agent %q was not delivered in %d attempts: %v", name, failures+1, err))
			}
			return nil, sdk.ParkUntil(ctx, time.Now().Add(s.backoff(failures)))
		}
		stall := time.NewTimer(s.opts.StallAfter)
		defer stall.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case rep := <-ss.done:
				if rep.err != "" {
					return nil, errors.New(rep.err)
				}
				return rep.output, nil
			case err := <-ss.waiting:
				return nil, err
			case <-ss.touched:
				if !stall.Stop() {
					select {
					case <-stall.C:
					default:
					}
				}
				stall.Reset(s.opts.StallAfter)
			case <-stall.C:
				s.opts.Logger.Warn("kernelapi: agent stalled; its attempt is replaced", "execution", info.ID.String(),
					"agent", name, "attempt", info.Dispatch)
				if failures+1 >= s.opts.MaxAttempts {
					return nil, sdk.FailExecution(ctx, FailDispatchExhausted,
						fmt.Sprintf("agent %q stalled or was not reached in %d attempts", name, failures+1))
				}
				return nil, sdk.ParkUntil(ctx, time.Now().Add(s.backoff(failures)))
			}
		}
	}
}

// backoff is the wait before redelivery after n failed attempts.
func (s *Server) backoff(n int) time.Duration {
	d := s.opts.RetryBackoff
	for i := 0; i < n && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// failedAttempts counts the dispatches of id's lineage that parked for a
// retry: failed deliveries and stalled agents.
func (s *Server) failedAttempts(ctx context.Context, id eventlog.ID) (int, error) {
	n := 0
	for ev, err := range s.log.Events(ctx, id, 1) {
		if err != nil {
			return 0, err
		}
		if p, ok := ev.Data.(*eventlog.DispatchParked); ok && p.Reason == eventlog.ParkRetry {
			n++
		}
	}
	return n, nil
}

// webhookBody is what a dispatch's webhook carries.
type webhookBody struct {
	ExecutionID     string `json:"execution_id"`
	DispatchID      string `json:"dispatch_id"`
	DispatchAttempt uint64 `json:"dispatch_attempt"`
}

func dispatchID(id eventlog.ID, n uint64) string {
	return id.String() + "-" + strconv.FormatUint(n, 10)
}

// deliver posts the signed webhook of ss to hook; a 2xx answer delivers it.
func (s *Server) deliver(ctx context.Context, hook string, secret []byte, ss *session) error {
	if hook == "" || secret == nil {
		return errors.New("the agent is not registered with this server")
	}
	body, err := json.Marshal(webhookBody{ExecutionID: ss.id.String(), DispatchID: dispatchID(ss.id, ss.n), DispatchAttempt: ss.n})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(s.opts.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(secret, ts, body))
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
	return nil
}

// sessionFor checks the dispatch headers of a write and returns the
// session they name: 400 without them, 403 for another execution's
// dispatch, 409 lease_superseded for an attempt that is not the current
// one in this process.
func (s *Server) sessionFor(r *http.Request, info eventlog.Info) (*session, error) {
	did, att := r.Header.Get(HeaderDispatchID), r.Header.Get(HeaderDispatchAttempt)
	if did == "" || att == "" {
		return nil, errorf(http.StatusBadRequest, "invalid_request", "the %s and %s headers are required", HeaderDispatchID, HeaderDispatchAttempt)
	}
	n, err := strconv.ParseUint(att, 10, 64)
	if err != nil || n == 0 {
		return nil, errorf(http.StatusBadRequest, "invalid_request", "%s %q is not a positive number", HeaderDispatchAttempt, att)
	}
	rest, ok := strings.CutPrefix(did, info.ID.String()+"-")
	if !ok {
		return nil, errorf(http.StatusForbidden, "forbidden", "dispatch %q is not one of execution %s", did, info.ID)
	}
	if rest != att {
		return nil, errorf(http.StatusBadRequest, "invalid_request", "dispatch %q does not match attempt %s", did, att)
	}
	s.mu.Lock()
	ss := s.sessions[info.ID]
	s.mu.Unlock()
	if ss == nil || ss.n != n {
		return nil, &apiError{status: http.StatusConflict, code: "lease_superseded",
			message: fmt.Sprintf("attempt %d no longer owns execution %s", n, info.ID),
			details: map[string]any{"dispatch_id": did, "dispatch_attempt": n}}
	}
	ss.touch()
	return ss, nil
}

type submitBody struct {
	Kind        string          `json:"kind"`
	Target      string          `json:"target"`
	Args        json.RawMessage `json:"args"`
	Idempotency string          `json:"idempotency"`
	// Resources are the keys of the bound resources the step affects
	// (forkline's addition): the completion carries their refs.
	Resources []string `json:"resources"`
}

// decision is a submit's answer.
type decision struct {
	Decision   string          `json:"decision"`
	StepID     string          `json:"step_id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      any             `json:"error,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	// Capture lists, with proceed, the resources the step affects: the
	// completion carries each one's checkpoint ref in captures.
	Capture []string `json:"capture,omitempty"`
}

func terminal(st eventlog.Status) bool {
	return st == eventlog.StatusCompleted || st == eventlog.StatusFailed || st == eventlog.StatusCancelled
}

func (s *Server) submitStep(w http.ResponseWriter, r *http.Request, req *request) error {
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	var b submitBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	kind, ok := fromWire[b.Kind]
	if !ok {
		return errorf(http.StatusBadRequest, "invalid_request", "kind %q is not tool_call, llm_call or local", b.Kind)
	}
	if err := validName("target", b.Target); err != nil {
		return err
	}
	idem := eventlog.Idempotency(b.Idempotency)
	if b.Idempotency == "" {
		idem = eventlog.SafeToRetry
	}
	if !idem.Valid() {
		return errorf(http.StatusBadRequest, "invalid_request", "idempotency %q is not safe_to_retry or at_most_once", b.Idempotency)
	}
	if len(b.Args) == 0 {
		b.Args = json.RawMessage("null")
	}
	args, err := sdk.CanonicalArgs(b.Args)
	if err != nil {
		return errorf(http.StatusBadRequest, "invalid_request", "%v", err)
	}
	if terminal(info.Status) {
		writeJSON(w, http.StatusOK, decision{Decision: "execution_terminal"})
		return nil
	}
	ss, err := s.sessionFor(r, info)
	if err != nil {
		return err
	}
	if len(b.Resources) > 0 && kind == eventlog.StepLLM {
		return errorf(http.StatusBadRequest, "invalid_request", "resources: an llm_call affects no resource")
	}
	if err := ss.checkBound("resources", b.Resources); err != nil {
		return err
	}
	identity := ""
	if idem == eventlog.AtMostOnce {
		identity = string(kind) + "\x00" + b.Target + "\x00" + string(args)
	}
	ss.mu.Lock()
	parked := ss.parked
	_, dup := ss.amo[identity]
	ss.mu.Unlock()
	switch {
	case parked:
		writeJSON(w, http.StatusOK, decision{Decision: "execution_blocked", Reason: "the dispatch waits for an approval"})
		return nil
	case identity != "" && dup:
		writeJSON(w, http.StatusOK, decision{Decision: "blocked", StepID: ss.amo[identity],
			Reason: "this at_most_once step is already started under this attempt"})
		return nil
	}

	ls := &liveStep{outcome: make(chan stepOutcome, 1), recorded: make(chan error, 1), identity: identity}
	started := make(chan string, 1)
	type ret struct {
		res    []byte
		stepID string
		ran    bool
		err    error
	}
	rets := make(chan ret, 1)
	go func() {
		res, stepID, ran, err := sdk.RemoteCallAffecting(ss.ctx, kind, b.Target, args, idem, b.Resources, func(bctx context.Context) ([]byte, error) {
			si, _ := sdk.Info(bctx)
			ss.mu.Lock()
			ss.inflight[si.StepID] = ls
			if identity != "" {
				ss.amo[identity] = si.StepID
			}
			ss.mu.Unlock()
			ss.stepRan(b.Resources)
			started <- si.StepID
			select {
			case o := <-ls.outcome:
				return o.result, o.err
			case <-bctx.Done():
				return nil, context.Cause(bctx)
			}
		})
		if ran {
			ss.mu.Lock()
			delete(ss.inflight, stepID)
			if identity != "" {
				delete(ss.amo, identity)
			}
			ss.mu.Unlock()
			ls.recorded <- err
		}
		rets <- ret{res, stepID, ran, err}
	}()
	select {
	case id := <-started:
		writeJSON(w, http.StatusOK, decision{Decision: "proceed", StepID: id, Capture: b.Resources})
		return nil
	case rt := <-rets:
		return s.answer(w, r, ss, info, rt.stepID, rt.res, rt.err)
	}
}

// answer writes the decision for a call that did not run.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, ss *session, info eventlog.Info, stepID string, res []byte, err error) error {
	var (
		se *sdk.StepError
		de *sdk.DeniedError
	)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, decision{Decision: "replay", StepID: stepID, Result: value(res)})
	case errors.As(err, &se):
		writeJSON(w, http.StatusOK, decision{Decision: "replay", StepID: stepID,
			Error: map[string]any{"message": se.Message, "indeterminate": se.Indeterminate}})
	case errors.As(err, &de):
		writeJSON(w, http.StatusOK, decision{Decision: "denied", StepID: stepID, Reason: de.Reason})
	case errors.Is(err, sdk.ErrWaiting):
		ss.mu.Lock()
		first := !ss.parked
		ss.parked = true
		ss.mu.Unlock()
		if first {
			select {
			case ss.waiting <- err:
			default:
			}
		}
		writeJSON(w, http.StatusOK, decision{Decision: "blocked", StepID: stepID, ApprovalID: approvalID(info.ID, stepID),
			Reason: "the call waits for an approval; the kernel dispatches again once it is decided"})
	case errors.Is(err, eventlog.ErrInvalid):
		return errorf(http.StatusBadRequest, "invalid_request", "%v", err)
	case ss.ctx.Err() != nil:
		// The dispatch was stopped (cancel, deadline, shutdown, lost lease).
		<-ss.gone
		now, ierr := s.log.Info(r.Context(), info.ID)
		if ierr == nil && terminal(now.Status) {
			writeJSON(w, http.StatusOK, decision{Decision: "execution_terminal"})
			return nil
		}
		return &apiError{status: http.StatusConflict, code: "lease_superseded", message: "the attempt was stopped: " + err.Error()}
	default:
		return err
	}
	return nil
}

// approvalID names the approval of step stepID of execution id.
func approvalID(id eventlog.ID, stepID string) string { return id.String() + "." + stepID }

type completeStepBody struct {
	Result json.RawMessage `json:"result"`
	// Captures are the checkpoint refs of the step's resources, by key.
	Captures map[string]string `json:"captures"`
}

type failStepBody struct {
	Error json.RawMessage `json:"error"`
	// Captures are the checkpoint refs of the step's resources, by key.
	Captures map[string]string `json:"captures"`
}

// liveFor returns the in-flight step the path names.
func (s *Server) liveFor(r *http.Request, req *request) (*session, *liveStep, error) {
	info, err := s.executionOf(r, req)
	if err != nil {
		return nil, nil, err
	}
	ss, err := s.sessionFor(r, info)
	if err != nil {
		return nil, nil, err
	}
	ss.mu.Lock()
	ls := ss.inflight[r.PathValue("step")]
	ss.mu.Unlock()
	if ls == nil {
		return nil, nil, errorf(http.StatusNotFound, "not_found", "step %q of execution %s is not in flight under this attempt", r.PathValue("step"), info.ID)
	}
	return ss, ls, nil
}

// report hands the agent's outcome to the call and waits until it is
// appended.
func report(ss *session, ls *liveStep, o stepOutcome) error {
	select {
	case ls.outcome <- o:
	default:
		return errorf(http.StatusConflict, "conflict", "the step's outcome was already reported")
	}
	select {
	case err := <-ls.recorded:
		var se *sdk.StepError
		if err == nil || errors.As(err, &se) && o.err != nil {
			return nil
		}
		if ss.ctx.Err() != nil {
			return &apiError{status: http.StatusConflict, code: "lease_superseded", message: "the attempt was stopped: " + err.Error()}
		}
		return err
	case <-ss.gone:
		return &apiError{status: http.StatusConflict, code: "lease_superseded", message: "the attempt ended before the outcome was recorded"}
	}
}

func (s *Server) completeStep(w http.ResponseWriter, r *http.Request, req *request) error {
	var b completeStepBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	if len(b.Result) == 0 {
		b.Result = json.RawMessage("null")
	}
	ss, ls, err := s.liveFor(r, req)
	if err != nil {
		return err
	}
	if err := ss.checkCaptures(b.Captures); err != nil {
		return err
	}
	ss.applyCaptures(b.Captures)
	if err := report(ss, ls, stepOutcome{result: b.Result}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) failStep(w http.ResponseWriter, r *http.Request, req *request) error {
	var b failStepBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	msg := errorText(b.Error)
	if msg == "" {
		return errorf(http.StatusBadRequest, "invalid_request", "error is required")
	}
	ss, ls, err := s.liveFor(r, req)
	if err != nil {
		return err
	}
	if err := ss.checkCaptures(b.Captures); err != nil {
		return err
	}
	ss.applyCaptures(b.Captures)
	if err := report(ss, ls, stepOutcome{err: errors.New(msg)}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// errorText is an error as the agent sent it: a string as it is, an
// object's "message", anything else as its JSON.
func errorText(b json.RawMessage) string {
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var str string
	if json.Unmarshal(b, &str) == nil {
		return str
	}
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return string(b)
}

type deltaBody struct {
	Seq  *int64  `json:"seq"`
	Data *string `json:"data"`
}

// maxDelta bounds one delta's data, as Rebuno's stream route does: a
// longer one is 400 and nothing is cut for the agent, which slices its
// batches (Rebuno's SDKs send 1,750 characters at most).
const maxDelta = 7000

func (s *Server) streamDelta(w http.ResponseWriter, r *http.Request, req *request) error {
	var b deltaBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	if b.Seq == nil || *b.Seq < 0 || b.Data == nil {
		return errorf(http.StatusBadRequest, "invalid_request", "seq (a number ≥ 0) and data (a string) are required")
	}
	if len(*b.Data) > maxDelta {
		return errorf(http.StatusBadRequest, "invalid_request", "data is %d bytes; a delta's data is capped at %d bytes: slice it into several deltas", len(*b.Data), maxDelta)
	}
	ss, _, err := s.liveFor(r, req)
	if err != nil {
		return err
	}
	s.k.PublishDelta(ss.id, sdk.Delta{StepID: r.PathValue("step"), Index: int(*b.Seq), Data: []byte(*b.Data)})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	if _, err := s.sessionFor(r, info); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type completeBody struct {
	Output json.RawMessage `json:"output"`
}

type failBody struct {
	Error json.RawMessage `json:"error"`
}

// end hands the agent's end of the execution to the proxy and waits until
// the dispatch has recorded it.
func (s *Server) end(w http.ResponseWriter, r *http.Request, req *request, rep endReport) error {
	info, err := s.executionOf(r, req)
	if err != nil {
		return err
	}
	ss, err := s.sessionFor(r, info)
	if err != nil {
		return err
	}
	select {
	case ss.done <- rep:
	default:
		return errorf(http.StatusConflict, "conflict", "the execution's end was already reported under this attempt")
	}
	select {
	case <-ss.gone:
	case <-r.Context().Done():
		return r.Context().Err()
	}
	// The handler has returned; the dispatch records its end right after.
	wctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	_, _ = s.k.Wait(wctx, info.ID)
	now, err := s.log.Info(r.Context(), info.ID)
	if err != nil {
		return err
	}
	want := eventlog.StatusCompleted
	if rep.err != "" {
		want = eventlog.StatusFailed
	}
	if now.Status != want {
		return errorf(http.StatusConflict, "conflict", "execution %s is %s, not %s", info.ID, now.Status, want)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) completeExecution(w http.ResponseWriter, r *http.Request, req *request) error {
	var b completeBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	if len(b.Output) == 0 {
		b.Output = json.RawMessage("null")
	}
	if _, err := sdk.CanonicalArgs(b.Output); err != nil {
		return errorf(http.StatusBadRequest, "invalid_request", "output: %v", err)
	}
	return s.end(w, r, req, endReport{output: b.Output})
}

func (s *Server) failExecution(w http.ResponseWriter, r *http.Request, req *request) error {
	var b failBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	msg := errorText(b.Error)
	if msg == "" {
		return errorf(http.StatusBadRequest, "invalid_request", "error is required")
	}
	return s.end(w, r, req, endReport{err: msg})
}
