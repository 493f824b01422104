package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"sync"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/forkline/forkline/sdk"
)

// Scenario 2t, tracing overhead (DESIGN §13, targets of §15½.13): the live
// safe_to_retry tool call of scenario 2 on kernels side by side. 2t: the
// OpenTelemetry API's no-op tracer and meter providers against no
// telemetry option (the kernel then does no telemetry work), both logs in
// memory, so a call is CPU alone and the API's share is the largest it can
// be; target under 2 %. 2u: the SDK's real pipeline recording every span in
// memory with a manual metric reader, against no telemetry, both on a
// synced Pebble log, where a live call is what a user pays for (its fsync
// costs no CPU, but the log's encoding and Pebble's write path do); target
// under 3 %. A call is timed by the process's CPU time, not the wall clock:
// a few microseconds of a call are far below the swing of a round's wall
// time on a shared machine, and far above that of its CPU time.

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
	kernels := []struct {
		name string
		disk bool
		opts []sdk.Option
	}{
		{"none", false, nil},
		{"noop", false, []sdk.Option{sdk.WithTracerProvider(tracenoop.NewTracerProvider()), sdk.WithMeterProvider(metricnoop.NewMeterProvider())}},
		{"disk-none", true, nil},
		{"disk-recorder", true, []sdk.Option{sdk.WithTracerProvider(tp), sdk.WithMeterProvider(mp)}},
	}
	tks := map[string]*toolKernel{}
	for _, kn := range kernels {
		dir := ""
		if kn.disk {
			var err error
			if dir, err = e.mkdir("tracing-" + kn.name); err != nil {
				return nil, err
			}
		}
		tk, err := openToolKernel(dir, kn.opts...)
		if err != nil {
			return nil, err
		}
		defer tk.Close()
		tk.timeCPU = true
		tks[kn.name] = tk
	}
	// Ten times the rounds, a tenth as long each: the three kernels take
	// turns more often, so that each sees the same machine, and the
	// medians are over more rounds.
	rounds, d := 10*e.cfg.Rounds, e.cfg.Duration/10
	var wall [4][]float64
	rates, load, err := e.interleaveRounds(rounds, d,
		contestant{"forkline tool call, no telemetry", tks["none"].cpuCallsFor(e.ctx, d, &wall[0])},
		contestant{"forkline tool call, no-op providers", tks["noop"].cpuCallsFor(e.ctx, d, &wall[1])},
		contestant{"forkline tool call on a synced log, no telemetry", tks["disk-none"].cpuCallsFor(e.ctx, d, &wall[2])},
		contestant{"forkline tool call on a synced log, span recorder + metric reader", tks["disk-recorder"].cpuCallsFor(e.ctx, d, &wall[3])},
	)
	if err != nil {
		return nil, err
	}
	// The recorder must have seen a span per call (and one per dispatch).
	if calls := tks["disk-recorder"].counted[0]; int64(ring.ended()) < calls {
		return nil, fmt.Errorf("%w: the span recorder saw %d spans for %d calls", errCheck, ring.ended(), calls)
	}
	// interleave's rates are calls per second of the process's CPU time;
	// the rows show their inverse, CPU microseconds per call. The warm-up
	// call's wall rates are dropped.
	var cpu [4]Figure
	for i, rs := range rates {
		us := make([]float64, len(rs))
		for j, r := range rs {
			us[j] = 1e6 / r
		}
		cpu[i] = Figure{What: "forkline", Value: median(us), Unit: "µs CPU/call", Rounds: us}
		wall[i] = wall[i][1:]
	}
	cpu[0].What = "forkline, no telemetry option"
	cpu[2].What = "forkline, no telemetry option"
	how := fmt.Sprintf("Timed by the process's CPU time (getrusage, user + system, every thread: the garbage collector's work on the extra allocations counts) over the calls of each round, not by the wall clock: on a shared machine a round's wall time swings with the other processes, its CPU time less. %d interleaved rounds of %s (ten times the run's rounds, a tenth as long), the four kernels of 2t and 2u taking turns; the ratio is of the two medians. The Go benchmark: go test -run '^$' -bench ToolCallTelemetry ./sdk.", rounds, d)
	a := rowOfMedians("2t", "live tool call traced through no-op providers vs no telemetry (log in memory, CPU time)",
		"ToolCallTelemetry/store=memory/provider=noop", cpu[1], cpu[0], inv, "calls per CPU-second, no-op/none", "≥ 0.98", atLeast(0.98), load)
	a.Note = fmt.Sprintf("sdk.WithTracerProvider(noop) and sdk.WithMeterProvider(noop): the kernel makes every span and data point through the API, which drops them. Overhead %s of CPU per call. The log is in memory, so a call is CPU alone, the worst case for the API's share. %s Wall-clock ratio of the same calls' medians, for comparison: %s (rounds %s).",
		overheadText(cpu[1].Value, cpu[0].Value), how, ratioText(median(wall[1])/median(wall[0])), rangeText(pairedRatios(wall[1], wall[0])))
	b := rowOfMedians("2u", "live tool call traced into an in-memory span recorder vs no telemetry (synced Pebble log, CPU time)",
		"ToolCallTelemetry/store=disk/provider=recorder", cpu[3], cpu[2], inv, "calls per CPU-second, recorder/none", "≥ 0.97", atLeast(0.97), load)
	b.Note = fmt.Sprintf("The OpenTelemetry SDK's tracer provider with an in-memory span processor (keeps the last 4,096 of %s ended spans) and its meter provider with a manual reader: every span is really made, with its six attributes, and every counter point recorded. Both kernels on a synced Pebble log in a folder of their own (an fsync per call, which costs wall time, not CPU). Overhead %s of CPU per call. %s Wall-clock ratio of the same calls' medians, for comparison: %s (rounds %s).",
		humanNumber(float64(ring.ended())), overheadText(cpu[3].Value, cpu[2].Value), how, ratioText(median(wall[3])/median(wall[2])), rangeText(pairedRatios(wall[3], wall[2])))
	return []Row{a, b}, nil
}

// overheadText gives how much more traced costs than base, as a signed
// percentage ("+8.3 %").
func overheadText(traced, base float64) string {
	return fmt.Sprintf("%+.1f %%", (traced/base-1)*100)
}

// rangeText gives the lowest and highest of rs ("0.81–1.36").
func rangeText(rs []float64) string {
	if len(rs) == 0 {
		return "none"
	}
	return ratioText(slices.Min(rs)) + "–" + ratioText(slices.Max(rs))
}
