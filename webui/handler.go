package webui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/sdk"
)

//go:embed page.html.tmpl
var pageFS embed.FS

var pageTmpl = template.Must(template.New("page.html.tmpl").Funcs(template.FuncMap{
	"timeText": timeText,
	"pending":  pendingRows,
}).ParseFS(pageFS, "page.html.tmpl"))

// Handler serves the pages of the executions of k (see the package doc).
func Handler(k *sdk.Kernel, opts ...Option) http.Handler {
	s := &server{k: k, differs: map[string]driver.Differ{}}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.list)
	mux.HandleFunc("GET /e/{id}", s.execution)
	mux.HandleFunc("GET /e/{id}/timeline", s.timeline)
	mux.HandleFunc("GET /e/{id}/events", s.events)
	mux.HandleFunc("GET /e/{id}/deltas", s.deltas)
	mux.HandleFunc("GET /e/{id}/fork", s.forkPreview)
	mux.HandleFunc("POST /e/{id}/fork", s.fork)
	mux.HandleFunc("GET /diff", s.diff)
	mux.HandleFunc("GET /approvals", s.approvals)
	mux.HandleFunc("POST /e/{id}/approve", s.decide(true))
	mux.HandleFunc("POST /e/{id}/reject", s.decide(false))
	mux.HandleFunc("POST /e/{id}/send", s.send)
	for _, rt := range s.routes {
		mux.Handle(rt.pattern, rt.h)
	}
	s.api(mux)
	// The forms that fork and decide approvals change the log: refuse
	// their requests from other sites' pages, after the Host, the token and
	// the body's size are checked (access.go).
	return s.guard(http.NewCrossOriginProtection().Handler(mux))
}

type server struct {
	k       *sdk.Kernel
	differs map[string]driver.Differ // by DriverID, for the diff page
	token   string                   // WithToken: demanded of every route but /login
	hosts   map[string]bool          // WithHosts: nil answers every Host
	routes  []route                  // WithRoute
}

// route is a program's own route (WithRoute).
type route struct {
	pattern string
	h       http.Handler
}

// WithRoute mounts h at pattern (an http.ServeMux pattern, say
// "POST /api/e/{id}/run") beside the pages, behind the same guards as
// theirs: the body's cap, the Host check (WithHosts), the token
// (WithToken) and, for a method that writes, the refusal of requests from
// another site. forkline serve mounts its run route so. A pattern that
// conflicts with a route of the handler panics in Handler, as
// http.ServeMux.Handle does; a nil h is ignored.
func WithRoute(pattern string, h http.Handler) Option {
	return func(s *server) {
		if h != nil {
			s.routes = append(s.routes, route{pattern, h})
		}
	}
}

// badRequest answers 400 with msg.
func badRequest(w http.ResponseWriter, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
}

// fail answers an error of the kernel: 404 for an unknown execution, 400
// for bad input, 500 otherwise.
func fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, eventlog.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, eventlog.ErrInvalid):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// info resolves the {id} of the path, answering the error itself.
func (s *server) info(w http.ResponseWriter, r *http.Request) (eventlog.Info, bool) {
	id, err := eventlog.ParseID(r.PathValue("id"))
	if err != nil {
		badRequest(w, "execution ID %q: want 32 hex digits", clipText(r.PathValue("id"), 64))
		return eventlog.Info{}, false
	}
	info, err := s.k.Log().Info(r.Context(), id)
	if err != nil {
		fail(w, err)
		return eventlog.Info{}, false
	}
	return info, true
}

// listPage is the data of the executions list.
type listPage struct {
	Title      string
	Agent      string
	Status     string
	Parent     string
	Statuses   []string
	Executions []eventlog.Info
	// Owners is, by execution ID, who holds each running execution
	// (ownerOf): its owner, and "owner gone" when its lease is not live.
	Owners map[eventlog.ID]string
	// Schedules are the store's schedules (Kernel.Schedules, DESIGN §19),
	// whatever the filter: their last and next tick.
	Schedules []sdk.ScheduleInfo
	// Queues are the store's queues (Kernel.Queues, DESIGN §19), whatever
	// the filter: their limits, depth and running.
	Queues []sdk.QueueInfo
}

func (s *server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := listPage{Title: "forkline · executions", Agent: q.Get("agent"), Status: q.Get("status"), Parent: q.Get("parent")}
	for st := eventlog.StatusPending; st <= eventlog.StatusCancelled; st++ {
		page.Statuses = append(page.Statuses, st.String())
	}
	f := sdk.Filter{Agent: page.Agent}
	if page.Status != "" {
		st, err := eventlog.ParseStatus(page.Status)
		if err != nil {
			badRequest(w, "status %q: want one of %s", clipText(page.Status, 64), strings.Join(page.Statuses, ", "))
			return
		}
		f.Status = []eventlog.Status{st}
	}
	if page.Parent != "" {
		id, err := eventlog.ParseID(page.Parent)
		if err != nil {
			badRequest(w, "parent %q: want 32 hex digits", clipText(page.Parent, 64))
			return
		}
		f.Parent = id
	}
	infos, err := s.k.List(r.Context(), f)
	if err != nil {
		fail(w, err)
		return
	}
	page.Executions = infos
	page.Owners = map[eventlog.ID]string{}
	for _, info := range infos {
		if page.Owners[info.ID], err = s.ownerOf(r.Context(), info); err != nil {
			fail(w, err)
			return
		}
	}
	if page.Schedules, err = s.k.Schedules(r.Context()); err != nil {
		fail(w, err)
		return
	}
	if page.Queues, err = s.k.Queues(r.Context()); err != nil {
		fail(w, err)
		return
	}
	render(w, "list", page)
}

// ownerOf says who holds a running execution, as forkline ls's OWNER
// column does: the owner of its newest dispatch.started, or the store's
// live lease holder if another owner claimed it since, with " (owner
// gone)" when no live lease holds it; "-" for an execution that is not
// running or that no dispatch ran. Without a store that keeps leases
// (eventlog.Leaser), the recorded owner alone.
func (s *server) ownerOf(ctx context.Context, info eventlog.Info) (string, error) {
	if info.Status != eventlog.StatusRunning {
		return "-", nil
	}
	owner := ""
	for ev, err := range s.k.Log().Events(ctx, info.ID, 1) {
		if err != nil {
			return "", err
		}
		if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			owner = ds.Owner
		}
	}
	var leaser eventlog.Leaser
	if !eventlog.As(s.k.Log(), &leaser) {
		if owner == "" {
			return "-", nil
		}
		return owner, nil
	}
	lease, live, err := leaser.Holder(ctx, info.ID)
	if err != nil {
		return "", fmt.Errorf("webui: lease of %s: %w", info.ID, err)
	}
	switch {
	case live:
		return lease.Owner, nil
	case owner == "":
		return "-", nil
	}
	return owner + " (owner gone)", nil
}

// executionPage is the data of one execution's page.
type executionPage struct {
	Title    string
	Info     eventlog.Info
	Pending  []sdk.PendingApproval // calls that await a decision
	Parents  []eventlog.Info       // the fork chain up to the root, nearest first
	Forks    []eventlog.Info
	Children []eventlog.Info
	// Published is the newest value of each key the execution published
	// (SetEvent), Inbox its messages sent and not yet received (DESIGN
	// §18).
	Published []published
	Inbox     []eventlog.Message
	// Tokens sums the usage of the lineage's llm calls, a fork's prefix
	// included (a fold of its events, DESIGN §16); Info.Tokens is the
	// own run's, which the store keeps.
	Tokens eventlog.Tokens
	// Decisions are the policy's recorded decisions over the lineage:
	// each denial and approval request with its rule id and reason.
	Decisions []policyDecision
	// Spend is what the lineage spent against its budget (DESIGN §17),
	// each limit shown beside its spend; empty without a budget.
	Spend []spendItem
}

// spendItem is one line of spend against a budget's limit: Limit 0 is
// no limit.
type spendItem struct {
	What         string
	Spent, Limit uint64
	Reached      bool
}

// spendItems lists d's spend against its budget, nil when it has none.
func spendItems(d *sdk.ExecutionDetails) []spendItem {
	if d.Budget == (sdk.Limits{}) {
		return nil
	}
	return []spendItem{
		spendOf("tokens", d.Spend.Tokens.Input+d.Spend.Tokens.Output, d.Budget.MaxTokens),
		spendOf("llm calls", d.Spend.LLMCalls, d.Budget.MaxLLMCalls),
		spendOf("tool calls", d.Spend.ToolCalls, d.Budget.MaxToolCalls),
	}
}

// spendOf is the spendItem of spent against limit (0: none).
func spendOf(what string, spent uint64, limit int64) spendItem {
	return spendItem{What: what, Spent: spent, Limit: uint64(limit), Reached: limit > 0 && spent >= uint64(limit)}
}

func (s *server) execution(w http.ResponseWriter, r *http.Request) {
	info, ok := s.info(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	page := executionPage{Title: "forkline · " + info.ID.String(), Info: info}
	for p := info; !p.Parent.IsZero(); {
		var err error
		if p, err = s.k.Log().Info(ctx, p.Parent); err != nil {
			fail(w, err)
			return
		}
		page.Parents = append(page.Parents, p)
	}
	var err error
	if page.Forks, err = s.k.List(ctx, sdk.Filter{Parent: info.ID}); err != nil {
		fail(w, err)
		return
	}
	if page.Children, err = s.k.List(ctx, sdk.Filter{Caller: info.ID}); err != nil {
		fail(w, err)
		return
	}
	if page.Published, page.Inbox, err = s.talkOf(r, info.ID); err != nil {
		fail(w, err)
		return
	}
	details, err := s.k.Info(ctx, info.ID)
	if err != nil {
		fail(w, err)
		return
	}
	page.Tokens, page.Spend = details.Spend.Tokens, spendItems(details)
	evs, err := s.lineage(ctx, info.ID, 1)
	if err != nil {
		fail(w, err)
		return
	}
	page.Decisions = policyDecisions(evs)
	if info.Status == eventlog.StatusWaiting {
		if page.Pending, err = s.k.AwaitedApprovals(ctx, info.ID); err != nil {
			fail(w, err)
			return
		}
	}
	render(w, "execution", page)
}

func (s *server) timeline(w http.ResponseWriter, r *http.Request) {
	info, ok := s.info(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	events, err := s.lineage(ctx, info.ID, 1)
	if err != nil {
		fail(w, err)
		return
	}
	info.Head = uint64(len(events)) // the events read, if more came since
	forks, err := s.k.List(ctx, sdk.Filter{Parent: info.ID})
	if err != nil {
		fail(w, err)
		return
	}
	var fs []Fork
	for _, fi := range forks {
		own, err := s.lineage(ctx, fi.ID, fi.ForkSeq+1)
		if err != nil {
			fail(w, err)
			return
		}
		fs = append(fs, Fork{Info: fi, Own: own})
	}
	var buf bytes.Buffer
	if err := WriteTimeline(&buf, info, events, fs); err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// lineage reads id's events from seq from.
func (s *server) lineage(ctx context.Context, id eventlog.ID, from uint64) ([]eventlog.Event, error) {
	var out []eventlog.Event
	for ev, err := range s.k.Log().Events(ctx, id, from) {
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// eventMessage is one server-sent event of /e/{id}/events.
type eventMessage struct {
	Seq      uint64 `json:"seq"`
	Kind     string `json:"kind"`
	Time     string `json:"time"`
	Summary  string `json:"summary"`
	Covered  bool   `json:"covered"`
	Restores string `json:"restores"`
	// InFlight describes the at_most_once calls in flight at the event
	// (InFlightText), which a fork there sees as indeterminate; "" for
	// none.
	InFlight string `json:"in_flight,omitempty"`
	// Status is the execution's status when the event was sent: the page
	// updates its badge with it.
	Status string `json:"status"`
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	info, ok := s.info(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	steps := eventlog.Steps{}
	streamSSE(w, ctx, "event", s.k.Watch(ctx, info.ID), func(ev eventlog.Event) any {
		steps.Add(ev)
		msg := eventMessage{Seq: ev.Seq, Kind: ev.Kind().String(), Time: timeText(ev.Time), Summary: steps.Summary(ev)}
		// Coverage at seq may depend on events after it (a capture
		// committed with a step's outcome covers it): ask the index.
		if p, err := s.k.Coverage(ctx, info.ID, ev.Seq); err == nil {
			msg.Covered, msg.Restores, msg.InFlight = p.Covered, RestoresText(p), InFlightText(p)
		}
		msg.Status = info.Status.String()
		if now, err := s.k.Log().Info(ctx, info.ID); err == nil {
			msg.Status = now.Status.String()
		}
		return msg
	})
}

// streamSSE answers with server-sent events: the headers at once, then an
// event named name for each item (msg gives its JSON data), flushed as it
// comes; "failure" with the error when items fails before the request
// ends, or "end" after the last item.
func streamSSE[T any](w http.ResponseWriter, ctx context.Context, name string, items iter.Seq2[T, error], msg func(T) any) {
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush()
	for it, err := range items {
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(w, "event: failure\ndata: %s\n\n", jsonString(err.Error()))
			}
			return
		}
		b, _ := json.Marshal(msg(it))
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		flush()
	}
	fmt.Fprint(w, "event: end\ndata: {}\n\n")
}

// deltaMessage is one server-sent event of /e/{id}/deltas.
type deltaMessage struct {
	StepID string `json:"step_id"`
	Index  int    `json:"index"`
	Data   string `json:"data"`
}

// deltas streams the pieces of the model replies that stream to id's
// handler in this process (Kernel.WatchDeltas, DESIGN §16), then "end"
// when the execution ends.
func (s *server) deltas(w http.ResponseWriter, r *http.Request) {
	info, ok := s.info(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	streamSSE(w, ctx, "delta", s.k.WatchDeltas(ctx, info.ID), func(dl sdk.Delta) any {
		return deltaMessage{StepID: dl.StepID, Index: dl.Index, Data: string(dl.Data)}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// forkPage is the data of the fork form.
type forkPage struct {
	Title string
	Info  eventlog.Info
	At    uint64
	Event string
	Point coverage.Point
	// Step is the step whose terminal event is At, which the form may
	// edit (DESIGN §12: an edit's fork point is the step's terminal
	// event); "" when At ends no step. LLM says it is an LLM call, whose
	// tool-call arguments the form may edit too.
	Step     string
	StepName string
	LLM      bool
}

// forkPoint resolves the at= of a fork request, answering errors itself.
func (s *server) forkPoint(w http.ResponseWriter, r *http.Request) (eventlog.Info, uint64, bool) {
	info, ok := s.info(w, r)
	if !ok {
		return info, 0, false
	}
	raw := r.FormValue("at")
	at, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || at == 0 || at > info.Head {
		badRequest(w, "at=%q: want the seq of an event of %s, 1 to %d", clipText(raw, 64), info.ID, info.Head)
		return info, 0, false
	}
	return info, at, true
}

func (s *server) forkPreview(w http.ResponseWriter, r *http.Request) {
	info, at, ok := s.forkPoint(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	p, err := s.k.Coverage(ctx, info.ID, at)
	if err != nil {
		fail(w, err)
		return
	}
	page := forkPage{Title: fmt.Sprintf("forkline · fork %s at %d", info.ID, at), Info: info, At: at, Point: p}
	steps := eventlog.Steps{}
	for ev, err := range s.k.Log().Events(ctx, info.ID, 1) {
		if err != nil {
			fail(w, err)
			return
		}
		steps.Add(ev)
		if ev.Seq == at {
			page.Event = ev.Kind().String() + " · " + steps.Summary(ev)
			if step := endedStep(ev); step != "" {
				page.Step, page.StepName = step, steps.Name(step)
				page.LLM = steps[step] != nil && steps[step].StepKind == eventlog.StepLLM
			}
			break
		}
	}
	render(w, "fork", page)
}

func (s *server) fork(w http.ResponseWriter, r *http.Request) {
	info, at, ok := s.forkPoint(w, r)
	if !ok {
		return
	}
	opts, err := forkEdits(r)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	fid, err := s.k.Fork(r.Context(), info.ID, at, opts...)
	if err != nil {
		fail(w, err)
		return
	}
	// Relative, so that the page works mounted under any prefix.
	w.Header().Set("Location", "../"+fid.String())
	w.WriteHeader(http.StatusSeeOther)
}

// endedStep is the step whose terminal event ev is: a step.succeeded, or
// a step.failed that is not retried; "" otherwise.
func endedStep(ev eventlog.Event) string {
	switch p := ev.Data.(type) {
	case *eventlog.StepSucceeded:
		return p.StepID
	case *eventlog.StepFailed:
		if p.RetryAt.IsZero() {
			return p.StepID
		}
	}
	return ""
}

// forkEdits reads the fork form's edits (DESIGN §12), as forkline fork's
// flags give them: step and result (the step's new result: an LLM call's
// response body as is, another step's JSON), or step, tool and tool_args
// (one key=value or key:=JSON a line: sdk.WithToolArgs). Both, or a
// result or tool edit without a step, is an error.
func forkEdits(r *http.Request) ([]sdk.ForkOption, error) {
	step := r.FormValue("step")
	result := r.FormValue("result")
	tool := strings.TrimSpace(r.FormValue("tool"))
	toolArgs := strings.TrimSpace(r.FormValue("tool_args"))
	if result == "" && tool == "" && toolArgs == "" {
		return nil, nil
	}
	if step == "" {
		return nil, errors.New("an edited result or tool call needs its step (fork at a step's terminal event)")
	}
	if result != "" && (tool != "" || toolArgs != "") {
		return nil, errors.New("give either a new result or tool-call arguments, not both")
	}
	if result != "" {
		if json.Valid([]byte(result)) {
			return []sdk.ForkOption{sdk.WithResult(step, json.RawMessage(result))}, nil
		}
		return []sdk.ForkOption{sdk.WithResult(step, []byte(result))}, nil
	}
	if tool == "" {
		return nil, errors.New("tool-call arguments need the tool (its name, or the call's ID)")
	}
	var args []fork.ToolArg
	for line := range strings.Lines(toolArgs) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		a, err := fork.ParseToolArg(line)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	return []sdk.ForkOption{sdk.WithToolArgs(step, tool, args...)}, nil
}

// render executes the named template of page.html.tmpl into w.
func render(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "webui: render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}
