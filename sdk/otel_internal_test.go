package sdk

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/forkline/forkline/eventlog"
)

// stepSet returns the attribute set that opts (one step count's options)
// carry.
func stepSet(t *testing.T, opts []metric.AddOption) attribute.Set {
	t.Helper()
	if len(opts) != 1 {
		t.Fatalf("%d options, want 1", len(opts))
	}
	return metric.NewAddConfig(opts).Attributes()
}

// The step counts' attribute options are made once: for every kind and
// outcome the kernel records in WithMeterProvider's table, for any other
// on first use and then cached, each carrying kind and outcome (kind alone
// for a replayed step's "").
func TestStepAttrOpts(t *testing.T) {
	k := &Kernel{}
	if err := WithMeterProvider(sdkmetric.NewMeterProvider())(k); err != nil {
		t.Fatal(err)
	}
	tel := &k.tel
	if len(tel.stepAttrs) != len(stepKinds)*len(stepOutcomes) {
		t.Fatalf("table of %d options, want %d", len(tel.stepAttrs), len(stepKinds)*len(stepOutcomes))
	}
	for _, c := range []struct {
		kind    eventlog.StepKind
		outcome string
		want    string
	}{
		{eventlog.StepTool, "succeeded", "kind=tool,outcome=succeeded"},
		{eventlog.StepLLM, "", "kind=llm"},
		{eventlog.StepChild, "unrecorded", "kind=child,outcome=unrecorded"},
		{eventlog.StepKind("other"), "denied", "kind=other,outcome=denied"}, // not in the table
		{eventlog.StepTool, "exploded", "kind=tool,outcome=exploded"},       // not in the table
	} {
		first := tel.stepAttrOpts(c.kind, c.outcome)
		set := stepSet(t, first)
		if got := set.Encoded(attribute.DefaultEncoder()); got != c.want {
			t.Errorf("%s %q: attributes %s, want %s", c.kind, c.outcome, got, c.want)
		}
		// Made once: the second call returns the same slice.
		if again := tel.stepAttrOpts(c.kind, c.outcome); &again[0] != &first[0] {
			t.Errorf("%s %q: options made again", c.kind, c.outcome)
		}
	}
	if n := len(tel.mu.moreAttrs); n != 2 {
		t.Errorf("%d options cached outside the table, want the 2 it lacks", n)
	}
}
