package pebblestore_test

import (
	"bytes"
	"encoding/json"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// t0 is the time of the first test event; tests give explicit times so that
// what they read back can be compared whole.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func openMem(t testing.TB) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatalf("Open(\"\"): %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openDir(t testing.TB, dir string, opts ...pebblestore.Option) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func create(t testing.TB, s eventlog.Log, agent string) eventlog.ID {
	t.Helper()
	id, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: agent, Input: []byte(agent)}, t0)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return id
}

// appendAll appends evs at the current head and returns the new head.
func appendAll(t testing.TB, s eventlog.Log, id eventlog.ID, evs ...eventlog.Event) uint64 {
	t.Helper()
	head, err := s.Head(t.Context(), id)
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	got, err := s.Append(t.Context(), id, head, evs...)
	if err != nil {
		t.Fatalf("Append at %d: %v", head, err)
	}
	return got
}

// fataler is what testing.TB and *rapid.T have in common that helpers use.
type fataler interface {
	Helper()
	Fatalf(string, ...any)
}

// collect reads a sequence to its end: the values, and the error (which
// must come last, at most once).
func collect[V any](t fataler, seq iter.Seq2[V, error]) ([]V, error) {
	t.Helper()
	var out []V
	var err error
	for v, e := range seq {
		if err != nil {
			t.Fatalf("value after the error %v", err)
		}
		if e != nil {
			err = e
			continue
		}
		out = append(out, v)
	}
	return out, err
}

func events(t testing.TB, s eventlog.Log, id eventlog.ID, from uint64) []eventlog.Event {
	t.Helper()
	evs, err := collect(t, s.Events(t.Context(), id, from))
	if err != nil {
		t.Fatalf("Events(%s, %d): %v", id, from, err)
	}
	return evs
}

// diff compares with cmp, nil and empty slices being equal. For the types
// the property tests compare often it first tries a cheap exact comparison
// and only builds a diff when that fails.
func diff(want, got any) string {
	switch w := want.(type) {
	case []eventlog.Event:
		if g, ok := got.([]eventlog.Event); ok && eventsEqual(w, g) {
			return ""
		}
	case eventlog.Info:
		if g, ok := got.(eventlog.Info); ok && infoEqual(w, g) {
			return ""
		}
	case []eventlog.Info:
		if g, ok := got.([]eventlog.Info); ok && slices.EqualFunc(w, g, infoEqual) {
			return ""
		}
	case []eventlog.ResourceState:
		if g, ok := got.([]eventlog.ResourceState); ok && slices.EqualFunc(w, g, stateEqual) {
			return ""
		}
	}
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

// eventsEqual compares seqs and encoded records: equal records mean equal
// times (to the nanosecond) and payloads.
func eventsEqual(a, b []eventlog.Event) bool {
	return slices.EqualFunc(a, b, func(x, y eventlog.Event) bool {
		rx, errx := eventlog.AppendRecord(nil, eventlog.ID{}, x)
		ry, erry := eventlog.AppendRecord(nil, eventlog.ID{}, y)
		return x.Seq == y.Seq && errx == nil && erry == nil && bytes.Equal(rx, ry)
	})
}

func infoEqual(x, y eventlog.Info) bool {
	return x.ID == y.ID && x.Agent == y.Agent && x.Parent == y.Parent && x.ForkSeq == y.ForkSeq &&
		x.Head == y.Head && x.Created.Equal(y.Created) && x.Status == y.Status && x.Updated.Equal(y.Updated) &&
		x.WakeAt.Equal(y.WakeAt) && x.Deadline.Equal(y.Deadline)
}

func stateEqual(x, y eventlog.ResourceState) bool {
	return x.Key == y.Key && x.Seq == y.Seq && x.Generation == y.Generation && slices.Equal(x.InFlight, y.InFlight) &&
		x.CoverageReuse == y.CoverageReuse && x.Bound == y.Bound && x.Latest == y.Latest
}

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

func dispatch(n uint64) eventlog.Event {
	return eventlog.Event{Time: at(int(n)), Data: &eventlog.DispatchStarted{Dispatch: n}}
}

func started(id string, kind eventlog.StepKind, affects ...string) eventlog.Event {
	return eventlog.Event{Time: at(3), Data: &eventlog.StepStarted{
		StepID: id, StepKind: kind, Target: "t", Resources: affects, Idempotency: eventlog.SafeToRetry, Attempt: 1,
	}}
}

func succeeded(id string) eventlog.Event {
	return eventlog.Event{Time: at(4), Data: &eventlog.StepSucceeded{StepID: id, Result: []byte(id)}}
}

func boundEv(key, from string, reuse bool) eventlog.Event {
	return eventlog.Event{Time: at(5), Data: &eventlog.ResourceBound{
		Key: key, DriverID: "drv", Binding: json.RawMessage(`{"n":1}`), From: from, EverySteps: 1,
		OnCompletion: true, CoverageReuse: reuse,
	}}
}

func captured(key, ref string, gen uint64) eventlog.Event {
	return eventlog.Event{Time: at(6), Data: &eventlog.ResourceCaptured{Key: key, Ref: ref, Generation: gen, Reason: eventlog.CaptureSteps}}
}

// withSeqs returns evs numbered from first.
func withSeqs(first uint64, evs ...eventlog.Event) []eventlog.Event {
	out := make([]eventlog.Event, len(evs))
	for i, ev := range evs {
		ev.Seq = first + uint64(i)
		out[i] = ev
	}
	return out
}
