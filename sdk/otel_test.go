package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/sdk"
)

// otelRig records a kernel's spans and metrics in memory.
type otelRig struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	opts   []sdk.Option
}

func newOtelRig() *otelRig {
	r := &otelRig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.opts = []sdk.Option{sdk.WithTracerProvider(r.tp), sdk.WithMeterProvider(mp)}
	return r
}

// tree describes the ended spans as "name" for roots and "parent > name"
// for children, with a step's kind and target, in the order they ended.
func (r *otelRig) tree() []string {
	spans := r.spans.Ended()
	names := map[trace.SpanID]string{}
	for _, s := range spans {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	var out []string
	for _, s := range spans {
		d := s.Name()
		if s.Name() == "forkline.step" {
			d += fmt.Sprintf(" %s %s", attr(s, "forkline.step.kind"), attr(s, "forkline.step.target"))
		}
		if s.Name() == "forkline.capture" {
			d += " " + attr(s, "reason")
		}
		if p := s.Parent(); p.IsValid() {
			d = names[p.SpanID()] + " > " + d
		}
		out = append(out, d)
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// checkExecution checks that every ended span names execution id.
func (r *otelRig) checkExecution(t *testing.T, id eventlog.ID) {
	t.Helper()
	spans := r.spans.Ended()
	if len(spans) == 0 {
		t.Fatal("no spans ended")
	}
	for _, s := range spans {
		if got := attr(s, "forkline.execution.id"); got != id.String() {
			t.Errorf("span %s: forkline.execution.id %q, want %s", s.Name(), got, id)
		}
	}
}

// stepSpans describes the step spans as "kind target stepID attempt idem".
func (r *otelRig) stepSpans() []string {
	var out []string
	for _, s := range r.spans.Ended() {
		if s.Name() == "forkline.step" {
			out = append(out, fmt.Sprintf("%s %s %s %s %s", attr(s, "forkline.step.kind"), attr(s, "forkline.step.target"),
				attr(s, "forkline.step.id"), attr(s, "forkline.step.attempt"), attr(s, "forkline.step.idempotency")))
		}
	}
	return out
}

// startedAfter describes the step.started events after seq like stepSpans.
func startedAfter(evs []eventlog.Event, seq uint64) []string {
	var out []string
	for _, ev := range evs {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && ev.Seq > seq {
			out = append(out, fmt.Sprintf("%s %s %s %d %s", p.StepKind, p.Target, p.StepID, p.Attempt, p.Idempotency))
		}
	}
	return out
}

// metrics sums every counter and histogram count by name and attributes:
// "forkline.steps{kind=tool,outcome=succeeded}" -> 11; a gauge's value is
// its last observation.
func (r *otelRig) metrics(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	name := func(m string, set attribute.Set) string {
		if set.Len() == 0 {
			return m
		}
		return m + "{" + set.Encoded(attribute.DefaultEncoder()) + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[name(m.Name, p.Attributes)] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[name(m.Name, p.Attributes)] += int64(p.Count)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[name(m.Name, p.Attributes)] = p.Value
				}
			}
		}
	}
	return out
}

// count returns how many of names equal want.
func count(names []string, want string) int {
	n := 0
	for _, s := range names {
		if s == want {
			n++
		}
	}
	return n
}

// DESIGN §13: the span tree of a coder run — one forkline.dispatch, one
// forkline.step per live step (with its StepID, kind, target, attempt,
// idempotency) and one forkline.capture per checkpoint, under the dispatch.
func TestOtelCoderRun(t *testing.T) {
	ctx := context.Background()
	o := newOtelRig()
	rig := newCoderRig(t)
	k := newKernel(t, newStore(t), rig.register, o.opts...)
	id, err := k.Start(ctx, "coder", coder.Input{Task: coderTask})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	if d := cmp.Diff(startedAfter(evs, 0), o.stepSpans()); d != "" {
		t.Fatalf("step spans differ from the step.started events (-events +spans):\n%s", d)
	}
	tree := o.tree()
	if tree[len(tree)-1] != "forkline.dispatch" || count(tree, "forkline.dispatch") != 1 {
		t.Fatalf("want one root forkline.dispatch, ended last; got %v", tree)
	}
	for _, want := range []struct {
		span string
		n    int
	}{
		{"forkline.dispatch > forkline.step llm " + coder.ScriptedName, 12},
		{"forkline.dispatch > forkline.step tool write_file", 8},
		{"forkline.dispatch > forkline.step tool read_file", 3},
		{"forkline.dispatch > forkline.capture baseline", 1},
		{"forkline.dispatch > forkline.capture steps", 1},
		{"forkline.dispatch > forkline.capture completion", 1},
	} {
		if got := count(tree, want.span); got != want.n {
			t.Errorf("%d spans %q, want %d", got, want.span, want.n)
		}
	}
	if len(tree) != 1+23+3 {
		t.Errorf("%d spans, want 27: %v", len(tree), tree)
	}
	// Every span names the execution: the dispatch's, its steps' and its
	// captures' (the attribute is made once per dispatch and shared).
	o.checkExecution(t, id)
	want := map[string]int64{
		"forkline.steps{kind=llm,outcome=succeeded}":                    12,
		"forkline.steps{kind=tool,outcome=succeeded}":                   11,
		"forkline.captures{outcome=captured,reason=baseline}":           1,
		"forkline.captures{outcome=captured,reason=steps}":              1,
		"forkline.captures{outcome=captured,reason=completion}":         1,
		"forkline.capture.duration{outcome=captured,reason=baseline}":   1,
		"forkline.capture.duration{outcome=captured,reason=steps}":      1,
		"forkline.capture.duration{outcome=captured,reason=completion}": 1,
		"forkline.executions.started":                                   1,
		"forkline.executions.ended{outcome=completed}":                  1,
		"forkline.execution.first_dispatch.delay":                       1,
		"forkline.step.duration{kind=llm,outcome=succeeded}":            12,
		"forkline.step.duration{kind=tool,outcome=succeeded}":           11,
		"forkline.executions.backlog{status=pending}":                   0,
		"forkline.executions.backlog{status=running}":                   0,
		"forkline.executions.backlog{status=waiting}":                   0,
	}
	if d := cmp.Diff(want, o.metrics(t)); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}

	// Running the completed execution again runs nothing: no span.
	n := len(o.spans.Ended())
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	if m := len(o.spans.Ended()); m != n {
		t.Errorf("Run of a completed execution made %d spans", m-n)
	}
	// Nor does it count the execution's end again.
	if d := cmp.Diff(want, o.metrics(t)); d != "" {
		t.Errorf("metrics after a Run of the completed execution (-want +got):\n%s", d)
	}
}

// DESIGN §13: a kernel with only a tracer traces its captures (each span
// names the checkpoint the capture made, as resource.captured records it),
// and one with only a meter measures them: either provider alone is
// enough.
func TestOtelOneProvider(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, opts ...sdk.Option) []eventlog.Event {
		t.Helper()
		k := newKernel(t, newStore(t), newCoderRig(t).register, opts...)
		id, err := k.Start(ctx, "coder", coder.Input{Task: coderTask})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, id); err != nil {
			t.Fatal(err)
		}
		return events(t, k, id)
	}
	t.Run("tracer", func(t *testing.T) {
		spans := tracetest.NewSpanRecorder()
		evs := run(t, sdk.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))))
		want := map[string]string{} // reason → ref
		for _, ev := range evs {
			if p, ok := ev.Data.(*eventlog.ResourceCaptured); ok {
				want[string(p.Reason)] = p.Ref
			}
		}
		got := map[string]string{}
		for _, s := range spans.Ended() {
			if s.Name() == "forkline.capture" {
				got[attr(s, "reason")] = attr(s, "forkline.checkpoint.ref")
			}
		}
		if len(want) != 3 || !cmp.Equal(got, want) {
			t.Errorf("capture spans' refs by reason %v, want the recorded %v", got, want)
		}
	})
	t.Run("meter", func(t *testing.T) {
		o := &otelRig{reader: sdkmetric.NewManualReader()}
		run(t, sdk.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))))
		m := o.metrics(t)
		for _, reason := range []string{"baseline", "steps", "completion"} {
			if n := m["forkline.captures{outcome=captured,reason="+reason+"}"]; n != 1 {
				t.Errorf("forkline.captures for %s: %d, want 1 (metrics %v)", reason, n, m)
			}
		}
	})
}

// DESIGN §13: a replay — a dispatch resuming after a crash — has step
// spans only for the steps that run live; the replayed ones are counted in
// forkline.steps.replayed, and the resumed execution is a takeover.
func TestOtelReplay(t *testing.T) {
	ctx := context.Background()
	rig := newCoderRig(t)
	store := newStore(t)
	crash := &crashLog{IndexedLog: store}
	crash.budget.Store(1 << 20)
	dying := newKernel(t, crash, rig.register)
	id, err := dying.Start(ctx, "coder", coder.Input{Task: coderTask})
	if err != nil {
		t.Fatal(err)
	}
	crash.budget.Store(20) // dies after the third write's step.started
	if _, err := dying.Run(ctx, id); !errors.Is(err, errCrash) {
		t.Fatalf("Run = %v, want the crash", err)
	}
	before := events(t, dying, id)
	terminal := 0
	for _, ev := range before {
		if ev.Kind() == eventlog.KindStepSucceeded {
			terminal++
		}
	}

	o := newOtelRig()
	k2 := newKernel(t, store, rig.register, o.opts...)
	if _, err := k2.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	after := events(t, k2, id)
	live := startedAfter(after, uint64(len(before)))
	if d := cmp.Diff(live, o.stepSpans()); d != "" {
		t.Fatalf("step spans differ from the live step.started events (-events +spans):\n%s", d)
	}
	if len(live) == 0 || len(live) >= 23 {
		t.Fatalf("%d live steps after the crash, want some but not all", len(live))
	}
	m := o.metrics(t)
	replayed := m["forkline.steps.replayed{kind=llm}"] + m["forkline.steps.replayed{kind=tool}"]
	if replayed != int64(terminal) {
		t.Errorf("forkline.steps.replayed = %d, want the %d steps recorded before the crash (%v)", replayed, terminal, m)
	}
	if m["forkline.lease.takeovers"] != 1 {
		t.Errorf("forkline.lease.takeovers = %d, want 1", m["forkline.lease.takeovers"])
	}
}

// DESIGN §13: a fork's dispatch restores its resource (forkline.restore)
// and has step spans only for the steps after the fork point.
func TestOtelFork(t *testing.T) {
	ctx := context.Background()
	rig := newCoderRig(t)
	store := newStore(t)
	k := newKernel(t, store, rig.register)
	id, err := k.Start(ctx, "coder", coder.Input{Task: coderTask})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	at := seqOf(t, events(t, k, id), "captured workspace steps gen=15", 1)

	o := newOtelRig()
	k2 := newKernel(t, store, rig.register, o.opts...)
	fid, err := k2.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k2.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	fevs := events(t, k2, fid)
	if d := cmp.Diff(startedAfter(fevs, at), o.stepSpans()); d != "" {
		t.Fatalf("fork step spans (-events +spans):\n%s", d)
	}
	tree := o.tree()
	if count(tree, "forkline.dispatch > forkline.restore") != 1 {
		t.Errorf("want one forkline.restore under the dispatch: %v", tree)
	}
	if count(tree, "forkline.step") != 0 || count(tree, "forkline.dispatch") != 1 {
		t.Errorf("want every step span under the one dispatch: %v", tree)
	}
	o.checkExecution(t, fid)
	m := o.metrics(t)
	if m["forkline.forks"] != 1 {
		t.Errorf("forkline.forks = %d, want 1", m["forkline.forks"])
	}
	if m["forkline.steps.replayed{kind=llm}"] == 0 || m["forkline.lease.takeovers"] != 0 {
		t.Errorf("metrics %v: want replayed LLM steps and no takeover", m)
	}
}

func TestOtelOptionsRefuseNil(t *testing.T) {
	if _, err := sdk.New(newStore(t), sdk.WithTracerProvider(nil)); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("WithTracerProvider(nil) = %v, want ErrInvalid", err)
	}
	if _, err := sdk.New(newStore(t), sdk.WithMeterProvider(nil)); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("WithMeterProvider(nil) = %v, want ErrInvalid", err)
	}
}

// DESIGN §13: forkline.capture.size (By) records, per capture of a driver
// that says what it stored (driver.Sizer), the bytes the capture added to
// the store: for the coder agent on dirfs, one point per capture reason,
// summing to exactly what the store's blobs and manifests take.
func TestOtelCaptureSize(t *testing.T) {
	ctx := context.Background()
	o := newOtelRig()
	store := filepath.Join(t.TempDir(), "store")
	srv := httptest.NewServer(coder.Script())
	t.Cleanup(srv.Close)
	m := coder.Model{Name: coder.ScriptedName, BaseURL: srv.URL + "/v1", APIKey: "test"}
	newDrv := func() driver.Driver[*dirfs.Workspace, dirfs.Binding] {
		return dirfs.New(dirfs.Config{Store: store, NoSync: true})
	}
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		if _, err := sdk.Register(k, "coder", coder.Handler(newDrv, m)); err != nil {
			t.Fatal(err)
		}
	}, o.opts...)
	id, err := k.Start(ctx, "coder", coder.Input{Task: coderTask})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	captures := 0
	for _, ev := range events(t, k, id) {
		if _, ok := ev.Data.(*eventlog.ResourceCaptured); ok {
			captures++
		}
	}
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var found bool
	var points, sum int64
	reasons := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != "forkline.capture.size" {
				continue
			}
			found = true
			if mt.Unit != "By" {
				t.Errorf("forkline.capture.size unit %q, want By", mt.Unit)
			}
			h, ok := mt.Data.(metricdata.Histogram[int64])
			if !ok {
				t.Fatalf("forkline.capture.size is a %T, want an int64 histogram", mt.Data)
			}
			for _, p := range h.DataPoints {
				r, _ := p.Attributes.Value("reason")
				reasons[r.AsString()] += p.Count
				points += int64(p.Count)
				sum += p.Sum
			}
		}
	}
	if !found {
		t.Fatal("no forkline.capture.size metric")
	}
	if want := map[string]uint64{"baseline": 1, "steps": 1, "completion": 1}; !cmp.Equal(reasons, want) || int(points) != captures {
		t.Errorf("capture.size points by reason %v (%d), want %v: one per resource.captured (%d)", reasons, points, want, captures)
	}
	var onDisk int64
	for _, sub := range []string{"blobs", "manifests"} {
		err := filepath.Walk(filepath.Join(store, sub), func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				onDisk += fi.Size()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if sum != onDisk || sum == 0 {
		t.Errorf("capture.size sums to %d bytes; the store's blobs and manifests take %d", sum, onDisk)
	}
}

// TestOtelParkIsNotAnError: a dispatch that parks (a Sleep past the park
// threshold) ends its forkline.dispatch span without an error status,
// with forkline.parked and a "parked" event; the lineage ends with
// dispatch.parked. A dispatch that fails is still an error span.
func TestOtelParkIsNotAnError(t *testing.T) {
	ctx := context.Background()
	r := newOtelRig()
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, fail bool) (int, error) {
			if fail {
				return 0, errors.New("boom")
			}
			return 0, sdk.Sleep(ctx, 1<<40)
		})
	}, r.opts...)
	id, _ := k.Start(ctx, "a", false)
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run: %v, want ErrWaiting", err)
	}
	evs := events(t, k, id)
	if _, ok := evs[len(evs)-1].Data.(*eventlog.DispatchParked); !ok {
		t.Fatalf("last event %s, want dispatch.parked", describe(evs[len(evs)-1]))
	}
	fid, _ := k.Start(ctx, "a", true)
	if _, err := k.Run(ctx, fid); err == nil {
		t.Fatal("the failing execution completed")
	}
	var parked, failed int
	for _, s := range r.spans.Ended() {
		if s.Name() != "forkline.dispatch" {
			continue
		}
		switch attr(s, "forkline.execution.id") {
		case id.String():
			parked++
			if s.Status().Code == codes.Error || attr(s, "forkline.parked") != "true" ||
				len(s.Events()) != 1 || s.Events()[0].Name != "parked" {
				t.Errorf("parked dispatch span: status %v, parked %q, events %v", s.Status(), attr(s, "forkline.parked"), s.Events())
			}
		case fid.String():
			failed++
			if s.Status().Code != codes.Error {
				t.Errorf("failed dispatch span status %v, want Error", s.Status())
			}
		}
	}
	if parked != 1 || failed != 1 {
		t.Fatalf("dispatch spans: %d parked, %d failed; want 1 each", parked, failed)
	}
}
