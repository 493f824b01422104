package kernelapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

func TestRemoteAgentRuns(t *testing.T) {
	r := newRig(t, kernelapi.Options{})
	hook := webhookServer(t, r.url, "adder", adder(t, 0))
	r.register("adder", hook.URL)
	id := r.create("adder", map[string]int{"n": 3})
	r.await(id, eventlog.StatusCompleted)
	evs := r.events(id)
	want := []string{"execution.created", "dispatch.started",
		"step.started", "step.succeeded", "step.started", "step.succeeded", "step.started", "step.succeeded",
		"execution.completed"}
	if diff := cmp.Diff(want, kinds(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	st := evs[2].Data.(*eventlog.StepStarted)
	if st.StepKind != eventlog.StepTool || st.Target != "add" || string(st.Args) != `{"i":0}` {
		t.Fatalf("first step %+v", st)
	}
	if got := string(evs[len(evs)-1].Data.(*eventlog.ExecutionCompleted).Output); got != `{"total":6}` {
		t.Fatalf("output %s", got)
	}
	var ex struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	if code := r.do("GET", "/v0/executions/"+id.String(), nil, &ex); code != 200 || ex.Status != "completed" || string(ex.Output) != `{"total":6}` {
		t.Fatalf("get: %d %+v", code, ex)
	}
	var page []struct {
		EventSeq uint64 `json:"event_seq"`
		Type     string `json:"type"`
	}
	if code := r.do("GET", "/v0/executions/"+id.String()+"/events?after_seq=7&limit=5", nil, &page); code != 200 ||
		len(page) != 2 || page[0].EventSeq != 8 || page[1].Type != "execution.completed" {
		t.Fatalf("events page: %d %+v", code, page)
	}
}

// TestKilledAgentResumes: an agent that goes silent with a step in flight
// has its attempt replaced after StallAfter; the next attempt replays the
// recorded steps and runs the orphan again.
func TestKilledAgentResumes(t *testing.T) {
	r := newRig(t, kernelapi.Options{StallAfter: 300 * time.Millisecond})
	hook := webhookServer(t, r.url, "adder", func(a *agentClient) {
		if a.attempt == 1 {
			adder(t, 2)(a)
			return
		}
		adder(t, 0)(a)
	})
	r.register("adder", hook.URL)
	id := r.create("adder", map[string]int{"n": 4})
	r.await(id, eventlog.StatusCompleted)
	got := kinds(r.events(id))
	want := []string{"execution.created", "dispatch.started",
		"step.started", "step.succeeded", "step.started", "step.succeeded", "step.started", // the third is in flight
		"step.cancelled", "dispatch.parked", "dispatch.started",
		"step.started", "step.succeeded", "step.started", "step.succeeded",
		"execution.completed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	evs := r.events(id)
	if p := evs[8].Data.(*eventlog.DispatchParked); p.Reason != eventlog.ParkRetry {
		t.Fatalf("park %+v", p)
	}
	if s := evs[10].Data.(*eventlog.StepStarted); s.Attempt != 2 || s.StepID != evs[6].Data.(*eventlog.StepStarted).StepID {
		t.Fatalf("orphan re-run %+v", s)
	}
	if got := string(evs[len(evs)-1].Data.(*eventlog.ExecutionCompleted).Output); got != `{"total":12}` {
		t.Fatalf("output %s", got)
	}
}

// TestSupersededAttemptRefused: a write under an attempt the kernel has
// replaced gets 409 lease_superseded and appends nothing.
func TestSupersededAttemptRefused(t *testing.T) {
	r := newRig(t, kernelapi.Options{StallAfter: 200 * time.Millisecond})
	first := make(chan *agentClient, 1)
	hook := webhookServer(t, r.url, "adder", func(a *agentClient) {
		if a.attempt == 1 {
			first <- a
			return // silent: replaced after StallAfter
		}
		adder(t, 0)(a)
	})
	r.register("adder", hook.URL)
	id := r.create("adder", map[string]int{"n": 1})
	r.await(id, eventlog.StatusCompleted)
	old := <-first
	before := r.snapshot()
	ans, err := old.post("/steps", map[string]any{"kind": "tool_call", "target": "add", "args": map[string]int{"i": 0}})
	if err != nil {
		t.Fatal(err)
	}
	if ans.code != 200 || !slices.Contains([]string{`{"decision":"execution_terminal"}`}, string(ans.body)) {
		t.Fatalf("submit to an ended execution: %d %s", ans.code, ans.body)
	}
	ans, err = old.send("POST", "/v0/executions/"+old.exec+"/heartbeat", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ Code string }
	_ = json.Unmarshal(ans.body, &env)
	if ans.code != 409 || env.Code != "lease_superseded" {
		t.Fatalf("heartbeat of a replaced attempt: %d %s", ans.code, ans.body)
	}
	if after := r.snapshot(); after != before {
		t.Fatalf("the log changed:\n%s\n---\n%s", before, after)
	}
}

// TestForkAndCoverageRoutes forks a remote agent's execution over the API:
// the fork is dispatched to the agent, replays the prefix and runs the
// rest live.
func TestForkAndCoverageRoutes(t *testing.T) {
	r := newRig(t, kernelapi.Options{})
	hook := webhookServer(t, r.url, "adder", adder(t, 0))
	r.register("adder", hook.URL)
	id := r.create("adder", map[string]int{"n": 3})
	r.await(id, eventlog.StatusCompleted)
	var cov struct {
		Seq     uint64 `json:"seq"`
		Covered bool   `json:"covered"`
	}
	if code := r.do("GET", "/v0/executions/"+id.String()+"/coverage?at=4", nil, &cov); code != 200 || cov.Seq != 4 || !cov.Covered {
		t.Fatalf("coverage: %d %+v", code, cov)
	}
	before := r.snapshot()
	for _, at := range []uint64{0, 99} {
		if code := r.do("POST", "/v0/executions/"+id.String()+"/fork", map[string]uint64{"at": at}, nil); code != 400 {
			t.Fatalf("fork at %d: %d", at, code)
		}
	}
	if after := r.snapshot(); after != before {
		t.Fatal("a refused fork changed the log")
	}
	var fk struct {
		ID       string `json:"id"`
		ParentID string `json:"parent_id"`
	}
	if code := r.do("POST", "/v0/executions/"+id.String()+"/fork", map[string]uint64{"at": 4}, &fk); code != 201 || fk.ParentID != id.String() {
		t.Fatalf("fork: %d %+v", code, fk)
	}
	fid, _ := eventlog.ParseID(fk.ID)
	r.await(fid, eventlog.StatusCompleted)
	var own []string
	for _, ev := range r.events(fid) {
		if ev.Seq > 4 {
			own = append(own, ev.Kind().String())
		}
	}
	want := []string{"fork.created", "dispatch.started", "step.started", "step.succeeded", "step.started", "step.succeeded", "execution.completed"}
	if diff := cmp.Diff(want, own); diff != "" {
		t.Fatalf("fork's own events (-want +got):\n%s", diff)
	}
}

// TestHealthReady: /v0/health answers while /v0/ready says 503 once the
// store is closed.
func TestHealthReady(t *testing.T) {
	r := newRig(t, kernelapi.Options{})
	var st struct{ Status string }
	if code := r.do("GET", "/v0/ready", nil, &st); code != 200 || st.Status != "ready" {
		t.Fatalf("ready: %d %+v", code, st)
	}
	if err := r.k.Log().Close(); err != nil {
		t.Fatal(err)
	}
	var env struct{ Code string }
	if code := r.do("GET", "/v0/ready", nil, &env); code != 503 || env.Code != "unavailable" {
		t.Fatalf("ready with the store closed: %d %+v", code, env)
	}
	if code := r.do("GET", "/v0/health", nil, &st); code != 200 || st.Status != "ok" {
		t.Fatalf("health: %d %+v", code, st)
	}
}

// TestApprovalOverAPI: a gate asks approval for a remote call; the agent
// gets blocked, the approval is granted over the API, and the next
// dispatch's submit proceeds.
func TestApprovalOverAPI(t *testing.T) {
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		return policy.Decision{Allow: true, Approval: c.Target == "add", Reason: "adds need a human"}
	}
	r := newRig(t, kernelapi.Options{}, sdk.WithGate(gate), sdk.ParkAfter(10*time.Millisecond))
	blocked := make(chan stepDecision, 1)
	hook := webhookServer(t, r.url, "adder", func(a *agentClient) {
		if a.attempt == 1 {
			d, err := a.submit("tool_call", "add", map[string]int{"i": 0}, "safe_to_retry")
			if err != nil {
				t.Error(err)
			}
			blocked <- d
			return
		}
		adder(t, 0)(a)
	})
	r.register("adder", hook.URL)
	id := r.create("adder", map[string]int{"n": 1})
	d := <-blocked
	if d.Decision != "blocked" || d.ApprovalID != id.String()+"."+d.StepID {
		t.Fatalf("first submit %+v", d)
	}
	r.await(id, eventlog.StatusWaiting)
	var list struct {
		Approvals []struct{ ID, Target string }
	}
	if code := r.do("GET", "/v0/approvals", nil, &list); code != 200 || len(list.Approvals) != 1 || list.Approvals[0].ID != d.ApprovalID {
		t.Fatalf("approvals: %d %+v", code, list)
	}
	before := r.snapshot()
	if code := r.do("POST", "/v0/approvals/"+d.ApprovalID+"/grant", map[string]any{"decided_by": 3}, nil); code != 400 {
		t.Fatalf("grant with a wrong type: %d", code)
	}
	if code := r.do("POST", "/v0/approvals/"+id.String()+".nope/grant", map[string]any{"decided_by": "ann"}, nil); code != 404 {
		t.Fatalf("grant of an unknown approval: %d", code)
	}
	if r.snapshot() != before {
		t.Fatal("a refused decision changed the log")
	}
	if code := r.do("POST", "/v0/approvals/"+d.ApprovalID+"/grant", map[string]any{"decided_by": "ann", "rationale": "fine"}, nil); code != 204 {
		t.Fatalf("grant: %d", code)
	}
	r.await(id, eventlog.StatusCompleted)
	var got []string
	for _, k := range kinds(r.events(id)) {
		got = append(got, k)
	}
	want := []string{"execution.created", "dispatch.started", "approval.requested", "dispatch.parked",
		"approval.granted", "dispatch.started", "step.started", "step.succeeded", "execution.completed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestDispatchExhausted: a webhook that never answers 2xx is retried with
// backoff, one dispatch per attempt, until the attempts run out.
func TestDispatchExhausted(t *testing.T) {
	r := newRig(t, kernelapi.Options{MaxAttempts: 3})
	var hits atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hook.Close)
	r.register("adder", hook.URL)
	id := r.create("adder", map[string]int{"n": 1})
	r.await(id, eventlog.StatusFailed)
	evs := r.events(id)
	want := []string{"execution.created", "dispatch.started", "dispatch.parked", "dispatch.started", "dispatch.parked",
		"dispatch.started", "execution.failed"}
	if diff := cmp.Diff(want, kinds(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if f := evs[len(evs)-1].Data.(*eventlog.ExecutionFailed); f.Code != kernelapi.FailDispatchExhausted || !strings.Contains(f.Error, "503") {
		t.Fatalf("failure %+v", f)
	}
	if hits.Load() != 3 {
		t.Fatalf("%d deliveries, want 3", hits.Load())
	}
}
