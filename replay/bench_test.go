package replay

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkFold stands for loading a long execution before a dispatch: the
// SDK folds the whole lineage (here a generated agent run, mostly tool,
// local and LLM steps with a checkpoint every few steps; fixed seed) before
// it runs the handler again. events=1000 is the baseline for scaling.
func BenchmarkFold(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			evs := generate(randChooser{rand.New(rand.NewPCG(1, uint64(n)))}, n, workload).events
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			folds := 0
			for b.Loop() {
				s, err := Fold(seqOf(evs))
				if err != nil || s.Head != uint64(n) {
					b.Fatalf("Fold: %v", err)
				}
				folds++
			}
			runtime.ReadMemStats(&after)
			events := float64(n) * float64(folds)
			b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/events, "allocs/event")
		})
	}
}
