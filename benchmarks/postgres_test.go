package benchmarks

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
)

// TestHarnessPostgresShort runs scenario 8 at CI sizes against the test
// server: its four rows, each with a positive figure (8w, the wake, with
// an absolute target and no baseline).
func TestHarnessPostgresShort(t *testing.T) {
	url := pgtest.URL(t)
	r, err := Run(context.Background(), Config{Short: true, Duration: 50 * time.Millisecond, Run: regexp.MustCompile("^8$"), Postgres: url})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range r.Rows {
		got = append(got, row.ID)
		if row.Forkline.Value <= 0 || (row.ID != "8w") != (row.Baseline != nil) || row.Baseline != nil && row.Baseline.Value <= 0 {
			t.Errorf("row %s: figures %+v, %+v", row.ID, row.Forkline, row.Baseline)
		}
	}
	if fmt.Sprint(got) != "[8a 8b 8c 8w]" {
		t.Fatalf("rows %v, want 8a 8b 8c 8w", got)
	}
}

// BenchmarkPostgresAppend stands for a kernel writing each call's outcome
// to the shared log (scenario 8): one event per synced append through
// pgstore, and system=insert one autocommitted single-row INSERT of the
// same record.
func BenchmarkPostgresAppend(b *testing.B) {
	ctx := context.Background()
	url := pgtest.URL(b)
	rec, err := appendRecord()
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range []int{1, benchSizes().AppendWriters} {
		for _, system := range []string{"forkline", "insert"} {
			b.Run(fmt.Sprintf("system=%s/writers=%d", system, w), func(b *testing.B) {
				pb, err := openPGBench(ctx, url)
				if err != nil {
					b.Fatal(err)
				}
				defer pb.Close()
				st, err := pb.store(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				var step func(int) error
				switch system {
				case "forkline":
					a, err := newPGAppender(ctx, st, workersFor(w))
					if err != nil {
						b.Fatal(err)
					}
					step = func(k int) error { return a.append(ctx, k) }
				case "insert":
					a := pb.rawAppender(rec, workersFor(w))
					step = func(k int) error { return a.append(ctx, k) }
				}
				var n atomic.Int64
				writers(b, w, func(k int) error { n.Add(1); return step(k) })
				perSecond(b, float64(n.Load()), "events/s")
			})
		}
	}
}

// BenchmarkPostgresWake stands for a runtime of several processes on one
// Postgres (row 8w): the latency from an Approve in one store to the next
// dispatch.started of the approved execution in another, whose Serve
// polls every 30 s, so only LISTEN/NOTIFY wakes it.
func BenchmarkPostgresWake(b *testing.B) {
	ctx := context.Background()
	b.Run("event=approve", func(b *testing.B) {
		pb, err := openPGBench(ctx, pgtest.URL(b))
		if err != nil {
			b.Fatal(err)
		}
		defer pb.Close()
		kA, kB, stop, err := newPGWakePair(ctx, pb)
		if err != nil {
			b.Fatal(err)
		}
		defer stop()
		var total float64
		for b.Loop() {
			ms, err := pgWakeOnce(ctx, kA, kB)
			if err != nil {
				b.Fatal(err)
			}
			total += ms
		}
		b.ReportMetric(total/float64(b.N), "ms/wake")
	})
}

// BenchmarkPostgresFork stands for a user forking a long execution kept in
// Postgres (scenario 8): at seq 10 and at the history's last seq.
func BenchmarkPostgresFork(b *testing.B) {
	ctx := context.Background()
	pb, err := openPGBench(ctx, pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pb.Close()
	build, err := pb.store(ctx, pgstore.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	n := benchSizes().HistoryEvents
	id, err := buildHistory(ctx, build, n)
	build.Close()
	if err != nil {
		b.Fatal(err)
	}
	st, err := pb.store(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, at := range []uint64{uint64(benchSizes().ForkNear), uint64(n)} {
		b.Run(fmt.Sprintf("at=%d", at), func(b *testing.B) {
			o := forkOn(ctx, st, id, at)
			for b.Loop() {
				if _, _, err := o(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
