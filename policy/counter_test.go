package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/eventtext"
	"github.com/forkline/forkline/replay"
)

// fold applies the events of text to a new Counter.
func fold(t *testing.T, text string) *Counter {
	t.Helper()
	evs, err := eventtext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter()
	for _, ev := range evs {
		if err := c.Apply(ev); err != nil {
			t.Fatalf("Apply(seq %d): %v", ev.Seq, err)
		}
	}
	return c
}

// counts renders Count and Due of keys as "ws=2 due, db=0".
func counts(c *Counter, keys ...string) string {
	var parts []string
	for _, k := range keys {
		s := fmt.Sprintf("%s=%d", k, c.Count(k))
		if c.Due(k) {
			s += " due"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

const prelude = `created agent=a
dispatch 1
bound ws driver=d every=3
captured ws ref=base gen=1 reason=baseline
`

// DESIGN §5 "Checkpoint policy": which calls count, what resets the count.
func TestCounter(t *testing.T) {
	tests := []struct {
		name   string
		events string // after prelude
		want   string // counts(ws)
	}{
		{"nothing yet", ``, "ws=0"},
		{"a succeeded tool call counts", `
started s1 tool write affects=ws
succeeded s1`, "ws=1"},
		{"a local step counts", `
started s1 local build affects=ws
succeeded s1`, "ws=1"},
		{"a failed call counts", `
started s1 tool write affects=ws
failed s1 err=boom`, "ws=1"},
		{"a call cancelled after starting counts", `
started s1 tool write affects=ws
cancelled s1`, "ws=1"},
		{"an indeterminate failure of an at_most_once orphan counts", `
started s1 tool write affects=ws idem=at_most_once
dispatch 2
failed s1 err=orphan indeterminate`, "ws=1"},
		{"an indeterminate failure of an unknown step counts nothing", `
failed s9 err=orphan indeterminate`, "ws=0"},
		{"a started call without a terminal event does not count yet", `
started s1 tool write affects=ws`, "ws=0"},
		{"an LLM call never counts, even if it lists the key", `
started s1 llm api.example.com affects=ws
succeeded s1`, "ws=0"},
		{"a denied call never counts", `
denied s1 tool write reason=no`, "ws=0"},
		{"a call that does not affect the key does not count", `
started s1 tool read
succeeded s1
started s2 tool query affects=db
succeeded s2`, "ws=0"},
		{"a safe_to_retry orphan re-run counts once", `
started s1 tool write affects=ws
dispatch 2
started s1 tool write affects=ws attempt=2
succeeded s1`, "ws=1"},
		{"a cancelled step re-run counts for both attempts", `
started s1 tool write affects=ws
cancelled s1
dispatch 2
started s1 tool write affects=ws attempt=2
succeeded s1`, "ws=2"},
		{"a cancelled at_most_once step resolved indeterminate counts once", `
started s1 tool write affects=ws idem=at_most_once
cancelled s1
dispatch 2
failed s1 err=orphan indeterminate`, "ws=1"},
		{"a second terminal event of one attempt is not counted again", `
started s1 tool write affects=ws
succeeded s1
succeeded s1`, "ws=1"},
		{"a new attempt after a landed one counts again", `
started s1 tool write affects=ws
cancelled s1
dispatch 2
started s1 tool write affects=ws attempt=2
cancelled s1
dispatch 3
failed s1 err=orphan indeterminate`, "ws=2"},
		{"the newest step.started decides what the terminal counts for", `
started s1 tool write affects=ws
dispatch 2
started s1 tool write attempt=2
succeeded s1`, "ws=0"},
		{"a key listed twice counts once", `
started s1 tool write affects=ws,ws
succeeded s1`, "ws=1"},
		{"the count reaching EverySteps makes a capture due", `
started s1 tool write affects=ws
succeeded s1
started s2 tool write affects=ws
succeeded s2
started s3 tool write affects=ws
succeeded s3`, "ws=3 due"},
		{"a capture resets the count", `
started s1 tool write affects=ws
succeeded s1
started s2 tool write affects=ws
succeeded s2
started s3 tool write affects=ws
succeeded s3
captured ws ref=r1 gen=4 reason=steps`, "ws=0"},
		{"a failed capture does not reset the count", `
started s1 tool write affects=ws
succeeded s1
started s2 tool write affects=ws
succeeded s2
started s3 tool write affects=ws
succeeded s3
capture_failed ws reason=steps err="disk full"
started s4 tool write affects=ws
succeeded s4`, "ws=4 due"},
		{"an own binding resets the count", `
started s1 tool write affects=ws
succeeded s1
bound ws driver=d from=r0 every=3`, "ws=0"},
		{"fork.created carries the count", `
started s1 tool write affects=ws
succeeded s1
started s2 tool write affects=ws
succeeded s2
fork parent=P at=9 select=ws:base@4/g3
dispatch 2
started s3 tool write affects=ws
succeeded s3`, "ws=3 due"},
		{"a fork's own binding from its selection resets the count", `
started s1 tool write affects=ws
succeeded s1
fork parent=P at=7 select=ws:base@4/g2
dispatch 2
bound ws driver=d from=base every=3`, "ws=0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := prelude + strings.TrimPrefix(tc.events, "\n")
			c := fold(t, text)
			if got := counts(c, "ws"); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			checkOver(t, text)
		})
	}
}

// checkOver folds text, event by event, into a Counter and into a
// replay.State with a NewCounterOver asking the State (the SDK's way), and
// checks that both counters answer the same after every event, up to an
// event the State refuses (where the SDK stops reading).
func checkOver(t *testing.T, text string) {
	t.Helper()
	evs, err := eventtext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	c, rs := NewCounter(), replay.New()
	over := NewCounterOver(rs.Started)
	for _, ev := range evs {
		if err := c.Apply(ev); err != nil {
			t.Fatalf("Apply(seq %d): %v", ev.Seq, err)
		}
		if err := rs.Apply(ev); err != nil {
			return
		}
		if err := over.Apply(ev); err != nil {
			t.Fatalf("NewCounterOver Apply(seq %d): %v", ev.Seq, err)
		}
		for _, k := range []string{"ws", "db"} {
			if got, want := counts(over, k), counts(c, k); got != want {
				t.Fatalf("after seq %d: NewCounterOver %s, NewCounter %s", ev.Seq, got, want)
			}
		}
		for _, id := range []string{"s1", "s2", "s3"} {
			if got, want := over.DueAfter(id), c.DueAfter(id); !slices.Equal(got, want) {
				t.Fatalf("after seq %d: DueAfter(%s): NewCounterOver %v, NewCounter %v", ev.Seq, id, got, want)
			}
		}
	}
}

// A NewCounterOver refuses a terminal event of a step its started function
// does not know, as NewCounter does, and writes nothing; an indeterminate
// step.failed of such a step counts nothing.
func TestCounterOverRefuses(t *testing.T) {
	evs, err := eventtext.Parse("created agent=a\nbound ws driver=d every=1\nstarted s1 tool t affects=ws\nsucceeded s1")
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	c := NewCounterOver(func(id string) bool { asked = append(asked, id); return false })
	for _, ev := range evs[:3] {
		if err := c.Apply(ev); err != nil {
			t.Fatalf("Apply(seq %d): %v", ev.Seq, err)
		}
	}
	err = c.Apply(evs[3])
	want := `policy: seq 4: step.succeeded of step "s1", which has no step.started`
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("Apply(succeeded) = %v, want one containing %q that wraps ErrInvalid", err, want)
	}
	if got := counts(c, "ws"); got != "ws=0" || !slices.Equal(asked, []string{"s1"}) {
		t.Fatalf("after the refused event: %s, started asked for %v", got, asked)
	}
	ind := eventlog.Event{Seq: 4, Data: &eventlog.StepFailed{StepID: "s1", Error: "lost", Indeterminate: true}}
	if err := c.Apply(ind); err != nil {
		t.Fatalf("Apply(indeterminate failed) = %v", err)
	}
	if got := counts(c, "ws"); got != "ws=0" {
		t.Fatalf("an indeterminate failure of an unknown step counted: %s", got)
	}
}

// DESIGN §5, §8.4: with EverySteps 5 a capture is due after the 5th and
// the 10th counted call, and only then.
func TestCounterEveryFive(t *testing.T) {
	evs, err := eventtext.Parse("created agent=a\ndispatch 1\nbound ws driver=d every=5\ncaptured ws ref=b gen=1 reason=baseline\n")
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter()
	for _, ev := range evs {
		if err := c.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	seq := uint64(len(evs))
	apply := func(p eventlog.Payload) {
		t.Helper()
		seq++
		if err := c.Apply(eventlog.Event{Seq: seq, Data: p}); err != nil {
			t.Fatal(err)
		}
	}
	var due []int
	for call := 1; call <= 12; call++ {
		id := fmt.Sprintf("s%d", call)
		apply(&eventlog.StepStarted{StepID: id, StepKind: eventlog.StepTool, Target: "write",
			Resources: []string{"ws"}, Idempotency: eventlog.SafeToRetry, Attempt: 1})
		if c.Due("ws") {
			t.Fatalf("due after step.started of call %d", call)
		}
		apply(&eventlog.StepSucceeded{StepID: id})
		if c.Due("ws") {
			due = append(due, call)
			apply(&eventlog.ResourceCaptured{Key: "ws", Ref: id, Generation: uint64(call + 1), Reason: eventlog.CaptureSteps})
			if c.Due("ws") || c.Count("ws") != 0 {
				t.Fatalf("after the capture of call %d: %s", call, counts(c, "ws"))
			}
		}
	}
	if fmt.Sprint(due) != "[5 10]" {
		t.Errorf("captures due after calls %v, want [5 10]", due)
	}
}

// DESIGN §5: each resource counts against its own recorded policy.
func TestCounterTwoResources(t *testing.T) {
	c := fold(t, `created agent=a
dispatch 1
bound ws driver=d every=2
bound db driver=sql every=3 completion=false
started s1 tool write affects=ws,db
succeeded s1
started s2 tool write affects=ws
succeeded s2
started s3 local migrate affects=db
failed s3 err=x`)
	if got, want := counts(c, "ws", "db", "other"), "ws=2 due, db=2, other=0"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if p, ok := c.Policy("ws"); !ok || p != (Checkpoints{EverySteps: 2, OnCompletion: true}) {
		t.Errorf("Policy(ws) = %+v, %v", p, ok)
	}
	if p, ok := c.Policy("db"); !ok || p != (Checkpoints{EverySteps: 3}) {
		t.Errorf("Policy(db) = %+v, %v", p, ok)
	}
	if p, ok := c.Policy("other"); ok {
		t.Errorf("Policy(other) = %+v, true; want false", p)
	}
}

// DESIGN §5 step 5: the newest resource.bound of the lineage holds the
// policy; an unbound key is never due, whatever its count.
func TestCounterPolicyNewestBinding(t *testing.T) {
	c := fold(t, `created agent=a
dispatch 1
bound ws driver=d every=4
fork parent=P at=3 select=ws:@0/g1
dispatch 2
bound ws driver=d every=1 completion=false`)
	if p, _ := c.Policy("ws"); p != (Checkpoints{EverySteps: 1}) {
		t.Errorf("Policy(ws) = %+v, want the newest binding's {1 false}", p)
	}
	c = fold(t, `created agent=a
dispatch 1
started s1 tool write affects=ghost
succeeded s1`)
	if got := counts(c, "ghost"); got != "ghost=1" {
		t.Errorf("got %s, want ghost=1 and not due", got)
	}
}

func TestCounterErrors(t *testing.T) {
	tests := []struct {
		events string
		want   string
	}{
		{"succeeded s1", "policy: seq 3: step.succeeded of step \"s1\", which has no step.started"},
		{"failed s1 err=x", "policy: seq 3: step.failed of step \"s1\", which has no step.started"},
		{"cancelled s1", "policy: seq 3: step.cancelled of step \"s1\", which has no step.started"},
		{"denied s1 tool t\nsucceeded s1", "policy: seq 4: step.succeeded of step \"s1\", which has no step.started"},
		{"bound ws driver=d every=0", "policy: seq 3:"},
		{"started \"\" tool t", "policy: seq 3:"},
	}
	for _, tc := range tests {
		evs, err := eventtext.Parse("created agent=a\nbound ws driver=d every=2\n" + tc.events)
		if err != nil {
			t.Fatal(err)
		}
		c := NewCounter()
		var got error
		for _, ev := range evs {
			if got = c.Apply(ev); got != nil {
				break
			}
		}
		if got == nil || !strings.Contains(got.Error(), tc.want) || !errors.Is(got, eventlog.ErrInvalid) {
			t.Errorf("%q: error %v, want one containing %q that wraps ErrInvalid", tc.events, got, tc.want)
		}
		// The failed Apply left the counter as it was.
		if p, _ := c.Policy("ws"); c.Count("ws") != 0 || c.Due("ws") || p.EverySteps != 2 {
			t.Errorf("%q: counter changed by a failed Apply: %s", tc.events, counts(c, "ws"))
		}
	}
	for _, ev := range []eventlog.Event{{Seq: 1}, {Seq: 1, Data: (*eventlog.StepSucceeded)(nil)}} {
		if err := NewCounter().Apply(ev); err == nil || !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Apply(%#v) = %v, want ErrInvalid", ev, err)
		}
	}
}

// DESIGN §5: DueAfter says, before a terminal event is applied, which keys
// Due would report once it is — the rule the SDK commits captures by.
func TestCounterDueAfter(t *testing.T) {
	tests := []struct {
		name   string
		events string // after prelude (ws every=3) and "bound db every=1"
		step   string
		want   string
	}{
		{"a started call below the threshold", `
started s1 tool write affects=ws,db`, "s1", "[db]"},
		{"the third counted call of ws", `
started s1 tool write affects=ws
succeeded s1
started s2 tool write affects=ws
failed s2 err=x
started s3 local build affects=db,ws,ws`, "s3", "[db ws]"},
		{"an LLM call is never due", `
started s1 llm api affects=db`, "s1", "[]"},
		{"an attempt already landed counts nothing more", `
started s1 tool write affects=db idem=at_most_once
cancelled s1
captured db ref=r gen=3 reason=steps
dispatch 2`, "s1", "[]"},
		{"a new attempt of a landed step counts", `
started s1 tool write affects=db
cancelled s1
captured db ref=r gen=3 reason=steps
dispatch 2
started s1 tool write affects=db attempt=2`, "s1", "[db]"},
		{"a key that is not bound is never due", `
started s1 tool write affects=ghost`, "s1", "[]"},
		{"a failed capture leaves it due at the next call", `
started s1 tool write affects=db
succeeded s1
capture_failed db reason=steps err=x
started s2 tool write affects=db`, "s2", "[db]"},
		{"the newest attempt's Resources decide", `
started s1 tool write affects=db
dispatch 2
started s1 tool write attempt=2`, "s1", "[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fold(t, prelude+"bound db driver=d every=1\n"+strings.TrimPrefix(tc.events, "\n"))
			before := counts(c, "ws", "db")
			got := c.DueAfter(tc.step)
			if fmt.Sprint(got) != tc.want && !(tc.want == "[]" && got == nil) {
				t.Errorf("DueAfter(%s) = %v, want %s", tc.step, got, tc.want)
			}
			if after := counts(c, "ws", "db"); after != before {
				t.Errorf("DueAfter changed the counts: %s, then %s", before, after)
			}
			if tc.want == "[]" && got != nil {
				t.Errorf("DueAfter(%s) = %#v, want nil", tc.step, got)
			}
			// Applying a terminal event of the step makes exactly those of
			// the keys it counted for due.
			countBefore := map[string]int{"db": c.Count("db"), "ws": c.Count("ws")}
			if err := c.Apply(eventlog.Event{Seq: 1000, Data: &eventlog.StepSucceeded{StepID: tc.step}}); err != nil {
				t.Fatal(err)
			}
			var due []string
			for _, k := range []string{"db", "ws"} {
				if c.Count(k) != countBefore[k] && c.Due(k) {
					due = append(due, k)
				}
			}
			if !slices.Equal(due, got) {
				t.Errorf("after the terminal event, the keys it counted for that are due: %v; DueAfter said %v", due, got)
			}
		})
	}
}
