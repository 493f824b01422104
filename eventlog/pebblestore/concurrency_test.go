package pebblestore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// Of two appends racing with the same expected head, exactly one wins and
// the other gets ErrConflict and writes nothing. Repeated so that both
// orders and true overlaps happen; run with -race. DESIGN §7 (ErrConflict),
// §8.7.
func TestRacingAppendsOneWins(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	id := create(t, s, "coder")
	const rounds = 300
	for round := range rounds {
		head := uint64(round + 1)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		ready := make(chan struct{})
		for w := range 2 {
			wg.Go(func() {
				ev := eventlog.Event{Time: at(round), Data: &eventlog.StepDenied{
					StepID: fmt.Sprintf("r%d-w%d", round, w), StepKind: "tool"}}
				<-ready
				_, errs[w] = s.Append(ctx, id, head, ev)
			})
		}
		close(ready)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, eventlog.ErrConflict):
				t.Fatalf("round %d: losing append failed with %v, want ErrConflict", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d appends won (errors %v)", round, wins, errs)
		}
	}
	evs := events(t, s, id, 1)
	if len(evs) != rounds+1 {
		t.Fatalf("%d events after %d rounds, want %d", len(evs), rounds, rounds+1)
	}
	for i, ev := range evs[1:] {
		d := ev.Data.(*eventlog.StepDenied)
		if d.StepID != fmt.Sprintf("r%d-w0", i) && d.StepID != fmt.Sprintf("r%d-w1", i) {
			t.Fatalf("event %d is %s, not a winner of round %d", ev.Seq, d.StepID, i)
		}
	}
}

// Writers that retry on conflict all get their events in, each exactly
// once, in a dense sequence; readers see a dense prefix meanwhile. DESIGN
// §3 (seqs are dense), §8.7.
func TestConcurrentAppendersRetry(t *testing.T) {
	s := openMem(t)
	ctx := t.Context()
	id := create(t, s, "coder")
	appendAll(t, s, id, boundEv("w", "", false))
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				for {
					head, err := s.Head(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					step := fmt.Sprintf("w%d-%d", w, i)
					// A step and its success in one append: the index sees both.
					_, err = s.Append(ctx, id, head, started(step, "tool", "w"), succeeded(step))
					if err == nil {
						break
					}
					if !errors.Is(err, eventlog.ErrConflict) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				evs, err := collect(t, s.Events(ctx, id, 1))
				if err != nil {
					t.Error(err)
					return
				}
				for i, ev := range evs {
					if ev.Seq != uint64(i+1) {
						t.Errorf("reader saw seq %d at position %d", ev.Seq, i)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	evs := events(t, s, id, 1)
	if want := 2 + writers*each*2; len(evs) != want {
		t.Fatalf("%d events, want %d", len(evs), want)
	}
	seen := map[string]int{}
	for _, ev := range evs[2:] {
		if p, ok := ev.Data.(*eventlog.StepStarted); ok {
			seen[p.StepID]++
		}
	}
	for w := range writers {
		for i := range each {
			if n := seen[fmt.Sprintf("w%d-%d", w, i)]; n != 1 {
				t.Errorf("step w%d-%d written %d times", w, i, n)
			}
		}
	}
	// The index followed every append: generation 1 from the binding, one
	// more per step, nothing in flight.
	st, err := s.ResourceStates(ctx, id, uint64(len(evs)))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Generation != 1+writers*each || len(st[0].InFlight) != 0 {
		t.Errorf("index after concurrent appends: %+v", st)
	}
}

// Appends to different executions proceed concurrently, forks and creates
// among them; afterwards every event is present. On disk with synced
// appends, so that Pebble's commit pipeline groups them.
func TestConcurrentExecutions(t *testing.T) {
	s := openDir(t, t.TempDir())
	ctx := t.Context()
	const execs, each = 16, 25
	ids := make([]eventlog.ID, execs)
	forks := make([]eventlog.ID, execs)
	var wg sync.WaitGroup
	for e := range execs {
		wg.Go(func() {
			id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: fmt.Sprint(e)}, t0)
			if err != nil {
				t.Error(err)
				return
			}
			ids[e] = id
			for i := range each {
				if _, err := s.Append(ctx, id, uint64(i+1), dispatch(uint64(i+1))); err != nil {
					t.Error(err)
					return
				}
				if i == each/2 {
					if forks[e], err = s.Fork(ctx, id, uint64(i+2), nil, t0); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for e, id := range ids {
		evs := events(t, s, id, 1)
		if len(evs) != each+1 {
			t.Errorf("execution %d has %d events, want %d", e, len(evs), each+1)
		}
		for i, ev := range evs[1:] {
			if ev.Data.(*eventlog.DispatchStarted).Dispatch != uint64(i+1) {
				t.Errorf("execution %d event %d is %+v", e, ev.Seq, ev.Data)
			}
		}
		fevs := events(t, s, forks[e], 1)
		if len(fevs) != each/2+3 || diff(evs[:each/2+2], fevs[:each/2+2]) != "" {
			t.Errorf("fork of execution %d reads %d events, not its parent's prefix", e, len(fevs))
		}
	}
	if n := countList(t, s); n != 2*execs {
		t.Errorf("List has %d executions, want %d", n, 2*execs)
	}
}

// Close waits for operations in progress and then refuses new ones; none
// of them fails with anything but ErrClosed.
func TestCloseDuringAppends(t *testing.T) {
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id := create(t, s, "coder")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				head, err := s.Head(ctx, id)
				if err == nil {
					_, err = s.Append(ctx, id, head, dispatch(uint64(w*1000+i+1)))
				}
				if errors.Is(err, eventlog.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, eventlog.ErrConflict) {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	for head := uint64(0); head < 50; {
		if head, err = s.Head(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
}
