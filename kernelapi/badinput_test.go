package kernelapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
)

// TestBadInput sends every kind of bad request the issue lists to the
// routes and checks the status, the envelope and that the log is
// unchanged.
func TestBadInput(t *testing.T) {
	r := newRig(t, kernelapi.Options{MaxBody: 4096, StallAfter: time.Minute})
	live := make(chan *agentClient, 1)
	hook := webhookServer(t, r.url, "adder", func(a *agentClient) { live <- a })
	r.register("adder", hook.URL)
	// A second agent, so that "wrong agent" has a valid signer.
	other := webhookServer(t, r.url, "other", func(*agentClient) {})
	r.register("other", other.URL)
	id := r.create("adder", map[string]int{"n": 1})
	a := <-live // the dispatch waits for this agent's requests
	d, err := a.submit("tool_call", "add", map[string]int{"i": 0}, "safe_to_retry")
	if err != nil || d.Decision != "proceed" {
		t.Fatalf("submit: %v %+v", err, d)
	}
	ex := "/v0/executions/" + id.String()
	unknown := "/v0/executions/" + eventlog.NewID().String()

	type req struct {
		name, method, path string
		body               string
		auth               string // bearer, none, badbearer, signed, badsig, oldts, other, unknownagent
		dispatch           string // "", ok, missing, otherexec, stale, mismatch
		status             int
		code               string
	}
	big := `{"result":"` + strings.Repeat("x", 5000) + `"}`
	cases := []req{
		{"create malformed", "POST", "/v0/executions", `{"agent_id":`, "bearer", "", 400, "invalid_request"},
		{"create wrong type", "POST", "/v0/executions", `{"agent_id":7}`, "bearer", "", 400, "invalid_request"},
		{"create unknown field", "POST", "/v0/executions", `{"agent":"adder"}`, "bearer", "", 400, "invalid_request"},
		{"create unknown agent", "POST", "/v0/executions", `{"agent_id":"nobody"}`, "bearer", "", 404, "not_found"},
		{"create past deadline", "POST", "/v0/executions", `{"agent_id":"adder","deadline_at":"2001-01-01T00:00:00Z"}`, "bearer", "", 400, "invalid_request"},
		{"create no token", "POST", "/v0/executions", `{"agent_id":"adder"}`, "none", "", 401, "unauthorized"},
		{"create wrong token", "POST", "/v0/executions", `{"agent_id":"adder"}`, "badbearer", "", 401, "unauthorized"},
		{"create oversize", "POST", "/v0/executions", `{"agent_id":"adder","input":"` + strings.Repeat("y", 5000) + `"}`, "bearer", "", 413, "payload_too_large"},
		{"get unknown", "GET", unknown, "", "bearer", "", 404, "not_found"},
		{"get bad id", "GET", "/v0/executions/nope", "", "bearer", "", 404, "not_found"},
		{"get wrong agent", "GET", ex, "", "other", "", 403, "forbidden"},
		{"list bad status", "GET", "/v0/executions?status=sleeping", "", "bearer", "", 400, "invalid_request"},
		{"list bad limit", "GET", "/v0/executions?limit=0", "", "bearer", "", 400, "invalid_request"},
		{"events bad after", "GET", ex + "/events?after_seq=x", "", "bearer", "", 400, "invalid_request"},
		{"cancel unknown", "POST", unknown + "/cancel", "", "bearer", "", 404, "not_found"},
		{"cancel malformed", "POST", ex + "/cancel", `{"reason":1}`, "bearer", "", 400, "invalid_request"},
		{"submit unsigned", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "none", "ok", 401, "unauthorized"},
		{"submit bad signature", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "badsig", "ok", 401, "unauthorized"},
		{"submit old timestamp", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "oldts", "ok", 401, "unauthorized"},
		{"submit unknown agent", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "unknownagent", "ok", 401, "unauthorized"},
		{"submit wrong agent", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "other", "ok", 403, "forbidden"},
		{"submit malformed", "POST", ex + "/steps", `{"kind":"tool_call",`, "signed", "ok", 400, "invalid_request"},
		{"submit wrong kind", "POST", ex + "/steps", `{"kind":"shell","target":"add","args":{}}`, "signed", "ok", 400, "invalid_request"},
		{"submit wrong type", "POST", ex + "/steps", `{"kind":"tool_call","target":5}`, "signed", "ok", 400, "invalid_request"},
		{"submit bad idempotency", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","idempotency":"twice"}`, "signed", "ok", 400, "invalid_request"},
		{"submit no dispatch", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "signed", "missing", 400, "invalid_request"},
		{"submit other dispatch", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "signed", "otherexec", 403, "forbidden"},
		{"submit stale attempt", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "signed", "stale", 409, "lease_superseded"},
		{"submit mismatched dispatch", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "signed", "mismatch", 400, "invalid_request"},
		{"submit unknown execution", "POST", unknown + "/steps", `{"kind":"tool_call","target":"add","args":{}}`, "signed", "ok", 404, "not_found"},
		{"complete unknown step", "POST", ex + "/steps/abc/complete", `{"result":1}`, "signed", "ok", 404, "not_found"},
		{"complete malformed", "POST", ex + "/steps/" + d.StepID + "/complete", `{"result":`, "signed", "ok", 400, "invalid_request"},
		{"complete oversize", "POST", ex + "/steps/" + d.StepID + "/complete", big, "signed", "ok", 413, "payload_too_large"},
		{"complete stale", "POST", ex + "/steps/" + d.StepID + "/complete", `{"result":1}`, "signed", "stale", 409, "lease_superseded"},
		{"complete no dispatch", "POST", ex + "/steps/" + d.StepID + "/complete", `{"result":1}`, "signed", "missing", 400, "invalid_request"},
		{"fail without error", "POST", ex + "/steps/" + d.StepID + "/fail", `{}`, "signed", "ok", 400, "invalid_request"},
		{"stream wrong type", "POST", ex + "/steps/" + d.StepID + "/stream", `{"seq":"a","data":"x"}`, "signed", "ok", 400, "invalid_request"},
		{"stream negative", "POST", ex + "/steps/" + d.StepID + "/stream", `{"seq":-1,"data":"x"}`, "signed", "ok", 400, "invalid_request"},
		{"heartbeat unsigned", "POST", ex + "/heartbeat", "", "none", "ok", 401, "unauthorized"},
		{"heartbeat stale", "POST", ex + "/heartbeat", "", "signed", "stale", 409, "lease_superseded"},
		{"heartbeat no dispatch", "POST", ex + "/heartbeat", "", "signed", "missing", 400, "invalid_request"},
		{"execution complete malformed", "POST", ex + "/complete", `{"output":}`, "signed", "ok", 400, "invalid_request"},
		{"execution complete stale", "POST", ex + "/complete", `{"output":1}`, "signed", "stale", 409, "lease_superseded"},
		{"execution fail wrong agent", "POST", ex + "/fail", `{"error":"x"}`, "other", "ok", 403, "forbidden"},
		{"execution fail empty", "POST", ex + "/fail", `{"error":""}`, "signed", "ok", 400, "invalid_request"},
		{"agent malformed", "POST", "/v0/agents", `{"id":"x","webhook_url":`, "bearer", "", 400, "invalid_request"},
		{"agent bad url", "POST", "/v0/agents", `{"id":"x","webhook_url":"ftp://h/","secret":"0123456789abcdefgh"}`, "bearer", "", 400, "invalid_request"},
		{"agent short secret", "POST", "/v0/agents", `{"id":"x","webhook_url":"http://h/","secret":"short"}`, "bearer", "", 400, "invalid_request"},
		{"agent unauthorized", "POST", "/v0/agents", `{"id":"x","webhook_url":"http://h/","secret":"0123456789abcdefgh"}`, "none", "", 401, "unauthorized"},
		{"agent unknown", "GET", "/v0/agents/nobody", "", "bearer", "", 404, "not_found"},
		{"no route", "GET", "/v0/nothing", "", "bearer", "", 404, "not_found"},
		{"bind unsigned", "POST", ex + "/resources", `{"key":"ws","driver_id":"d"}`, "none", "ok", 401, "unauthorized"},
		{"bind wrong agent", "POST", ex + "/resources", `{"key":"ws","driver_id":"d"}`, "other", "ok", 403, "forbidden"},
		{"bind no dispatch", "POST", ex + "/resources", `{"key":"ws","driver_id":"d"}`, "signed", "missing", 400, "invalid_request"},
		{"bind stale", "POST", ex + "/resources", `{"key":"ws","driver_id":"d"}`, "signed", "stale", 409, "lease_superseded"},
		{"bind malformed", "POST", ex + "/resources", `{"key":`, "signed", "ok", 400, "invalid_request"},
		{"bind no key", "POST", ex + "/resources", `{"driver_id":"d"}`, "signed", "ok", 400, "invalid_request"},
		{"bind no driver", "POST", ex + "/resources", `{"key":"ws"}`, "signed", "ok", 400, "invalid_request"},
		{"bind bad configuration", "POST", ex + "/resources", `{"key":"ws","driver_id":"d","configuration":{]}`, "signed", "ok", 400, "invalid_request"},
		{"bind unknown execution", "POST", unknown + "/resources", `{"key":"ws","driver_id":"d"}`, "signed", "ok", 404, "not_found"},
		{"submit unbound resource", "POST", ex + "/steps", `{"kind":"tool_call","target":"add","args":{},"resources":["ws"]}`, "signed", "ok", 400, "invalid_request"},
		{"submit llm with resource", "POST", ex + "/steps", `{"kind":"llm_call","target":"m","args":{},"resources":["ws"]}`, "signed", "ok", 400, "invalid_request"},
		{"complete capture unbound", "POST", ex + "/steps/" + d.StepID + "/complete", `{"result":1,"captures":{"ws":"ref"}}`, "signed", "ok", 400, "invalid_request"},
		{"complete capture wrong type", "POST", ex + "/steps/" + d.StepID + "/complete", `{"result":1,"captures":["ref"]}`, "signed", "ok", 400, "invalid_request"},
		{"fail capture unbound", "POST", ex + "/steps/" + d.StepID + "/fail", `{"error":"x","captures":{"ws":"ref"}}`, "signed", "ok", 400, "invalid_request"},
		{"metrics no token", "GET", "/metrics", "", "none", "", 401, "unauthorized"},
		{"metrics wrong token", "GET", "/metrics", "", "badbearer", "", 401, "unauthorized"},
		{"metrics signed", "GET", "/metrics", "", "signed", "", 401, "unauthorized"},
		{"metrics not configured", "GET", "/metrics", "", "bearer", "", 404, "not_found"},
		{"stream no token", "GET", ex + "/stream", "", "none", "", 401, "unauthorized"},
		{"stream signed", "GET", ex + "/stream", "", "signed", "", 401, "unauthorized"},
		{"stream unknown", "GET", unknown + "/stream", "", "bearer", "", 404, "not_found"},
		{"stream bad id", "GET", "/v0/executions/nope/stream", "", "bearer", "", 404, "not_found"},
		{"stream with body", "GET", ex + "/stream", `{"x":1}`, "bearer", "", 400, "invalid_request"},
		{"policy no token", "PUT", "/v0/agents/adder/policy", "default: deny\n", "none", "", 401, "unauthorized"},
		{"policy signed", "PUT", "/v0/agents/adder/policy", "default: deny\n", "signed", "", 401, "unauthorized"},
		{"policy unknown agent", "PUT", "/v0/agents/nobody/policy", "default: deny\n", "bearer", "", 404, "not_found"},
		{"policy empty", "PUT", "/v0/agents/adder/policy", "", "bearer", "", 400, "invalid_request"},
		{"policy not yaml", "PUT", "/v0/agents/adder/policy", "default: [", "bearer", "", 400, "invalid_request"},
		{"policy bad field", "PUT", "/v0/agents/adder/policy", "default: allow\nrules:\n  - id: r\n    priority: 1\n    then: {decision: deny, colour: red}\n", "bearer", "", 400, "invalid_request"},
		{"policy oversize", "PUT", "/v0/agents/adder/policy", "default: allow\n#" + strings.Repeat("z", 5000) + "\n", "bearer", "", 413, "payload_too_large"},
		{"policy get none", "GET", "/v0/agents/adder/policy", "", "bearer", "", 404, "not_found"},
		{"policy get no token", "GET", "/v0/agents/adder/policy", "", "none", "", 401, "unauthorized"},
		{"policy delete no token", "DELETE", "/v0/agents/adder/policy", "", "none", "", 401, "unauthorized"},
		{"policy get unknown agent", "GET", "/v0/agents/nobody/policy", "", "bearer", "", 404, "not_found"},
		{"policy delete none", "DELETE", "/v0/agents/adder/policy", "", "bearer", "", 404, "not_found"},
		{"diff no token", "GET", ex + "/diff?with=" + id.String(), "", "none", "", 401, "unauthorized"},
		{"diff signed", "GET", ex + "/diff?with=" + id.String(), "", "signed", "", 401, "unauthorized"},
		{"diff no with", "GET", ex + "/diff", "", "bearer", "", 400, "invalid_request"},
		{"diff bad with", "GET", ex + "/diff?with=nope", "", "bearer", "", 400, "invalid_request"},
		{"diff unknown with", "GET", ex + "/diff?with=" + eventlog.NewID().String(), "", "bearer", "", 404, "not_found"},
		{"diff unknown", "GET", unknown + "/diff?with=" + id.String(), "", "bearer", "", 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := r.snapshot()
			hreq, err := http.NewRequest(c.method, r.url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			sign := func(agent, secret, ts string) {
				hreq.Header.Set(kernelapi.HeaderAgentID, agent)
				hreq.Header.Set(kernelapi.HeaderTimestamp, ts)
				hreq.Header.Set(kernelapi.HeaderSignature, kernelapi.Sign([]byte(secret), ts, []byte(c.body)))
			}
			switch c.auth {
			case "bearer":
				hreq.Header.Set("Authorization", "Bearer "+testToken)
			case "badbearer":
				hreq.Header.Set("Authorization", "Bearer "+testToken+"x")
			case "signed":
				sign("adder", testSecret, ts)
			case "badsig":
				sign("adder", testSecret+"x", ts)
			case "oldts":
				sign("adder", testSecret, strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10))
			case "other":
				sign("other", testSecret, ts)
			case "unknownagent":
				sign("nobody", testSecret, ts)
			}
			n := a.attempt
			switch c.dispatch {
			case "ok":
				hreq.Header.Set(kernelapi.HeaderDispatchID, a.dispatchID)
				hreq.Header.Set(kernelapi.HeaderDispatchAttempt, strconv.FormatUint(n, 10))
			case "otherexec":
				hreq.Header.Set(kernelapi.HeaderDispatchID, eventlog.NewID().String()+"-1")
				hreq.Header.Set(kernelapi.HeaderDispatchAttempt, "1")
			case "stale":
				hreq.Header.Set(kernelapi.HeaderDispatchID, id.String()+"-"+strconv.FormatUint(n+1, 10))
				hreq.Header.Set(kernelapi.HeaderDispatchAttempt, strconv.FormatUint(n+1, 10))
			case "mismatch":
				hreq.Header.Set(kernelapi.HeaderDispatchID, a.dispatchID)
				hreq.Header.Set(kernelapi.HeaderDispatchAttempt, strconv.FormatUint(n+1, 10))
			}
			resp, err := http.DefaultClient.Do(hreq)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env struct {
				Code    string          `json:"code"`
				Message string          `json:"message"`
				Details json.RawMessage `json:"details"`
			}
			if err := json.Unmarshal(b, &env); err != nil || resp.StatusCode != c.status || env.Code != c.code ||
				env.Message == "" || len(env.Details) == 0 {
				t.Fatalf("got %d %s, want %d with code %s", resp.StatusCode, b, c.status, c.code)
			}
			if bytes.Contains(b, []byte(testSecret)) || bytes.Contains(b, []byte(testToken)) {
				t.Fatalf("a secret in the answer: %s", b)
			}
			if after := r.snapshot(); after != before {
				t.Fatalf("the log changed:\n%s\n---\n%s", before, after)
			}
		})
	}
	// The step in flight still completes under the live attempt.
	if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": map[string]int{"sum": 0}}); err != nil || ans.code != 204 {
		t.Fatalf("complete: %v %d %s", err, ans.code, ans.body)
	}
	if ans, err := a.post("/complete", map[string]any{"output": 0}); err != nil || ans.code != 204 {
		t.Fatalf("complete execution: %v %d %s", err, ans.code, ans.body)
	}
	var agents struct{ Agents []map[string]string }
	if code := r.do("GET", "/v0/agents", nil, &agents); code != 200 || len(agents.Agents) != 2 || agents.Agents[0]["secret"] != "[redacted]" {
		t.Fatalf("agents: %d %+v", code, agents)
	}
}

// TestAtMostOnceResubmitBlocked: a second submit of an at_most_once step
// already started under the current attempt gets blocked, never a second
// proceed, and appends nothing.
func TestAtMostOnceResubmitBlocked(t *testing.T) {
	r := newRig(t, kernelapi.Options{StallAfter: time.Minute})
	live := make(chan *agentClient, 1)
	hook := webhookServer(t, r.url, "pay", func(a *agentClient) { live <- a })
	r.register("pay", hook.URL)
	id := r.create("pay", nil)
	a := <-live
	d, err := a.submit("tool_call", "charge", map[string]int{"cents": 5}, "at_most_once")
	if err != nil || d.Decision != "proceed" {
		t.Fatalf("first submit: %v %+v", err, d)
	}
	before := r.snapshot()
	d2, err := a.submit("tool_call", "charge", map[string]int{"cents": 5}, "at_most_once")
	if err != nil || d2.Decision != "blocked" || d2.StepID != d.StepID {
		t.Fatalf("second submit: %v %+v", err, d2)
	}
	if after := r.snapshot(); after != before {
		t.Fatalf("the log changed:\n%s\n---\n%s", before, after)
	}
	if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": "ok"}); err != nil || ans.code != 204 {
		t.Fatalf("complete: %v %d %s", err, ans.code, ans.body)
	}
	// Once the first has ended, the same call is a new occurrence.
	d3, err := a.submit("tool_call", "charge", map[string]int{"cents": 5}, "at_most_once")
	if err != nil || d3.Decision != "proceed" || d3.StepID == d.StepID {
		t.Fatalf("third submit: %v %+v", err, d3)
	}
	if ans, err := a.post("/steps/"+d3.StepID+"/fail", map[string]any{"error": "card declined"}); err != nil || ans.code != 204 {
		t.Fatalf("fail: %v %d %s", err, ans.code, ans.body)
	}
	if ans, err := a.post("/fail", map[string]any{"error": "gave up"}); err != nil || ans.code != 204 {
		t.Fatalf("fail execution: %v %d %s", err, ans.code, ans.body)
	}
	want := []string{"execution.created", "dispatch.started", "step.started", "step.succeeded",
		"step.started", "step.failed", "execution.failed"}
	if got := kinds(r.events(id)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", got, want)
	}
}
