package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/resource"
)

// instrumentation is the name of forkline's tracer and meter.
const instrumentation = "github.com/forkline/forkline/sdk"

// The span and attribute names of DESIGN §13.
const (
	spanDispatch = "forkline.dispatch"
	spanStep     = "forkline.step"
	spanCapture  = "forkline.capture"
	spanRestore  = "forkline.restore"

	attrExecution   = attribute.Key("forkline.execution.id")
	attrAgent       = attribute.Key("forkline.agent")
	attrStepID      = attribute.Key("forkline.step.id")
	attrStepKind    = attribute.Key("forkline.step.kind")
	attrStepTarget  = attribute.Key("forkline.step.target")
	attrAttempt     = attribute.Key("forkline.step.attempt")
	attrIdempotency = attribute.Key("forkline.step.idempotency")
	attrResource    = attribute.Key("forkline.resource.key")
	attrRef         = attribute.Key("forkline.checkpoint.ref")
	attrKind        = attribute.Key("kind")
	attrOutcome     = attribute.Key("outcome")
	attrReason      = attribute.Key("reason")
	attrParked      = attribute.Key("forkline.parked")
)

// telemetry is a kernel's OpenTelemetry instruments. A nil tracer or meter
// means none was given: the kernel then does no tracing or metrics work at
// all, not even through a no-op provider.
type telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter

	steps           metric.Int64Counter
	stepsReplayed   metric.Int64Counter
	captures        metric.Int64Counter
	captureDuration metric.Float64Histogram
	captureSize     metric.Int64Histogram
	forks           metric.Int64Counter
	takeovers       metric.Int64Counter

	// stepAttrs holds the attribute options of forkline.steps and
	// forkline.steps.replayed for every step kind and outcome the kernel
	// records, made once in WithMeterProvider and only read after it:
	// building an attribute set per step took about 4 % of the CPU of a
	// live tool call on a log in memory, and a lock around a shared cache
	// about 1 % more (benchmarks/README.md, 2t). Each is a slice of one
	// option, so that passing it makes no variadic slice per step.
	stepAttrs map[[2]string][]metric.AddOption
	// mu.moreAttrs caches the options of a kind or outcome stepAttrs
	// lacks (none the kernel records today).
	mu struct {
		sync.Mutex
		moreAttrs map[[2]string][]metric.AddOption
	}
}

// stepKinds and stepOutcomes are what forkline.steps and
// forkline.steps.replayed are counted by ("" is the outcome of a replayed
// step, which has none).
var (
	stepKinds    = []eventlog.StepKind{eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM, eventlog.StepChild}
	stepOutcomes = []string{"", "succeeded", "failed", "cancelled", "denied", "indeterminate", "parked", "unrecorded"}
)

// stepAttrOptions returns the option carrying the attributes of a step
// count of kind and outcome ("": replayed, no outcome attribute).
func stepAttrOptions(kind eventlog.StepKind, outcome string) []metric.AddOption {
	kvs := []attribute.KeyValue{attrKind.String(string(kind))}
	if outcome != "" {
		kvs = append(kvs, attrOutcome.String(outcome))
	}
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
}

// stepAttrOpts returns the attribute options of a step count of kind and
// outcome.
func (t *telemetry) stepAttrOpts(kind eventlog.StepKind, outcome string) []metric.AddOption {
	key := [2]string{string(kind), outcome}
	if o, ok := t.stepAttrs[key]; ok {
		return o
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.mu.moreAttrs[key]; ok {
		return o
	}
	o := stepAttrOptions(kind, outcome)
	if t.mu.moreAttrs == nil {
		t.mu.moreAttrs = map[[2]string][]metric.AddOption{}
	}
	t.mu.moreAttrs[key] = o
	return o
}

// WithTracerProvider makes the kernel trace through tp (DESIGN §13): a span
// forkline.dispatch per Run that executes the handler, forkline.step per
// live step (replayed steps have none) with the attributes
// forkline.execution.id, forkline.step.id, .kind, .target, .attempt and
// .idempotency, forkline.capture per checkpoint taken and forkline.restore
// per resource created from a fork's checkpoint. Without it the kernel
// traces nothing.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(k *Kernel) error {
		if tp == nil {
			return fmt.Errorf("%w: nil tracer provider", ErrInvalid)
		}
		k.tel.tracer = tp.Tracer(instrumentation)
		return nil
	}
}

// WithMeterProvider makes the kernel record metrics through mp (DESIGN §13):
// counters forkline.steps (attributes kind and outcome: succeeded, failed,
// cancelled, denied, indeterminate), forkline.steps.replayed (kind),
// forkline.captures (reason, outcome: captured or failed), forkline.forks
// and forkline.lease.takeovers (a dispatch that resumes an execution whose
// previous dispatch never ended), and the histogram
// forkline.capture.duration in seconds. Without it the kernel records none.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(k *Kernel) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", ErrInvalid)
		}
		m := mp.Meter(instrumentation)
		t := &k.tel
		var errs [7]error
		t.steps, errs[0] = m.Int64Counter("forkline.steps", metric.WithDescription("Live steps that ended, by kind and outcome."))
		t.stepsReplayed, errs[1] = m.Int64Counter("forkline.steps.replayed", metric.WithDescription("Steps answered from the log without running."))
		t.captures, errs[2] = m.Int64Counter("forkline.captures", metric.WithDescription("Checkpoints taken or failed, by reason and outcome."))
		t.captureDuration, errs[3] = m.Float64Histogram("forkline.capture.duration", metric.WithUnit("s"),
			metric.WithDescription("How long a driver took to checkpoint a resource."))
		t.forks, errs[4] = m.Int64Counter("forkline.forks", metric.WithDescription("Forks created."))
		t.takeovers, errs[5] = m.Int64Counter("forkline.lease.takeovers",
			metric.WithDescription("Dispatches that resumed an execution whose previous dispatch never ended."))
		t.captureSize, errs[6] = m.Int64Histogram("forkline.capture.size", metric.WithUnit("By"),
			metric.WithDescription("Bytes a checkpoint added to the driver's store (new contents only)."))
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("sdk: meter provider: %w", err)
			}
		}
		t.stepAttrs = make(map[[2]string][]metric.AddOption, len(stepKinds)*len(stepOutcomes))
		for _, kind := range stepKinds {
			for _, outcome := range stepOutcomes {
				t.stepAttrs[[2]string{string(kind), outcome}] = stepAttrOptions(kind, outcome)
			}
		}
		t.meter = m
		return nil
	}
}

// execAttr returns the forkline.execution.id attribute of id, if tracing
// (a dispatch makes it once for all its spans: its text took an
// allocation per step).
func (t *telemetry) execAttr(id eventlog.ID) attribute.KeyValue {
	if t.tracer == nil {
		return attribute.KeyValue{}
	}
	return attrExecution.String(id.String())
}

// startDispatch starts the forkline.dispatch span, if tracing; exec is
// execAttr's.
func (t *telemetry) startDispatch(ctx context.Context, exec attribute.KeyValue, agent string) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	return t.tracer.Start(ctx, spanDispatch, trace.WithAttributes(exec, attrAgent.String(agent)))
}

// startStep starts the forkline.step span of a live step, if tracing; exec
// is execAttr's.
func (t *telemetry) startStep(ctx context.Context, exec attribute.KeyValue, s *eventlog.StepStarted) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	// The attributes are set only on a span that records: building them
	// (the execution ID's text among them) was most of what a step cost
	// through the no-op providers (benchmarks/README.md, 2t). A sampler
	// therefore sees a step span without them.
	ctx, span := t.tracer.Start(ctx, spanStep)
	if span.IsRecording() {
		span.SetAttributes(
			exec,
			attrStepID.String(s.StepID),
			attrStepKind.String(string(s.StepKind)),
			attrStepTarget.String(s.Target),
			attrAttempt.Int64(int64(s.Attempt)),
			attrIdempotency.String(string(s.Idempotency)),
		)
	}
	return ctx, span
}

// stepEnded counts a live step's outcome and ends its span (nil when not
// tracing).
func (t *telemetry) stepEnded(span trace.Span, kind eventlog.StepKind, outcome string, err error) {
	if t.meter != nil {
		t.steps.Add(context.Background(), 1, t.stepAttrOpts(kind, outcome)...)
	}
	endSpan(span, err)
}

// replayed counts a step answered from the log.
func (t *telemetry) replayed(kind eventlog.StepKind) {
	if t.meter != nil {
		t.stepsReplayed.Add(context.Background(), 1, t.stepAttrOpts(kind, "")...)
	}
}

// capture is resource.Capture traced and measured: a forkline.capture span,
// forkline.captures, forkline.capture.duration and, when the driver says
// what it stored, forkline.capture.size. exec is the dispatch's execAttr.
func (k *Kernel) capture(ctx context.Context, exec attribute.KeyValue, drv resource.Driver, h any, key string, gen uint64, reason eventlog.CaptureReason) eventlog.Payload {
	t := &k.tel
	if t.tracer == nil && t.meter == nil {
		return resource.Capture(ctx, drv, h, key, gen, reason)
	}
	var span trace.Span
	if t.tracer != nil {
		ctx, span = t.tracer.Start(ctx, spanCapture, trace.WithAttributes(
			exec, attrResource.String(key), attrReason.String(string(reason))))
	}
	start := time.Now()
	ev, stored, sized := resource.CaptureSize(ctx, drv, h, key, gen, reason)
	took := time.Since(start)
	outcome, err := "captured", error(nil)
	switch p := ev.(type) {
	case *eventlog.ResourceCaptured:
		if span != nil {
			span.SetAttributes(attrRef.String(p.Ref))
		}
	case *eventlog.ResourceCaptureFailed:
		outcome, err = "failed", fmt.Errorf("%s", p.Error)
	}
	if t.meter != nil {
		attrs := metric.WithAttributes(attrReason.String(string(reason)), attrOutcome.String(outcome))
		t.captures.Add(ctx, 1, attrs)
		t.captureDuration.Record(ctx, took.Seconds(), attrs)
		if sized {
			t.captureSize.Record(ctx, stored, metric.WithAttributes(attrReason.String(string(reason))))
		}
	}
	endSpan(span, err)
	return ev
}

// startRestore starts the forkline.restore span of a resource created from
// a checkpoint, if tracing; exec is the dispatch's execAttr.
func (t *telemetry) startRestore(ctx context.Context, exec attribute.KeyValue, key, ref string) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	return t.tracer.Start(ctx, spanRestore, trace.WithAttributes(
		exec, attrResource.String(key), attrRef.String(ref)))
}

// forked counts a fork.
func (t *telemetry) forked(ctx context.Context) {
	if t.meter != nil {
		t.forks.Add(ctx, 1)
	}
}

// tookOver counts a takeover.
func (t *telemetry) tookOver(ctx context.Context) {
	if t.meter != nil {
		t.takeovers.Add(ctx, 1)
	}
}

// endDispatchSpan ends a forkline.dispatch span (nil: not tracing). A
// dispatch that parked (err wraps ErrWaiting) did not fail: its span gets
// the attribute forkline.parked and an event "parked", and no error
// status. Any other error marks it failed.
func endDispatchSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if errors.Is(err, ErrWaiting) {
		span.SetAttributes(attrParked.Bool(true))
		span.AddEvent("parked", trace.WithAttributes(attribute.String("message", err.Error())))
		span.End()
		return
	}
	endSpan(span, err)
}

// endSpan ends span (nil: not tracing), marking it failed with err.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
