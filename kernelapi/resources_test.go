package kernelapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
)

// counterAgent is a remote agent with one resource, a counter it keeps
// itself, and checkpoints it takes itself (snapshots by ref). It binds
// "ws", restores from the ref the kernel names, then makes three tool calls
// "incr" {i}: a live one increments the counter and completes with the new
// value and the counter's new ref; a replayed one changes nothing (the
// restored state holds it). It completes with the counter.
type counterAgent struct {
	t     *testing.T
	mu    sync.Mutex
	snaps map[string]int
	binds []map[string]any // what each bind answered
	next  int
}

func (c *counterAgent) run(a *agentClient) {
	ans, err := a.post("/resources", map[string]any{"key": "ws", "driver_id": "counter.v1", "configuration": map[string]int{"start": 0}})
	if err != nil || ans.code != 200 {
		c.t.Errorf("bind: %v %d %s", err, ans.code, ans.body)
		return
	}
	var bind map[string]any
	if err := json.Unmarshal(ans.body, &bind); err != nil {
		c.t.Error(err)
		return
	}
	c.mu.Lock()
	c.binds = append(c.binds, bind)
	value := 0
	if from, _ := bind["from"].(string); from != "" {
		v, ok := c.snaps[from]
		if !ok {
			c.mu.Unlock()
			c.t.Errorf("bind names unknown checkpoint %q", from)
			return
		}
		value = v
	}
	c.mu.Unlock()
	for i := range 3 {
		ans, err := a.post("/steps", map[string]any{"kind": "tool_call", "target": "incr", "args": map[string]int{"i": i}, "resources": []string{"ws"}})
		if err != nil || ans.code != 200 {
			c.t.Errorf("submit: %v %d %s", err, ans.code, ans.body)
			return
		}
		var d stepDecision
		if err := json.Unmarshal(ans.body, &d); err != nil {
			c.t.Error(err)
			return
		}
		switch d.Decision {
		case "proceed":
			if !cmp.Equal(d.Capture, []string{"ws"}) {
				c.t.Errorf("proceed asks captures of %v, want [ws]", d.Capture)
			}
			value++
			c.mu.Lock()
			ref := fmt.Sprintf("snap-%d", c.next)
			c.next++
			c.snaps[ref] = value
			c.mu.Unlock()
			if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": value, "captures": map[string]string{"ws": ref}}); err != nil || ans.code != 204 {
				c.t.Errorf("complete: %v %d %s", err, ans.code, ans.body)
				return
			}
		case "replay":
		default:
			c.t.Errorf("decision %+v", d)
			return
		}
	}
	if ans, err := a.post("/complete", map[string]any{"output": value}); err != nil || ans.code != 204 {
		c.t.Errorf("complete execution: %v %d %s", err, ans.code, ans.body)
	}
}

// TestRemoteResource: a remote agent binds a resource through the API and
// reports a checkpoint ref with each step's outcome; the log records the
// binding, a baseline and a capture after each step (appended with the
// step's outcome). A fork at the second step's capture tells the agent to
// restore from that step's ref, replays the two steps and runs the third
// live, so the fork ends with the same counter as the parent. The same on
// the embedded log and on Postgres.
func TestRemoteResource(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { testRemoteResource(t, newRig(t, kernelapi.Options{})) })
	t.Run("postgres", func(t *testing.T) { testRemoteResource(t, newPGRig(t, kernelapi.Options{})) })
}

func testRemoteResource(t *testing.T, r *rig) {
	c := &counterAgent{t: t, snaps: map[string]int{}}
	hook := webhookServer(t, r.url, "counter", c.run)
	r.register("counter", hook.URL)
	id := r.create("counter", nil)
	r.await(id, eventlog.StatusCompleted)

	evs := r.events(id)
	want := []string{"execution.created", "dispatch.started", "resource.bound", "resource.captured",
		"step.started", "step.succeeded", "resource.captured",
		"step.started", "step.succeeded", "resource.captured",
		"step.started", "step.succeeded", "resource.captured", "execution.completed"}
	if diff := cmp.Diff(want, kinds(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	var refs []string
	var forkAt uint64
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			if p.Key != "ws" || p.DriverID != "remote:counter.v1" || p.From != "" || string(p.Configuration) != `{"start":0}` {
				t.Fatalf("resource.bound %+v", p)
			}
		case *eventlog.ResourceCaptured:
			refs = append(refs, p.Ref)
			if p.Ref == "snap-1" {
				forkAt = ev.Seq
			}
		}
	}
	if diff := cmp.Diff([]string{"kernelapi:initial", "snap-0", "snap-1", "snap-2"}, refs); diff != "" {
		t.Fatalf("captured refs (-want +got):\n%s", diff)
	}
	var fk struct{ ID string }
	if code := r.do("POST", "/v0/executions/"+id.String()+"/fork", map[string]uint64{"at": forkAt}, &fk); code != 201 {
		t.Fatalf("fork: %d", code)
	}
	fid, err := eventlog.ParseID(fk.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.await(fid, eventlog.StatusCompleted)
	c.mu.Lock()
	binds := c.binds
	c.mu.Unlock()
	wantBinds := []map[string]any{{"key": "ws", "action": "create", "from": ""}, {"key": "ws", "action": "create", "from": "snap-1"}}
	if diff := cmp.Diff(wantBinds, binds); diff != "" {
		t.Fatalf("binds (-want +got):\n%s", diff)
	}
	var own []string
	var from string
	for _, ev := range r.events(fid) {
		if ev.Seq <= forkAt {
			continue
		}
		own = append(own, ev.Kind().String())
		if p, ok := ev.Data.(*eventlog.ResourceBound); ok {
			from = p.From
		}
	}
	wantOwn := []string{"fork.created", "dispatch.started", "resource.bound", "step.started", "step.succeeded", "resource.captured", "execution.completed"}
	if diff := cmp.Diff(wantOwn, own); diff != "" || from != "snap-1" {
		t.Fatalf("fork's events (from %q; -want +got):\n%s", from, diff)
	}
	var ex struct{ Output int }
	if code := r.do("GET", "/v0/executions/"+fid.String(), nil, &ex); code != 200 || ex.Output != 3 {
		t.Fatalf("fork's output: %d %+v", code, ex)
	}
}

// TestRemoteResourceReopen: a due checkpoint whose ref the agent did not
// send is recorded as resource.capture_failed; after the agent stalls and
// its attempt is replaced, the next attempt's bind answers "open" (the
// resource this execution bound) and appends no second binding. The same
// on the embedded log and on Postgres.
func TestRemoteResourceReopen(t *testing.T) {
	opts := kernelapi.Options{StallAfter: 300 * time.Millisecond}
	t.Run("embedded", func(t *testing.T) { testRemoteResourceReopen(t, newRig(t, opts)) })
	t.Run("postgres", func(t *testing.T) { testRemoteResourceReopen(t, newPGRig(t, opts)) })
}

func testRemoteResourceReopen(t *testing.T, r *rig) {
	var mu sync.Mutex
	var binds []map[string]any
	hook := webhookServer(t, r.url, "keeper", func(a *agentClient) {
		ans, err := a.post("/resources", map[string]any{"key": "ws", "driver_id": "keeper.v1"})
		if err != nil || ans.code != 200 {
			t.Errorf("bind: %v %d %s", err, ans.code, ans.body)
			return
		}
		var bind map[string]any
		if err := json.Unmarshal(ans.body, &bind); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		binds = append(binds, bind)
		first := len(binds) == 1
		mu.Unlock()
		for i := range 2 {
			ans, err := a.post("/steps", map[string]any{"kind": "tool_call", "target": "touch", "args": map[string]int{"i": i}, "resources": []string{"ws"}})
			if err != nil || ans.code != 200 {
				t.Errorf("submit: %v %d %s", err, ans.code, ans.body)
				return
			}
			var d stepDecision
			if err := json.Unmarshal(ans.body, &d); err != nil {
				t.Error(err)
				return
			}
			if d.Decision != "proceed" {
				continue
			}
			if first && i == 1 {
				return // stalls with the step in flight
			}
			body := map[string]any{"result": i}
			if !first {
				body["captures"] = map[string]string{"ws": fmt.Sprintf("ref-%d", i)}
			}
			if ans, err := a.post("/steps/"+d.StepID+"/complete", body); err != nil || ans.code != 204 {
				t.Errorf("complete: %v %d %s", err, ans.code, ans.body)
				return
			}
		}
		if ans, err := a.post("/complete", map[string]any{"output": "done"}); err != nil || ans.code != 204 {
			t.Errorf("complete execution: %v %d %s", err, ans.code, ans.body)
		}
	})
	r.register("keeper", hook.URL)
	id := r.create("keeper", nil)
	r.await(id, eventlog.StatusCompleted)
	mu.Lock()
	defer mu.Unlock()
	want := []map[string]any{{"key": "ws", "action": "create", "from": ""}, {"key": "ws", "action": "open"}}
	if diff := cmp.Diff(want, binds); diff != "" {
		t.Fatalf("binds (-want +got):\n%s", diff)
	}
	// The first step's outcome is appended with the failure of the
	// capture due after it.
	bound, failed, captured := 0, false, []string{}
	evs := r.events(id)
	for i, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			bound++
		case *eventlog.StepSucceeded:
			if i == 5 && i+1 < len(evs) {
				cf, ok := evs[i+1].Data.(*eventlog.ResourceCaptureFailed)
				failed = ok && cf.Key == "ws" && cf.Reason == eventlog.CaptureSteps && evs[i+1].Time.Equal(ev.Time)
			}
		case *eventlog.ResourceCaptured:
			captured = append(captured, p.Ref)
		}
	}
	if bound != 1 || !failed || !slices.Contains(captured, "ref-1") {
		t.Fatalf("bound %d, capture failed after the first step %t, captured %v; events:\n%s", bound, failed, captured, kindsText(r.events(id)))
	}
}
