package kernelapi_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
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
