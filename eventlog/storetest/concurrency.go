package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestConcurrency checks expectedHead under concurrent writers on s (DESIGN
// §3, §7, §8.7): of appends racing at one head exactly one wins and the
// others wrap ErrConflict and write nothing; writers that retry on
// conflict all get their events in, each exactly once, in a dense lineage
// whose index and status are those of its fold; readers meanwhile see a
// dense prefix; writers of different executions appending at once (which
// a store may commit together, DESIGN §21) each get the log, index and
// status that their appends one at a time give.
func TestConcurrency(t T, s eventlog.IndexedLog) {
	t.Helper()
	testRacingAppends(t, s)
	testRetryingWriters(t, s)
	testManyExecutions(t, s)
}

func testManyExecutions(t T, s eventlog.IndexedLog) {
	ctx := t.Context()
	const writers, each = 8, 10
	ids := make([]eventlog.ID, writers)
	for w := range ids {
		ids[w] = createFor(t, s, "many")
	}
	step := func(w, i int) []eventlog.Event {
		id := fmt.Sprintf("m%d-%d", w, i)
		return []eventlog.Event{
			{Time: at(w*100 + i), Data: &eventlog.StepStarted{StepID: id, StepKind: "tool", Target: "t",
				Resources: []string{"m"}, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
			{Time: at(w*100 + i), Data: &eventlog.StepSucceeded{StepID: id, Result: fmt.Appendf(nil, `%d`, w*100+i)}},
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			bound := eventlog.Event{Time: at(w), Data: &eventlog.ResourceBound{Key: "m", DriverID: "d", Binding: []byte(`{}`), EverySteps: 1}}
			head, err := s.Append(ctx, ids[w], 1, bound)
			for i := 0; i < each && err == nil; i++ {
				var h uint64
				if h, err = s.Append(ctx, ids[w], head, step(w, i)...); err == nil && h != head+2 {
					err = fmt.Errorf("head %d after an append at %d, want %d", h, head, head+2)
				}
				head = h
			}
			if err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for w, id := range ids {
		evs, err := collectAll(t, s.Events(ctx, id, 1))
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		if len(evs) != 2+2*each {
			t.Fatalf("execution %d: %d events, want %d", w, len(evs), 2+2*each)
		}
		fold := eventlog.NewIndexState(nil)
		var status eventlog.StatusState
		for i, ev := range evs {
			if ev.Seq != uint64(i+1) {
				t.Fatalf("execution %d: seq %d at position %d", w, ev.Seq, i)
			}
			if i >= 2 {
				want := step(w, (i-2)/2)[i%2]
				if ev.Kind() != want.Kind() || !ev.Time.Equal(want.Time) || !reflect.DeepEqual(ev.Data, want.Data) {
					t.Fatalf("execution %d: event %d is %s %+v, want %s %+v", w, ev.Seq, ev.Kind(), ev.Data, want.Kind(), want.Data)
				}
			}
			if _, err := fold.Apply(ev); err != nil {
				t.Fatalf("execution %d: the fold refuses event %d: %v", w, ev.Seq, err)
			}
			status.Apply(ev)
		}
		got, err := s.ResourceStates(ctx, id, uint64(len(evs)))
		if err != nil {
			t.Fatalf("ResourceStates: %v", err)
		}
		if d := diff(fold.States(), got); d != "" {
			t.Fatalf("execution %d: ResourceStates at the head (-fold +store):\n%s", w, d)
		}
		info, err := s.Info(ctx, id)
		if err != nil || info.Head != uint64(len(evs)) || info.Status != status.Status || !info.Updated.Equal(status.Updated) {
			t.Fatalf("execution %d: Info = %+v, %v; want head %d, status %s, updated %v", w, info, err, len(evs), status.Status, status.Updated)
		}
	}
}

func createFor(t T, s eventlog.Log, agent string) eventlog.ID {
	t.Helper()
	id, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: agent, Input: []byte(`{}`)}, at(0))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return id
}

func testRacingAppends(t T, s eventlog.IndexedLog) {
	ctx := t.Context()
	id := createFor(t, s, "racing")
	const rounds, racers = 40, 3
	for round := range rounds {
		head := uint64(round + 1)
		var wg sync.WaitGroup
		errs := make([]error, racers)
		ready := make(chan struct{})
		for w := range racers {
			wg.Go(func() {
				ev := eventlog.Event{Time: at(round), Data: &eventlog.StepDenied{StepID: fmt.Sprintf("r%d-w%d", round, w), StepKind: "tool"}}
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
				t.Fatalf("round %d: a losing append failed with %v, want ErrConflict", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d of %d appends at head %d won (errors %v), want exactly 1", round, wins, racers, head, errs)
		}
	}
	evs, err := collectAll(t, s.Events(ctx, id, 1))
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(evs) != rounds+1 {
		t.Fatalf("%d events after %d rounds, want %d", len(evs), rounds, rounds+1)
	}
	for i, ev := range evs[1:] {
		d, ok := ev.Data.(*eventlog.StepDenied)
		if !ok || ev.Seq != uint64(i+2) || !slices.ContainsFunc([]int{0, 1, 2}, func(w int) bool { return d.StepID == fmt.Sprintf("r%d-w%d", i, w) }) {
			t.Fatalf("event %d is %s %+v, not a winner of round %d", ev.Seq, ev.Kind(), ev.Data, i)
		}
	}
}

func testRetryingWriters(t T, s eventlog.IndexedLog) {
	ctx := t.Context()
	id := createFor(t, s, "writers")
	bound := eventlog.Event{Time: at(1), Data: &eventlog.ResourceBound{Key: "w", DriverID: "d", Binding: []byte(`{}`), EverySteps: 1}}
	if _, err := s.Append(ctx, id, 1, bound); err != nil {
		t.Fatalf("Append: %v", err)
	}
	const writers, each = 6, 12
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				step := fmt.Sprintf("w%d-%d", w, i)
				for {
					head, err := s.Head(ctx, id)
					if err != nil {
						t.Errorf("Head: %v", err)
						return
					}
					// A step and its success in one append: the index sees both.
					_, err = s.Append(ctx, id, head,
						eventlog.Event{Time: at(2), Data: &eventlog.StepStarted{StepID: step, StepKind: "tool", Target: "t",
							Resources: []string{"w"}, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
						eventlog.Event{Time: at(3), Data: &eventlog.StepSucceeded{StepID: step, Result: []byte(`1`)}})
					if err == nil {
						break
					}
					if !errors.Is(err, eventlog.ErrConflict) {
						t.Errorf("writer %d: %v", w, err)
						return
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var seq uint64
			for ev, err := range s.Events(ctx, id, 1) {
				if err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				if seq++; ev.Seq != seq {
					t.Errorf("reader saw seq %d at position %d", ev.Seq, seq)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	if t.Failed() {
		return
	}
	evs, err := collectAll(t, s.Events(ctx, id, 1))
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(evs) != 2+2*writers*each {
		t.Fatalf("%d events, want %d", len(evs), 2+2*writers*each)
	}
	seen := map[string]int{}
	fold := eventlog.NewIndexState(nil)
	var status eventlog.StatusState
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("seq %d at position %d", ev.Seq, i)
		}
		if st, ok := ev.Data.(*eventlog.StepStarted); ok {
			seen[st.StepID]++
			if next, ok := evs[i+1].Data.(*eventlog.StepSucceeded); !ok || next.StepID != st.StepID {
				t.Fatalf("step.started %s at %d is not followed by its success: one append was split", st.StepID, ev.Seq)
			}
		}
		if _, err := fold.Apply(ev); err != nil {
			t.Fatalf("the fold refuses event %d: %v", ev.Seq, err)
		}
		status.Apply(ev)
	}
	for w := range writers {
		for i := range each {
			if n := seen[fmt.Sprintf("w%d-%d", w, i)]; n != 1 {
				t.Fatalf("step w%d-%d is in the lineage %d times, want once", w, i, n)
			}
		}
	}
	got, err := s.ResourceStates(ctx, id, uint64(len(evs)))
	if err != nil {
		t.Fatalf("ResourceStates: %v", err)
	}
	if d := diff(fold.States(), got); d != "" {
		t.Fatalf("ResourceStates at the head (-fold +store):\n%s", d)
	}
	info, err := s.Info(ctx, id)
	if err != nil || info.Head != uint64(len(evs)) || info.Status != status.Status {
		t.Fatalf("Info = %+v, %v; want head %d, status %s", info, err, len(evs), status.Status)
	}
}

// TestClose checks Close on s (which it closes): operations racing with
// Close either succeed or fail with ErrClosed; after Close every method,
// Close too, fails with an error wrapping ErrClosed.
func TestClose(t T, s eventlog.IndexedLog) {
	t.Helper()
	ctx := t.Context()
	id := createFor(t, s, "closing")
	var wg sync.WaitGroup
	appended := make(chan struct{}, 1)
	for w := range 3 {
		wg.Go(func() {
			// Bounded, so that a store that never closes fails below
			// rather than hanging here.
			for i := range 2000 {
				head, err := s.Head(ctx, id)
				if err == nil {
					_, err = s.Append(ctx, id, head, eventlog.Event{Time: at(i), Data: &eventlog.DispatchStarted{Dispatch: uint64(w*10000 + i + 1)}})
				}
				if err == nil {
					select {
					case appended <- struct{}{}:
					default:
					}
				}
				if errors.Is(err, eventlog.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, eventlog.ErrConflict) {
					t.Errorf("writer %d during Close: %v, want success, ErrConflict or ErrClosed", w, err)
					return
				}
			}
		})
	}
	<-appended
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, eventlog.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", what, err)
		}
	}
	_, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "a"}, at(0))
	closed("Create", err)
	_, err = s.Append(ctx, id, 1, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1}})
	closed("Append", err)
	_, err = s.AppendUnsynced(ctx, id, 1, eventlog.Event{Data: &eventlog.DispatchStarted{Dispatch: 1}})
	closed("AppendUnsynced", err)
	_, err = s.Head(ctx, id)
	closed("Head", err)
	_, err = s.Info(ctx, id)
	closed("Info", err)
	_, err = collectAll(t, s.Events(ctx, id, 1))
	closed("Events", err)
	_, err = collectAll(t, s.List(ctx, eventlog.Filter{}))
	closed("List", err)
	_, err = s.Fork(ctx, id, 1, nil, at(0))
	closed("Fork", err)
	_, err = s.ResourceStates(ctx, id, 1)
	closed("ResourceStates", err)
	_, err = collectAll(t, s.ResourceHistory(ctx, id, "k", 0))
	closed("ResourceHistory", err)
	closed("a second Close", s.Close())
}
