package kernelapi_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
)

// TestStreamRoute: a client tails GET /v0/executions/{id}/stream over real
// HTTP while a remote agent streams an llm_call's deltas through the step's
// stream route; the client gets each delta as a data frame {step_id, seq,
// data}, keep-alive comments while none comes, and the end of the response
// when the execution ends. The log holds no delta.
func TestStreamRoute(t *testing.T) {
	r := newRig(t, kernelapi.Options{KeepAlive: 2 * time.Millisecond, StallAfter: time.Minute})
	seen := make(chan struct{}) // the client got a probe delta: it is subscribed
	stepc := make(chan string, 2)
	hook := webhookServer(t, r.url, "writer", func(a *agentClient) {
		d, err := a.submit("llm_call", "model", map[string]string{"prompt": "greet"}, "safe_to_retry")
		if err != nil || d.Decision != "proceed" {
			t.Errorf("submit: %v %+v", err, d)
			return
		}
		stepc <- d.StepID
		// A watch sees only deltas from when it began: probe until the
		// client has one.
		for probing := true; probing; {
			if ans, err := a.post("/steps/"+d.StepID+"/stream", map[string]any{"seq": 0, "data": "probe"}); err != nil || ans.code != 204 {
				t.Errorf("probe: %v %d %s", err, ans.code, ans.body)
				return
			}
			select {
			case <-seen:
				probing = false
			case <-time.After(5 * time.Millisecond):
			}
		}
		// A delta over 7,000 bytes is refused whole, as Rebuno refuses it.
		if ans, err := a.post("/steps/"+d.StepID+"/stream", map[string]any{"seq": 1, "data": strings.Repeat("x", 7001)}); err != nil || ans.code != 400 || !strings.Contains(string(ans.body), "invalid_request") {
			t.Errorf("a 7,001-byte delta: %v %d %s, want 400 invalid_request", err, ans.code, ans.body)
			return
		}
		for i, piece := range []string{"Hel", "lo", " world"} {
			if ans, err := a.post("/steps/"+d.StepID+"/stream", map[string]any{"seq": i + 1, "data": piece}); err != nil || ans.code != 204 {
				t.Errorf("delta: %v %d %s", err, ans.code, ans.body)
				return
			}
		}
		if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": map[string]string{"text": "Hello world"}}); err != nil || ans.code != 204 {
			t.Errorf("complete step: %v %d %s", err, ans.code, ans.body)
			return
		}
		// A second step's deltas count from 0 again.
		d, err = a.submit("llm_call", "model", map[string]string{"prompt": "part"}, "safe_to_retry")
		if err != nil || d.Decision != "proceed" {
			t.Errorf("submit: %v %+v", err, d)
			return
		}
		stepc <- d.StepID
		if ans, err := a.post("/steps/"+d.StepID+"/stream", map[string]any{"seq": 0, "data": "Bye"}); err != nil || ans.code != 204 {
			t.Errorf("delta: %v %d %s", err, ans.code, ans.body)
			return
		}
		if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": map[string]string{"text": "Bye"}}); err != nil || ans.code != 204 {
			t.Errorf("complete step: %v %d %s", err, ans.code, ans.body)
			return
		}
		if ans, err := a.post("/complete", map[string]any{"output": "Hello world"}); err != nil || ans.code != 204 {
			t.Errorf("complete: %v %d %s", err, ans.code, ans.body)
		}
	})
	r.register("writer", hook.URL)
	id := r.create("writer", nil)
	step := <-stepc

	req, err := http.NewRequest("GET", r.url+"/v0/executions/"+id.String()+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	type frame struct {
		StepID string `json:"step_id"`
		Seq    int    `json:"seq"`
		Data   string `json:"data"`
	}
	var got []frame
	keepAlives := 0
	var once sync.Once
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() { // ends when the server ends the response
		line := sc.Text()
		switch {
		case line == "":
		case line == ": keep-alive":
			keepAlives++
		case strings.HasPrefix(line, "data: "):
			var f frame
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f); err != nil {
				t.Fatalf("frame %q: %v", line, err)
			}
			if f.Data == "probe" {
				if keepAlives > 0 {
					once.Do(func() { close(seen) })
				}
				continue
			}
			got = append(got, f)
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	step2 := <-stepc
	want := []frame{{step, 1, "Hel"}, {step, 2, "lo"}, {step, 3, " world"}, {step2, 0, "Bye"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("frames (-want +got):\n%s", diff)
	}
	r.await(id, eventlog.StatusCompleted)
	wantKinds := []string{"execution.created", "dispatch.started", "step.started", "step.succeeded",
		"step.started", "step.succeeded", "execution.completed"}
	if diff := cmp.Diff(wantKinds, kinds(r.events(id))); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	// The stream of an ended execution ends at once, with no frame.
	code, body := r.rawGet("/v0/executions/"+id.String()+"/stream", testToken)
	if code != 200 || strings.Contains(body, "data:") {
		t.Fatalf("stream of an ended execution: %d %q", code, body)
	}
}
