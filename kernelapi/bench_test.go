package kernelapi_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
	"github.com/forkline/forkline/sdk"
)

// median returns the median of ds (sorted in place); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	if len(ds)%2 == 1 {
		return ds[len(ds)/2]
	}
	return (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
}

// timedAdder is the adder agent over HTTP that records each step's round
// trip as the agent sees it: its submit and its complete, from the first
// byte sent to the last received.
func timedAdder(b *testing.B, record func(time.Duration)) func(a *agentClient) {
	return func(a *agentClient) {
		ans, err := a.send("GET", "/v0/executions/"+a.exec, nil, false)
		if err != nil || ans.code != 200 {
			b.Errorf("get execution: %v %d %s", err, ans.code, ans.body)
			return
		}
		var ex struct {
			Input struct{ N int } `json:"input"`
		}
		if err := json.Unmarshal(ans.body, &ex); err != nil {
			b.Error(err)
			return
		}
		total := 0
		for i := range ex.Input.N {
			start := time.Now()
			d, err := a.submit("tool_call", "add", map[string]any{"i": i}, "safe_to_retry")
			if err != nil || d.Decision != "proceed" {
				b.Errorf("submit: %v %+v", err, d)
				return
			}
			res := map[string]int{"sum": 2 * i}
			if ans, err := a.post("/steps/"+d.StepID+"/complete", map[string]any{"result": res}); err != nil || ans.code != 204 {
				b.Errorf("complete: %v %d %s", err, ans.code, ans.body)
				return
			}
			record(time.Since(start))
			total += res["sum"]
		}
		if ans, err := a.post("/complete", map[string]any{"output": map[string]int{"total": total}}); err != nil || ans.code != 204 {
			b.Errorf("complete execution: %v %d %s", err, ans.code, ans.body)
		}
	}
}

// BenchmarkStep50 runs a 50-step agent over HTTP (the adder agent, a Go
// client signing every request) and the same agent in process (each step
// through sdk.RemoteCall), alternately in the same run, on in-memory
// stores. Each step's round trip is timed where the agent sees it — over
// HTTP its submit and its complete, in process its RemoteCall — and the
// benchmark reports the median step of each side, the HTTP overhead per
// step at the median (ns/step-overhead-median) and as a ratio of the
// in-process median, and each side's mean step over whole executions.
func BenchmarkStep50(b *testing.B) {
	const steps = 50
	var mu sync.Mutex
	var httpSteps, inprocSteps []time.Duration
	k, err := sdk.Open("")
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	if _, err := sdk.Register(k, "adder", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		total := 0
		for i := range steps {
			start := time.Now()
			args, _ := json.Marshal(map[string]int{"i": i})
			res, _, _, err := sdk.RemoteCall(ctx, eventlog.StepTool, "add", args, eventlog.SafeToRetry,
				func(context.Context) ([]byte, error) { return json.Marshal(map[string]int{"sum": 2 * i}) })
			if err != nil {
				return nil, err
			}
			took := time.Since(start)
			mu.Lock()
			inprocSteps = append(inprocSteps, took)
			mu.Unlock()
			var r struct{ Sum int }
			_ = json.Unmarshal(res, &r)
			total += r.Sum
		}
		return json.Marshal(map[string]int{"total": total})
	}); err != nil {
		b.Fatal(err)
	}
	var overHTTP, inProc time.Duration
	r := newRig(b, kernelapi.Options{})
	hook := webhookServer(b, r.url, "adder", timedAdder(b, func(d time.Duration) {
		mu.Lock()
		httpSteps = append(httpSteps, d)
		mu.Unlock()
	}))
	r.register("adder", hook.URL)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		id, err := k.Start(context.Background(), "adder", map[string]int{"n": steps})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.Run(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		inProc += time.Since(start)
		start = time.Now()
		id = r.create("adder", map[string]int{"n": steps})
		if _, err := r.k.Wait(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		overHTTP += time.Since(start)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	mh, mi := median(httpSteps), median(inprocSteps)
	n := float64(b.N * steps)
	b.ReportMetric(float64(mi.Nanoseconds()), "ns/step-inproc-median")
	b.ReportMetric(float64(mh.Nanoseconds()), "ns/step-http-median")
	b.ReportMetric(float64((mh - mi).Nanoseconds()), "ns/step-overhead-median")
	b.ReportMetric(float64(mh-mi)/float64(mi), "overhead/inproc-median")
	b.ReportMetric(float64(inProc.Nanoseconds())/n, "ns/step-inproc-mean")
	b.ReportMetric(float64(overHTTP.Nanoseconds())/n, "ns/step-http-mean")
}
