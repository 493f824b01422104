package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestCreateKeys checks Create's idempotency keys (DESIGN §9) on the
// stores open makes (fresh and empty each call): the same key, agent and
// input return the same execution and write nothing; another agent or
// input under a used key wraps ErrConflict and writes nothing; racing
// Creates with one key create one execution; an empty key is no key.
func TestCreateKeys(t *testing.T, open func(t *testing.T) eventlog.Log) {
	t.Run("SameKeyAgainWritesNothing", func(t *testing.T) { testKeyAgain(t, open(t)) })
	t.Run("ConflictWritesNothing", func(t *testing.T) { testKeyConflict(t, open(t)) })
	t.Run("Racing", func(t *testing.T) { testKeyRacing(t, open(t)) })
	t.Run("RacingDifferentInputs", func(t *testing.T) { testKeyRacingInputs(t, open(t)) })
	t.Run("EmptyKey", func(t *testing.T) { testEmptyKey(t, open(t)) })
	t.Run("LookupAndInfo", func(t *testing.T) { testKeyLookup(t, open(t)) })
}

func keyed(agent, input, key string) *eventlog.ExecutionCreated {
	return &eventlog.ExecutionCreated{Agent: agent, Input: []byte(input), Key: key}
}

var keyT0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// wantOnly checks that s holds exactly one execution, id, whose lineage is
// still the single event want.
func wantOnly(t *testing.T, s eventlog.Log, id eventlog.ID, want []eventlog.Event) {
	t.Helper()
	infos := listAll(t, s, eventlog.Filter{})
	if len(infos) != 1 || infos[0].ID != id {
		t.Fatalf("List after keyed Creates: %d executions %v, want only %s", len(infos), ids(infos), id)
	}
	if head, err := s.Head(t.Context(), id); err != nil || head != 1 {
		t.Fatalf("Head(%s) = %d, %v; want 1", id, head, err)
	}
	if got := readEvents(t, s, id); !sameEvents(got, want) {
		t.Fatalf("lineage of %s is %v, want the one execution.created", id, kinds(got))
	}
}

func ids(infos []eventlog.Info) []eventlog.ID {
	out := make([]eventlog.ID, len(infos))
	for i, info := range infos {
		out[i] = info.ID
	}
	return out
}

func testKeyAgain(t *testing.T, s eventlog.Log) {
	ctx := t.Context()
	id, err := s.Create(ctx, keyed("a", `{"n":1}`, "order-7"), keyT0)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := readEvents(t, s, id)
	if len(want) != 1 || want[0].Data.(*eventlog.ExecutionCreated).Key != "order-7" {
		t.Fatalf("lineage of a keyed Create = %v, want execution.created with the key", kinds(want))
	}
	for i := range 3 {
		again, err := s.Create(ctx, keyed("a", `{"n":1}`, "order-7"), keyT0.Add(time.Duration(i+1)*time.Second))
		if err != nil || again != id {
			t.Fatalf("Create again with the same key = %s, %v; want %s", again, err, id)
		}
	}
	wantOnly(t, s, id, want)
}

func testKeyConflict(t *testing.T, s eventlog.Log) {
	ctx := t.Context()
	id, err := s.Create(ctx, keyed("a", `{"n":1}`, "k"), keyT0)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := readEvents(t, s, id)
	for _, c := range []struct {
		name    string
		created *eventlog.ExecutionCreated
	}{
		{"another agent", keyed("b", `{"n":1}`, "k")},
		{"another input", keyed("a", `{"n":2}`, "k")},
		{"no input", keyed("a", "", "k")},
	} {
		got, err := s.Create(ctx, c.created, keyT0)
		if !errors.Is(err, eventlog.ErrConflict) {
			t.Errorf("Create with a used key and %s = %s, %v; want ErrConflict", c.name, got, err)
		}
	}
	wantOnly(t, s, id, want)
	// The key still names the first execution.
	if again, err := s.Create(ctx, keyed("a", `{"n":1}`, "k"), keyT0); err != nil || again != id {
		t.Fatalf("Create with the key after conflicts = %s, %v; want %s", again, err, id)
	}
}

func testKeyRacing(t *testing.T, s eventlog.Log) {
	const rounds, n = 20, 16
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		start := make(chan struct{})
		var wg sync.WaitGroup
		got := make([]eventlog.ID, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				got[i], errs[i] = s.Create(t.Context(), keyed("a", "in", key), keyT0)
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || got[i] != got[0] {
				t.Fatalf("round %d: racing Create %d = %s, %v; Create 0 = %s", round, i, got[i], errs[i], got[0])
			}
		}
		if infos := listAll(t, s, eventlog.Filter{}); len(infos) != round+1 {
			t.Fatalf("round %d: %d executions after racing Creates with %d keys", round, len(infos), round+1)
		}
		if got := readEvents(t, s, got[0]); !sameEvents(got, []eventlog.Event{{Seq: 1, Time: keyT0, Data: keyed("a", "in", key)}}) {
			t.Fatalf("round %d: lineage %v, want the one execution.created", round, kinds(got))
		}
	}
}

func testKeyRacingInputs(t *testing.T, s eventlog.Log) {
	const n = 16
	var wg sync.WaitGroup
	got := make([]eventlog.ID, n)
	errs := make([]error, n)
	input := func(i int) string { return fmt.Sprintf("in-%d", i%2) }
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = s.Create(t.Context(), keyed("a", input(i), "race"), keyT0)
		})
	}
	close(start)
	wg.Wait()
	infos := listAll(t, s, eventlog.Filter{})
	if len(infos) != 1 {
		t.Fatalf("racing Creates with one key made %d executions", len(infos))
	}
	evs := readEvents(t, s, infos[0].ID)
	winner := string(evs[0].Data.(*eventlog.ExecutionCreated).Input)
	for i := range n {
		switch {
		case input(i) == winner && (errs[i] != nil || got[i] != infos[0].ID):
			t.Errorf("Create %d with the winner's input = %s, %v; want %s", i, got[i], errs[i], infos[0].ID)
		case input(i) != winner && !errors.Is(errs[i], eventlog.ErrConflict):
			t.Errorf("Create %d with another input = %s, %v; want ErrConflict", i, got[i], errs[i])
		}
	}
	wantOnly(t, s, infos[0].ID, []eventlog.Event{{Seq: 1, Time: keyT0, Data: keyed("a", winner, "race")}})
}

func testEmptyKey(t *testing.T, s eventlog.Log) {
	seen := map[eventlog.ID]bool{}
	for range 3 {
		id, err := s.Create(t.Context(), keyed("a", "in", ""), keyT0)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if seen[id] {
			t.Fatalf("Create with no key returned %s twice", id)
		}
		seen[id] = true
	}
	if infos := listAll(t, s, eventlog.Filter{}); len(infos) != 3 {
		t.Fatalf("List after 3 Creates with no key: %d executions", len(infos))
	}
}

// testKeyLookup: Info and List show an execution's start key; a store
// that implements eventlog.KeyLookup finds it by the key, and a lookup of
// a key nobody has is ErrNotFound and creates nothing.
func testKeyLookup(t *testing.T, s eventlog.Log) {
	ctx := t.Context()
	id, err := s.Create(ctx, keyed("a", `{"n":1}`, "order-9"), keyT0)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	plain, err := s.Create(ctx, keyed("a", `{"n":2}`, ""), keyT0)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if info, err := s.Info(ctx, id); err != nil || info.Key != "order-9" {
		t.Fatalf("Info of a keyed execution: Key %q, %v; want order-9", info.Key, err)
	}
	if info, err := s.Info(ctx, plain); err != nil || info.Key != "" {
		t.Fatalf("Info of an execution without a key: Key %q, %v", info.Key, err)
	}
	keys := map[eventlog.ID]string{}
	for _, info := range listAll(t, s, eventlog.Filter{}) {
		keys[info.ID] = info.Key
	}
	if diff := diff(map[eventlog.ID]string{id: "order-9", plain: ""}, keys); diff != "" {
		t.Fatalf("keys in List (-want +got):\n%s", diff)
	}
	kl, ok := s.(eventlog.KeyLookup)
	if !ok {
		t.Skip("the store does not implement eventlog.KeyLookup")
	}
	if got, err := kl.LookupKey(ctx, "order-9"); err != nil || got != id {
		t.Fatalf("LookupKey(order-9) = %s, %v; want %s", got, err, id)
	}
	if _, err := kl.LookupKey(ctx, "order-10"); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("LookupKey of a key nobody has = %v, want ErrNotFound", err)
	}
	if _, err := kl.LookupKey(ctx, ""); !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("LookupKey of an empty key = %v, want ErrInvalid", err)
	}
	if n := len(listAll(t, s, eventlog.Filter{})); n != 2 {
		t.Fatalf("%d executions after the lookups, want 2: a lookup never creates", n)
	}
}
