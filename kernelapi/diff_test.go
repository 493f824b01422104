package kernelapi_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
)

// multiplier is a remote agent: three tool calls "mul" {i} whose result is
// {product: i*m}, m read when the call runs; it completes with the sum.
func multiplier(t *testing.T, m *atomic.Int64) func(a *agentClient) {
	return func(a *agentClient) {
		total := int64(0)
		for i := range int64(3) {
			d, err := a.submit("tool_call", "mul", map[string]int64{"i": i}, "safe_to_retry")
			if err != nil {
				t.Error(err)
				return
			}
			var res struct{ Product int64 }
			switch d.Decision {
			case "proceed":
				res.Product = i * m.Load()
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
			total += res.Product
		}
		if ans, err := a.post("/complete", map[string]any{"output": total}); err != nil || ans.code != 204 {
			t.Errorf("complete execution: %v %d %s", err, ans.code, ans.body)
		}
	}
}

// TestDiffRoute: a remote agent's execution and a fork of it whose live
// steps answer differently compare over GET /v0/executions/{id}/diff: the
// shared prefix is the fork point, the step before it is in the prefix,
// the two after it are changed with each side's result, the outputs differ;
// the comparison writes nothing.
func TestDiffRoute(t *testing.T) {
	r := newRig(t, kernelapi.Options{})
	var m atomic.Int64
	m.Store(2)
	hook := webhookServer(t, r.url, "mul", multiplier(t, &m))
	r.register("mul", hook.URL)
	id := r.create("mul", nil)
	r.await(id, eventlog.StatusCompleted)
	m.Store(3)
	var fk struct{ ID string }
	if code := r.do("POST", "/v0/executions/"+id.String()+"/fork", map[string]uint64{"at": 4}, &fk); code != 201 {
		t.Fatalf("fork: %d", code)
	}
	fid, err := eventlog.ParseID(fk.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.await(fid, eventlog.StatusCompleted)

	type outcome struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	type step struct {
		Kind   string   `json:"kind"`
		Target string   `json:"target"`
		Change string   `json:"change"`
		A      *outcome `json:"a"`
		B      *outcome `json:"b"`
	}
	var c struct {
		A       string `json:"a"`
		B       string `json:"b"`
		Shared  uint64 `json:"shared"`
		Prefix  []struct{ Kind, Target string }
		Steps   []step `json:"steps"`
		OutputA struct {
			Output json.RawMessage `json:"output"`
		} `json:"output_a"`
		OutputB struct {
			Output json.RawMessage `json:"output"`
		} `json:"output_b"`
	}
	before := r.snapshot()
	if code := r.do("GET", "/v0/executions/"+id.String()+"/diff?with="+fid.String(), nil, &c); code != 200 {
		t.Fatalf("diff: %d", code)
	}
	if after := r.snapshot(); after != before {
		t.Fatal("the diff changed the log")
	}
	if c.A != id.String() || c.B != fid.String() || c.Shared != 4 || len(c.Prefix) != 1 || c.Prefix[0].Kind != "tool_call" {
		t.Fatalf("comparison %+v", c)
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	want := []step{
		{"tool_call", "mul", "changed", &outcome{"succeeded", raw(`{"Product":2}`)}, &outcome{"succeeded", raw(`{"Product":3}`)}},
		{"tool_call", "mul", "changed", &outcome{"succeeded", raw(`{"Product":4}`)}, &outcome{"succeeded", raw(`{"Product":6}`)}},
	}
	if diff := cmp.Diff(want, c.Steps); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if string(c.OutputA.Output) != "6" || string(c.OutputB.Output) != "9" {
		t.Fatalf("outputs %s %s", c.OutputA.Output, c.OutputB.Output)
	}
}
