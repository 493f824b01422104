package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/sdk"
)

// The JSON API (see the package doc): what another process needs to read
// the log this one holds, as internal/serveapi's wire types.
func (s *server) api(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/executions", s.apiExecutions)
	mux.HandleFunc("GET /api/e/{id}", s.apiExecution)
	mux.HandleFunc("GET /api/e/{id}/events", s.apiEvents)
	// The deltas of the streams this process's handlers read (DESIGN
	// §16), never stored: server-sent events as the page's route.
	mux.HandleFunc("GET /api/e/{id}/deltas", s.apiDeltas)
	mux.HandleFunc("GET /api/e/{id}/resources", s.apiResources)
	mux.HandleFunc("GET /api/e/{id}/history", s.apiHistory)
	mux.HandleFunc("GET /api/e/{id}/coverage", s.apiCoverage)
	mux.HandleFunc("GET /api/usage", s.apiUsage)
	mux.HandleFunc("GET /api/schedules", s.apiSchedules)
	mux.HandleFunc("GET /api/queues", s.apiQueues)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, fmt.Errorf("%w: no API endpoint %s %s", eventlog.ErrNotFound, r.Method, clipText(r.URL.Path, 80)))
	})
}

// writeAPI answers v as JSON.
func writeAPI(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		apiFail(w, fmt.Errorf("webui: encode the answer: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}

// apiError answers err as a serveapi.Error with status code.
func apiError(w http.ResponseWriter, code int, err error) {
	b, _ := json.Marshal(serveapi.Error{Error: err.Error(), Code: serveapi.Code(err)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// apiFail answers an error of the log: 404 for an unknown execution, 400
// for bad input, 500 otherwise.
func apiFail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, eventlog.ErrNotFound):
		apiError(w, http.StatusNotFound, err)
	case errors.Is(err, eventlog.ErrInvalid):
		apiError(w, http.StatusBadRequest, err)
	default:
		apiError(w, http.StatusInternalServerError, err)
	}
}

// apiBad answers bad input: 400, classified as eventlog.ErrInvalid.
func apiBad(w http.ResponseWriter, format string, args ...any) {
	apiError(w, http.StatusBadRequest, fmt.Errorf("%w: "+format, append([]any{eventlog.ErrInvalid}, args...)...))
}

// apiID parses the {id} of the path, answering the error itself.
func apiID(w http.ResponseWriter, r *http.Request) (eventlog.ID, bool) {
	id, err := eventlog.ParseID(r.PathValue("id"))
	if err != nil {
		apiBad(w, "execution ID %q: want 32 hex digits", clipText(r.PathValue("id"), 64))
		return id, false
	}
	return id, true
}

// apiUint parses query parameter name as a number, def when absent.
func apiUint(w http.ResponseWriter, r *http.Request, name string, def uint64) (uint64, bool) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return def, true
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		apiBad(w, "%s=%q: want a number", name, clipText(raw, 64))
		return 0, false
	}
	return n, true
}

// apiLimit parses limit=, 1 to serveapi.PageSize (the default).
func apiLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	n, ok := apiUint(w, r, "limit", serveapi.PageSize)
	if !ok {
		return 0, false
	}
	if n == 0 || n > serveapi.PageSize {
		apiBad(w, "limit=%d: want 1 to %d", n, serveapi.PageSize)
		return 0, false
	}
	return int(n), true
}

func (s *server) apiExecutions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := eventlog.Filter{Agent: q.Get("agent")}
	if raw := q.Get("status"); raw != "" {
		for _, name := range strings.Split(raw, ",") {
			st, err := eventlog.ParseStatus(strings.TrimSpace(name))
			if err != nil {
				apiBad(w, "status=%q: want names of statuses (pending, running, waiting, completed, failed, cancelled) joined by commas", clipText(raw, 64))
				return
			}
			f.Status = append(f.Status, st)
		}
	}
	for name, dst := range map[string]*eventlog.ID{"parent": &f.Parent, "caller": &f.Caller, "after": &f.After} {
		if raw := q.Get(name); raw != "" {
			id, err := eventlog.ParseID(raw)
			if err != nil {
				apiBad(w, "%s=%q: want 32 hex digits", name, clipText(raw, 64))
				return
			}
			*dst = id
		}
	}
	limit, ok := apiUint(w, r, "limit", 0)
	if !ok {
		return
	}
	if limit > 1<<31 {
		apiBad(w, "limit=%d: too large", limit)
		return
	}
	f.Limit = int(limit)
	out := serveapi.Executions{Executions: []serveapi.Execution{}}
	for info, err := range s.k.Log().List(r.Context(), f) {
		if err != nil {
			apiFail(w, err)
			return
		}
		out.Executions = append(out.Executions, serveapi.ExecutionOf(info))
	}
	writeAPI(w, out)
}

func (s *server) apiExecution(w http.ResponseWriter, r *http.Request) {
	id, ok := apiID(w, r)
	if !ok {
		return
	}
	info, err := s.k.Log().Info(r.Context(), id)
	if err != nil {
		apiFail(w, err)
		return
	}
	writeAPI(w, serveapi.ExecutionOf(info))
}

// apiDeltas streams the deltas of id's streams that this process's
// handlers read, as the page's route does; an unknown or malformed ID is
// answered in the API's error envelope.
func (s *server) apiDeltas(w http.ResponseWriter, r *http.Request) {
	id, ok := apiID(w, r)
	if !ok {
		return
	}
	info, err := s.k.Log().Info(r.Context(), id)
	if err != nil {
		apiFail(w, err)
		return
	}
	ctx := r.Context()
	streamSSE(w, ctx, "delta", s.k.WatchDeltas(ctx, info.ID), func(dl sdk.Delta) any {
		return deltaMessage{StepID: dl.StepID, Index: dl.Index, Data: string(dl.Data)}
	})
}

// apiEvents answers a page of the lineage: from= (default 1) up to to=
// (default: the head now), at most limit= events.
func (s *server) apiEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := apiID(w, r)
	if !ok {
		return
	}
	from, ok1 := apiUint(w, r, "from", 1)
	if !ok1 {
		return
	}
	to, ok2 := apiUint(w, r, "to", 0)
	if !ok2 {
		return
	}
	limit, ok3 := apiLimit(w, r)
	if !ok3 {
		return
	}
	ctx := r.Context()
	info, err := s.k.Log().Info(ctx, id)
	if err != nil {
		apiFail(w, err)
		return
	}
	if to == 0 {
		to = info.Head
	}
	if from == 0 || to > info.Head {
		apiBad(w, "execution %s has events 1 to %d: from=%d to=%d", id, info.Head, from, to)
		return
	}
	page := serveapi.Events{Execution: id, To: to, Events: []serveapi.Event{}}
	if from > to {
		writeAPI(w, page)
		return
	}
	last, err := s.eventsPage(ctx, &page, from, to, limit)
	if err != nil {
		apiFail(w, err)
		return
	}
	if last < to {
		page.Next = last + 1
	}
	writeAPI(w, page)
}

// eventsPage reads id's events from..to, at most limit of them, into page
// and returns the last seq read.
func (s *server) eventsPage(ctx context.Context, page *serveapi.Events, from, to uint64, limit int) (uint64, error) {
	last := from - 1
	for ev, err := range s.k.Log().Events(ctx, page.Execution, from) {
		if err != nil {
			return 0, err
		}
		if ev.Seq > to || len(page.Events) == limit {
			break
		}
		rec, err := eventlog.AppendRecord(nil, page.Execution, ev)
		if err != nil {
			return 0, fmt.Errorf("webui: execution %s: seq %d: %w", page.Execution, ev.Seq, err)
		}
		data, err := eventlog.PayloadFields(ev.Data).MarshalJSON()
		if err != nil {
			return 0, fmt.Errorf("webui: execution %s: seq %d: %w", page.Execution, ev.Seq, err)
		}
		page.Events = append(page.Events, serveapi.Event{Seq: ev.Seq, Time: ev.Time, Kind: ev.Kind().String(),
			Summary: eventlog.Summary(ev), Data: data, Record: rec})
		last = ev.Seq
	}
	return last, nil
}

func (s *server) apiResources(w http.ResponseWriter, r *http.Request) {
	id, ok := apiID(w, r)
	if !ok {
		return
	}
	at, ok := apiUint(w, r, "at", 0)
	if !ok {
		return
	}
	states, err := s.k.Log().ResourceStates(r.Context(), id, at)
	if err != nil {
		apiFail(w, err)
		return
	}
	out := serveapi.ResourceStates{States: make([]serveapi.ResourceState, len(states))}
	for i, st := range states {
		out.States[i] = serveapi.ResourceStateOf(st)
	}
	writeAPI(w, out)
}

// apiHistory answers a page of resource key='s states after after=.
func (s *server) apiHistory(w http.ResponseWriter, r *http.Request) {
	id, ok := apiID(w, r)
	if !ok {
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		apiBad(w, "key= is required: the resource whose history to read")
		return
	}
	after, ok1 := apiUint(w, r, "after", 0)
	if !ok1 {
		return
	}
	limit, ok2 := apiLimit(w, r)
	if !ok2 {
		return
	}
	out := serveapi.ResourceStates{States: []serveapi.ResourceState{}}
	for st, err := range s.k.Log().ResourceHistory(r.Context(), id, key, after) {
		if err != nil {
			apiFail(w, err)
			return
		}
		if len(out.States) == limit {
			out.Next = out.States[limit-1].Seq
			break
		}
		out.States = append(out.States, serveapi.ResourceStateOf(st))
	}
	writeAPI(w, out)
}

// coverageJSON is a coverage.Point in the API.
type coverageJSON struct {
	Seq       uint64          `json:"seq"`
	Covered   bool            `json:"covered"`
	Resources []selectionJSON `json:"resources"`
	// InFlight lists the at_most_once calls in flight at Seq, which a
	// fork there sees as indeterminate; omitted when there are none.
	InFlight []inFlightJSON `json:"in_flight,omitempty"`
}

// inFlightJSON is a coverage.InFlight in the API.
type inFlightJSON struct {
	StepID    string `json:"step_id"`
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	StartedAt uint64 `json:"started_at"`
}

// selectionJSON is a coverage.Selection in the API.
type selectionJSON struct {
	Key        string `json:"key"`
	Ref        string `json:"ref"` // "" = the initial environment
	CapturedAt uint64 `json:"captured_at"`
	Generation uint64 `json:"generation"`
	Covered    bool   `json:"covered"`
}

func (s *server) apiCoverage(w http.ResponseWriter, r *http.Request) {
	id, ok := apiID(w, r)
	if !ok {
		return
	}
	at, ok := apiUint(w, r, "at", 0)
	if !ok {
		return
	}
	p, err := s.k.Coverage(r.Context(), id, at)
	if err != nil {
		apiFail(w, err)
		return
	}
	out := coverageJSON{Seq: p.Seq, Covered: p.Covered, Resources: []selectionJSON{}}
	for _, sel := range p.Resources {
		out.Resources = append(out.Resources, selectionJSON(sel))
	}
	for _, f := range p.InFlight {
		out.InFlight = append(out.InFlight, inFlightJSON{StepID: f.StepID, Kind: string(f.Kind), Target: f.Target, StartedAt: f.StartedAt})
	}
	writeAPI(w, out)
}

// chunkCounter is a store that says what its shared chunks of long records
// take (pebblestore).
type chunkCounter interface {
	ChunkUsage(ctx context.Context) (int, int64, error)
}

func (s *server) apiUsage(w http.ResponseWriter, r *http.Request) {
	var ur eventlog.UsageReporter
	if !eventlog.As(s.k.Log(), &ur) {
		apiError(w, http.StatusNotImplemented, fmt.Errorf("webui: this store (%T) does not report what executions take", s.k.Log()))
		return
	}
	ctx := r.Context()
	out := serveapi.Usages{Executions: []serveapi.Usage{}}
	for u, err := range ur.Usage(ctx) {
		if err != nil {
			apiFail(w, err)
			return
		}
		out.Executions = append(out.Executions, serveapi.Usage(u))
	}
	if cc := chunkCounter(nil); eventlog.As(s.k.Log(), &cc) {
		n, b, err := cc.ChunkUsage(ctx)
		if err != nil {
			apiFail(w, err)
			return
		}
		out.Chunks = &serveapi.Chunks{Count: n, Bytes: b}
	}
	writeAPI(w, out)
}

// apiSchedules answers the store's schedules (DESIGN §19), none for a
// store that keeps none.
func (s *server) apiSchedules(w http.ResponseWriter, r *http.Request) {
	out := serveapi.Schedules{Schedules: []serveapi.Schedule{}}
	var sch eventlog.Scheduler
	if eventlog.As(s.k.Log(), &sch) {
		all, err := sch.Schedules(r.Context())
		if err != nil {
			apiFail(w, err)
			return
		}
		for _, sc := range all {
			out.Schedules = append(out.Schedules, serveapi.Schedule{Name: sc.Name, Agent: sc.Agent, Spec: sc.Spec,
				Input: sc.Input, CatchUp: sc.CatchUp,
				Created: eventlog.ScheduleNanos(sc.Created), LastTick: eventlog.ScheduleNanos(sc.LastTick)})
		}
	}
	writeAPI(w, out)
}

// apiQueues answers the store's queues with their counts (DESIGN §19),
// none for a store that keeps none.
func (s *server) apiQueues(w http.ResponseWriter, r *http.Request) {
	out := serveapi.Queues{Queues: []serveapi.Queue{}}
	all, err := s.k.Queues(r.Context())
	if err != nil {
		apiFail(w, err)
		return
	}
	for _, q := range all {
		out.Queues = append(out.Queues, serveapi.Queue{Name: q.Name, Concurrency: q.Concurrency, Rate: q.Rate,
			PerNS: int64(q.Per), Priority: q.Priority, Declared: q.Declared, Waiting: q.Waiting, Running: q.Running})
	}
	writeAPI(w, out)
}
