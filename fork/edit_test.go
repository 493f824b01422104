package fork_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/google/go-cmp/cmp"
)

// editLineage writes a root with three steps: s1 ends at 4; s2 starts at
// 5 and ends at 7; the LLM call s3 starts at 6 and ends at 8; a resource
// is bound at 9 and captured at 10.
func editLineage(t *testing.T, s eventlog.IndexedLog) eventlog.ID {
	t.Helper()
	started := func(id string, k eventlog.StepKind) *eventlog.StepStarted {
		return &eventlog.StepStarted{StepID: id, StepKind: k, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1}
	}
	ps := []eventlog.Payload{
		&eventlog.ExecutionCreated{Agent: "a", Input: []byte(`"in"`)},
		&eventlog.DispatchStarted{Dispatch: 1},
		started("s1", eventlog.StepTool),
		&eventlog.StepSucceeded{StepID: "s1", Result: []byte("1")},
		started("s2", eventlog.StepTool),
		started("s3", eventlog.StepLLM),
		&eventlog.StepSucceeded{StepID: "s2", Result: []byte("2")},
		&eventlog.StepSucceeded{StepID: "s3", Result: []byte("3")},
		&eventlog.ResourceBound{Key: "ws", DriverID: "d", Binding: []byte(`{}`), EverySteps: 1, OnCompletion: true},
		&eventlog.StepStarted{StepID: "s4", StepKind: eventlog.StepTool, Target: "t", Idempotency: eventlog.SafeToRetry, Attempt: 1},
	}
	evs := make([]eventlog.Event, len(ps))
	for i, p := range ps {
		evs[i] = eventlog.Event{Seq: uint64(i + 1), Time: epoch, Data: p}
	}
	return writeRoot(t, s, evs)
}

// TestCreateEdits: Create records WithInput and WithOverride in
// fork.created, sorted, and refuses what DESIGN §12 does not allow without
// writing anything.
func TestCreateEdits(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	id := editLineage(t, s)

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
	fid, _, err := fork.Create(ctx, s, id, 4, epoch, fork.WithInput([]byte(`"new"`)),
		fork.WithOverride("s2", []byte(`"b"`)), fork.WithOverride("s1", []byte(`"a"`)), fork.WithTraceParent(tp))
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, fid)[4].Data.(*eventlog.ForkCreated)
	want := &eventlog.ForkCreated{Parent: id, At: 4, Input: []byte(`"new"`), TraceParent: tp,
		Overrides: []eventlog.StepOverride{{StepID: "s1", Result: []byte(`"a"`)}, {StepID: "s2", Result: []byte(`"b"`)}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("fork.created (-want +got):\n%s", diff)
	}

	before := count(t, s)
	for _, c := range []struct {
		name string
		at   uint64
		opts []fork.Option
		is   error
		msg  string
	}{
		{"not the terminal event", 5, []fork.Option{fork.WithOverride("s1", nil)}, eventlog.ErrInvalid, "step s1 ended at seq 4"},
		{"another override running at the point", 7, []fork.Option{fork.WithOverride("s2", nil), fork.WithOverride("s3", nil)}, eventlog.ErrInvalid, "s3 is running"},
		{"not ended", 10, []fork.Option{fork.WithOverride("s4", nil)}, eventlog.ErrInvalid, "not succeeded or failed"},
		{"unknown step", 4, []fork.Option{fork.WithOverride("s9", nil)}, eventlog.ErrInvalid, "never ran"},
		{"empty step ID", 4, []fork.Option{fork.WithOverride("", nil)}, eventlog.ErrInvalid, "empty step"},
		{"twice", 4, []fork.Option{fork.WithOverride("s1", nil), fork.WithOverride("s1", nil)}, eventlog.ErrInvalid, "twice"},
		{"empty input", 4, []fork.Option{fork.WithInput(nil)}, eventlog.ErrInvalid, "empty input"},
		{"nil option", 4, []fork.Option{nil}, eventlog.ErrInvalid, "nil option"},
		{"bad traceparent", 4, []fork.Option{fork.WithTraceParent("00-abc")}, eventlog.ErrInvalid, "traceparent"},
		{"uncovered", 10, []fork.Option{fork.RequireCovered()}, coverage.ErrUncovered, `"ws" not covered`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := fork.Create(ctx, s, id, c.at, epoch, c.opts...)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Create: %v; want %v saying %q", err, c.is, c.msg)
			}
		})
	}
	if after := count(t, s); after != before {
		t.Fatalf("%d executions after refused forks, want %d", after, before)
	}
	// The LLM call s3 ends at 8 while s2 ended at 7: s3 alone may be
	// overridden at 8.
	if _, _, err := fork.Create(ctx, s, id, 8, epoch, fork.WithOverride("s3", []byte("x"))); err != nil {
		t.Fatal(err)
	}
}

// count returns the number of executions s lists.
func count(t *testing.T, s eventlog.IndexedLog) int {
	t.Helper()
	n := 0
	for _, err := range s.List(context.Background(), eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestCheckOverridesReadsToLastEnd: CheckOverrides reads the parent's
// lineage from seq 1 to the end of the last overridden step (the fork
// point when that is later) and no further, and writes nothing.
func TestCheckOverridesReadsToLastEnd(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	id := editLineage(t, s) // s1 ends at 4, s2 at 7, s3 at 8; head 10
	before := readAll(t, s, id)
	for _, c := range []struct {
		name string
		at   uint64
		ids  []string
		last uint64
	}{
		{"one step, ended at the point", 4, []string{"s1"}, 4},
		{"a second step ending later", 4, []string{"s2", "s1"}, 7},
		{"the LLM call", 8, []string{"s3"}, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			var overrides []eventlog.StepOverride
			for _, id := range c.ids {
				overrides = append(overrides, eventlog.StepOverride{StepID: id, Result: []byte(`"x"`)})
			}
			r := &readingLog{Log: s}
			if err := fork.CheckOverrides(ctx, r, id, c.at, overrides); err != nil {
				t.Fatal(err)
			}
			if r.last != c.last {
				t.Errorf("read the lineage up to seq %d, want %d", r.last, c.last)
			}
		})
	}
	if d := cmp.Diff(before, readAll(t, s, id)); d != "" {
		t.Errorf("CheckOverrides changed the lineage (-before +after):\n%s", d)
	}
}

// readingLog records the seq of the newest event Events handed out.
type readingLog struct {
	eventlog.Log
	last uint64
}

func (r *readingLog) Events(ctx context.Context, id eventlog.ID, from uint64) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		for ev, err := range r.Log.Events(ctx, id, from) {
			if err == nil {
				r.last = ev.Seq
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}
