package benchmarks

import (
	"context"
	"fmt"
	"sync"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/forkline/forkline/sdk"
)

// Scenario 2t, tracing overhead (DESIGN §13): the live safe_to_retry tool
// call of scenario 2 on three kernels side by side — no telemetry option
// (the kernel does no telemetry work), the OpenTelemetry API's no-op
// tracer and meter providers, and the SDK's real pipeline recording every
// span in memory with a manual metric reader. The targets: no-op within
// 2 %, recorder within 10 % of no telemetry. The kernels' logs are in
// memory, so a call is CPU alone and telemetry's share is the largest it
// can be; on disk an fsync per call (scenario 2a) dwarfs it.

// spanRing is an in-memory span recorder like tracetest.SpanRecorder,
// which keeps every ended span: over a 2-second round that is hundreds of
// megabytes, so this one keeps the last len(spans) and counts the rest.
// The SDK's work per span (the snapshot handed to OnEnd) is the same.
type spanRing struct {
	mu struct {
		sync.Mutex
		spans []sdktrace.ReadOnlySpan
		ended int
	}
}

func newSpanRing(n int) *spanRing {
	r := &spanRing{}
	r.mu.spans = make([]sdktrace.ReadOnlySpan, n)
	return r
}

// OnStart implements sdktrace.SpanProcessor.
func (r *spanRing) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: it keeps s.
func (r *spanRing) OnEnd(s sdktrace.ReadOnlySpan) {
	r.mu.Lock()
	r.mu.spans[r.mu.ended%len(r.mu.spans)] = s
	r.mu.ended++
	r.mu.Unlock()
}

// Shutdown implements sdktrace.SpanProcessor.
func (r *spanRing) Shutdown(context.Context) error { return nil }

// ForceFlush implements sdktrace.SpanProcessor.
func (r *spanRing) ForceFlush(context.Context) error { return nil }

// ended returns how many spans ended.
func (r *spanRing) ended() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.ended
}

func runTracing(e *env) ([]Row, error) {
	ring := newSpanRing(4096)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ring))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	kernels := map[string][]sdk.Option{
		"none":     nil,
		"noop":     {sdk.WithTracerProvider(tracenoop.NewTracerProvider()), sdk.WithMeterProvider(metricnoop.NewMeterProvider())},
		"recorder": {sdk.WithTracerProvider(tp), sdk.WithMeterProvider(mp)},
	}
	tks := map[string]*toolKernel{}
	for name, opts := range kernels {
		tk, err := openToolKernel("", opts...)
		if err != nil {
			return nil, err
		}
		defer tk.Close()
		tks[name] = tk
	}
	d := e.cfg.Duration
	rates, load, err := e.interleave(
		contestant{"forkline tool call, no telemetry", tks["none"].callsFor(e.ctx, d, false)},
		contestant{"forkline tool call, no-op providers", tks["noop"].callsFor(e.ctx, d, false)},
		contestant{"forkline tool call, span recorder + metric reader", tks["recorder"].callsFor(e.ctx, d, false)},
	)
	if err != nil {
		return nil, err
	}
	// The recorder must have seen a span per call (and one per dispatch).
	if calls := tks["recorder"].counted[0]; int64(ring.ended()) < calls {
		return nil, fmt.Errorf("%w: the span recorder saw %d spans for %d calls", errCheck, ring.ended(), calls)
	}
	none := Figure{What: "forkline, no telemetry option", Value: median(rates[0]), Unit: "calls/s", Rounds: rates[0]}
	noop := Figure{What: "forkline", Value: median(rates[1]), Unit: "calls/s", Rounds: rates[1]}
	rec := Figure{What: "forkline", Value: median(rates[2]), Unit: "calls/s", Rounds: rates[2]}
	a := rowOf("2t", "live tool call traced through no-op providers vs no telemetry (log in memory)",
		"ToolCallTelemetry/store=memory/provider=noop", noop, none, div, "calls/calls", "≥ 0.98", atLeast(0.98), load)
	a.Note = "sdk.WithTracerProvider(noop) and sdk.WithMeterProvider(noop): the kernel makes every span and data point through the API, which drops them. The log is in memory, so the ratio is of CPU alone, the worst case for telemetry's share. The Go benchmark: go test -run '^$' -bench ToolCallTelemetry ./sdk."
	b := rowOf("2u", "live tool call traced into an in-memory span recorder vs no telemetry (log in memory)",
		"ToolCallTelemetry/store=memory/provider=recorder", rec, none, div, "calls/calls", "≥ 0.90", atLeast(0.90), load)
	b.Note = fmt.Sprintf("The OpenTelemetry SDK's tracer provider with an in-memory span processor (keeps the last 4,096 of %s ended spans) and its meter provider with a manual reader: every span is really made, with its six attributes, and every counter and histogram point recorded.",
		humanNumber(float64(ring.ended())))
	return []Row{a, b}, nil
}
