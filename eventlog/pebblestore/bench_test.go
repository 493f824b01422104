package pebblestore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/vmihailenco/msgpack/v5"
)

// benchSeed fixes every random choice of the benchmarks.
const benchSeed = 20261202

// benchEvents returns n events of a tool-calling agent without resources: a
// step.started with 16..256 bytes of arguments, then its step.succeeded with
// 32..1024 bytes of result, and a dispatch.started now and then. No event
// changes the checkpoint index, so a store writes one key per event, as the
// baseline does.
func benchEvents(n int, rng *rand.Rand) []eventlog.Event {
	const alphabet = "abcdefghijklmnopqrstuvwxyz {}\":,0123456789"
	text := func(lo, hi int) []byte {
		b := make([]byte, lo+rng.IntN(hi-lo+1))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return b
	}
	evs := make([]eventlog.Event, 0, n)
	for i := 0; len(evs) < n; i++ {
		tm := t0.Add(0)
		step := fmt.Sprintf("%032x", rng.Uint64())
		switch {
		case i%50 == 0:
			evs = append(evs, eventlog.Event{Time: tm, Data: &eventlog.DispatchStarted{Dispatch: uint64(i/50 + 1)}})
		case i%2 == 1:
			evs = append(evs, eventlog.Event{Time: tm, Data: &eventlog.StepStarted{StepID: step, StepKind: eventlog.StepTool,
				Target: "write_file", Args: text(16, 256), Idempotency: eventlog.SafeToRetry, Attempt: 1}})
		default:
			evs = append(evs, eventlog.Event{Time: tm, Data: &eventlog.StepSucceeded{StepID: step, Result: text(32, 1024)}})
		}
	}
	return evs
}

func benchRecords(evs []eventlog.Event) [][]byte {
	recs := make([][]byte, len(evs))
	for i, ev := range evs {
		ev.Seq = uint64(i + 2)
		recs[i] = mustRecord(ev)
	}
	return recs
}

func mustRecord(ev eventlog.Event) []byte {
	rec, err := eventlog.AppendRecord(nil, eventlog.ID{}, ev) // the raw baseline only writes the bytes
	if err != nil {
		panic(err)
	}
	return rec
}

type benchLogger struct{}

func (benchLogger) Infof(string, ...any)  {}
func (benchLogger) Errorf(string, ...any) {}
func (benchLogger) Fatalf(f string, args ...any) {
	panic(fmt.Sprintf(f, args...))
}

// BenchmarkAppend measures synced appends of one event each, on disk:
//
//   - writers=1 stands for one execution running live tool calls one after
//     another, each outcome durable before the caller sees it (DESIGN §4:
//     one fsync per live safe_to_retry call);
//   - writers=64 stands for a kernel running 64 executions at once, each
//     appending to its own log; Pebble groups their commits into shared
//     fsyncs.
//
// Each has a baseline=pebble sibling that writes the same bytes (the same
// records, one 25-byte key per event) with raw pebble Set+Sync in the same
// run, so store=forkline / baseline=pebble is forkline's own cost.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			evs := benchEvents(4096, rand.New(rand.NewPCG(benchSeed, uint64(writers))))
			recs := benchRecords(evs)
			b.Run("store=forkline", func(b *testing.B) {
				s, err := pebblestore.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ids := make([]eventlog.ID, writers)
				for w := range ids {
					if ids[w], err = s.Create(b.Context(), &eventlog.ExecutionCreated{Agent: "bench"}, t0); err != nil {
						b.Fatal(err)
					}
				}
				runWriters(b, writers, func(w int, i uint64) error {
					_, err := s.Append(b.Context(), ids[w], i+1, evs[i%uint64(len(evs))])
					return err
				})
			})
			b.Run("baseline=pebble", func(b *testing.B) {
				db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: benchLogger{}})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				ids := make([]eventlog.ID, writers)
				for w := range ids {
					ids[w] = eventlog.NewID()
				}
				runWriters(b, writers, func(w int, i uint64) error {
					return db.Set(pebblestore.EventKey(ids[w], i+2), recs[i%uint64(len(recs))], pebble.Sync)
				})
			})
		})
	}
}

// runWriters runs the b.Loop with writers goroutines: each iteration hands
// one append to a free writer, so ns/op is the time per event of the whole
// group. write(w, i) appends writer w's i-th event (i from 0).
func runWriters(b *testing.B, writers int, write func(w int, i uint64) error) {
	b.ReportAllocs()
	work := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			var i uint64
			for range work {
				if errs[w] == nil {
					errs[w] = write(w, i)
				}
				i++
			}
		})
	}
	for b.Loop() {
		work <- struct{}{}
	}
	b.StartTimer() // the appends handed out last belong to the measurement
	close(work)
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

const lineageEvents = 1_000_000

// readLineage is a lineage of a million events: a root with 600,000 events
// and a fork of it at 500,000 with 500,000 of its own, so that a read
// crosses a segment boundary as every fork's does.
type readLineage struct {
	s          *pebblestore.Store
	root, fork eventlog.ID
	at         uint64
}

// buildReadLineage writes the lineage without syncing, in appends of 1,000
// events.
func buildReadLineage(dir string) (*readLineage, error) {
	s, err := pebblestore.Open(dir, pebblestore.WithoutSync())
	if err != nil {
		return nil, err
	}
	f := &readLineage{s: s, at: 500_000}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(benchSeed, 7))
	fill := func(id eventlog.ID, head uint64, n int) error {
		for n > 0 {
			batch := benchEvents(min(n, 1000), rng)
			if _, err := s.Append(ctx, id, head, batch...); err != nil {
				return err
			}
			head += uint64(len(batch))
			n -= len(batch)
		}
		return nil
	}
	if f.root, err = s.Create(ctx, &eventlog.ExecutionCreated{Agent: "bench"}, t0); err == nil {
		err = fill(f.root, 1, 600_000-1)
	}
	if err == nil {
		f.fork, err = s.Fork(ctx, f.root, f.at, nil, t0)
	}
	if err == nil {
		err = fill(f.fork, f.at+1, lineageEvents-int(f.at)-1)
	}
	// Settle the LSM (flush and compact the events) so that background
	// compactions of the build do not run during the measurement; a log
	// read on a later dispatch finds it settled too.
	if err == nil {
		err = pebblestore.DB(s).Compact(ctx, []byte{'e'}, []byte{'e' + 1}, true)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return f, nil
}

// BenchmarkReadLineage measures reading a whole lineage of a million events
// (store=forkline: Events, which checks each record's checksum, decodes and
// validates it into a fresh event the caller keeps), against baseline=pebble:
// a raw Pebble iterator over the same keys that msgpack-decodes each payload
// with one reused decoder. It stands for replaying a long-running
// execution on its next dispatch, or a fork of it, and for `forkline
// inspect` of such an execution.
func BenchmarkReadLineage(b *testing.B) {
	b.Run(fmt.Sprintf("events=%d", lineageEvents), func(b *testing.B) {
		f, err := buildReadLineage(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer f.s.Close()
		b.Run("store=forkline", func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				n = 0
				for _, err := range f.s.Events(b.Context(), f.fork, 1) {
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
			}
			if n != lineageEvents {
				b.Fatalf("read %d events", n)
			}
			b.ReportMetric(float64(b.N*lineageEvents)/b.Elapsed().Seconds(), "events/s")
		})
		b.Run("baseline=pebble", func(b *testing.B) {
			b.ReportAllocs()
			db := pebblestore.DB(f.s)
			dec := msgpack.NewDecoder(nil)
			r := bytes.NewReader(nil)
			// One reused payload value per kind the lineage holds.
			payloads := map[eventlog.Kind]any{
				eventlog.KindExecutionCreated: new(eventlog.ExecutionCreated),
				eventlog.KindDispatchStarted:  new(eventlog.DispatchStarted),
				eventlog.KindStepStarted:      new(eventlog.StepStarted),
				eventlog.KindStepSucceeded:    new(eventlog.StepSucceeded),
				eventlog.KindForkCreated:      new(eventlog.ForkCreated),
			}
			ranges := []struct {
				id     eventlog.ID
				lo, hi uint64
			}{{f.root, 1, f.at}, {f.fork, f.at + 1, lineageEvents}}
			var n int
			for b.Loop() {
				n = 0
				for _, rg := range ranges {
					it, err := db.NewIter(&pebble.IterOptions{
						LowerBound: pebblestore.EventKey(rg.id, rg.lo), UpperBound: pebblestore.EventKey(rg.id, rg.hi+1)})
					if err != nil {
						b.Fatal(err)
					}
					for ok := it.First(); ok; ok = it.Next() {
						v := it.Value()
						if binary.BigEndian.Uint64(it.Key()[17:]) == 0 || len(v) < 14 {
							b.Fatal("bad key or value")
						}
						r.Reset(v[14:])
						dec.Reset(r)
						if err := dec.Decode(payloads[eventlog.Kind(v[1])]); err != nil {
							b.Fatal(err)
						}
						n++
					}
					if err := it.Close(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if n != lineageEvents {
				b.Fatalf("read %d events", n)
			}
			b.ReportMetric(float64(b.N*lineageEvents)/b.Elapsed().Seconds(), "events/s")
		})
	})
}
