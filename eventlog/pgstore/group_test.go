package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
)

// flushes records the size of every flush of a store, and holds the first
// flush until the appends of a group have queued behind it.
type flushes struct {
	mu    sync.Mutex
	sizes []int
	hold  chan struct{} // closed when the first flush may go on
	held  chan struct{} // closed when the first flush is held
	once  sync.Once
	// onGroup, when set, runs in every flush of more than one append,
	// with the flush's context.
	onGroup func(ctx context.Context, pid uint32)
}

func watchFlushes(s *pgstore.Store) *flushes {
	f := &flushes{hold: make(chan struct{}), held: make(chan struct{})}
	pgstore.SetFlushHook(s, func(ctx context.Context, pid uint32, n int) {
		f.mu.Lock()
		f.sizes = append(f.sizes, n)
		on := f.onGroup
		f.mu.Unlock()
		f.once.Do(func() {
			close(f.held)
			<-f.hold
		})
		if n > 1 && on != nil {
			on(ctx, pid)
		}
	})
	return f
}

func (f *flushes) got() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sizes)
}

// grouped runs first, and once its flush is held, rest concurrently; when
// all of rest have queued behind the held flush, one after the other in
// their order, it lets the flush go on and waits for all. The appends of
// rest then share the next flush, which rest[0] leads.
func grouped(t *testing.T, s *pgstore.Store, f *flushes, first func(), rest ...func()) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(first)
	<-f.held
	for i, r := range rest {
		wg.Go(r)
		for pgstore.QueuedAppends(s) < i+1 {
			time.Sleep(time.Millisecond) // waiting for a state, not asserting a time
		}
	}
	close(f.hold)
	wg.Wait()
}

// stepEvents is the events of one step of execution i, attempt k.
func stepEvents(i, k int) []eventlog.Event {
	id := fmt.Sprintf("x%d-%d", i, k)
	at := t0.Add(time.Duration(i*100+k) * time.Second)
	return []eventlog.Event{
		{Time: at, Data: &eventlog.StepStarted{StepID: id, StepKind: "tool", Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		{Time: at, Data: &eventlog.StepSucceeded{StepID: id, Result: fmt.Appendf(nil, `%d`, i*100+k)}},
	}
}

// events returns every event of id.
func events(t *testing.T, s *pgstore.Store, id eventlog.ID) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	for ev, err := range s.Events(t.Context(), id, 1) {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

// Concurrent appends of n executions, grouped, write the logs, statuses
// and heads that the same appends one at a time write.
func TestGroupCommitConcurrentAppends(t *testing.T) {
	const n, rounds = 8, 5
	s := openStore(t)
	one := openStore(t, pgstore.WithGroupCommit(false))
	f := watchFlushes(s)
	ctx := t.Context()
	ids := make([]eventlog.ID, n)
	for i := range ids {
		ids[i] = create(t, s, "a")
	}
	errs := make([]error, n)
	step := func(i, k int) func() {
		return func() {
			want := uint64(1 + 2*k)
			h, err := s.Append(ctx, ids[i], want, stepEvents(i, k)...)
			if err == nil && h != want+2 {
				err = fmt.Errorf("head %d, want %d", h, want+2)
			}
			if err != nil && errs[i] == nil {
				errs[i] = fmt.Errorf("execution %d, step %d: %w", i, k, err)
			}
		}
	}
	rest := make([]func(), 0, n-1)
	for i := 1; i < n; i++ {
		rest = append(rest, step(i, 0))
	}
	grouped(t, s, f, step(0, 0), rest...)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for k := 1; k < rounds; k++ {
				step(i, k)()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sizes := f.got()
	if len(sizes) < 2 || sizes[0] != 1 || sizes[1] != n-1 {
		t.Fatalf("flush sizes %v: want a lone flush, then the %d queued appends in one", sizes, n-1)
	}
	flushes, flushed := pgstore.GroupFlushes(s)
	if flushed != n*rounds || flushes != uint64(len(sizes)) || flushes >= flushed {
		t.Fatalf("%d flushes of %d appends; want %d appends in fewer flushes", flushes, flushed, n*rounds)
	}
	for i := range n {
		id := create(t, one, "a")
		for k := range rounds {
			if _, err := one.Append(ctx, id, uint64(1+2*k), stepEvents(i, k)...); err != nil {
				t.Fatal(err)
			}
		}
		got, want := events(t, s, ids[i]), events(t, one, id)
		if len(got) != 1+2*rounds || len(got) != len(want) {
			t.Fatalf("execution %d: %d events, want %d", i, len(got), len(want))
		}
		for j := range got {
			got[j].Data, want[j].Data = normalCreated(got[j].Data), normalCreated(want[j].Data)
			if got[j].Seq != want[j].Seq || !got[j].Time.Equal(want[j].Time) || !reflect.DeepEqual(got[j].Data, want[j].Data) {
				t.Fatalf("execution %d, event %d: %+v, want %+v", i, j, got[j], want[j])
			}
		}
		gi, err := s.Info(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		wi, err := one.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if gi.Head != wi.Head || gi.Status != wi.Status || !gi.Updated.Equal(wi.Updated) {
			t.Fatalf("execution %d: info %+v, want %+v", i, gi, wi)
		}
	}
	if fl, ap := pgstore.GroupFlushes(one); fl != ap {
		t.Fatalf("with group commit off: %d flushes of %d appends", fl, ap)
	}
}

// normalCreated drops what differs between two stores' execution.created
// of the same agent and input: nothing else may differ.
func normalCreated(p eventlog.Payload) eventlog.Payload {
	if c, ok := p.(*eventlog.ExecutionCreated); ok {
		cp := *c
		return &cp
	}
	return p
}

// A failed head or lease check in a group fails only its own append, with
// the error a lone append gets; the group's other appends are written.
// Two appends of one execution at one head in a group: one is written, the
// other fails ErrConflict.
func TestGroupCommitOneFailsAlone(t *testing.T) {
	ss, _ := openShared(t, 2, "")
	s, other := ss[0], ss[1]
	f := watchFlushes(s)
	ctx := t.Context()
	ev := func(d uint64) eventlog.Event {
		return eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: d}}
	}
	lead, good1, stale, leased, good2, twice := create(t, s, "a"), create(t, s, "a"), create(t, s, "a"), create(t, s, "a"), create(t, s, "a"), create(t, s, "a")
	// stale: another process writes, so s's fold (head 1) is behind.
	appendEvs(t, other, stale, 1, &eventlog.DispatchStarted{Dispatch: 9})
	// leased: s claims, the lease passes to the other process.
	la, err := s.Claim(ctx, leased, "s", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	lb, err := other.Claim(ctx, leased, "other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tried0, _ := pgstore.FastAppends(s)
	res := make([]error, 6)
	app := func(i int, c context.Context, id eventlog.ID, d uint64) func() {
		return func() { _, res[i] = s.Append(c, id, 1, ev(d)) }
	}
	grouped(t, s, f, app(0, ctx, lead, 1),
		app(1, ctx, good1, 1),
		app(2, ctx, stale, 1),
		app(3, eventlog.WithEpoch(ctx, la.Epoch), leased, 1),
		app(4, ctx, good2, 1),
		app(5, ctx, twice, 5),
	)
	if sizes := f.got(); !slices.Equal(sizes[:2], []int{1, 5}) {
		t.Fatalf("flush sizes %v, want [1 5 …]", sizes)
	}
	if tried, _ := pgstore.FastAppends(s); tried != tried0+6 {
		t.Fatalf("%d appends tried in one round trip, want 6", tried-tried0)
	}
	for i, err := range res {
		switch i {
		case 2:
			if !errors.Is(err, eventlog.ErrConflict) {
				t.Fatalf("append at a stale head: %v, want ErrConflict", err)
			}
		case 3:
			if !errors.Is(err, eventlog.ErrLeaseLost) {
				t.Fatalf("append under a superseded epoch: %v, want ErrLeaseLost", err)
			}
		default:
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
	for _, c := range []struct {
		id   eventlog.ID
		want []string
	}{
		{lead, []string{"1:execution.created", "2:dispatch.started"}},
		{good1, []string{"1:execution.created", "2:dispatch.started"}},
		{stale, []string{"1:execution.created", "2:dispatch.started"}},
		{leased, []string{"1:execution.created"}},
		{good2, []string{"1:execution.created", "2:dispatch.started"}},
		{twice, []string{"1:execution.created", "2:dispatch.started"}},
	} {
		if got := kinds(t, s, c.id); !slices.Equal(got, c.want) {
			t.Fatalf("execution %s: events %v, want %v", c.id, got, c.want)
		}
	}
	if got := events(t, s, stale)[1].Data.(*eventlog.DispatchStarted).Dispatch; got != 9 {
		t.Fatalf("stale execution: dispatch %d written, want the other process's 9", got)
	}

	// Two appends of twice at head 2 and one of good1, in one group.
	f2 := watchFlushes(s)
	res = make([]error, 4)
	heads := make([]uint64, 4)
	app2 := func(i int, id eventlog.ID, d uint64) func() {
		return func() { heads[i], res[i] = s.Append(ctx, id, 2, ev(d)) }
	}
	grouped(t, s, f2, app2(0, lead, 2), app2(1, twice, 21), app2(2, twice, 22), app2(3, good1, 2))
	if sizes := f2.got(); !slices.Equal(sizes[:2], []int{1, 3}) {
		t.Fatalf("flush sizes %v, want [1 3 …]", sizes)
	}
	if res[0] != nil || res[3] != nil || heads[0] != 3 || heads[3] != 3 {
		t.Fatalf("appends beside the conflict: heads %v, errors %v", heads, res)
	}
	won := 1
	if res[1] != nil {
		won = 2
	}
	if lost := 3 - won; res[won] != nil || heads[won] != 3 || !errors.Is(res[lost], eventlog.ErrConflict) {
		t.Fatalf("two appends of one execution at one head: heads %v, errors %v; want one written, one ErrConflict", heads, res)
	}
	evs := events(t, s, twice)
	if len(evs) != 3 || evs[2].Data.(*eventlog.DispatchStarted).Dispatch != uint64(20+won) {
		t.Fatalf("execution twice: %d events, the last %+v; want the winner's dispatch %d at seq 3", len(evs), evs[len(evs)-1].Data, 20+won)
	}
	// The folds cached by the group are right: the next appends, on the
	// one-round-trip path, write and fold from them.
	if h, err := s.Append(ctx, twice, 3, ev(30)); err != nil || h != 4 {
		t.Fatalf("append after the group: head %d, %v", h, err)
	}
	if _, err := other.Append(eventlog.WithEpoch(ctx, lb.Epoch), leased, 1, ev(7)); err != nil {
		t.Fatalf("the lease holder's append: %v", err)
	}
}

// When a group's transaction fails (its connection is killed, or every
// member's context is cancelled), every append in it fails and none is
// written; the store keeps working after. One member's cancellation does
// not fail the others.
func TestGroupCommitTransactionFails(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	ev := func(d uint64) eventlog.Event {
		return eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: d}}
	}
	const n = 4
	ids := make([]eventlog.ID, n)
	for i := range ids {
		ids[i] = create(t, s, "a")
	}
	res := make([]error, n)
	app := func(c context.Context, i int, head uint64) func() {
		return func() { _, res[i] = s.Append(c, ids[i], head, ev(head)) }
	}
	check := func(what string, heads ...int) {
		t.Helper()
		for i, id := range ids {
			info, err := s.Info(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(kinds(t, s, id)); info.Head != uint64(heads[i]) || got != heads[i] {
				t.Fatalf("%s: execution %d: head %d, %d events; want %d", what, i, info.Head, got, heads[i])
			}
		}
	}

	// The connection of the group's flush is terminated before it sends.
	f := watchFlushes(s)
	f.onGroup = func(_ context.Context, pid uint32) { exec(t, `SELECT pg_terminate_backend($1, 60000)`, int32(pid)) }
	grouped(t, s, f, app(ctx, 0, 1), app(ctx, 1, 1), app(ctx, 2, 1), app(ctx, 3, 1))
	if sizes := f.got(); !slices.Equal(sizes, []int{1, 3}) {
		t.Fatalf("flush sizes %v, want [1 3]", sizes)
	}
	if res[0] != nil {
		t.Fatalf("the lone append: %v", res[0])
	}
	for i := 1; i < n; i++ {
		if res[i] == nil || errors.Is(res[i], eventlog.ErrConflict) {
			t.Fatalf("append %d of the killed flush: %v, want the connection's error", i, res[i])
		}
	}
	check("killed flush", 2, 1, 1, 1)

	// The store works after: the same appends at the same heads.
	for i := 1; i < n; i++ {
		if h, err := s.Append(ctx, ids[i], 1, ev(1)); err != nil || h != 2 {
			t.Fatalf("append %d after the killed flush: head %d, %v", i, h, err)
		}
	}
	check("after", 2, 2, 2, 2)

	// Every member's context is cancelled in the flush: all fail.
	c, cancel := context.WithCancel(ctx)
	f = watchFlushes(s)
	f.onGroup = func(flush context.Context, _ uint32) {
		cancel()
		<-flush.Done()
	}
	grouped(t, s, f, app(ctx, 0, 2), app(c, 1, 2), app(c, 2, 2), app(c, 3, 2))
	if res[0] != nil {
		t.Fatalf("the lone append: %v", res[0])
	}
	for i := 1; i < n; i++ {
		if !errors.Is(res[i], context.Canceled) {
			t.Fatalf("append %d of the cancelled flush: %v, want context.Canceled", i, res[i])
		}
	}
	check("cancelled flush", 3, 2, 2, 2)

	// The context of the group's leader is cancelled in its flush: the
	// others do not fail, and it may.
	c, cancel = context.WithCancel(ctx)
	f = watchFlushes(s)
	f.onGroup = func(context.Context, uint32) { cancel() }
	grouped(t, s, f, app(ctx, 0, 3), app(c, 1, 2), app(ctx, 2, 2), app(ctx, 3, 2))
	if res[0] != nil || res[2] != nil || res[3] != nil {
		t.Fatalf("appends beside a cancelled one: %v", res)
	}
	want := 3
	if res[1] != nil {
		want = 2
	}
	check("one cancelled", 4, want, 3, 3)
}

// A lone append is flushed at once and alone: sequential appends take one
// flush each, and none waits for another append.
func TestGroupCommitLoneAppend(t *testing.T) {
	s := openStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a lone append that waited would fail here
	defer cancel()
	id := create(t, s, "a")
	for k := range 3 {
		if h, err := s.Append(ctx, id, uint64(1+k), eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: uint64(k + 1)}}); err != nil || h != uint64(2+k) {
			t.Fatalf("append %d: head %d, %v", k, h, err)
		}
		if fl, ap := pgstore.GroupFlushes(s); fl != uint64(k+1) || ap != uint64(k+1) {
			t.Fatalf("after %d appends: %d flushes of %d appends", k+1, fl, ap)
		}
	}
	if got := kinds(t, s, id); len(got) != 4 {
		t.Fatalf("events %v", got)
	}
}

// Each append of a group NOTIFYs its own execution at the group's commit
// (with NotifyEveryAppend, so that every append notifies).
func TestGroupCommitNotifies(t *testing.T) {
	url, schema := pgtest.Schema(t)
	open := func(opts ...pgstore.Option) *pgstore.Store {
		s, err := pgstore.Open(t.Context(), url, append([]pgstore.Option{pgstore.WithSchema(schema)}, opts...)...)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s, listener := open(pgstore.NotifyEveryAppend()), open()
	ctx := t.Context()
	ch := listening(t, ctx, listener)
	const n = 4
	ids := make([]eventlog.ID, n)
	for i := range ids {
		ids[i] = create(t, s, "a")
	}
	f := watchFlushes(s)
	res := make([]error, n)
	app := func(i int) func() {
		return func() {
			_, res[i] = s.Append(ctx, ids[i], 1, eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: 1}})
		}
	}
	grouped(t, s, f, app(0), app(1), app(2), app(3))
	if sizes := f.got(); !slices.Equal(sizes, []int{1, 3}) {
		t.Fatalf("flush sizes %v, want [1 3]", sizes)
	}
	for i, err := range res {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	heard := map[eventlog.ID]bool{}
	deadline := time.After(5 * time.Second)
	for len(heard) < n {
		select {
		case id := <-ch:
			if !slices.Contains(ids, id) {
				t.Fatalf("change of %s, not one of the appended executions", id)
			}
			heard[id] = true
		case <-deadline:
			t.Fatalf("heard changes of %d of the %d executions", len(heard), n)
		}
	}
}

// A statement of a group that fails with an error (here a trigger refuses
// one execution's event) rolls the group back; each append is then flushed
// alone, so only that one fails and the others are written.
func TestGroupCommitStatementError(t *testing.T) {
	ss, sc := openShared(t, 1, "")
	s := ss[0]
	ctx := t.Context()
	const n = 4
	ids := make([]eventlog.ID, n)
	for i := range ids {
		ids[i] = create(t, s, "a")
	}
	exec(t, `CREATE FUNCTION `+sc+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.execution = '\x`+fmt.Sprintf("%x", ids[2][:])+`'::bytea THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$`)
	exec(t, `CREATE TRIGGER refuse BEFORE INSERT ON `+sc+`.events FOR EACH ROW EXECUTE FUNCTION `+sc+`.refuse()`)
	f := watchFlushes(s)
	res := make([]error, n)
	app := func(i int) func() {
		return func() {
			_, res[i] = s.Append(ctx, ids[i], 1, eventlog.Event{Time: t0, Data: &eventlog.DispatchStarted{Dispatch: 1}})
		}
	}
	grouped(t, s, f, app(0), app(1), app(2), app(3))
	if sizes := f.got(); !slices.Equal(sizes, []int{1, 3, 1, 1, 1}) {
		t.Fatalf("flush sizes %v, want [1 3 1 1 1]: the group, then each alone", sizes)
	}
	for i, err := range res {
		if (i == 2) != (err != nil) {
			t.Fatalf("appends %v: want only append 2 refused", res)
		}
	}
	if !strings.Contains(res[2].Error(), "refused by the test") {
		t.Fatalf("the refused append: %v", res[2])
	}
	for i, id := range ids {
		want := []string{"1:execution.created", "2:dispatch.started"}
		if i == 2 {
			want = want[:1]
		}
		if got := kinds(t, s, id); !slices.Equal(got, want) {
			t.Fatalf("execution %d: events %v, want %v", i, got, want)
		}
	}
}
