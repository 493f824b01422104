package proptest

import (
	"context"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/sdk"
)

var coderInput = coder.Input{Task: "Build a tiny Go module that greets people."}

// BenchmarkCheckAgentCoder times CheckAgent on the coder agent of the
// reference page (issue 38 item 4: ≤ 10 s on 2 cores), every trial
// included: the run, a kill and resume after each event, a fork at each
// event. It reports the time of one check in seconds (s/check) and, as the
// baseline measured in the same run, its ratio to one uninterrupted run of
// the agent on the same fake model and driver (x-run).
func BenchmarkCheckAgentCoder(b *testing.B) {
	newKernel, drv := coderKernel(b)
	ctx := context.Background()
	var check, run time.Duration
	for b.Loop() {
		start := time.Now()
		if err := checkAgent(ctx, newKernel, "coder", coderInput, WithDiffer("workspace", drv)); err != nil {
			b.Fatal(err)
		}
		check += time.Since(start)
		start = time.Now()
		store, err := pebblestore.Open("", pebblestore.WithoutSync())
		if err != nil {
			b.Fatal(err)
		}
		k, err := newKernel(store, sdk.Strict())
		if err != nil {
			b.Fatal(err)
		}
		id, err := k.Start(ctx, "coder", coderInput)
		if err == nil {
			_, err = k.Run(ctx, id)
		}
		_ = k.Close()
		_ = store.Close()
		if err != nil {
			b.Fatal(err)
		}
		run += time.Since(start)
	}
	b.ReportMetric(check.Seconds()/float64(b.N), "s/check")
	b.ReportMetric(float64(check)/float64(run), "x-run")
}
