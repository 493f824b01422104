package sdk_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// Run-level telemetry (DESIGN §13, issue 38 item 9): trace context carried
// through the log, and the run-level metrics.

// traceparentOf is the W3C traceparent text of sc.
func traceparentOf(sc trace.SpanContext) string {
	return eventlog.TraceParent{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: byte(sc.TraceFlags())}.String()
}

// dispatchSpans returns the ended forkline.dispatch spans of execution id.
func (r *otelRig) dispatchSpans(id eventlog.ID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == "forkline.dispatch" && attr(s, "forkline.execution.id") == id.String() {
			out = append(out, s)
		}
	}
	return out
}

// checkLinks fails unless every span in spans (at least one) links to
// exactly want.
func checkLinks(t *testing.T, what string, spans []sdktrace.ReadOnlySpan, want trace.SpanContext) {
	t.Helper()
	if len(spans) == 0 {
		t.Fatalf("%s: no dispatch span", what)
	}
	for _, s := range spans {
		links := s.Links()
		if len(links) != 1 || links[0].SpanContext.TraceID() != want.TraceID() || links[0].SpanContext.SpanID() != want.SpanID() {
			t.Errorf("%s: dispatch span links %+v, want one to %s/%s", what, links, want.TraceID(), want.SpanID())
		}
	}
}

// createdTraceParent returns the TraceParent of id's run: of
// execution.created, or of the newest fork.created.
func createdTraceParent(t *testing.T, k *sdk.Kernel, id eventlog.ID) string {
	t.Helper()
	tp := ""
	for _, ev := range events(t, k, id) {
		switch p := ev.Data.(type) {
		case *eventlog.ExecutionCreated:
			tp = p.TraceParent
		case *eventlog.ForkCreated:
			tp = p.TraceParent
		}
	}
	return tp
}

// DESIGN §13: Start records the caller's span context in execution.created
// and the dispatch links to it; a child's execution.created records the
// parent's child step span and the child's dispatch links to it; a fork
// records its own caller's and links to that alone.
func TestOtelTraceContextLinks(t *testing.T) {
	ctx := context.Background()
	r := newOtelRig()
	var child *sdk.Agent[int, int]
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		child, _ = sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) { return 2 * n, nil })
		_, _ = sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
			return child.Call(ctx, n+1)
		})
	}, r.opts...)
	tracer := r.tp.Tracer("test")

	rctx, request := tracer.Start(ctx, "request")
	id, err := k.Start(rctx, "parent", 1)
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := createdTraceParent(t, k, id), traceparentOf(request.SpanContext()); got != want {
		t.Fatalf("execution.created TraceParent %q, want the caller's %q", got, want)
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "4" {
		t.Fatalf("output %s, want 4", res.Output)
	}
	checkLinks(t, "parent", r.dispatchSpans(id), request.SpanContext())

	kids, err := k.List(ctx, sdk.Filter{Caller: id})
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %v, %v; want one", kids, err)
	}
	var step sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == "forkline.step" && attr(s, "forkline.step.kind") == "child" {
			step = s
		}
	}
	if step == nil || attr(step, "forkline.execution.id") != id.String() {
		t.Fatalf("no child step span of the parent")
	}
	if got, want := createdTraceParent(t, k, kids[0].ID), traceparentOf(step.SpanContext()); got != want {
		t.Fatalf("child's execution.created TraceParent %q, want the parent's child step span %q", got, want)
	}
	// The child ran in the background: its dispatch span ends after the
	// child's terminal event, which the parent's wait saw.
	for i := 0; len(r.dispatchSpans(kids[0].ID)) == 0; i++ {
		if i == 5000 {
			t.Fatal("the child's dispatch span never ended")
		}
		time.Sleep(time.Millisecond)
	}
	checkLinks(t, "child", r.dispatchSpans(kids[0].ID), step.SpanContext())

	// A fork records its own caller's context, never the parent's.
	evs := events(t, k, id)
	fctx, forkReq := tracer.Start(ctx, "fork request")
	fid, err := k.Fork(fctx, id, uint64(len(evs)-1))
	forkReq.End()
	if err != nil {
		t.Fatal(err)
	}
	fevs := events(t, k, fid)
	fc, ok := fevs[len(evs)-1].Data.(*eventlog.ForkCreated)
	if !ok || fc.TraceParent != traceparentOf(forkReq.SpanContext()) {
		t.Fatalf("fork's event %s: want fork.created with TraceParent %q", describe(fevs[len(evs)-1]), traceparentOf(forkReq.SpanContext()))
	}
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	checkLinks(t, "fork", r.dispatchSpans(fid), forkReq.SpanContext())

	// StartByName records it too, for an agent another process registers.
	byName, err := k.StartByName(rctx, "elsewhere", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := createdTraceParent(t, k, byName), traceparentOf(request.SpanContext()); got != want {
		t.Errorf("StartByName's TraceParent %q, want %q", got, want)
	}

	// Without a span in ctx nothing is recorded, and the dispatch links
	// to nothing.
	plain, err := k.Start(ctx, "child", 5)
	if err != nil {
		t.Fatal(err)
	}
	if tp := createdTraceParent(t, k, plain); tp != "" {
		t.Errorf("Start without a span recorded TraceParent %q", tp)
	}
	if _, err := k.Run(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if s := r.dispatchSpans(plain); len(s) != 1 || len(s[0].Links()) != 0 {
		t.Errorf("dispatch spans of an execution started without a span: %d, links %v", len(s), s[0].Links())
	}
}

// A kernel without a tracer provider records no trace context, whatever
// its caller's context holds.
func TestOtelNoTracerRecordsNoTraceParent(t *testing.T) {
	ctx := context.Background()
	o := newOtelRig()
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) { return n, nil })
	}, sdk.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	sctx, span := o.tp.Tracer("test").Start(ctx, "request")
	defer span.End()
	id, err := k.Start(sctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if tp := createdTraceParent(t, k, id); tp != "" {
		t.Errorf("TraceParent %q recorded without a tracer provider", tp)
	}
}

// DESIGN §13: a dispatch that parks waiting for a child is no error: its
// span and the child step's span have no error status.
func TestOtelChildParkIsNotAnError(t *testing.T) {
	ctx := context.Background()
	r := newOtelRig()
	release := make(chan struct{})
	var child *sdk.Agent[int, int]
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		child, _ = sdk.Register(k, "child", func(ctx context.Context, n int) (int, error) {
			select {
			case <-release:
				return n, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		_, _ = sdk.Register(k, "parent", func(ctx context.Context, n int) (int, error) {
			return child.Call(ctx, n)
		})
	}, append(r.opts, sdk.ParkAfter(time.Millisecond))...)
	id, err := k.Start(ctx, "parent", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	evs := events(t, k, id)
	if p, ok := evs[len(evs)-1].Data.(*eventlog.DispatchParked); !ok || p.Reason != eventlog.ParkChild {
		t.Fatalf("last event %s, want dispatch.parked child", describe(evs[len(evs)-1]))
	}
	close(release)
	ds := r.dispatchSpans(id)
	if len(ds) != 1 || ds[0].Status().Code == codes.Error || attr(ds[0], "forkline.parked") != "true" {
		t.Fatalf("parked dispatch spans %d, status %v", len(ds), ds[0].Status())
	}
	steps := 0
	for _, s := range r.spans.Ended() {
		if s.Name() == "forkline.step" && attr(s, "forkline.execution.id") == id.String() {
			steps++
			if s.Status().Code == codes.Error {
				t.Errorf("parked child step span status %v, want no error", s.Status())
			}
		}
	}
	if steps != 1 {
		t.Fatalf("%d step spans of the parent, want the parked child step's", steps)
	}
	kids, err := k.List(ctx, sdk.Filter{Caller: id})
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %v, %v", kids, err)
	}
	if _, err := k.Wait(ctx, kids[0].ID); err != nil {
		t.Fatal(err)
	}
}

// DESIGN §13: forkline.executions.started and .ended by outcome, the
// backlog by status, first_dispatch.delay per run, approval.wait per
// decision and step.duration per live step, over a run with one
// completed, one failed and one cancelled execution, one waiting and two
// pending. A Run of an ended execution counts nothing again.
func TestOtelRunMetrics(t *testing.T) {
	ctx := context.Background()
	r := newOtelRig()
	var bodies, asked atomic.Int64
	register := func(k *sdk.Kernel) {
		approvalAgent(&bodies)(k)
		_, _ = sdk.Register(k, "f", func(ctx context.Context, n int) (int, error) { return 0, errors.New("boom") })
	}
	store := newStore(t)
	k := newKernel(t, store, register, append(r.opts, sdk.WithGate(countingGate(&asked)), sdk.ParkAfter(time.Millisecond))...)

	completed, _ := k.Start(ctx, "a", 3)
	if _, err := k.Run(ctx, completed); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting (approval)", err)
	}
	p := pendingStep(t, k, completed)
	if err := k.Approve(ctx, completed, p.StepID); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, completed); err != nil {
		t.Fatal(err)
	}
	failed, _ := k.Start(ctx, "f", 1)
	if _, err := k.Run(ctx, failed); err == nil {
		t.Fatal("f completed")
	}
	cancelled, _ := k.Start(ctx, "a", 4)
	if err := k.Cancel(ctx, cancelled, "no"); err != nil {
		t.Fatal(err)
	}
	waiting, _ := k.Start(ctx, "a", 5)
	if _, err := k.Run(ctx, waiting); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if _, err := k.Start(ctx, "a", 6); err != nil {
		t.Fatal(err)
	}
	// A keyed Start that finds its execution creates none.
	for range 2 {
		if _, err := k.Start(ctx, "f", 7, sdk.WithKey("once")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id   eventlog.ID
		last eventlog.Kind
	}{{completed, eventlog.KindExecutionCompleted}, {failed, eventlog.KindExecutionFailed}, {cancelled, eventlog.KindExecutionCancelled}} {
		evs := events(t, k, c.id)
		if evs[len(evs)-1].Kind() != c.last {
			t.Fatalf("%s ends %s, want %s", c.id, evs[len(evs)-1].Kind(), c.last)
		}
	}
	want := map[string]int64{
		"forkline.executions.started":                         6,
		"forkline.executions.ended{outcome=completed}":        1,
		"forkline.executions.ended{outcome=failed}":           1,
		"forkline.executions.ended{outcome=cancelled}":        1,
		"forkline.executions.backlog{status=pending}":         2,
		"forkline.executions.backlog{status=running}":         0,
		"forkline.executions.backlog{status=waiting}":         1,
		"forkline.execution.first_dispatch.delay":             3, // completed, failed, waiting: each run's first only
		"forkline.approval.wait{decision=granted}":            1,
		"forkline.step.duration{kind=tool,outcome=succeeded}": 1,
		"forkline.steps{kind=tool,outcome=succeeded}":         1,
	}
	got := r.metrics(t)
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s = %d, want %d", name, got[name], n)
		}
	}
	// Running the ended executions again counts nothing.
	for _, id := range []eventlog.ID{completed, failed, cancelled} {
		_, _ = k.Run(ctx, id)
	}
	if d := cmp.Diff(got, r.metrics(t)); d != "" {
		t.Errorf("metrics after Runs of ended executions (-before +after):\n%s", d)
	}
	// The parked dispatches (the approval waits) have no error status.
	for _, id := range []eventlog.ID{completed, waiting} {
		for _, s := range r.dispatchSpans(id) {
			if s.Status().Code == codes.Error {
				t.Errorf("dispatch span of %s: status %v", id, s.Status())
			}
		}
	}
}
