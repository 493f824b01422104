package kernelapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/kernelapi"
	"github.com/forkline/forkline/sdk"
)

const (
	testToken  = "test-token"
	testSecret = "0123456789abcdef-secret"
)

// rig is a kernel served over real HTTP.
type rig struct {
	t   testing.TB
	k   *sdk.Kernel
	srv *kernelapi.Server
	url string
}

func newRig(t testing.TB, opts kernelapi.Options, kopts ...sdk.Option) *rig {
	t.Helper()
	k, err := sdk.Open("", kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return serveRig(t, k, opts)
}

// newPGRig is newRig on a Postgres log of its own (a fresh schema of the
// test server, dropped at cleanup).
func newPGRig(t testing.TB, opts kernelapi.Options, kopts ...sdk.Option) *rig {
	t.Helper()
	store, err := pgstore.Open(context.Background(), pgtest.SchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	k, err := sdk.New(store, kopts...)
	if err != nil {
		t.Fatal(err)
	}
	return serveRig(t, k, opts)
}

// serveRig serves k over real HTTP with opts, Serve running until cleanup.
func serveRig(t testing.TB, k *sdk.Kernel, opts kernelapi.Options) *rig {
	t.Helper()
	if opts.Token == "" && !opts.Dev {
		opts.Token = testToken
	}
	if opts.StallAfter == 0 {
		opts.StallAfter = 5 * time.Second
	}
	if opts.RetryBackoff == 0 {
		opts.RetryBackoff = 20 * time.Millisecond
	}
	srv, err := kernelapi.Handler(k, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, sdk.PollEvery(10*time.Millisecond))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &rig{t: t, k: k, srv: srv, url: hs.URL}
}

// do sends a bearer request and decodes a JSON answer into out (if not nil).
func (r *rig) do(method, path string, body any, out any) int {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.url+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			r.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// create starts an execution of agent with input over the API.
func (r *rig) create(agent string, input any) eventlog.ID {
	r.t.Helper()
	var out struct{ ID string }
	if code := r.do("POST", "/v0/executions", map[string]any{"agent_id": agent, "input": input}, &out); code != 201 {
		r.t.Fatalf("create: status %d", code)
	}
	id, err := eventlog.ParseID(out.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// await waits until execution id has status want.
func (r *rig) await(id eventlog.ID, want eventlog.Status) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := r.k.Log().Info(context.Background(), id)
		if err != nil {
			r.t.Fatal(err)
		}
		if info.Status == want {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("execution %s is %s, want %s; events:\n%s", id, info.Status, want, kindsText(r.events(id)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *rig) events(id eventlog.ID) []eventlog.Event {
	r.t.Helper()
	var out []eventlog.Event
	for ev, err := range r.k.Events(context.Background(), id) {
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// snapshot is every event of every execution, as JSON: what a refused
// request must leave unchanged.
func (r *rig) snapshot() string {
	r.t.Helper()
	infos, err := r.k.List(context.Background(), eventlog.Filter{})
	if err != nil {
		r.t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, info := range infos {
		fmt.Fprintf(&buf, "%s %s\n", info.ID, info.Status)
		for _, ev := range r.events(info.ID) {
			b, _ := json.Marshal(ev)
			buf.Write(b)
			buf.WriteByte('\n')
		}
	}
	return buf.String()
}

func kinds(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind().String()
	}
	return out
}

func kindsText(evs []eventlog.Event) string {
	var buf bytes.Buffer
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.String()
}

// agentClient signs an agent's requests.
type agentClient struct {
	base, agent string
	secret      []byte
	exec        string
	dispatchID  string
	attempt     uint64
}

type answer struct {
	code int
	body []byte
}

func (a *agentClient) send(method, path string, body []byte, dispatch bool) (answer, error) {
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(kernelapi.HeaderAgentID, a.agent)
	req.Header.Set(kernelapi.HeaderTimestamp, ts)
	req.Header.Set(kernelapi.HeaderSignature, kernelapi.Sign(a.secret, ts, body))
	if dispatch {
		req.Header.Set(kernelapi.HeaderDispatchID, a.dispatchID)
		req.Header.Set(kernelapi.HeaderDispatchAttempt, strconv.FormatUint(a.attempt, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, b}, err
}

func (a *agentClient) post(path string, v any) (answer, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return answer{}, err
	}
	return a.send("POST", "/v0/executions/"+a.exec+path, b, true)
}

type stepDecision struct {
	Decision   string          `json:"decision"`
	StepID     string          `json:"step_id"`
	Result     json.RawMessage `json:"result"`
	Error      json.RawMessage `json:"error"`
	ApprovalID string          `json:"approval_id"`
	Reason     string          `json:"reason"`
	Capture    []string        `json:"capture"`
}

func (a *agentClient) submit(kind, target string, args any, idem string) (stepDecision, error) {
	ans, err := a.post("/steps", map[string]any{"kind": kind, "target": target, "args": args, "idempotency": idem})
	if err != nil {
		return stepDecision{}, err
	}
	if ans.code != 200 {
		return stepDecision{}, fmt.Errorf("submit: %d %s", ans.code, ans.body)
	}
	var d stepDecision
	return d, json.Unmarshal(ans.body, &d)
}

// webhookServer receives dispatches and hands each to run in a goroutine.
func webhookServer(t testing.TB, base, agent string, run func(a *agentClient)) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(kernelapi.HeaderSignature) != kernelapi.Sign([]byte(testSecret), r.Header.Get(kernelapi.HeaderTimestamp), body) {
			http.Error(w, "bad signature", 401)
			return
		}
		var wb struct {
			ExecutionID     string `json:"execution_id"`
			DispatchID      string `json:"dispatch_id"`
			DispatchAttempt uint64 `json:"dispatch_attempt"`
		}
		if err := json.Unmarshal(body, &wb); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.WriteHeader(200)
		go run(&agentClient{base: base, agent: agent, secret: []byte(testSecret), exec: wb.ExecutionID,
			dispatchID: wb.DispatchID, attempt: wb.DispatchAttempt})
	}))
	t.Cleanup(hs.Close)
	return hs
}

// register registers agent with its webhook.
func (r *rig) register(agent, hook string) {
	r.t.Helper()
	if code := r.do("POST", "/v0/agents", map[string]any{"id": agent, "webhook_url": hook, "secret": testSecret}, nil); code != 201 {
		r.t.Fatalf("register: status %d", code)
	}
}

// adder is a remote agent: n tool calls "add" {i} whose result is {sum: 2i},
// then completes with the total. stopAfter > 0 makes it go silent after that
// many live calls (a killed agent).
func adder(t testing.TB, stopAfter int) func(a *agentClient) {
	return func(a *agentClient) {
		ans, err := a.send("GET", "/v0/executions/"+a.exec, nil, false)
		if err != nil || ans.code != 200 {
			t.Errorf("get execution: %v %d %s", err, ans.code, ans.body)
			return
		}
		var ex struct {
			Input struct{ N int } `json:"input"`
		}
		if err := json.Unmarshal(ans.body, &ex); err != nil {
			t.Error(err)
			return
		}
		total, live := 0, 0
		for i := range ex.Input.N {
			d, err := a.submit("tool_call", "add", map[string]any{"i": i}, "safe_to_retry")
			if err != nil {
				t.Error(err)
				return
			}
			var res struct{ Sum int }
			switch d.Decision {
			case "proceed":
				if stopAfter > 0 && live == stopAfter {
					return // killed while the step is in flight
				}
				live++
				res.Sum = 2 * i
				if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": res}); err != nil || ans.code != 204 {
					t.Errorf("complete: %v %d %s", err, ans.code, ans.body)
					return
				}
			case "replay":
				if err := json.Unmarshal(d.Result, &res); err != nil {
					t.Error(err)
					return
				}
			default:
				t.Errorf("decision %+v", d)
				return
			}
			total += res.Sum
		}
		if ans, err := a.post("/complete", map[string]any{"output": map[string]int{"total": total}}); err != nil || ans.code != 204 {
			t.Errorf("complete execution: %v %d %s", err, ans.code, ans.body)
		}
	}
}
