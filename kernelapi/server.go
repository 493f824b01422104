package kernelapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Header names of the agent protocol.
const (
	HeaderAgentID         = "Rebuno-Agent-Id"
	HeaderSignature       = "Rebuno-Signature"
	HeaderTimestamp       = "Rebuno-Timestamp"
	HeaderDispatchID      = "Rebuno-Dispatch-Id"
	HeaderDispatchAttempt = "Rebuno-Dispatch-Attempt"
)

// MaxClockSkew is how far a signed request's timestamp may be from the
// server's clock (DESIGN §21½.3).
const MaxClockSkew = 5 * time.Minute

// FailDispatchExhausted is the execution.failed code of an execution whose
// webhook could not be delivered in Options.MaxAttempts attempts.
const FailDispatchExhausted eventlog.FailureCode = "dispatch_exhausted"

// Options configure a Server.
type Options struct {
	// Token is the bearer token of client and admin routes. It is required
	// unless Dev.
	Token string
	// Dev turns bearer authentication off (agent routes stay signed).
	Dev bool
	// MaxBody bounds a request body (default 1 MiB); a larger one is 413.
	MaxBody int64
	// StallAfter is how long an agent may stay silent (no request, no
	// heartbeat) during its dispatch before the attempt is replaced
	// (default 30 s).
	StallAfter time.Duration
	// RetryBackoff is the wait before the first redelivery (default 1 s);
	// it doubles with every further attempt, up to 1 minute.
	RetryBackoff time.Duration
	// MaxAttempts is how many failed webhook deliveries an execution may
	// have before it fails with dispatch_exhausted (default 8).
	MaxAttempts int
	// Client delivers webhooks (default: a client with a 10 s timeout).
	Client *http.Client
	// Logger receives the server's logs (default slog.Default()). Secrets
	// and tokens are never logged.
	Logger *slog.Logger
	// Now is the clock for signature timestamps (default time.Now).
	Now func() time.Time
	// Metrics is what GET /metrics exports: the meter the kernel was
	// opened with (Metrics.Option). Nil: /metrics is 404.
	Metrics *Metrics
	// KeepAlive is how often GET /v0/executions/{id}/stream sends a
	// comment while no delta comes (default 15 s).
	KeepAlive time.Duration
}

// Server is the HTTP API of a kernel. It implements http.Handler.
type Server struct {
	k    *sdk.Kernel
	log  eventlog.IndexedLog
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	agents   map[string]*agent
	sessions map[eventlog.ID]*session
}

// agent is a registered remote agent.
type agent struct {
	ID         string
	WebhookURL string
	secret     []byte
	registered bool // its proxy handler is registered in the kernel
}

// Handler returns the API of k. k must not have agents registered under
// the names that will be registered over the API.
func Handler(k *sdk.Kernel, opts Options) (*Server, error) {
	if k == nil {
		return nil, fmt.Errorf("%w: kernelapi: nil kernel", eventlog.ErrInvalid)
	}
	if opts.Token == "" && !opts.Dev {
		return nil, fmt.Errorf("%w: kernelapi: a bearer token is required unless Dev", eventlog.ErrInvalid)
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 1 << 20
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = 30 * time.Second
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{k: k, log: k.Log(), opts: opts, agents: map[string]*agent{}, sessions: map[eventlog.ID]*session{}}
	s.routes()
	return s, nil
}

// Serve runs the kernel's dispatch loop (sdk.Kernel.Serve) until ctx ends.
func (s *Server) Serve(ctx context.Context, opts ...sdk.ServeOption) error {
	return s.k.Serve(ctx, opts...)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /v0/executions", s.bearer(s.createExecution))
	m.HandleFunc("GET /v0/executions", s.bearer(s.listExecutions))
	m.HandleFunc("GET /v0/executions/{id}", s.either(s.getExecution))
	m.HandleFunc("GET /v0/executions/{id}/events", s.bearer(s.events))
	m.HandleFunc("POST /v0/executions/{id}/cancel", s.bearer(s.cancel))
	m.HandleFunc("POST /v0/executions/{id}/fork", s.bearer(s.fork))
	m.HandleFunc("GET /v0/executions/{id}/coverage", s.bearer(s.coverage))
	m.HandleFunc("GET /v0/executions/{id}/stream", s.bearer(s.stream))
	m.HandleFunc("GET /v0/executions/{id}/diff", s.bearer(s.diff))
	m.HandleFunc("GET /v0/health", s.health)
	m.HandleFunc("GET /v0/ready", s.ready)
	m.HandleFunc("GET /metrics", s.bearer(s.metrics))

	m.HandleFunc("GET /v0/executions/{id}/steps", s.either(s.listSteps))
	m.HandleFunc("GET /v0/executions/{id}/steps/{step}", s.either(s.getStep))
	m.HandleFunc("POST /v0/executions/{id}/steps", s.signed(s.submitStep))
	m.HandleFunc("POST /v0/executions/{id}/steps/{step}/complete", s.signed(s.completeStep))
	m.HandleFunc("POST /v0/executions/{id}/steps/{step}/fail", s.signed(s.failStep))
	m.HandleFunc("POST /v0/executions/{id}/steps/{step}/stream", s.signed(s.streamDelta))
	m.HandleFunc("POST /v0/executions/{id}/heartbeat", s.signed(s.heartbeat))
	m.HandleFunc("POST /v0/executions/{id}/resources", s.signed(s.bindResource))
	m.HandleFunc("POST /v0/executions/{id}/complete", s.signed(s.completeExecution))
	m.HandleFunc("POST /v0/executions/{id}/fail", s.signed(s.failExecution))

	m.HandleFunc("POST /v0/agents", s.bearer(s.putAgent))
	m.HandleFunc("GET /v0/agents", s.bearer(s.listAgents))
	m.HandleFunc("GET /v0/agents/{agent}", s.bearer(s.getAgent))
	m.HandleFunc("DELETE /v0/agents/{agent}", s.bearer(s.deleteAgent))
	m.HandleFunc("PUT /v0/agents/{agent}/policy", s.bearer(s.putPolicy))
	m.HandleFunc("GET /v0/agents/{agent}/policy", s.bearer(s.getPolicy))
	m.HandleFunc("DELETE /v0/agents/{agent}/policy", s.bearer(s.deletePolicy))
	m.HandleFunc("GET /v0/approvals", s.bearer(s.listApprovals))
	m.HandleFunc("GET /v0/approvals/{approval}", s.bearer(s.getApproval))
	m.HandleFunc("POST /v0/approvals/{approval}/grant", s.bearer(s.decide(true)))
	m.HandleFunc("POST /v0/approvals/{approval}/deny", s.bearer(s.decide(false)))
	s.mux = m
}

// ServeHTTP implements http.Handler. An unknown route or method gets the
// error envelope.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path, nil)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// apiError is an error with its status and envelope code.
type apiError struct {
	status  int
	code    string
	message string
	details map[string]any
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, format string, a ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, a...)}
}

func writeError(w http.ResponseWriter, status int, code, message string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	writeJSON(w, status, map[string]any{"code": code, "message": message, "details": details})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":"internal_error","message":"response does not encode","details":{}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// fail writes err as the envelope: an *apiError as it is; a store's
// classified error by its class; anything else as 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, eventlog.ErrNotFound):
		ae = errorf(http.StatusNotFound, "not_found", "%v", err)
	case errors.Is(err, eventlog.ErrInvalid):
		ae = errorf(http.StatusBadRequest, "invalid_request", "%v", err)
	case errors.Is(err, eventlog.ErrConflict), errors.Is(err, sdk.ErrBusy):
		ae = errorf(http.StatusConflict, "conflict", "%v", err)
	default:
		s.opts.Logger.Error("kernelapi: request failed", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		ae = errorf(http.StatusInternalServerError, "internal_error", "%v", err)
	}
	writeError(w, ae.status, ae.code, ae.message, ae.details)
}

// request is an authenticated request: its raw body and, when signed,
// the agent that signed it.
type request struct {
	body  []byte
	agent *agent // nil for a bearer request
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, req *request) error

// readBody reads the body up to MaxBody.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "payload_too_large", "the body is over the %d-byte limit", s.opts.MaxBody)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_request", "the body could not be read: %v", err)
	}
	return b, nil
}

func (s *Server) wrap(auth func(r *http.Request, body []byte) (*request, error), h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := s.readBody(w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		req, err := auth(r, body)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := h(w, r, req); err != nil {
			s.fail(w, r, err)
		}
	}
}

func (s *Server) bearer(h handlerFunc) http.HandlerFunc {
	return s.wrap(func(r *http.Request, body []byte) (*request, error) {
		if err := s.checkBearer(r); err != nil {
			return nil, err
		}
		return &request{body: body}, nil
	}, h)
}

func (s *Server) signed(h handlerFunc) http.HandlerFunc {
	return s.wrap(func(r *http.Request, body []byte) (*request, error) {
		a, err := s.checkSignature(r, body)
		if err != nil {
			return nil, err
		}
		return &request{body: body, agent: a}, nil
	}, h)
}

// either takes a signed request when it carries a signature, a bearer
// one otherwise.
func (s *Server) either(h handlerFunc) http.HandlerFunc {
	return s.wrap(func(r *http.Request, body []byte) (*request, error) {
		if r.Header.Get(HeaderSignature) != "" || r.Header.Get(HeaderAgentID) != "" {
			a, err := s.checkSignature(r, body)
			if err != nil {
				return nil, err
			}
			return &request{body: body, agent: a}, nil
		}
		if err := s.checkBearer(r); err != nil {
			return nil, err
		}
		return &request{body: body}, nil
	}, h)
}

func (s *Server) checkBearer(r *http.Request) error {
	if s.opts.Dev {
		return nil
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) != 1 {
		return errorf(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
	}
	return nil
}

// Sign returns the Rebuno-Signature value of body sent at ts (Unix
// seconds) under secret: "sha256=" + hex(HMAC-SHA256(secret, ts + "." +
// body)).
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (s *Server) checkSignature(r *http.Request, body []byte) (*agent, error) {
	unauthorized := errorf(http.StatusUnauthorized, "unauthorized", "a valid agent signature is required")
	id, sig, ts := r.Header.Get(HeaderAgentID), r.Header.Get(HeaderSignature), r.Header.Get(HeaderTimestamp)
	if id == "" || sig == "" || ts == "" {
		return nil, unauthorized
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, unauthorized
	}
	if d := s.opts.Now().Sub(time.Unix(secs, 0)); d > MaxClockSkew || d < -MaxClockSkew {
		return nil, errorf(http.StatusUnauthorized, "unauthorized", "the request's timestamp is more than %v from the server's clock", MaxClockSkew)
	}
	// An unknown (or deleted) agent is checked against a fixed key, so its
	// answer takes as long as a known one's.
	secret := []byte("kernelapi: no such agent")
	s.mu.Lock()
	a := s.agents[id]
	if a != nil && a.secret != nil {
		secret = a.secret
	} else {
		a = nil
	}
	s.mu.Unlock()
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(sig)) || a == nil {
		return nil, unauthorized
	}
	return a, nil
}

// decode decodes body, a JSON object, into v, refusing unknown fields,
// trailing data and a missing body.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errorf(http.StatusBadRequest, "invalid_request", "a JSON body is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "invalid_request", "malformed body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid_request", "malformed body: data after the JSON object")
	}
	return nil
}

// noBody refuses a body on a route that takes none.
func noBody(body []byte) error {
	if len(bytes.TrimSpace(body)) != 0 {
		return errorf(http.StatusBadRequest, "invalid_request", "this route takes no body")
	}
	return nil
}

// executionOf parses the {id} path value and reads its Info; an agent
// request must come from the execution's agent.
func (s *Server) executionOf(r *http.Request, req *request) (eventlog.Info, error) {
	id, err := eventlog.ParseID(r.PathValue("id"))
	if err != nil {
		return eventlog.Info{}, errorf(http.StatusNotFound, "not_found", "no execution %q", r.PathValue("id"))
	}
	info, err := s.log.Info(r.Context(), id)
	if errors.Is(err, eventlog.ErrNotFound) {
		return eventlog.Info{}, errorf(http.StatusNotFound, "not_found", "no execution %s", id)
	}
	if err != nil {
		return eventlog.Info{}, err
	}
	if req.agent != nil && req.agent.ID != info.Agent {
		return eventlog.Info{}, errorf(http.StatusForbidden, "forbidden", "execution %s belongs to another agent", id)
	}
	return info, nil
}

// validName refuses an empty name, one that is not UTF-8 or holds a
// control character, or one over 200 bytes.
func validName(what, name string) error {
	if name == "" || len(name) > 200 || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errorf(http.StatusBadRequest, "invalid_request", "%s %q is not a valid name", what, name)
	}
	return nil
}

// ---- admin: agents ----

type agentBody struct {
	ID         string `json:"id"`
	WebhookURL string `json:"webhook_url"`
	Secret     string `json:"secret"`
}

func (s *Server) putAgent(w http.ResponseWriter, r *http.Request, req *request) error {
	var b agentBody
	if err := decode(req.body, &b); err != nil {
		return err
	}
	if err := s.RegisterAgent(b.ID, b.WebhookURL, b.Secret); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, agentJSON(&agent{ID: b.ID, WebhookURL: b.WebhookURL}))
	return nil
}

// RegisterAgent registers or updates the remote agent id, dispatched by
// webhook to webhookURL and signing with secret (at least 16 bytes).
func (s *Server) RegisterAgent(id, webhookURL, secret string) error {
	if err := validName("agent id", id); err != nil {
		return err
	}
	u, err := url.Parse(webhookURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errorf(http.StatusBadRequest, "invalid_request", "webhook_url %q is not an http(s) URL", webhookURL)
	}
	if len(secret) < 16 {
		return errorf(http.StatusBadRequest, "invalid_request", "the secret must be at least 16 bytes")
	}
	s.mu.Lock()
	a, ok := s.agents[id]
	if !ok {
		a = &agent{ID: id}
	}
	if !a.registered {
		if _, err := sdk.Register(s.k, id, s.proxy(id)); err != nil {
			s.mu.Unlock()
			return errorf(http.StatusConflict, "conflict", "agent %q cannot be registered in the kernel: %v", id, err)
		}
		a.registered = true
	}
	a.WebhookURL, a.secret = webhookURL, []byte(secret)
	s.agents[id] = a
	s.mu.Unlock()
	return nil
}

func agentJSON(a *agent) map[string]any {
	return map[string]any{"id": a.ID, "webhook_url": a.WebhookURL, "secret": "[redacted]"}
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	s.mu.Lock()
	out := []map[string]any{}
	for _, a := range s.agents {
		if a.secret != nil {
			out = append(out, agentJSON(a))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

func (s *Server) agentNamed(name string) (*agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[name]
	if a == nil || a.secret == nil {
		return nil, errorf(http.StatusNotFound, "not_found", "no agent %q", name)
	}
	return a, nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	a, err := s.agentNamed(r.PathValue("agent"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentJSON(a))
	return nil
}

// deleteAgent forgets the agent's webhook and secret: its executions
// wait (their deliveries fail) until it is registered again.
func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request, req *request) error {
	if err := noBody(req.body); err != nil {
		return err
	}
	a, err := s.agentNamed(r.PathValue("agent"))
	if err != nil {
		return err
	}
	s.mu.Lock()
	a.secret, a.WebhookURL = nil, ""
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, eventlog.ErrNotFound) }
