package benchmarks

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/workload"
	"github.com/forkline/forkline/sdk"
)

// The Go benchmarks measure the operations of the harness's scenarios one
// at a time, under names benchstat can compare. `go test -bench . ./benchmarks/`
// uses the sizes (building a 1,000,000-event history takes a while);
// with -short, the harness's short sizes. Every store is on the real disk
// (the system temporary folder).

// benchSizes returns the sizes for this run.
func benchSizes() Sizes { return sizesFor(testing.Short()) }

// shared holds fixtures that several benchmarks use, built on first use and
// removed by TestMain.
var shared struct {
	dir  string
	hist *historyFixture
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.hist != nil {
		shared.hist.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedHistory returns the coder-agent history of the run's size.
func sharedHistory(b *testing.B) *historyFixture {
	b.Helper()
	if shared.hist != nil {
		return shared.hist
	}
	if shared.dir == "" {
		dir, err := os.MkdirTemp("", "forkline-bench-")
		if err != nil {
			b.Fatal(err)
		}
		shared.dir = dir
	}
	h, err := openHistory(context.Background(), filepath.Join(shared.dir, "history"), benchSizes().HistoryEvents)
	if err != nil {
		b.Fatal(err)
	}
	shared.hist = h
	return h
}

// workersFor returns how many goroutines b.RunParallel starts for w
// workers: w rounded up to a multiple of GOMAXPROCS (w itself for one).
func workersFor(w int) int {
	if w == 1 {
		return 1
	}
	procs := runtime.GOMAXPROCS(0)
	return (w + procs - 1) / procs * procs
}

// writers runs step on workersFor(w) workers for the benchmark's
// iterations: a b.Loop for one, b.RunParallel otherwise. Each worker has
// its own index, below workersFor(w).
func writers(b *testing.B, w int, step func(worker int) error) {
	b.Helper()
	if w == 1 {
		for b.Loop() {
			if err := step(0); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(workersFor(w) / runtime.GOMAXPROCS(0))
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		k := int(next.Add(1) - 1)
		for pb.Next() {
			if err := step(k); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// perSecond reports units per second of the timed part.
func perSecond(b *testing.B, units float64, name string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(units/s, name)
	}
}

// BenchmarkDurableAppend stands for a kernel writing each call's outcome:
// one event per synced append, one writer or many on as many executions
// (scenario 1). system=pebble and system=sqlite write the same record with a
// synced Pebble Set and a SQLite insert in WAL mode with synchronous=FULL.
func BenchmarkDurableAppend(b *testing.B) {
	ctx := context.Background()
	for _, w := range []int{1, benchSizes().AppendWriters} {
		for _, system := range []string{"forkline", "pebble", "sqlite"} {
			b.Run(fmt.Sprintf("system=%s/writers=%d", system, w), func(b *testing.B) {
				s, err := openAppendStores(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var step func(int) error
				workers := workersFor(w)
				switch system {
				case "forkline":
					a, err := newForklineAppender(ctx, s.fl, workers)
					if err != nil {
						b.Fatal(err)
					}
					step = func(k int) error { return a.append(ctx, k) }
				case "pebble":
					a := newRawAppender(s.raw.db, s.rec, workers)
					step = a.append
				case "sqlite":
					a := newSQLiteAppender(s.sq, s.rec, workers)
					step = func(k int) error { return a.append(ctx, k) }
				}
				var n atomic.Int64
				writers(b, w, func(k int) error { n.Add(1); return step(k) })
				perSecond(b, float64(n.Load()), "events/s")
			})
		}
	}
}

// BenchmarkToolCall stands for an agent's tool calls running live on a
// kernel that syncs (scenario 2): call=safe_to_retry costs one fsync,
// call=at_most_once two; call=pebble_sync is one synced Pebble write of
// the call's step.succeeded record, the ceiling.
func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	for _, call := range []string{"safe_to_retry", "at_most_once"} {
		b.Run("call="+call, func(b *testing.B) {
			k, err := sdk.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer k.Close()
			var opts []sdk.CallOption
			if call == "at_most_once" {
				opts = append(opts, sdk.AtMostOnce())
			}
			tool := sdk.DefineTool("increment", func(ctx context.Context, i int) (int, error) { return i + 1, nil }, opts...)
			calls := 0
			_, err = sdk.Register(k, toolAgent, func(ctx context.Context, _ toolInput) (int, error) {
				for b.Loop() {
					if _, err := tool.Call(ctx, calls); err != nil {
						return 0, err
					}
					calls++
				}
				return calls, nil
			})
			if err != nil {
				b.Fatal(err)
			}
			id, err := k.Start(ctx, toolAgent, toolInput{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := k.Run(ctx, id); err != nil {
				b.Fatal(err)
			}
			perSecond(b, float64(calls), "calls/s")
		})
	}
	b.Run("call=pebble_sync", func(b *testing.B) {
		raw, err := openRaw(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer raw.Close()
		rec, err := toolRecord()
		if err != nil {
			b.Fatal(err)
		}
		a := newRawAppender(raw.db, rec, 1)
		n := 0
		for b.Loop() {
			if err := a.append(0); err != nil {
				b.Fatal(err)
			}
			n++
		}
		perSecond(b, float64(n), "writes/s")
	})
}

// BenchmarkReplay stands for resuming a long execution after a crash: Run
// of a fork at the last event of an execution whose every step is recorded
// replays the whole prefix (scenario 3). system=decode scans and decodes
// the same records from Pebble directly, the ceiling.
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	steps := benchSizes().ReplaySteps
	dir := b.TempDir()
	rk, err := openReplayKernel(ctx, filepath.Join(dir, "kernel"), steps)
	if err != nil {
		b.Fatal(err)
	}
	defer rk.Close()
	raw, err := openRaw(filepath.Join(dir, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.copyFrom(ctx, rk.st, rk.id); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("steps=%d/system=forkline", steps), func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			b.StopTimer()
			id, err := rk.fork(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := rk.run(ctx, id); err != nil {
				b.Fatal(err)
			}
			n++
		}
		perSecond(b, float64(n*steps), "steps/s")
		perSecond(b, float64(n)*float64(rk.head), "events/s")
	})
	b.Run(fmt.Sprintf("steps=%d/system=decode", steps), func(b *testing.B) {
		b.ReportAllocs()
		events := 0
		for b.Loop() {
			n, err := raw.scanDecode(rk.id)
			if err != nil {
				b.Fatal(err)
			}
			events += n
		}
		perSecond(b, float64(events)*float64(steps)/float64(rk.head), "steps/s")
		perSecond(b, float64(events), "events/s")
	})
}

// BenchmarkReplayMemory reports the peak live heap of Run replaying a long
// execution and the folds' own state, per event (scenario 3m). Its time is
// that of building and replaying the execution; the metrics are the point.
func BenchmarkReplayMemory(b *testing.B) {
	events := benchSizes().MemoryEvents
	b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
		var m memoryFigures
		for b.Loop() {
			var err error
			if m, err = measureMemory(context.Background(), b.TempDir(), events, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(m.peak)/float64(m.events), "peak-B/event")
		b.ReportMetric(float64(m.fold)/float64(m.events), "fold-B/event")
	})
}

// BenchmarkFork stands for a user forking a long execution (scenario 4):
// method=index is Fork (a plan from the checkpoint index and one synced
// write) early and at the last event; method=copy copies the prefix as
// most engines do.
func BenchmarkFork(b *testing.B) {
	ctx := context.Background()
	h := sharedHistory(b)
	for _, at := range []uint64{uint64(benchSizes().ForkNear), uint64(h.n)} {
		b.Run(fmt.Sprintf("method=index/at=%d", at), func(b *testing.B) {
			o := h.forkOp(ctx, at)
			for b.Loop() {
				if _, _, err := o(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run(fmt.Sprintf("method=copy/at=%d", h.n), func(b *testing.B) {
		o := h.copyOp(uint64(h.n))
		var took time.Duration
		n := 0
		for b.Loop() {
			_, t, err := o()
			if err != nil {
				b.Fatal(err)
			}
			took += t
			n++
		}
		b.ReportMetric(float64(took.Nanoseconds())/float64(n), "ns/copy")
	})
}

// BenchmarkCoverageFold stands for a timeline or fork picker loading a long
// history (scenario 5): coverage.FoldEvents over the store's Events, and
// system=decode the raw scan and decode of the same records.
func BenchmarkCoverageFold(b *testing.B) {
	ctx := context.Background()
	h := sharedHistory(b)
	b.Run(fmt.Sprintf("events=%d/system=forkline", h.n), func(b *testing.B) {
		b.ReportAllocs()
		o := h.foldOp(ctx)
		n := 0
		for b.Loop() {
			if _, _, err := o(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		perSecond(b, float64(n*h.n), "events/s")
	})
	b.Run(fmt.Sprintf("events=%d/system=decode", h.n), func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			c, err := h.raw.scanDecode(h.id)
			if err != nil {
				b.Fatal(err)
			}
			n += c
		}
		perSecond(b, float64(n), "events/s")
	})
}

// BenchmarkCoveragePoint stands for a fork picker scrubbing through a long
// history: Fold.Point at random seqs (scenario 5).
func BenchmarkCoveragePoint(b *testing.B) {
	h := sharedHistory(b)
	f, err := coverage.FoldEvents(h.st.Events(context.Background(), h.id, 1))
	if err != nil {
		b.Fatal(err)
	}
	seqs := pointSeqs(h.n)
	b.Run(fmt.Sprintf("events=%d", h.n), func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := f.Point(seqs[i%len(seqs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		perSecond(b, float64(i), "queries/s")
	})
}

// BenchmarkDirfs stands for a workspace resource of many files (scenario
// 6): op=capture checkpoints it after one file changed, op=restore creates
// a workspace from a checkpoint of it, op=copy copies it with os.CopyFS.
// The ns/op figures include the untimed edit or cleanup; ns/capture and the
// like do not.
func BenchmarkDirfs(b *testing.B) {
	ctx := context.Background()
	files := benchSizes().Files
	w, err := openWorkspace(ctx, b.TempDir(), files)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	for _, c := range []struct {
		op string
		o  op
	}{{"capture", w.captureOp(ctx)}, {"restore", w.restoreOp(ctx)}, {"copy", w.copyOp()}} {
		b.Run(fmt.Sprintf("files=%d/op=%s", files, c.op), func(b *testing.B) {
			var took time.Duration
			n := 0
			for b.Loop() {
				_, t, err := c.o()
				if err != nil {
					b.Fatal(err)
				}
				took += t
				n++
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(n), "ns/"+c.op)
		})
	}
}

// BenchmarkPeer stands for a durable workflow of N steps (scenario 7):
// engine=forkline runs it as an agent calling a tool N times,
// engine=go-workflows as a workflow of N activities on its SQLite backend;
// one workflow at a time or many.
func BenchmarkPeer(b *testing.B) {
	ctx := context.Background()
	sz := benchSizes()
	dir := b.TempDir()
	k, err := openPeerKernel(filepath.Join(dir, "forkline"))
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	g, err := openGoWorkflows(ctx, filepath.Join(dir, "go-workflows.sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	for _, c := range []int{1, sz.PeerConcurrent} {
		for _, engine := range []string{"forkline", "go-workflows"} {
			b.Run(fmt.Sprintf("engine=%s/concurrency=%d", engine, c), func(b *testing.B) {
				run := func(int) error { return runPeerKernel(ctx, k, sz.PeerSteps) }
				if engine == "go-workflows" {
					run = func(int) error { return g.run(ctx, sz.PeerSteps) }
				}
				var n atomic.Int64
				writers(b, c, func(k int) error { n.Add(1); return run(k) })
				perSecond(b, float64(n.Load())*float64(sz.PeerSteps), "steps/s")
			})
		}
	}
}

// BenchmarkDurability stands for scenario 15: scenario 7's workflow on
// Pebble under sdk.Durability(sdk.SyncAtEffects) (mode=sync_at_effects)
// and under the default (mode=sync_every_step), one workflow at a time or
// many. The modes differ in what a machine crash may re-run (see
// sdk.SyncAtEffects).
func BenchmarkDurability(b *testing.B) {
	ctx := context.Background()
	sz := benchSizes()
	dir := b.TempDir()
	kernels := map[sdk.DurabilityMode]*sdk.Kernel{}
	for _, mode := range []sdk.DurabilityMode{sdk.SyncAtEffects, sdk.SyncEveryStep} {
		k, err := openPeerKernel(filepath.Join(dir, mode.String()), sdk.Durability(mode))
		if err != nil {
			b.Fatal(err)
		}
		defer k.Close()
		kernels[mode] = k
	}
	for _, c := range []int{1, sz.PeerConcurrent} {
		for _, mode := range []sdk.DurabilityMode{sdk.SyncAtEffects, sdk.SyncEveryStep} {
			b.Run(fmt.Sprintf("store=pebble/mode=%s/concurrency=%d", mode, c), func(b *testing.B) {
				var n atomic.Int64
				writers(b, c, func(int) error { n.Add(1); return runPeerKernel(ctx, kernels[mode], sz.PeerSteps) })
				perSecond(b, float64(n.Load())*float64(sz.PeerSteps), "steps/s")
			})
		}
	}
}

// BenchmarkConversation stands for scenario 9: the LLM calls of one
// conversation of ConversationTurns turns appended with chunked values
// (values=chunked) and with whole records (values=whole); it reports
// calls/s and the bytes stored per unique byte of the conversation.
func BenchmarkConversation(b *testing.B) {
	ctx := context.Background()
	turns := benchSizes().ConversationTurns
	for _, values := range []string{"chunked", "whole"} {
		b.Run("values="+values, func(b *testing.B) {
			var opts []pebblestore.Option
			if values == "whole" {
				opts = append(opts, pebblestore.ChunkAbove(0))
			}
			st, err := pebblestore.Open(b.TempDir(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			e := &env{ctx: ctx}
			var calls int
			var took time.Duration
			var unique int
			for i := 0; b.Loop(); i++ {
				reqs, u := workload.Conversation(turns, uint64(i+1))
				d, err := appendConversation(e, st, reqs)
				if err != nil {
					b.Fatal(err)
				}
				calls, took, unique = calls+len(reqs), took+d, unique+u
			}
			stored, err := storedBytes(e, st)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(calls)/took.Seconds(), "calls/s")
			b.ReportMetric(stored/float64(unique), "stored/unique")
		})
	}
}

// BenchmarkStream times scenario 10's requests inside one handler: to the
// first byte (what=ttfb, row 10a) and the reads of a long reply's events
// after the first (what=event, row 10b; ns/op per event), through
// sdk.Transport and directly. Each op is one request.
func BenchmarkStream(b *testing.B) {
	for _, what := range []string{"ttfb", "event"} {
		for _, via := range []string{"transport", "direct"} {
			b.Run("what="+what+"/via="+via, func(b *testing.B) {
				sb, err := newStreamBench(context.Background(), b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer sb.closer()
				client := sb.direct
				if via == "transport" {
					client = &http.Client{Transport: sb.rt}
				}
				long := what == "event"
				if _, err := sdk.Register(sb.k, "bench", func(ctx context.Context, _ int) (int, error) {
					var total float64
					n := 0
					for b.Loop() {
						s, err := sb.measure(ctx, client, n, long)
						if err != nil {
							return 0, err
						}
						if long {
							total += s.rest / (streamChunks - 1)
						} else {
							total += s.first
						}
						n++
					}
					b.ReportMetric(total/float64(n), "µs/"+what)
					return 0, nil
				}); err != nil {
					b.Fatal(err)
				}
				id, err := sb.k.Start(context.Background(), "bench", 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sb.k.Run(context.Background(), id); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
