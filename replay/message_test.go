package replay

import (
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
)

// foldAll applies payloads as seqs 1, 2, … and returns the state and the
// first error.
func foldAll(payloads ...eventlog.Payload) (*State, error) {
	s := New()
	for i, p := range payloads {
		if err := s.Apply(eventlog.Event{Seq: uint64(i) + 1, Time: time.Unix(int64(i), 0), Data: p}); err != nil {
			return s, err
		}
	}
	return s, nil
}

func recvStarted(id, topic string) *eventlog.StepStarted {
	return &eventlog.StepStarted{StepID: id, StepKind: eventlog.StepRecv, Target: topic, Idempotency: eventlog.SafeToRetry,
		Attempt: 1, WakeAt: time.Unix(100, 0)}
}

// TestFoldMessages: messages fold in arrival order (a fork's injected ones
// at fork.created, after the prefix's); each succeeded recv step consumes
// the oldest unconsumed one of its topic; a failed (timed out) one
// consumes none; a recv step records its WakeAt.
func TestFoldMessages(t *testing.T) {
	s, err := foldAll(
		&eventlog.ExecutionCreated{Agent: "a"},
		&eventlog.MessageReceived{MessageID: "m1", Topic: "in", Value: []byte(`1`)},
		&eventlog.MessageReceived{MessageID: "x1", Topic: "other", Value: []byte(`9`)},
		&eventlog.MessageReceived{MessageID: "m2", Topic: "in", Value: []byte(`2`)},
		&eventlog.DispatchStarted{Dispatch: 1},
		recvStarted("r1", "in"),
		&eventlog.StepSucceeded{StepID: "r1", Result: []byte(`1`)},
		recvStarted("r2", "none"),
		&eventlog.StepFailed{StepID: "r2", Error: "timed out"},
		&eventlog.ForkCreated{Parent: eventlog.ID{1}, At: 9, Messages: []eventlog.Message{{MessageID: "f1", Topic: "in", Value: []byte(`3`)}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Step("r1"); !st.WakeAt.Equal(time.Unix(100, 0)) {
		t.Fatalf("recv WakeAt %v", st.WakeAt)
	}
	type row struct {
		ID                   string
		Received, ConsumedAt uint64
		By                   string
	}
	var got []row
	for _, m := range s.Messages() {
		got = append(got, row{m.MessageID, m.ReceivedAt, m.ConsumedAt, m.ConsumedBy})
	}
	want := []row{{"m1", 2, 7, "r1"}, {"x1", 3, 0, ""}, {"m2", 4, 0, ""}, {"f1", 10, 0, ""}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("messages (-want +got):\n%s", d)
	}
	if m, ok := s.NextMessage("in"); !ok || m.MessageID != "m2" {
		t.Fatalf("next of in: %+v %v, want m2", m, ok)
	}
	if _, ok := s.NextMessage("none"); ok {
		t.Fatal("next of a topic without messages")
	}
	if n := len(s.Unconsumed()); n != 3 {
		t.Fatalf("%d unconsumed, want 3", n)
	}
}

// TestFoldMessageErrors: a MessageID received twice (also injected by a
// fork) and a recv step that succeeds with no message of its topic break
// the lineage.
func TestFoldMessageErrors(t *testing.T) {
	created := &eventlog.ExecutionCreated{Agent: "a"}
	for name, ps := range map[string][]eventlog.Payload{
		"twice": {created, &eventlog.MessageReceived{MessageID: "m", Topic: "in"}, &eventlog.MessageReceived{MessageID: "m", Topic: "in"}},
		"fork injects a received id": {created, &eventlog.MessageReceived{MessageID: "m", Topic: "in"},
			&eventlog.ForkCreated{Parent: eventlog.ID{1}, At: 2, Messages: []eventlog.Message{{MessageID: "m", Topic: "x"}}}},
		"recv without message": {created, &eventlog.MessageReceived{MessageID: "m", Topic: "other"},
			&eventlog.DispatchStarted{Dispatch: 1}, recvStarted("r", "in"), &eventlog.StepSucceeded{StepID: "r"}},
	} {
		if _, err := foldAll(ps...); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestFoldEvents: event.set values by key and occurrence, the newest per
// key, and the sorted keys.
func TestFoldEvents(t *testing.T) {
	s, err := foldAll(
		&eventlog.ExecutionCreated{Agent: "a"},
		&eventlog.DispatchStarted{Dispatch: 1},
		&eventlog.EventSet{Key: "p", Value: []byte(`1`)},
		&eventlog.EventSet{Key: "a", Value: []byte(`"x"`)},
		&eventlog.EventSet{Key: "p", Value: []byte(`2`)},
	)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := s.Event("p"); !ok || string(e.Value) != "2" || e.Seq != 5 {
		t.Fatalf("newest p: %+v %v", e, ok)
	}
	if e, ok := s.EventAt("p", 0); !ok || string(e.Value) != "1" || e.Seq != 3 {
		t.Fatalf("p #0: %+v %v", e, ok)
	}
	if _, ok := s.EventAt("p", 2); ok {
		t.Fatal("p #2 exists")
	}
	if d := cmp.Diff([]string{"a", "p"}, s.EventKeys()); d != "" {
		t.Fatalf("keys (-want +got):\n%s", d)
	}
	if n := len(s.Events()); n != 3 {
		t.Fatalf("%d events", n)
	}
}
