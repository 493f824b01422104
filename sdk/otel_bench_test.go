package sdk_test

import (
	"context"
	"fmt"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/forkline/forkline/sdk"
)

// BenchmarkToolCallTelemetry measures what OpenTelemetry costs a live tool
// call (DESIGN §13), side by side: provider=none (no option: the kernel
// does no telemetry work), provider=noop (the API's no-op providers) and
// provider=recorder (the SDK's in-memory span recorder and a manual metric
// reader, so every span and data point is really made). store=disk syncs
// each call as production does; store=memory shows the CPU cost alone.
func BenchmarkToolCallTelemetry(b *testing.B) {
	providers := []struct {
		name string
		opts func() []sdk.Option
	}{
		{"none", func() []sdk.Option { return nil }},
		{"noop", func() []sdk.Option {
			return []sdk.Option{sdk.WithTracerProvider(tracenoop.NewTracerProvider()), sdk.WithMeterProvider(metricnoop.NewMeterProvider())}
		}},
		{"recorder", func() []sdk.Option {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			return []sdk.Option{sdk.WithTracerProvider(tp), sdk.WithMeterProvider(mp)}
		}},
	}
	for _, store := range []string{"disk", "memory"} {
		for _, p := range providers {
			b.Run(fmt.Sprintf("store=%s/provider=%s", store, p.name), func(b *testing.B) {
				dir := ""
				if store == "disk" {
					dir = b.TempDir()
				}
				benchLiveCalls(b, dir, p.opts()...)
			})
		}
	}
}

// benchLiveCalls times live read_file calls inside one handler on a kernel
// opened on dir ("" = in memory) with opts.
func benchLiveCalls(b *testing.B, dir string, opts ...sdk.Option) {
	ctx := context.Background()
	k, err := sdk.Open(dir, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	read := sdk.DefineTool("read_file", func(ctx context.Context, a benchArgs) (string, error) { return "ok", nil })
	calls := 0
	_, err = sdk.Register(k, "calls", func(ctx context.Context, _ struct{}) (int, error) {
		for b.Loop() {
			if _, err := read.Call(ctx, benchArgs{Path: fmt.Sprintf("src/f%d.go", calls)}); err != nil {
				return 0, err
			}
			calls++
		}
		return calls, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	id, err := k.Start(ctx, "calls", struct{}{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	if _, err := k.Run(ctx, id); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(calls)/b.Elapsed().Seconds(), "calls/s")
}
