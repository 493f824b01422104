package serveapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// ErrReadOnly is returned by every method of a [Log] that would write:
// the log belongs to the serving process, which alone writes to it.
var ErrReadOnly = errors.New("serveapi: the log is read through a serving process")

// ErrUnreachable classifies a failure to talk to the serving process at
// all: it does not answer, or something else answers in its place.
var ErrUnreachable = errors.New("serveapi: the serving process does not answer")

// Log reads an event log through the JSON API of a serving process
// (webui.Handler): it is an [eventlog.IndexedLog], an
// [eventlog.UsageReporter] and an [eventlog.Scheduler] whose reads are the
// server's answers and whose writes (Create, Append, AppendUnsynced, Fork,
// the schedules' Put, Delete and Advance) fail with ErrReadOnly, so that code written against a store runs
// unchanged on it. Events arrive as their stored records and are decoded
// here, so they are the very events the store holds.
type Log struct {
	base   *neturl.URL
	token  string
	client *http.Client
	closed chan struct{}
}

var (
	_ eventlog.IndexedLog    = (*Log)(nil)
	_ eventlog.UsageReporter = (*Log)(nil)
	_ eventlog.Scheduler     = (*Log)(nil)
	_ eventlog.Queuer        = (*Log)(nil)
)

// Dial returns a Log reading through the server at base (say
// http://127.0.0.1:7070/). A token that is not empty is presented on
// every request as "Authorization: Bearer TOKEN", and every answer must
// carry its [Proof] in ProofHeader. Dial asks the server once, so that a server
// that is gone or another one in its place is an error wrapping
// ErrUnreachable here, not at the first read.
func Dial(ctx context.Context, base, token string) (*Log, error) {
	u, err := neturl.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: serveapi: address %q: want http://host:port/", eventlog.ErrInvalid, base)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	l := &Log{base: u, token: token, closed: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: time.Minute}}}
	var x Executions
	if err := l.get(ctx, "api/executions", neturl.Values{"limit": {"1"}}, &x); err != nil {
		return nil, err
	}
	return l, nil
}

// URL is the address of the server.
func (l *Log) URL() string { return l.base.String() }

// remoteError is an error answered by the server: its message, classified
// by the sentinel its code names.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Unwrap() error { return e.sentinel }

// get asks for path with query q and decodes the JSON answer into v.
func (l *Log) get(ctx context.Context, path string, q neturl.Values, v any) error {
	return l.do(ctx, http.MethodGet, path, q, v)
}

// Run asks the serving process to run one dispatch of execution id
// (RunPath) and waits for its answer: the dispatch's own error is in the
// RunResult (RunResult.Err); err is a failure to ask, or the server's
// refusal (an unknown execution, one of an agent it does not run, a
// server that runs none: eventlog.ErrNotFound for the route). Ending ctx
// ends the request, which cuts the dispatch in the server as ending the
// context of sdk.Kernel.Run does. It is not a write through this Log: the
// serving process runs the execution with its own kernel.
func (l *Log) Run(ctx context.Context, id eventlog.ID) (RunResult, error) {
	var r RunResult
	err := l.do(ctx, http.MethodPost, RunPath(id), nil, &r)
	return r, err
}

// do sends a request of method for path with query q and decodes the JSON
// answer into v.
func (l *Log) do(ctx context.Context, method, path string, q neturl.Values, v any) error {
	select {
	case <-l.closed:
		return fmt.Errorf("serveapi: %w", eventlog.ErrClosed)
	default:
	}
	u := l.base.ResolveReference(&neturl.URL{Path: path, RawQuery: q.Encode()})
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return fmt.Errorf("serveapi: %w", err)
	}
	if l.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if l.token != "" && resp.Header.Get(ProofHeader) != Proof(l.token) {
		return fmt.Errorf("%w: %s answers (%s), but it is not the process that advertised itself: it does not know the advertised token (another server took its address)",
			ErrUnreachable, l.base, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%w: read the answer to %s: %v", ErrUnreachable, u.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e Error
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			return fmt.Errorf("%w: %s: %s: %s", ErrUnreachable, u.Path, resp.Status, strings.TrimSpace(string(body)))
		}
		return &remoteError{msg: e.Error, sentinel: sentinel(e.Code)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s: the answer is not the API's JSON: %v", ErrUnreachable, u.Path, err)
	}
	return nil
}

// List implements eventlog.Log, asking for PageSize executions at a time.
func (l *Log) List(ctx context.Context, f eventlog.Filter) iter.Seq2[eventlog.Info, error] {
	return func(yield func(eventlog.Info, error) bool) {
		if err := f.Validate(); err != nil {
			yield(eventlog.Info{}, err)
			return
		}
		q := neturl.Values{}
		if f.Agent != "" {
			q.Set("agent", f.Agent)
		}
		if len(f.Status) > 0 {
			names := make([]string, len(f.Status))
			for i, s := range f.Status {
				names[i] = s.String()
			}
			q.Set("status", strings.Join(names, ","))
		}
		for name, id := range map[string]eventlog.ID{"parent": f.Parent, "caller": f.Caller} {
			if !id.IsZero() {
				q.Set(name, id.String())
			}
		}
		after, left := f.After, f.Limit
		for {
			n := PageSize
			if f.Limit > 0 {
				n = min(n, left)
			}
			q.Set("limit", strconv.Itoa(n))
			if !after.IsZero() {
				q.Set("after", after.String())
			}
			var x Executions
			if err := l.get(ctx, "api/executions", q, &x); err != nil {
				yield(eventlog.Info{}, err)
				return
			}
			for _, e := range x.Executions {
				if !yield(e.Info(), nil) {
					return
				}
				after = e.ID
			}
			left -= len(x.Executions)
			if len(x.Executions) < n || (f.Limit > 0 && left <= 0) {
				return
			}
		}
	}
}

// Info implements eventlog.Log.
func (l *Log) Info(ctx context.Context, id eventlog.ID) (eventlog.Info, error) {
	var x Execution
	if err := l.get(ctx, "api/e/"+id.String(), nil, &x); err != nil {
		return eventlog.Info{}, err
	}
	return x.Info(), nil
}

// Head implements eventlog.Log.
func (l *Log) Head(ctx context.Context, id eventlog.ID) (uint64, error) {
	info, err := l.Info(ctx, id)
	return info.Head, err
}

// Events implements eventlog.Log: it asks for pages of events up to the
// head the first page reports.
func (l *Log) Events(ctx context.Context, id eventlog.ID, from uint64) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		if from == 0 {
			from = 1
		}
		q := neturl.Values{"from": {strconv.FormatUint(from, 10)}}
		for {
			var page Events
			if err := l.get(ctx, "api/e/"+id.String()+"/events", q, &page); err != nil {
				yield(eventlog.Event{}, err)
				return
			}
			for _, we := range page.Events {
				ev, err := eventlog.DecodeRecord(id, we.Seq, we.Record)
				if err != nil {
					yield(eventlog.Event{}, &eventlog.CorruptionError{Execution: id, Seq: we.Seq, Err: err})
					return
				}
				if !yield(ev, nil) {
					return
				}
			}
			if page.Next == 0 {
				return
			}
			q = neturl.Values{"from": {strconv.FormatUint(page.Next, 10)}, "to": {strconv.FormatUint(page.To, 10)}}
		}
	}
}

// ResourceStates implements eventlog.Index.
func (l *Log) ResourceStates(ctx context.Context, id eventlog.ID, at uint64) ([]eventlog.ResourceState, error) {
	var x ResourceStates
	if err := l.get(ctx, "api/e/"+id.String()+"/resources", neturl.Values{"at": {strconv.FormatUint(at, 10)}}, &x); err != nil {
		return nil, err
	}
	var out []eventlog.ResourceState
	for _, st := range x.States {
		out = append(out, st.State())
	}
	return out, nil
}

// ResourceHistory implements eventlog.Index, a page at a time.
func (l *Log) ResourceHistory(ctx context.Context, id eventlog.ID, key string, after uint64) iter.Seq2[eventlog.ResourceState, error] {
	return func(yield func(eventlog.ResourceState, error) bool) {
		for {
			var x ResourceStates
			q := neturl.Values{"key": {key}, "after": {strconv.FormatUint(after, 10)}}
			if err := l.get(ctx, "api/e/"+id.String()+"/history", q, &x); err != nil {
				yield(eventlog.ResourceState{}, err)
				return
			}
			for _, st := range x.States {
				if !yield(st.State(), nil) {
					return
				}
			}
			if x.Next == 0 {
				return
			}
			after = x.Next
		}
	}
}

// Usage implements eventlog.UsageReporter.
func (l *Log) Usage(ctx context.Context) iter.Seq2[eventlog.Usage, error] {
	return func(yield func(eventlog.Usage, error) bool) {
		x, err := l.usages(ctx)
		if err != nil {
			yield(eventlog.Usage{}, err)
			return
		}
		for _, u := range x.Executions {
			if !yield(eventlog.Usage(u), nil) {
				return
			}
		}
	}
}

// ChunkUsage says what the store's shared chunks of long records take
// (none when it keeps none), as pebblestore.Store.ChunkUsage does.
func (l *Log) ChunkUsage(ctx context.Context) (int, int64, error) {
	x, err := l.usages(ctx)
	if err != nil || x.Chunks == nil {
		return 0, 0, err
	}
	return x.Chunks.Count, x.Chunks.Bytes, nil
}

func (l *Log) usages(ctx context.Context) (Usages, error) {
	var x Usages
	err := l.get(ctx, "api/usage", nil, &x)
	return x, err
}

// Schedules implements eventlog.Scheduler: the serving store's
// schedules (DESIGN §19). A record that breaks eventlog.CheckSchedule is
// an eventlog.CorruptionError, as the stores report it.
func (l *Log) Schedules(ctx context.Context) ([]eventlog.Schedule, error) {
	var x Schedules
	if err := l.get(ctx, "api/schedules", nil, &x); err != nil {
		return nil, err
	}
	out := make([]eventlog.Schedule, 0, len(x.Schedules))
	for _, w := range x.Schedules {
		sc := eventlog.Schedule{Name: w.Name, Agent: w.Agent, Spec: w.Spec, Input: w.Input, CatchUp: w.CatchUp,
			Created: eventlog.ScheduleTime(w.Created), LastTick: eventlog.ScheduleTime(w.LastTick)}
		if err := eventlog.CheckSchedule(sc); err != nil {
			return nil, &eventlog.CorruptionError{What: fmt.Sprintf("schedule %q from %s", w.Name, l.base), Err: err}
		}
		out = append(out, sc)
	}
	return out, nil
}

// PutSchedule implements eventlog.Scheduler; it fails with ErrReadOnly.
func (l *Log) PutSchedule(context.Context, eventlog.Schedule) error {
	return l.readOnly("put a schedule")
}

// DeleteSchedule implements eventlog.Scheduler; it fails with ErrReadOnly.
func (l *Log) DeleteSchedule(_ context.Context, name string) error {
	return l.readOnly("remove schedule " + strconv.Quote(name))
}

// AdvanceSchedule implements eventlog.Scheduler; it fails with
// ErrReadOnly.
func (l *Log) AdvanceSchedule(_ context.Context, name string, _, _, _ time.Time) (bool, error) {
	return false, l.readOnly("advance schedule " + strconv.Quote(name))
}

// queues reads /api/queues.
func (l *Log) queues(ctx context.Context) ([]Queue, error) {
	var x Queues
	if err := l.get(ctx, "api/queues", nil, &x); err != nil {
		return nil, err
	}
	return x.Queues, nil
}

// Queues implements eventlog.Queuer: the serving store's declared queues
// (DESIGN §19). A record that breaks eventlog.CheckQueue is an
// eventlog.CorruptionError, as the stores report it.
func (l *Log) Queues(ctx context.Context) ([]eventlog.Queue, error) {
	all, err := l.queues(ctx)
	if err != nil {
		return nil, err
	}
	var out []eventlog.Queue
	for _, w := range all {
		if !w.Declared {
			continue
		}
		q := eventlog.Queue{Name: w.Name, Concurrency: w.Concurrency, Rate: w.Rate, Per: time.Duration(w.PerNS), Priority: w.Priority}
		if err := eventlog.CheckQueue(q); err != nil {
			return nil, &eventlog.CorruptionError{What: fmt.Sprintf("queue %q from %s", w.Name, l.base), Err: err}
		}
		out = append(out, q)
	}
	return out, nil
}

// QueueCounts implements eventlog.Queuer: the serving store's counts.
func (l *Log) QueueCounts(ctx context.Context) (map[string]eventlog.QueueCount, error) {
	all, err := l.queues(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]eventlog.QueueCount{}
	for _, w := range all {
		if w.Waiting > 0 || w.Running > 0 {
			out[w.Name] = eventlog.QueueCount{Waiting: w.Waiting, Running: w.Running}
		}
	}
	return out, nil
}

// PutQueue implements eventlog.Queuer; it fails with ErrReadOnly.
func (l *Log) PutQueue(_ context.Context, q eventlog.Queue) error {
	return l.readOnly("declare queue " + strconv.Quote(q.Name))
}

// ClaimToRun implements eventlog.Queuer; it fails with ErrReadOnly.
func (l *Log) ClaimToRun(_ context.Context, id eventlog.ID, _ string, _ time.Duration, _ string) (eventlog.Lease, error) {
	return eventlog.Lease{}, l.readOnly("claim " + id.String())
}

func (l *Log) readOnly(op string) error {
	return fmt.Errorf("%w (%s): %s", ErrReadOnly, l.base, op)
}

// Create implements eventlog.Log; it fails with ErrReadOnly.
func (l *Log) Create(context.Context, *eventlog.ExecutionCreated, time.Time, ...eventlog.CreateOption) (eventlog.ID, error) {
	return eventlog.ID{}, l.readOnly("create an execution")
}

// Append implements eventlog.Log; it fails with ErrReadOnly.
func (l *Log) Append(_ context.Context, id eventlog.ID, _ uint64, _ ...eventlog.Event) (uint64, error) {
	return 0, l.readOnly("append to " + id.String())
}

// AppendUnsynced implements eventlog.Log; it fails with ErrReadOnly.
func (l *Log) AppendUnsynced(_ context.Context, id eventlog.ID, _ uint64, _ ...eventlog.Event) (uint64, error) {
	return 0, l.readOnly("append to " + id.String())
}

// Fork implements eventlog.Log; it fails with ErrReadOnly.
func (l *Log) Fork(_ context.Context, parent eventlog.ID, _ uint64, _ *eventlog.ForkCreated, _ time.Time) (eventlog.ID, error) {
	return eventlog.ID{}, l.readOnly("fork " + parent.String())
}

// Close releases the client; every later read fails with ErrClosed.
func (l *Log) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
		l.client.CloseIdleConnections()
	}
	return nil
}
