package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// listRoots is how many root executions the List checks create: more than
// 16·256, so that a store that pages by 256 matches or 16·256 scanned
// headers (as pebblestore does) ends pages on both limits, and a filter
// that matches few executions spread over the table crosses a page that
// ends on the scan limit with few or no matches.
const listRoots = 4400

// TestList checks List and the Caller of Create (DESIGN §9) on the stores
// open makes (fresh and empty each call): each filter field alone and
// combined, paging with After and Limit, ID order, statuses set by
// appended events, and invalid filters.
func TestList(t *testing.T, open func(t *testing.T) eventlog.Log) {
	t.Run("Caller", func(t *testing.T) { testCaller(t, open(t)) })
	t.Run("Invalid", func(t *testing.T) { testListInvalid(t, open(t)) })
	t.Run("Filters", func(t *testing.T) { testListFilters(t, open(t)) })
}

func testCaller(t *testing.T, s eventlog.Log) {
	ctx := t.Context()
	parent := newExecution(t, s)
	child, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "child", Input: []byte("x")}, time.Now(), eventlog.WithCaller(parent))
	if err != nil {
		t.Fatalf("Create with a caller: %v", err)
	}
	other := newExecution(t, s)
	if info, err := s.Info(ctx, child); err != nil || info.Caller != parent || !info.Parent.IsZero() {
		t.Fatalf("Info(child) = %+v, %v; want Caller %s and no Parent", info, err, parent)
	}
	for _, id := range []eventlog.ID{parent, other} {
		if info, err := s.Info(ctx, id); err != nil || !info.Caller.IsZero() {
			t.Fatalf("Info of an execution created without a caller = %+v, %v; want no Caller", info, err)
		}
	}
	fork, err := s.Fork(ctx, child, 1, nil, time.Now())
	if err != nil {
		t.Fatalf("Fork of the child: %v", err)
	}
	if info, err := s.Info(ctx, fork); err != nil || !info.Caller.IsZero() || info.Parent != child {
		t.Fatalf("Info(fork of the child) = %+v, %v; want Parent %s and no Caller", info, err, child)
	}
	if got := ids(listAll(t, s, eventlog.Filter{Caller: parent})); !slices.Equal(got, []eventlog.ID{child}) {
		t.Fatalf("List(Caller: parent) = %v, want [%s]", got, child)
	}
	if got := ids(listAll(t, s, eventlog.Filter{Caller: child})); len(got) != 0 {
		t.Fatalf("List(Caller: child) = %v, want none", got)
	}
	if got := ids(listAll(t, s, eventlog.Filter{Parent: child})); !slices.Equal(got, []eventlog.ID{fork}) {
		t.Fatalf("List(Parent: child) = %v, want [%s]", got, fork)
	}
	// The caller is in the header, not an event: the lineages hold only
	// their created events.
	if evs := readEvents(t, s, child); len(evs) != 1 || evs[0].Kind() != eventlog.KindExecutionCreated {
		t.Fatalf("child's lineage = %v, want [execution.created]", kinds(evs))
	}
	if evs := readEvents(t, s, fork); len(evs) != 2 || evs[1].Kind() != eventlog.KindForkCreated {
		t.Fatalf("fork's lineage = %v, want [execution.created fork.created]", kinds(evs))
	}
}

func testListInvalid(t *testing.T, s eventlog.Log) {
	newExecution(t, s)
	for _, f := range []eventlog.Filter{
		{Status: []eventlog.Status{0}},
		{Status: []eventlog.Status{eventlog.StatusCompleted, 42}},
		{Limit: -1},
		{Agent: "a", Limit: -5},
	} {
		infos, err := collect(t, s.List(t.Context(), f))
		if len(infos) != 0 || !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("List(%+v) = %d executions, %v; want only an ErrInvalid error", f, len(infos), err)
		}
	}
}

// listed is what the List checks expect of one execution.
type listed struct {
	id             eventlog.ID
	agent          string
	parent, caller eventlog.ID
	forkSeq, head  uint64
	status         eventlog.Status
}

// statusEvents returns the events that take a pending execution to st.
func statusEvents(st eventlog.Status, at time.Time) []eventlog.Event {
	ev := func(p eventlog.Payload) eventlog.Event { return eventlog.Event{Time: at, Data: p} }
	started := ev(&eventlog.DispatchStarted{Dispatch: 1})
	switch st {
	case eventlog.StatusRunning:
		return []eventlog.Event{started}
	case eventlog.StatusWaiting:
		return []eventlog.Event{started, ev(&eventlog.DispatchParked{Reason: eventlog.ParkChild})}
	case eventlog.StatusCompleted:
		return []eventlog.Event{started, ev(&eventlog.ExecutionCompleted{Output: []byte("ok")})}
	case eventlog.StatusFailed:
		return []eventlog.Event{started, ev(&eventlog.ExecutionFailed{Error: "boom", Code: eventlog.FailHandler})}
	case eventlog.StatusCancelled:
		return []eventlog.Event{started, ev(&eventlog.ExecutionCancelled{Reason: "asked"})}
	}
	return nil
}

// listPopulation is the executions of testListFilters and the ones the
// filters name.
type listPopulation struct {
	all                  []*listed // in creation order
	roots                []eventlog.ID
	forked, forked2      eventlog.ID // roots with forks
	child                eventlog.ID // a child, with a fork
	callerA, callerB     eventlog.ID
	childless, rareAfter eventlog.ID
}

// populate creates listRoots roots of agents a, b, c and a few of agent
// rare spread among them, children of two callers, forks of three
// executions made in between, and sets a status on some of them.
func populate(t *testing.T, s eventlog.Log) *listPopulation {
	ctx := t.Context()
	p := &listPopulation{}
	t0 := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	setStatus := func(l *listed, st eventlog.Status, at time.Time) {
		evs := statusEvents(st, at)
		if len(evs) == 0 {
			return
		}
		head, err := s.Append(ctx, l.id, l.head, evs...)
		if err != nil {
			t.Fatalf("Append to %s: %v", l.id, err)
		}
		l.head, l.status = head, st
	}
	fork := func(parent *listed, at time.Time) *listed {
		id, err := s.Fork(ctx, parent.id, 1, nil, at)
		if err != nil {
			t.Fatalf("Fork of %s: %v", parent.id, err)
		}
		l := &listed{id: id, agent: parent.agent, parent: parent.id, forkSeq: 1, head: 2, status: eventlog.StatusPending}
		p.all = append(p.all, l)
		return l
	}
	statuses := eventlog.Statuses()
	var childL *listed
	for i := range listRoots {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		agent := []string{"a", "b", "c"}[i%3]
		if i%1000 == 500 {
			agent = "rare"
		}
		var opts []eventlog.CreateOption
		var caller eventlog.ID
		switch {
		case i%1000 == 777 || i == 1234:
			caller = p.roots[3]
		case i == listRoots-100:
			caller = p.roots[4]
		}
		if !caller.IsZero() {
			opts = append(opts, eventlog.WithCaller(caller))
		}
		id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: agent, Input: fmt.Appendf(nil, "%d", i)}, at, opts...)
		if err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
		l := &listed{id: id, agent: agent, caller: caller, head: 1, status: eventlog.StatusPending}
		p.all = append(p.all, l)
		p.roots = append(p.roots, id)
		if i < 360 || agent == "rare" || !caller.IsZero() {
			setStatus(l, statuses[(i/3)%len(statuses)], at)
		}
		if i == 777 {
			childL = l
		}
		switch i {
		case 1200, 2400, 3600:
			f := fork(p.all[10], at)
			if i == 1200 {
				setStatus(f, eventlog.StatusRunning, at)
			}
		case 2000:
			fork(p.all[11], at)
		case 3000:
			setStatus(fork(childL, at), eventlog.StatusCompleted, at)
		}
	}
	p.forked, p.forked2, p.child = p.all[10].id, p.all[11].id, childL.id
	p.callerA, p.callerB = p.roots[3], p.roots[4]
	p.childless, p.rareAfter = p.roots[12], p.roots[2000]
	return p
}

// want is what List(f) should yield from p: the executions f selects, in
// ID order, after f.After, at most f.Limit.
func (p *listPopulation) want(f eventlog.Filter) []*listed {
	all := slices.Clone(p.all)
	slices.SortFunc(all, func(a, b *listed) int { return bytes.Compare(a.id[:], b.id[:]) })
	var out []*listed
	for _, l := range all {
		if !f.After.IsZero() && bytes.Compare(l.id[:], f.After[:]) <= 0 {
			continue
		}
		if f.Agent != "" && l.agent != f.Agent || !f.Parent.IsZero() && l.parent != f.Parent ||
			!f.Caller.IsZero() && l.caller != f.Caller || len(f.Status) > 0 && !slices.Contains(f.Status, l.status) {
			continue
		}
		out = append(out, l)
		if len(out) == f.Limit {
			break
		}
	}
	return out
}

// sameListing reports how got differs from want, "" if it does not.
func sameListing(want []*listed, got []eventlog.Info) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d executions, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.Agent != w.agent || g.Parent != w.parent || g.Caller != w.caller ||
			g.ForkSeq != w.forkSeq || g.Head != w.head || g.Status != w.status {
			return fmt.Sprintf("execution %d is %s agent %q parent %s caller %s at %d head %d %s; want %s agent %q parent %s caller %s at %d head %d %s",
				i, g.ID, g.Agent, g.Parent, g.Caller, g.ForkSeq, g.Head, g.Status,
				w.id, w.agent, w.parent, w.caller, w.forkSeq, w.head, w.status)
		}
	}
	return ""
}

func testListFilters(t *testing.T, s eventlog.Log) {
	p := populate(t, s)
	// Creation order is ID order.
	for i := 1; i < len(p.roots); i++ {
		if bytes.Compare(p.roots[i-1][:], p.roots[i][:]) >= 0 {
			t.Fatalf("root %d has ID %s, not greater than root %d's %s", i, p.roots[i], i-1, p.roots[i-1])
		}
	}
	st := func(ss ...eventlog.Status) []eventlog.Status { return ss }
	cases := []eventlog.Filter{
		{},
		{Agent: "a"},
		{Agent: "rare"},
		{Agent: "nobody"},
		{Status: st(eventlog.StatusCompleted)},
		{Status: st(eventlog.StatusFailed, eventlog.StatusCancelled)},
		{Status: st(eventlog.StatusPending)},
		{Status: st(eventlog.StatusWaiting, eventlog.StatusRunning)},
		{Parent: p.forked},
		{Parent: p.forked2},
		{Parent: p.child},
		{Parent: p.childless},
		{Caller: p.callerA},
		{Caller: p.callerB},
		{Caller: p.child},
		{Agent: "a", Status: st(eventlog.StatusRunning)},
		{Agent: "rare", Status: st(eventlog.StatusPending, eventlog.StatusWaiting, eventlog.StatusCancelled)},
		{Parent: p.forked, Status: st(eventlog.StatusRunning)},
		{Parent: p.forked, Agent: "b"},
		{Caller: p.callerA, Agent: "c", Status: st(eventlog.StatusFailed, eventlog.StatusRunning, eventlog.StatusCompleted)},
		{Agent: "rare", After: p.rareAfter},
		{After: p.roots[listRoots-5]},
		{Limit: 10},
		{Agent: "b", Limit: 300},
		{Agent: "rare", Limit: 2},
		{Status: st(eventlog.StatusPending), After: p.roots[100], Limit: 1000},
	}
	for _, f := range cases {
		want := p.want(f)
		got := listAll(t, s, f)
		if d := sameListing(want, got); d != "" {
			t.Errorf("List(%+v): %s", f, d)
			continue
		}
		for i := 1; i < len(got); i++ {
			if bytes.Compare(got[i-1].ID[:], got[i].ID[:]) >= 0 {
				t.Errorf("List(%+v): not in ID order at %d", f, i)
			}
		}
		if f.Limit != 0 || !f.After.IsZero() {
			continue
		}
		// The same in pages: of 300 (which crosses pages of 256 inside a
		// store), and smaller ones where the listing is short enough.
		sizes := []int{300}
		if len(want) <= 600 {
			sizes = append(sizes, 7)
		}
		if len(want) <= 50 {
			sizes = append(sizes, 1)
		}
		for _, size := range sizes {
			var paged []eventlog.Info
			g := f
			g.Limit = size
			for pages := 0; ; pages++ {
				page := listAll(t, s, g)
				if len(page) > size {
					t.Fatalf("List(%+v) yielded %d executions", g, len(page))
				}
				paged = append(paged, page...)
				if len(page) < size || pages > len(want) {
					break
				}
				g.After = page[len(page)-1].ID
			}
			if d := sameListing(want, paged); d != "" {
				t.Errorf("List(%+v) in pages of %d: %s", f, size, d)
			}
		}
	}
}
