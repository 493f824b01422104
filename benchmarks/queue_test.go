package benchmarks

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/pgtest"
)

// BenchmarkQueueClaim stands for a worker claiming queued executions to
// run (scenario 12): one claim and release at a time, of an execution in a
// queue of concurrency 64 (queue=yes) or in none (queue=no), on Pebble
// (ClaimToRun) and on Postgres (the bulk claim of one).
func BenchmarkQueueClaim(b *testing.B) {
	ctx := context.Background()
	for _, queued := range []bool{true, false} {
		agent, name := queueBenchAgentFree, "no"
		if queued {
			agent, name = queueBenchAgentQueue, "yes"
		}
		b.Run("store=pebble/queue="+name, func(b *testing.B) {
			st, err := pebblestore.Open(filepath.Join(b.TempDir(), "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ids, err := queueFixture(ctx, st)
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				l, err := st.ClaimToRun(ctx, ids[agent][0][i%queueBenchPerWorker], "w", queueBenchTTL, "")
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Release(ctx, l); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("store=postgres/queue="+name, func(b *testing.B) {
			pb, err := openPGBench(ctx, pgtest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			defer pb.Close()
			st, err := pb.store(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := queueFixture(ctx, st); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				ls, err := st.ClaimRunnableVersion(ctx, "w", queueBenchTTL, []string{agent}, "", 1, time.Now())
				if err != nil || len(ls) != 1 {
					b.Fatalf("ClaimRunnableVersion = %d leases, %v", len(ls), err)
				}
				if err := st.Release(ctx, ls[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
