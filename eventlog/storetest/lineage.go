package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
	"pgregory.net/rapid"
)

// lineageMachine drives a store with a random tree of executions and forks
// and random appends, beside a plain model: each execution's whole lineage
// as a slice of events. The model knows nothing of segments or the index;
// the store must agree with it.
type lineageMachine struct {
	s     eventlog.IndexedLog
	start eventlog.ID   // every execution of this run has a greater ID
	ids   []eventlog.ID // in creation order
	model map[eventlog.ID][]eventlog.Event
	info  map[eventlog.ID]eventlog.Info
	clock int
	steps int
	// touched lists the executions the last action wrote (and a fork's
	// parent): Check reads their events after every action, all others'
	// at the end (events never change once written, so a stray write to
	// an untouched execution is still there to be seen).
	touched []eventlog.ID
}

func newLineageMachine(t *rapid.T, s eventlog.IndexedLog) *lineageMachine {
	m := &lineageMachine{s: s, start: eventlog.NewID(), model: map[eventlog.ID][]eventlog.Event{}, info: map[eventlog.ID]eventlog.Info{}}
	m.create(t)
	return m
}

func (m *lineageMachine) tick() int { m.clock++; return m.clock }

// foldLineage folds evs with a fresh IndexState: the states after the last
// event, and the changes of every event by seq.
func foldLineage(t interface{ Fatalf(string, ...any) }, evs []eventlog.Event) (*eventlog.IndexState, map[uint64][]eventlog.ResourceState) {
	st := eventlog.NewIndexState(nil)
	changes := map[uint64][]eventlog.ResourceState{}
	for _, ev := range evs {
		c, err := st.Apply(ev)
		if err != nil {
			t.Fatalf("model fold refused event %d %s: %v", ev.Seq, ev.Kind(), err)
		}
		changes[ev.Seq] = c
	}
	return st, changes
}

func (m *lineageMachine) pick(t *rapid.T) eventlog.ID {
	return m.ids[rapid.IntRange(0, len(m.ids)-1).Draw(t, "execution")]
}

func (m *lineageMachine) create(t *rapid.T) {
	if len(m.ids) >= 4 && rapid.Bool().Draw(t, "skip create") {
		t.Skip("enough roots")
	}
	tm := at(m.tick())
	agent := fmt.Sprintf("agent-%d", len(m.ids))
	created := &eventlog.ExecutionCreated{Agent: agent}
	id, err := m.s.Create(t.Context(), created, tm)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	m.ids = append(m.ids, id)
	m.touched = []eventlog.ID{id}
	m.model[id] = []eventlog.Event{{Seq: 1, Time: tm, Data: created}}
	m.info[id] = withStatus(eventlog.Info{ID: id, Agent: agent, Head: 1, Created: tm}, m.model[id])
}

// Append draws 1..3 events that are valid for the execution's lineage.
func (m *lineageMachine) Append(t *rapid.T) {
	id := m.pick(t)
	lin := m.model[id]
	shadow, _ := foldLineage(t, lin)
	n := rapid.IntRange(1, 3).Draw(t, "batch")
	var evs []eventlog.Event
	for i := range n {
		seq := uint64(len(lin) + i + 1)
		gens := map[string]uint64{}
		var bound, inFlight []string
		for _, st := range shadow.States() {
			gens[st.Key] = st.Generation
			bound = append(bound, st.Key)
			inFlight = append(inFlight, st.InFlight...)
		}
		var p eventlog.Payload
		switch rapid.IntRange(0, 7).Draw(t, "kind") {
		case 0:
			p = &eventlog.ResourceBound{Key: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key"), DriverID: "d",
				Binding: json.RawMessage(`{}`), From: rapid.SampledFrom([]string{"", "from"}).Draw(t, "from"), EverySteps: 1,
				CoverageReuse: rapid.Bool().Draw(t, "reuse")}
		case 1, 2:
			stepID := fmt.Sprintf("s%d", m.steps)
			m.steps++
			if len(inFlight) > 0 && rapid.Bool().Draw(t, "retry") {
				stepID = rapid.SampledFrom(inFlight).Draw(t, "retried")
			}
			var affects []string
			for _, k := range bound {
				if rapid.Bool().Draw(t, "affects") {
					affects = append(affects, k)
				}
			}
			p = &eventlog.StepStarted{StepID: stepID, StepKind: rapid.SampledFrom([]eventlog.StepKind{"tool", "local", "llm", "child"}).Draw(t, "step kind"),
				Target: "t", Resources: affects, Idempotency: eventlog.SafeToRetry, Attempt: 1}
		case 3:
			if len(inFlight) == 0 {
				p = &eventlog.StepDenied{StepID: "denied", StepKind: "tool"}
				break
			}
			p = &eventlog.StepSucceeded{StepID: rapid.SampledFrom(inFlight).Draw(t, "landed"), Result: []byte("ok")}
		case 4, 5:
			if len(bound) == 0 {
				p = &eventlog.DispatchStarted{Dispatch: 1}
				break
			}
			k := rapid.SampledFrom(bound).Draw(t, "captured")
			// A capture names the generation it captured: the current one.
			p = &eventlog.ResourceCaptured{Key: k, Ref: fmt.Sprintf("ref-%d", m.tick()),
				Generation: gens[k], Reason: eventlog.CaptureSteps}
		case 7:
			// fork.diverged marks every resource bound now in the index
			// (DESIGN §12); the store keeps the mark as the fold does.
			p = &eventlog.ForkDiverged{Unconsumed: []string{"s0"}}
		default:
			p = &eventlog.DispatchStarted{Dispatch: uint64(rapid.IntRange(1, 9).Draw(t, "dispatch"))}
		}
		ev := eventlog.Event{Seq: seq, Time: at(m.tick()), Data: p}
		if _, err := shadow.Apply(ev); err != nil {
			t.Fatalf("generated an event the fold refuses: %v", err)
		}
		evs = append(evs, ev)
	}
	head := uint64(len(lin))
	if rapid.Bool().Draw(t, "zero seqs") {
		for i := range evs {
			evs[i].Seq = 0
		}
	}
	got, err := m.s.Append(t.Context(), id, head, evs...)
	if err != nil {
		t.Fatalf("Append to %s at %d: %v", id, head, err)
	}
	if got != head+uint64(n) {
		t.Fatalf("Append returned head %d, want %d", got, head+uint64(n))
	}
	for i := range evs {
		evs[i].Seq = head + uint64(i) + 1
	}
	m.model[id] = append(lin, evs...)
	m.touched = []eventlog.ID{id}
	info := m.info[id]
	info.Head = got
	m.info[id] = withStatus(info, m.model[id])
}

// Fork forks a random execution at a random seq, selecting every resource
// bound there at its generation, covered or not.
func (m *lineageMachine) Fork(t *rapid.T) {
	if len(m.ids) >= 12 {
		t.Skip("tree is big enough")
	}
	parent := m.pick(t)
	lin := m.model[parent]
	atSeq := uint64(rapid.IntRange(1, len(lin)).Draw(t, "at"))
	shadow, _ := foldLineage(t, lin[:atSeq])
	fc := &eventlog.ForkCreated{}
	for _, st := range shadow.States() {
		sel := eventlog.ForkSelection{Key: st.Key, Generation: st.Generation, Ref: st.Latest.Ref, CapturedAt: st.Latest.At}
		if rapid.Bool().Draw(t, "covered") {
			sel.Ref, sel.CapturedAt, sel.Covered = fmt.Sprintf("cover-%d", m.tick()), atSeq+uint64(rapid.IntRange(0, 3).Draw(t, "captured later")), true
		}
		fc.Selections = append(fc.Selections, sel)
	}
	tm := at(m.tick())
	id, err := m.s.Fork(t.Context(), parent, atSeq, fc, tm)
	if err != nil {
		t.Fatalf("Fork(%s, %d): %v", parent, atSeq, err)
	}
	written := *fc
	written.Parent, written.At = parent, atSeq
	m.ids = append(m.ids, id)
	m.touched = []eventlog.ID{id, parent}
	m.model[id] = append(slices.Clone(lin[:atSeq]), eventlog.Event{Seq: atSeq + 1, Time: tm, Data: &written})
	m.info[id] = withStatus(eventlog.Info{ID: id, Agent: m.info[parent].Agent, Parent: parent, ForkSeq: atSeq, Head: atSeq + 1, Created: tm}, m.model[id])
}

// Create adds a root execution.
func (m *lineageMachine) Create(t *rapid.T) { m.create(t) }

// Index checks one random ResourceStates and ResourceHistory query.
func (m *lineageMachine) Index(t *rapid.T) {
	id := m.pick(t)
	m.checkIndex(t, id, uint64(rapid.IntRange(1, len(m.model[id])).Draw(t, "index at")))
}

// checkEvents fails unless id reads as its model lineage.
func (m *lineageMachine) checkEvents(t *rapid.T, id eventlog.ID) {
	got, err := collectAll(t, m.s.Events(t.Context(), id, 1))
	if err != nil {
		t.Fatalf("Events(%s): %v", id, err)
	}
	if d := diff(m.model[id], got); d != "" {
		t.Fatalf("Events(%s) (-model +store):\n%s", id, d)
	}
}

// checkIndex compares the store's index of id at seq atSeq with a fresh
// fold of the model's lineage: the newest state per key at or before atSeq,
// and, for each key, the states written after atSeq.
func (m *lineageMachine) checkIndex(t *rapid.T, id eventlog.ID, atSeq uint64) {
	lin := m.model[id]
	prefix, _ := foldLineage(t, lin[:atSeq])
	_, changes := foldLineage(t, lin)
	got, err := m.s.ResourceStates(t.Context(), id, atSeq)
	if err != nil {
		t.Fatalf("ResourceStates(%s, %d): %v", id, atSeq, err)
	}
	if d := diff(prefix.States(), got); d != "" {
		t.Fatalf("ResourceStates(%s, %d) (-fold +store):\n%s", id, atSeq, d)
	}
	for _, key := range []string{"a", "b", "c", "never"} {
		var want []eventlog.ResourceState
		for _, ev := range lin[atSeq:] {
			for _, st := range changes[ev.Seq] {
				if st.Key == key {
					want = append(want, st)
				}
			}
		}
		hist, err := collectAll(t, m.s.ResourceHistory(t.Context(), id, key, atSeq))
		if err != nil {
			t.Fatalf("ResourceHistory(%s, %s, %d): %v", id, key, atSeq, err)
		}
		if d := diff(want, hist); d != "" {
			t.Fatalf("ResourceHistory(%s, %q, after %d) (-fold +store):\n%s", id, key, atSeq, d)
		}
	}
}

// checkStates compares ResourceStates of id at every seq with the fold of
// its lineage, and ResourceHistory after 1 (all of it: execution.created
// changes no resource), after its fork point and after its head.
func (m *lineageMachine) checkStates(t *rapid.T, id eventlog.ID) {
	lin := m.model[id]
	fold := eventlog.NewIndexState(nil)
	for _, ev := range lin {
		if _, err := fold.Apply(ev); err != nil {
			t.Fatal(err)
		}
		got, err := m.s.ResourceStates(t.Context(), id, ev.Seq)
		if err != nil {
			t.Fatalf("ResourceStates(%s, %d): %v", id, ev.Seq, err)
		}
		if d := diff(fold.States(), got); d != "" {
			t.Fatalf("ResourceStates(%s, %d) (-fold +store):\n%s", id, ev.Seq, d)
		}
	}
	for _, after := range []uint64{1, m.info[id].ForkSeq, uint64(len(lin))} {
		if after > 0 {
			m.checkIndex(t, id, after)
		}
	}
}

// Check runs after every action: the executions just written read as their
// model lineage, and Head, Info and List agree for all.
func (m *lineageMachine) Check(t *rapid.T) {
	for _, id := range m.touched {
		m.checkEvents(t, id)
	}
	for _, id := range m.ids {
		head, err := m.s.Head(t.Context(), id)
		if err != nil || head != uint64(len(m.model[id])) {
			t.Fatalf("Head(%s) = %d, %v; want %d", id, head, err, len(m.model[id]))
		}
		info, err := m.s.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(m.info[id], info); d != "" {
			t.Fatalf("Info(%s) (-model +store):\n%s", id, d)
		}
	}
	list, err := collectAll(t, m.s.List(t.Context(), eventlog.Filter{After: m.start}))
	if err != nil {
		t.Fatal(err)
	}
	var want []eventlog.Info
	for _, id := range m.ids {
		want = append(want, m.info[id])
	}
	// IDs are time-ordered, so creation order is ID order.
	if d := diff(want, list); d != "" {
		t.Fatalf("List (-model +store):\n%s", d)
	}
}

// TestLineage drives s with random trees of executions, forks and forks of
// forks, and random appends, beside a plain model (each execution's whole
// lineage as a slice of events): every lineage reads back as the model
// says, Head, Info (with the status fold) and List agree with it, and the
// index of every execution at every seq equals folding its lineage
// (DESIGN §3, §5, §8.3, §8.7). s may hold other executions: each run
// checks only those it created, and List from its first ID on. It runs
// as many cases as rapid's -rapid.checks flag says.
func TestLineage(t T, s eventlog.IndexedLog) {
	t.Helper()
	rapid.Check(t, func(t *rapid.T) {
		m := newLineageMachine(t, s)
		t.Repeat(map[string]func(*rapid.T){
			"":       m.Check,
			"create": m.Create,
			"append": m.Append,
			"fork":   m.Fork,
			"index":  m.Index,
		})
		// Every execution reads as its model lineage: appending to a fork
		// changed no ancestor, and the reverse (DESIGN §8.7); and its index
		// agrees with the fold at every seq.
		for _, id := range m.ids {
			m.checkEvents(t, id)
			m.checkStates(t, id)
		}
	})
}

var lineageT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(i int) time.Time { return lineageT0.Add(time.Duration(i) * time.Second) }

// withStatus returns info with the status fields of lineage lin: the
// status fold of its events.
func withStatus(info eventlog.Info, lin []eventlog.Event) eventlog.Info {
	var st eventlog.StatusState
	for _, ev := range lin {
		st.Apply(ev)
	}
	info.Status, info.Updated, info.WakeAt, info.Deadline = st.Status, st.Updated, st.WakeAt, st.Deadline
	return info
}
