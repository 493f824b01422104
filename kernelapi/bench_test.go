package kernelapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
	"github.com/forkline/forkline/sdk"
)

// BenchmarkStep50 runs a 50-step agent over HTTP (the adder agent, a Go
// client signing every request) and the same agent in process (each step
// through sdk.RemoteCall), in the same run, on in-memory stores. It reports
// each side's mean per step and the HTTP overhead as a ratio of the
// in-process time.
func BenchmarkStep50(b *testing.B) {
	const steps = 50
	inproc := func() time.Duration {
		k, err := sdk.Open("")
		if err != nil {
			b.Fatal(err)
		}
		defer k.Close()
		if _, err := sdk.Register(k, "adder", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
			total := 0
			for i := range steps {
				args, _ := json.Marshal(map[string]int{"i": i})
				res, _, _, err := sdk.RemoteCall(ctx, eventlog.StepTool, "add", args, eventlog.SafeToRetry,
					func(context.Context) ([]byte, error) { return json.Marshal(map[string]int{"sum": 2 * i}) })
				if err != nil {
					return nil, err
				}
				var r struct{ Sum int }
				_ = json.Unmarshal(res, &r)
				total += r.Sum
			}
			return json.Marshal(map[string]int{"total": total})
		}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		id, err := k.Start(context.Background(), "adder", map[string]int{"n": steps})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.Run(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var overHTTP, inProc time.Duration
	r := newRig(b, kernelapi.Options{})
	hook := webhookServer(b, r.url, "adder", adder(b, 0))
	r.register("adder", hook.URL)
	b.ResetTimer()
	for range b.N {
		inProc += inproc()
		start := time.Now()
		id := r.create("adder", map[string]int{"n": steps})
		if _, err := r.k.Wait(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		overHTTP += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N * steps)
	b.ReportMetric(float64(inProc.Nanoseconds())/n, "ns/step-inproc")
	b.ReportMetric(float64(overHTTP.Nanoseconds())/n, "ns/step-http")
	b.ReportMetric(float64(overHTTP-inProc)/float64(inProc), "http-overhead/inproc")
}
