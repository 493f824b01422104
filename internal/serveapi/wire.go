package serveapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// ProofHeader is the response header by which a serving process proves
// it is the one its advertisement names (Advert.Token) without sending
// the token: it is set, to [Proof] of the token, on the answers to
// requests that presented the token. A client that finds another value,
// or none, is talking to some other server.
const ProofHeader = "Forkline-Serve-Proof"

// Proof is the value of ProofHeader for token: an HMAC-SHA256 of a fixed
// label keyed by the token, in hex. Knowing it does not reveal the token.
func Proof(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("forkline serve proof"))
	return hex.EncodeToString(m.Sum(nil))
}

// ErrUnauthorized classifies an answer of 401: the request presented no
// token, or a wrong one (Error.Code "unauthorized").
var ErrUnauthorized = errors.New("serveapi: the server wants its token")

// PageSize is how many events or states one response holds at most when
// the request names no limit.
const PageSize = 1000

// Execution is an [eventlog.Info] on the wire.
type Execution struct {
	ID       eventlog.ID     `json:"id"`
	Agent    string          `json:"agent"`
	Parent   *eventlog.ID    `json:"parent,omitempty"`
	ForkSeq  uint64          `json:"fork_seq,omitempty"`
	Caller   *eventlog.ID    `json:"caller,omitempty"`
	Head     uint64          `json:"head"`
	Created  time.Time       `json:"created"`
	Status   eventlog.Status `json:"status"`
	Updated  time.Time       `json:"updated"`
	WakeAt   *time.Time      `json:"wake_at,omitempty"`
	Deadline *time.Time      `json:"deadline,omitempty"`
	// Tokens is the own run's token usage (eventlog.Info.Tokens, DESIGN
	// §16); absent when its llm calls reported none.
	Tokens *eventlog.Tokens `json:"tokens,omitempty"`
}

// ExecutionOf puts info on the wire.
func ExecutionOf(info eventlog.Info) Execution {
	x := Execution{ID: info.ID, Agent: info.Agent, ForkSeq: info.ForkSeq, Head: info.Head,
		Created: info.Created, Status: info.Status, Updated: info.Updated}
	if !info.Parent.IsZero() {
		x.Parent = &info.Parent
	}
	if !info.Caller.IsZero() {
		x.Caller = &info.Caller
	}
	if !info.WakeAt.IsZero() {
		x.WakeAt = &info.WakeAt
	}
	if !info.Deadline.IsZero() {
		x.Deadline = &info.Deadline
	}
	if info.Tokens != (eventlog.Tokens{}) {
		x.Tokens = &info.Tokens
	}
	return x
}

// Info is x as the store described it.
func (x Execution) Info() eventlog.Info {
	info := eventlog.Info{ID: x.ID, Agent: x.Agent, ForkSeq: x.ForkSeq, Head: x.Head,
		Created: x.Created, Status: x.Status, Updated: x.Updated}
	if x.Tokens != nil {
		info.Tokens = *x.Tokens
	}
	if x.Parent != nil {
		info.Parent = *x.Parent
	}
	if x.Caller != nil {
		info.Caller = *x.Caller
	}
	if x.WakeAt != nil {
		info.WakeAt = *x.WakeAt
	}
	if x.Deadline != nil {
		info.Deadline = *x.Deadline
	}
	return info
}

// Executions is the answer of /api/executions.
type Executions struct {
	Executions []Execution `json:"executions"`
}

// Event is one event on the wire: what people read (kind, summary, data)
// and the event's record (eventlog.AppendRecord), from which a client
// decodes the very event the store holds. On the wire a record is bound
// to the execution asked for (Events.Execution) and its seq, even an event
// of the prefix a fork shares with its parent, which the store binds to
// the parent.
type Event struct {
	Seq     uint64          `json:"seq"`
	Time    time.Time       `json:"time"`
	Kind    string          `json:"kind"`
	Summary string          `json:"summary"`
	Data    json.RawMessage `json:"data"`   // eventlog.PayloadFields
	Record  []byte          `json:"record"` // base64 in JSON
}

// Events is one page of the answer of /api/e/{id}/events.
type Events struct {
	Execution eventlog.ID `json:"execution"`
	// To is the last seq the read covers: the head when the first page was
	// asked for. Later pages ask with to=To, so that the whole read is the
	// lineage up to the head at the time of the first call.
	To     uint64  `json:"to"`
	Events []Event `json:"events"`
	// Next is the seq to ask for next (from=Next), or 0 when the read is
	// complete.
	Next uint64 `json:"next,omitempty"`
}

// ResourceState is an [eventlog.ResourceState] on the wire.
type ResourceState struct {
	Key           string     `json:"key"`
	Seq           uint64     `json:"seq"`
	Generation    uint64     `json:"generation"`
	InFlight      []string   `json:"in_flight,omitempty"`
	CoverageReuse bool       `json:"coverage_reuse,omitempty"`
	Bound         uint64     `json:"bound"`
	Latest        Checkpoint `json:"latest"`
}

// Checkpoint is an [eventlog.Checkpoint] on the wire.
type Checkpoint struct {
	Ref        string `json:"ref"`
	At         uint64 `json:"at"`
	Generation uint64 `json:"generation"`
}

// ResourceStateOf puts st on the wire.
func ResourceStateOf(st eventlog.ResourceState) ResourceState {
	return ResourceState{Key: st.Key, Seq: st.Seq, Generation: st.Generation, InFlight: st.InFlight,
		CoverageReuse: st.CoverageReuse, Bound: st.Bound, Latest: Checkpoint(st.Latest)}
}

// State is r as the store's index holds it.
func (r ResourceState) State() eventlog.ResourceState {
	return eventlog.ResourceState{Key: r.Key, Seq: r.Seq, Generation: r.Generation, InFlight: r.InFlight,
		CoverageReuse: r.CoverageReuse, Bound: r.Bound, Latest: eventlog.Checkpoint(r.Latest)}
}

// ResourceStates is the answer of /api/e/{id}/resources (the states at a
// seq) and one page of /api/e/{id}/history (a resource's states after a
// seq; Next is the after= of the next page, 0 when complete).
type ResourceStates struct {
	States []ResourceState `json:"states"`
	Next   uint64          `json:"next,omitempty"`
}

// Usage is an [eventlog.Usage] on the wire.
type Usage struct {
	ID      eventlog.ID `json:"id"`
	Deleted bool        `json:"deleted,omitempty"`
	Events  uint64      `json:"events"`
	Bytes   int64       `json:"bytes"`
}

// Usages is the answer of /api/usage: every execution's usage in ID
// order, and the shared chunks of long records when the store keeps any.
type Usages struct {
	Executions []Usage `json:"executions"`
	Chunks     *Chunks `json:"chunks,omitempty"`
}

// Chunks is what a store's shared chunks of long records take.
type Chunks struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`
}

// Error is the answer of a request that failed. Code classifies it as the
// log's sentinel errors do: "not_found", "invalid", "corrupt", "conflict",
// "closed", "unauthorized", or "" for anything else.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// codes maps Error.Code to the sentinel it stands for.
var codes = []struct {
	code string
	err  error
}{
	{"not_found", eventlog.ErrNotFound},
	{"invalid", eventlog.ErrInvalid},
	{"corrupt", eventlog.ErrCorrupt},
	{"conflict", eventlog.ErrConflict},
	{"closed", eventlog.ErrClosed},
	{"unauthorized", ErrUnauthorized},
}

// Code classifies err for Error.Code.
func Code(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// sentinel is the sentinel of code, or nil.
func sentinel(code string) error {
	for _, c := range codes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}

// Schedule is an [eventlog.Schedule] on the wire; its times are Unix
// nanoseconds (0 for none), so they read back exactly.
type Schedule struct {
	Name     string `json:"name"`
	Agent    string `json:"agent"`
	Spec     string `json:"spec"`
	Input    []byte `json:"input"`
	CatchUp  int    `json:"catch_up"`
	Created  int64  `json:"created_ns"`
	LastTick int64  `json:"last_tick_ns,omitempty"`
}

// Schedules is the answer of /api/schedules: the store's schedules,
// ordered by name (DESIGN §19).
type Schedules struct {
	Schedules []Schedule `json:"schedules"`
}

// Queue is one queue in the answer of /api/queues: its record and what
// it holds now (DESIGN §19). PerNS is the rate's period in nanoseconds.
type Queue struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	Rate        int    `json:"rate"`
	PerNS       int64  `json:"per_ns"`
	Priority    bool   `json:"priority"`
	Declared    bool   `json:"declared"`
	Waiting     int    `json:"waiting"`
	Running     int    `json:"running"`
}

// Queues is the answer of /api/queues: the store's queues, ordered by
// name, with their counts (DESIGN §19).
type Queues struct {
	Queues []Queue `json:"queues"`
}

// RunPath is the route, under the API's base, by which a serving process
// that runs executions (forkline serve) runs one dispatch of execution id
// for another process: POST, answered with a [RunResult].
func RunPath(id eventlog.ID) string { return "api/e/" + id.String() + "/run" }

// RunResult is the answer of a run (RunPath): the model the serving
// process ran the execution on, and how the dispatch ended. The answer's
// head comes before the dispatch runs, so an error found before it (an
// unknown execution, one of an agent the server does not run) is an
// [Error] with its status; one of the dispatch itself is in Error and
// Code.
type RunResult struct {
	Model    string `json:"model"`    // the model's name
	BaseURL  string `json:"base_url"` // its endpoint ("" for the scripted one)
	Scripted bool   `json:"scripted"` // the built-in scripted model
	// Output is the execution's output (JSON) when the dispatch ended in
	// it, or found it completed.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the dispatch's error, with Code classifying it as [Code]
	// does; "" when it completed.
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// Err is the dispatch's error as an error that errors.Is matches against
// the sentinel Code names (eventlog.ErrNotFound, …), or nil.
func (r RunResult) Err() error {
	if r.Error == "" {
		return nil
	}
	return &remoteError{msg: r.Error, sentinel: sentinel(r.Code)}
}
