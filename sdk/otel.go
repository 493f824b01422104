package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
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
	attrStatus      = attribute.Key("status")
	attrDecision    = attribute.Key("decision")
)

// backlogTimeout bounds the store listing behind one collection of
// forkline.executions.backlog.
const backlogTimeout = 5 * time.Second

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

	// The run-level metrics (DESIGN §13, issue 38).
	started            metric.Int64Counter
	ended              metric.Int64Counter
	firstDispatchDelay metric.Float64Histogram
	approvalWait       metric.Float64Histogram
	stepDuration       metric.Float64Histogram
	backlog            metric.Registration
	// endedAttrs holds the options of forkline.executions.ended by
	// outcome, made once.
	endedAttrs map[eventlog.Status][]metric.AddOption

	// stepAttrs holds the attribute options of forkline.steps and
	// forkline.steps.replayed for every step kind and outcome the kernel
	// records, made once in WithMeterProvider and only read after it:
	// building an attribute set per step took about 4 % of the CPU of a
	// live tool call on a log in memory, and a lock around a shared cache
	// about 1 % more (benchmarks/README.md, 2t). Each is a slice of one
	// option, so that passing it makes no variadic slice per step.
	stepAttrs map[[2]string][]metric.AddOption
	// stepRecAttrs is stepAttrs for forkline.step.duration.
	stepRecAttrs map[[2]string][]metric.RecordOption
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
	return []metric.AddOption{stepAttrSet(kind, outcome)}
}

// stepAttrSet is the measurement option of stepAttrOptions.
func stepAttrSet(kind eventlog.StepKind, outcome string) metric.MeasurementOption {
	kvs := []attribute.KeyValue{attrKind.String(string(kind))}
	if outcome != "" {
		kvs = append(kvs, attrOutcome.String(outcome))
	}
	return metric.WithAttributeSet(attribute.NewSet(kvs...))
}

// stepRecOpts returns the attribute options of a step duration of kind
// and outcome: from the table, else made anew (no kind or outcome the
// kernel records today).
func (t *telemetry) stepRecOpts(kind eventlog.StepKind, outcome string) []metric.RecordOption {
	if o, ok := t.stepRecAttrs[[2]string{string(kind), outcome}]; ok {
		return o
	}
	return []metric.RecordOption{stepAttrSet(kind, outcome)}
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
//
// Trace context crosses the log: Start (a child's start inside its
// parent's child step included) records the span context of its ctx, when
// it holds a valid one, as execution.created's TraceParent, and Fork as
// fork.created's (a fork's own caller's, never its parent's). Every
// dispatch of the run — not only the first: a dispatch resumed after a
// park or a crash is as much a part of that request — starts its
// forkline.dispatch span with a trace.Link to that span context, the span
// keeping its parent as before (a new root, or Serve's context). So a
// child's dispatch links to the parent's forkline.step span of the child
// call. A dispatch that parks (a sleep, an approval, a message, a child)
// ends its span with no error status, the attribute forkline.parked and
// an event "parked"; so does the parked step's span.
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
//
// Run-level metrics, in the same style:
//   - forkline.executions.started (counter): executions this kernel
//     created — Start and StartByName (children included; a keyed Start
//     that finds its execution is not counted) and Fork.
//   - forkline.executions.ended (counter; outcome: completed, failed,
//     cancelled): counted by the kernel that appends the terminal event
//     (the owner, or a Cancel that settles an execution with none), once
//     per execution: a Run of an ended execution appends nothing and
//     counts nothing.
//   - forkline.executions.backlog (observable gauge; status: pending,
//     running, waiting): executions not ended, by status. Each collection
//     lists the store's executions of those statuses (one List, bounded
//     by 5 s; on Pebble a scan of every execution's header, on Postgres
//     one indexed query), so its cost grows with the unended executions:
//     collect it every few seconds, not per request. A kernel over a
//     shared store reports the whole store's backlog, not its own.
//   - forkline.execution.first_dispatch.delay (histogram, s): from
//     execution.created (or a fork's fork.created) to the run's first
//     dispatch.started, by the log's times.
//   - forkline.approval.wait (histogram, s; decision: granted, rejected,
//     expired): from approval.requested to its decision.
//   - forkline.step.duration (histogram, s; kind, outcome as
//     forkline.steps): how long a live step's attempt ran, from its
//     step.started to its outcome (a streamed llm step's to its stream's
//     end); replayed and denied steps have none.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(k *Kernel) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", ErrInvalid)
		}
		m := mp.Meter(instrumentation)
		t := &k.tel
		var errs [14]error
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
		t.started, errs[7] = m.Int64Counter("forkline.executions.started",
			metric.WithDescription("Executions created by Start, StartByName or Fork."))
		t.ended, errs[8] = m.Int64Counter("forkline.executions.ended",
			metric.WithDescription("Executions that ended, by outcome: completed, failed or cancelled."))
		t.firstDispatchDelay, errs[9] = m.Float64Histogram("forkline.execution.first_dispatch.delay", metric.WithUnit("s"),
			metric.WithDescription("Time from an execution's creation (or fork) to its first dispatch."))
		t.approvalWait, errs[10] = m.Float64Histogram("forkline.approval.wait", metric.WithUnit("s"),
			metric.WithDescription("Time from an approval request to its decision, by decision."))
		t.stepDuration, errs[11] = m.Float64Histogram("forkline.step.duration", metric.WithUnit("s"),
			metric.WithDescription("How long a live step's attempt ran, by kind and outcome."))
		var backlog metric.Int64ObservableGauge
		backlog, errs[12] = m.Int64ObservableGauge("forkline.executions.backlog",
			metric.WithDescription("Executions not ended, by status: pending, running or waiting."))
		if errs[12] == nil {
			if t.backlog != nil {
				_ = t.backlog.Unregister() // an earlier WithMeterProvider's
			}
			t.backlog, errs[13] = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
				return k.observeBacklog(ctx, o, backlog)
			}, backlog)
		}
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("sdk: meter provider: %w", err)
			}
		}
		t.stepAttrs = make(map[[2]string][]metric.AddOption, len(stepKinds)*len(stepOutcomes))
		t.stepRecAttrs = make(map[[2]string][]metric.RecordOption, len(stepKinds)*len(stepOutcomes))
		for _, kind := range stepKinds {
			for _, outcome := range stepOutcomes {
				set := stepAttrSet(kind, outcome)
				t.stepAttrs[[2]string{string(kind), outcome}] = []metric.AddOption{set}
				t.stepRecAttrs[[2]string{string(kind), outcome}] = []metric.RecordOption{set}
			}
		}
		t.endedAttrs = map[eventlog.Status][]metric.AddOption{}
		for _, st := range []eventlog.Status{eventlog.StatusCompleted, eventlog.StatusFailed, eventlog.StatusCancelled} {
			t.endedAttrs[st] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrOutcome.String(st.String())))}
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
// execAttr's, traceparent the run's recorded trace context ("" for none),
// which the span links to.
func (t *telemetry) startDispatch(ctx context.Context, exec attribute.KeyValue, agent, traceparent string) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(exec, attrAgent.String(agent))}
	if sc, ok := spanContextOf(traceparent); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return t.tracer.Start(ctx, spanDispatch, opts...)
}

// traceParent returns the W3C traceparent of ctx's span context, which
// Start and Fork record: "" when not tracing or ctx holds no valid one.
func (t *telemetry) traceParent(ctx context.Context) string {
	if t.tracer == nil {
		return ""
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return eventlog.TraceParent{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: byte(sc.TraceFlags())}.String()
}

// spanContextOf is the remote span context a recorded traceparent names;
// false for "" (the log refuses a malformed one when it decodes).
func spanContextOf(traceparent string) (trace.SpanContext, bool) {
	if traceparent == "" {
		return trace.SpanContext{}, false
	}
	tp, err := eventlog.ParseTraceParent(traceparent)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tp.TraceID, SpanID: tp.SpanID, TraceFlags: trace.TraceFlags(tp.Flags), Remote: true,
	})
	return sc, sc.IsValid()
}

// stepStart is the time a live step's attempt starts, for
// forkline.step.duration: zero when not metering (no clock read).
func (t *telemetry) stepStart() time.Time {
	if t.meter == nil {
		return time.Time{}
	}
	return time.Now()
}

// executionStarted counts an execution created.
func (t *telemetry) executionStarted(ctx context.Context) {
	if t.meter != nil {
		t.started.Add(ctx, 1)
	}
}

// appended records the run-level metrics of an event a dispatch appended
// and folded into st: a terminal event, the run's first dispatch.started,
// an approval's decision.
func (t *telemetry) appended(st *replay.State, ev eventlog.Event) {
	if t.meter == nil {
		return
	}
	ctx := context.Background()
	switch p := ev.Data.(type) {
	case *eventlog.ExecutionCompleted:
		t.ended.Add(ctx, 1, t.endedAttrs[eventlog.StatusCompleted]...)
	case *eventlog.ExecutionFailed:
		t.ended.Add(ctx, 1, t.endedAttrs[eventlog.StatusFailed]...)
	case *eventlog.ExecutionCancelled:
		t.ended.Add(ctx, 1, t.endedAttrs[eventlog.StatusCancelled]...)
	case *eventlog.DispatchStarted:
		if st.RunDispatches == 1 {
			t.firstDispatchDelay.Record(ctx, seconds(ev.Time.Sub(st.Created)))
		}
	case *eventlog.ApprovalGranted:
		t.decided(ctx, st, p.StepID, ev.Time, "granted")
	case *eventlog.ApprovalRejected:
		t.decided(ctx, st, p.StepID, ev.Time, "rejected")
	case *eventlog.StepDenied:
		if p.Code == eventlog.DenyApprovalExpired {
			t.decided(ctx, st, p.StepID, ev.Time, "expired")
		}
	}
}

// decided records forkline.approval.wait of step stepID's approval,
// decided at.
func (t *telemetry) decided(ctx context.Context, st *replay.State, stepID string, at time.Time, decision string) {
	a, ok := st.Approval(stepID)
	if !ok || a.RequestedTime.IsZero() {
		return
	}
	t.approvalWait.Record(ctx, seconds(at.Sub(a.RequestedTime)), metric.WithAttributes(attrDecision.String(decision)))
}

// seconds is d in seconds, never negative (clocks of two hosts may
// disagree).
func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// observeBacklog observes forkline.executions.backlog: the store's
// executions not ended, by status, listed once (WithMeterProvider says
// what that costs). A closed log observes nothing.
func (k *Kernel) observeBacklog(ctx context.Context, o metric.Observer, g metric.Int64ObservableGauge) error {
	if k.log == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, backlogTimeout)
	defer cancel()
	statuses := []eventlog.Status{eventlog.StatusPending, eventlog.StatusRunning, eventlog.StatusWaiting}
	counts := make([]int64, len(statuses))
	for info, err := range k.log.List(ctx, eventlog.Filter{Status: statuses}) {
		if errors.Is(err, eventlog.ErrClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sdk: forkline.executions.backlog: %w", err)
		}
		if i := slices.Index(statuses, info.Status); i >= 0 {
			counts[i]++
		}
	}
	for i, st := range statuses {
		o.ObserveInt64(g, counts[i], metric.WithAttributes(attrStatus.String(st.String())))
	}
	return nil
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
// tracing). start is stepStart's when the step's body ran (its duration
// is recorded), zero when none did.
func (t *telemetry) stepEnded(span trace.Span, kind eventlog.StepKind, outcome string, err error, start time.Time) {
	if t.meter != nil {
		t.steps.Add(context.Background(), 1, t.stepAttrOpts(kind, outcome)...)
		if !start.IsZero() {
			t.stepDuration.Record(context.Background(), time.Since(start).Seconds(), t.stepRecOpts(kind, outcome)...)
		}
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
