package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// Tamperer reaches a store's stored event records behind its back, as a
// careless operator or a damaged disk would: TestTamper's way in.
type Tamperer interface {
	// Record returns the stored record of event seq of execution id.
	Record(t testing.TB, id eventlog.ID, seq uint64) []byte
	// SetRecord stores rec as the record of event seq of id.
	SetRecord(t testing.TB, id eventlog.ID, seq uint64, rec []byte)
	// DeleteRecord removes the record of event seq of id.
	DeleteRecord(t testing.TB, id eventlog.ID, seq uint64)
}

// TestTamper checks that a damaged history is never read as good data: on
// the stores open makes (a fresh store each call, and a Tamperer into it),
// records of an execution A are swapped (seqs 3 and 4), overwritten by a
// valid record of another execution (seq 6), deleted (seq 5) or have a
// byte flipped (seq 4). After each, reading A's lineage, or that of a fork
// of A made before the damage, yields at most the events before the
// damage (a store that reads in pages may yield fewer) and then an error that wraps ErrCorrupt and is a *CorruptionError naming A
// and the first damaged seq; PrefixVerifier.VerifyPrefix of A (or of that
// fork) at or past the damage reports the same error and writes nothing,
// and passes before it; Fork, which reads no record of the prefix (DESIGN
// §5), makes a fork at or past the damage whose lineage reads as damaged,
// and a fork before it reads whole; the other execution reads whole.
func TestTamper(t *testing.T, open func(t *testing.T) (eventlog.Log, Tamperer)) {
	for _, c := range []struct {
		name   string
		bad    uint64 // the first seq that no longer reads
		damage func(t *testing.T, tp Tamperer, a, b eventlog.ID)
	}{
		{"swap 3 and 4", 3, func(t *testing.T, tp Tamperer, a, _ eventlog.ID) {
			r3, r4 := tp.Record(t, a, 3), tp.Record(t, a, 4)
			tp.SetRecord(t, a, 3, r4)
			tp.SetRecord(t, a, 4, r3)
		}},
		{"another execution's 6", 6, func(t *testing.T, tp Tamperer, a, b eventlog.ID) {
			tp.SetRecord(t, a, 6, tp.Record(t, b, 6))
		}},
		{"delete 5", 5, func(t *testing.T, tp Tamperer, a, _ eventlog.ID) {
			tp.DeleteRecord(t, a, 5)
		}},
		{"flip a byte of 4", 4, func(t *testing.T, tp Tamperer, a, _ eventlog.ID) {
			rec := slices.Clone(tp.Record(t, a, 4))
			rec[len(rec)-1] ^= 0x01
			tp.SetRecord(t, a, 4, rec)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, tp := open(t)
			testTamper(t, s, tp, c.bad, c.damage)
		})
	}
}

// tamperEvents are the own events, after execution.created, of a tamper
// test's execution: seqs 2 to 8, the results marked with tag.
func tamperEvents(tag string) []eventlog.Event {
	evs := []eventlog.Event{{Data: &eventlog.DispatchStarted{Dispatch: 1}}}
	for i := range 3 {
		step := fmt.Sprintf("s%d", i)
		evs = append(evs,
			eventlog.Event{Data: &eventlog.StepStarted{StepID: step, StepKind: eventlog.StepTool, Target: "t",
				Idempotency: eventlog.SafeToRetry, Attempt: 1}},
			eventlog.Event{Data: &eventlog.StepSucceeded{StepID: step, Result: []byte(`"` + tag + `"`)}})
	}
	return evs
}

func testTamper(t *testing.T, s eventlog.Log, tp Tamperer, bad uint64, damage func(*testing.T, Tamperer, eventlog.ID, eventlog.ID)) {
	ctx := t.Context()
	newExec := func(tag string) eventlog.ID {
		id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`"` + tag + `"`)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if head := appendAll(t, s, id, tamperEvents(tag)); head != 8 {
			t.Fatalf("head %d, want 8", head)
		}
		return id
	}
	a, b := newExec("A"), newExec("B")
	f, err := s.Fork(ctx, a, 8, &eventlog.ForkCreated{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	before := readEvents(t, s, a)
	wantB := readEvents(t, s, b)
	listed := len(listAll(t, s, eventlog.Filter{}))

	damage(t, tp, a, b)

	wantDamage := func(what string, err error) {
		t.Helper()
		var ce *eventlog.CorruptionError
		if !errors.Is(err, eventlog.ErrCorrupt) || !errors.As(err, &ce) || ce.Execution != a || ce.Seq != bad {
			t.Errorf("%s = %v; want ErrCorrupt, a *CorruptionError naming %s seq %d", what, err, a, bad)
		}
	}
	for _, id := range []eventlog.ID{a, f} {
		got, err := collect(t, s.Events(ctx, id, 1))
		wantDamage(fmt.Sprintf("Events(%s)", id), err)
		// A store that reads in pages may yield fewer; never a damaged one.
		if len(got) > int(bad-1) || !sameEvents(got, before[:len(got)]) {
			t.Errorf("Events(%s) yielded %v before the error, want at most %v", id, kinds(got), kinds(before[:bad-1]))
		}
	}
	if got := readEvents(t, s, b); !sameEvents(got, wantB) {
		t.Errorf("the other execution reads %v, want %v", kinds(got), kinds(wantB))
	}
	var pv eventlog.PrefixVerifier
	if !eventlog.As(s, &pv) {
		t.Fatalf("%T is no eventlog.PrefixVerifier", s)
	}
	for _, at := range []uint64{bad, 8} {
		wantDamage(fmt.Sprintf("VerifyPrefix(A, %d)", at), pv.VerifyPrefix(ctx, a, at))
	}
	wantDamage("VerifyPrefix(fork of A, 9)", pv.VerifyPrefix(ctx, f, 9))
	if err := pv.VerifyPrefix(ctx, a, bad-1); err != nil {
		t.Errorf("VerifyPrefix(A, %d), before the damage: %v", bad-1, err)
	}
	if err := pv.VerifyPrefix(ctx, b, 8); err != nil {
		t.Errorf("VerifyPrefix(B, 8): %v", err)
	}
	if err := pv.VerifyPrefix(ctx, a, 9); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("VerifyPrefix(A, 9) past the head = %v, want ErrInvalid", err)
	}
	if n := len(listAll(t, s, eventlog.Filter{})); n != listed {
		t.Errorf("%d executions after VerifyPrefix, want %d: it wrote", n, listed)
	}
	late, err := s.Fork(ctx, a, 8, &eventlog.ForkCreated{}, time.Now())
	if err != nil {
		t.Fatalf("Fork(A, 8) after the damage: %v (Fork reads no record of the prefix)", err)
	}
	_, err = collect(t, s.Events(ctx, late, 1))
	wantDamage("Events(fork of A at 8, made after the damage)", err)
	g, err := s.Fork(ctx, a, bad-1, &eventlog.ForkCreated{}, time.Now())
	if err != nil {
		t.Fatalf("Fork(A, %d), before the damage: %v", bad-1, err)
	}
	if got := readEvents(t, s, g); !sameEvents(got[:bad-1], before[:bad-1]) || len(got) != int(bad) {
		t.Errorf("the fork before the damage reads %v, want %v and fork.created", kinds(got), kinds(before[:bad-1]))
	}
}
