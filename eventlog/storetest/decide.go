package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// DecideStore is a Store that decides approvals atomically
// (eventlog.Decider).
type DecideStore interface {
	Store
	eventlog.Decider
}

// TestDecider checks the eventlog.Decider contract (DESIGN §8½, §12) of the
// stores open makes (fresh and empty each call): a decision of an awaited
// step is stored as a request; a second decision of it — pending in the
// inbox or taken into the lineage — a decision of a step that awaits none,
// and one for an ended execution wrap ErrNotAwaited and write nothing; bad
// decisions are ErrInvalid; and of an Approve racing a Reject exactly one
// is stored, the one its caller was told, however many race.
func TestDecider(t *testing.T, open func(t *testing.T) DecideStore) {
	t.Run("Once", func(t *testing.T) { testDecideOnce(t, open(t)) })
	t.Run("Refused", func(t *testing.T) { testDecideRefused(t, open(t)) })
	t.Run("Race", func(t *testing.T) { testDecideRace(t, open(t)) })
}

// awaiting creates an execution whose run awaits a decision of step s1
// and returns it with its lineage.
func awaiting(t *testing.T, s Store) (eventlog.ID, []eventlog.Event) {
	t.Helper()
	id := newExecution(t, s)
	asked := eventlog.Event{Data: &eventlog.ApprovalRequested{StepID: "s1", StepKind: eventlog.StepTool, Target: "pay"}}
	if _, err := s.Append(t.Context(), id, 1, dispatchEvent(1), asked); err != nil {
		t.Fatalf("Append approval.requested: %v", err)
	}
	info, err := s.Info(t.Context(), id)
	if err != nil || info.Status != eventlog.StatusWaiting || len(info.Approvals) != 1 || info.Approvals[0] != "s1" {
		t.Fatalf("Info after approval.requested = %+v, %v; want waiting on s1", info, err)
	}
	return id, readEvents(t, s, id)
}

// wantNotAwaited checks that Decide(id, p) is refused with ErrNotAwaited.
func wantNotAwaited(t *testing.T, s DecideStore, id eventlog.ID, p eventlog.Payload, why string) {
	t.Helper()
	if n, err := s.Decide(t.Context(), id, p, inboxT0); !errors.Is(err, eventlog.ErrNotAwaited) {
		t.Fatalf("Decide(%s) %s = %d, %v; want ErrNotAwaited", p.Kind(), why, n, err)
	}
}

func testDecideOnce(t *testing.T, s DecideStore) {
	ctx := t.Context()
	id, lineage := awaiting(t, s)
	granted := &eventlog.ApprovalGranted{StepID: "s1", By: "ops", Note: "fine"}
	n, err := s.Decide(ctx, id, granted, inboxT0)
	if err != nil || n != 1 {
		t.Fatalf("Decide(granted s1) = %d, %v; want request 1", n, err)
	}
	wantLineage(t, s, id, lineage)
	rs := wantPending(t, s, id, 1)
	want := eventlog.Event{Seq: 1, Time: inboxT0, Data: granted}
	if !sameEvents([]eventlog.Event{asEvent(rs[0], 1)}, []eventlog.Event{want}) {
		t.Fatalf("request 1 = %+v (%+v), want %+v", rs[0], rs[0].Data, granted)
	}
	// A second decision while the first waits in the inbox.
	wantNotAwaited(t, s, id, &eventlog.ApprovalRejected{StepID: "s1", By: "ops"}, "with a decision pending")
	wantNotAwaited(t, s, id, granted, "twice")
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 1)
	// A cancel in the inbox does not decide the step.
	request(t, s, id, cancelReq("stop"), inboxT0)
	// Once the owner took it, the lineage holds the decision.
	if _, err := s.Take(ctx, id, 3, []uint64{1}, asEvent(rs[0], 0)); err != nil {
		t.Fatalf("Take(1): %v", err)
	}
	lineage = append(lineage, asEvent(rs[0], 4))
	wantLineage(t, s, id, lineage)
	wantNotAwaited(t, s, id, &eventlog.ApprovalRejected{StepID: "s1", By: "ops"}, "decided in the lineage")
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id, 2)
}

func testDecideRefused(t *testing.T, s DecideStore) {
	ctx := t.Context()
	id, lineage := awaiting(t, s)
	// A step that awaits no decision.
	wantNotAwaited(t, s, id, &eventlog.ApprovalGranted{StepID: "s2", By: "ops"}, "of a step never asked about")
	// Bad decisions.
	for _, p := range []eventlog.Payload{nil, cancelReq("x"), &eventlog.ApprovalGranted{By: "ops"}, &eventlog.ApprovalRejected{}} {
		if n, err := s.Decide(ctx, id, p, inboxT0); !errors.Is(err, eventlog.ErrInvalid) {
			t.Fatalf("Decide(%#v) = %d, %v; want ErrInvalid", p, n, err)
		}
	}
	if n, err := s.Decide(ctx, eventlog.NewID(), &eventlog.ApprovalGranted{StepID: "s1"}, inboxT0); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Decide of an unknown execution = %d, %v; want ErrNotFound", n, err)
	}
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id)
	// An ended execution awaits nothing.
	end := eventlog.Event{Data: &eventlog.ExecutionCancelled{Reason: "stop"}}
	if _, err := s.Append(ctx, id, uint64(len(lineage)), end); err != nil {
		t.Fatalf("Append execution.cancelled: %v", err)
	}
	lineage = readEvents(t, s, id)
	wantNotAwaited(t, s, id, &eventlog.ApprovalGranted{StepID: "s1", By: "ops"}, "of an ended execution")
	wantLineage(t, s, id, lineage)
	wantPending(t, s, id)
}

// decideRounds is how many Approve ‖ Reject races testDecideRace runs, each
// between decideRacers decisions, half of them grants.
const (
	decideRounds = 20
	decideRacers = 6
)

func testDecideRace(t *testing.T, s DecideStore) {
	ctx := t.Context()
	for round := range decideRounds {
		id, lineage := awaiting(t, s)
		var payloads []eventlog.Payload
		for i := range decideRacers / 2 {
			payloads = append(payloads,
				&eventlog.ApprovalGranted{StepID: "s1", By: fmt.Sprint("a", i), Note: fmt.Sprint(round)},
				&eventlog.ApprovalRejected{StepID: "s1", By: fmt.Sprint("b", i), Note: fmt.Sprint(round)})
		}
		errs := make([]error, len(payloads))
		var start, wg sync.WaitGroup
		start.Add(1)
		for i, p := range payloads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				_, errs[i] = s.Decide(ctx, id, p, inboxT0.Add(time.Duration(i)))
			}()
		}
		start.Done()
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Fatalf("round %d: decisions %d and %d were both stored", round, winner, i)
			case !errors.Is(err, eventlog.ErrNotAwaited):
				t.Fatalf("round %d: Decide(%s) = %v; want success or ErrNotAwaited", round, payloads[i].Kind(), err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no decision was stored: %v", round, errs)
		}
		wantLineage(t, s, id, lineage)
		rs := wantPending(t, s, id, 1)
		want := eventlog.Event{Seq: 1, Time: inboxT0.Add(time.Duration(winner)), Data: payloads[winner]}
		if !sameEvents([]eventlog.Event{asEvent(rs[0], 1)}, []eventlog.Event{want}) {
			t.Fatalf("round %d: the stored decision is %s %+v; the one reported stored is %s %+v",
				round, rs[0].Data.Kind(), rs[0].Data, payloads[winner].Kind(), payloads[winner])
		}
	}
}
