package kernelapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
)

// putPolicy PUTs bundle text as agent's policy and returns the status and
// the decoded answer.
func (r *rig) putPolicy(agent, text string) (int, map[string]any) {
	r.t.Helper()
	req, err := http.NewRequest("PUT", r.url+"/v0/agents/"+agent+"/policy", strings.NewReader(text))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		r.t.Fatalf("policy answer %s: %v", b, err)
	}
	return resp.StatusCode, out
}

const denyDelete = `default: allow
rules:
  - id: no-delete
    priority: 10
    when:
      kind: tool
      target: delete
    then:
      decision: deny
      reason: deleting is not allowed here
`

// deleter is a remote agent that adds, then tries to delete, and reports
// the delete's decision as its output.
func deleter(t *testing.T) func(a *agentClient) {
	return func(a *agentClient) {
		d, err := a.submit("tool_call", "add", map[string]int{"i": 0}, "safe_to_retry")
		if err != nil || d.Decision != "proceed" {
			t.Errorf("add: %v %+v", err, d)
			return
		}
		if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": 0}); err != nil || ans.code != 204 {
			t.Errorf("complete add: %v %d %s", err, ans.code, ans.body)
			return
		}
		d, err = a.submit("tool_call", "delete", map[string]string{"path": "/data"}, "at_most_once")
		if err != nil {
			t.Error(err)
			return
		}
		if d.Decision == "proceed" {
			if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": "deleted"}); err != nil || ans.code != 204 {
				t.Errorf("complete delete: %v %d %s", err, ans.code, ans.body)
				return
			}
		}
		if ans, err := a.post("/complete", map[string]any{"output": map[string]string{"delete": d.Decision, "reason": d.Reason}}); err != nil || ans.code != 204 {
			t.Errorf("complete: %v %d %s", err, ans.code, ans.body)
		}
	}
}

// TestAgentPolicyBundle: a bundle uploaded over the admin route decides
// that agent's submits — its deny is recorded as step.denied with the
// rule's id and Code policy — and not another agent's; a bundle that does
// not parse is 400 naming the line and field, and leaves the agent's
// bundle and the log as they were.
func TestAgentPolicyBundle(t *testing.T) {
	r := newRig(t, kernelapi.Options{StallAfter: 0})
	for _, name := range []string{"guarded", "free"} {
		hook := webhookServer(t, r.url, name, deleter(t))
		r.register(name, hook.URL)
	}
	if code, out := r.putPolicy("guarded", denyDelete); code != 200 || out["agent_id"] != "guarded" {
		t.Fatalf("put policy: %d %v", code, out)
	}
	var got map[string]any
	if code := r.do("GET", "/v0/agents/guarded/policy", nil, &got); code != 200 || !strings.Contains(got["bundle"].(string), "no-delete") {
		t.Fatalf("get policy: %d %v", code, got)
	}

	// A bad bundle changes nothing.
	before := r.snapshot()
	bad := strings.Replace(denyDelete, "decision: deny", "decision: maybe", 1)
	code, env := r.putPolicy("guarded", bad)
	details, _ := env["details"].(map[string]any)
	if code != 400 || env["code"] != "invalid_request" || details["line"] != float64(9) || details["field"] != "rules[0].then.decision" {
		t.Fatalf("bad bundle: %d %v", code, env)
	}
	if code, env := r.putPolicy("nobody", denyDelete); code != 404 || env["code"] != "not_found" {
		t.Fatalf("policy of an unknown agent: %d %v", code, env)
	}
	if after := r.snapshot(); after != before {
		t.Fatal("a refused bundle changed the log")
	}
	var again map[string]any
	if code := r.do("GET", "/v0/agents/guarded/policy", nil, &again); code != 200 || !cmp.Equal(again, got) {
		t.Fatalf("the bundle changed after a refused one: %d %v", code, again)
	}

	guarded := r.create("guarded", nil)
	free := r.create("free", nil)
	r.await(guarded, eventlog.StatusCompleted)
	r.await(free, eventlog.StatusCompleted)
	var denied []*eventlog.StepDenied
	for _, ev := range r.events(guarded) {
		if p, ok := ev.Data.(*eventlog.StepDenied); ok {
			denied = append(denied, p)
		}
	}
	if len(denied) != 1 || denied[0].RuleID != "no-delete" || denied[0].Code != eventlog.DenyPolicy ||
		denied[0].Target != "delete" || denied[0].Reason == "" {
		t.Fatalf("denials %+v", denied)
	}
	wantKinds := []string{"execution.created", "dispatch.started", "step.started", "step.succeeded", "step.denied", "execution.completed"}
	if diff := cmp.Diff(wantKinds, kinds(r.events(guarded))); diff != "" {
		t.Fatalf("guarded events (-want +got):\n%s", diff)
	}
	wantFree := []string{"execution.created", "dispatch.started", "step.started", "step.succeeded", "step.started", "step.succeeded", "execution.completed"}
	if diff := cmp.Diff(wantFree, kinds(r.events(free))); diff != "" {
		t.Fatalf("free events (-want +got):\n%s", diff)
	}
	var ex struct {
		Output struct{ Delete, Reason string } `json:"output"`
	}
	if code := r.do("GET", "/v0/executions/"+guarded.String(), nil, &ex); code != 200 || ex.Output.Delete != "denied" ||
		!bytes.Contains([]byte(ex.Output.Reason), []byte("deleting is not allowed")) {
		t.Fatalf("guarded output: %d %+v", code, ex)
	}

	// Deleted, the agent's bundle no longer decides.
	if code := r.do("DELETE", "/v0/agents/guarded/policy", nil, nil); code != 204 {
		t.Fatalf("delete policy: %d", code)
	}
	if code := r.do("GET", "/v0/agents/guarded/policy", nil, nil); code != 404 {
		t.Fatalf("policy after delete: %d", code)
	}
	after := r.create("guarded", nil)
	r.await(after, eventlog.StatusCompleted)
	if diff := cmp.Diff(wantFree, kinds(r.events(after))); diff != "" {
		t.Fatalf("events after the bundle's removal (-want +got):\n%s", diff)
	}
}
