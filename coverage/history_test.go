package coverage_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// history builds a lineage's events the way the SDK writes them, for the
// golden scenarios. Captures take the resource's current generation and a
// fork's selections come from the naive model, so the builder never asks the
// code under test.
type history struct {
	id       eventlog.ID
	events   []eventlog.Event
	dispatch uint64
}

// testID returns a fixed, readable execution ID: 00000000-0000-7000-8000-0000000000NN.
func testID(n byte) eventlog.ID {
	var id eventlog.ID
	id[6], id[8], id[15] = 0x70, 0x80, n
	return id
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newHistory starts a root execution of agent with ID testID(n).
func newHistory(n byte, agent string) *history {
	h := &history{id: testID(n)}
	return h.add(&eventlog.ExecutionCreated{Agent: agent})
}

func (h *history) head() uint64 { return uint64(len(h.events)) }

func (h *history) add(p eventlog.Payload) *history {
	seq := h.head() + 1
	h.events = append(h.events, eventlog.Event{Seq: seq, Time: epoch.Add(time.Duration(seq) * time.Second), Data: p})
	return h
}

// run starts a dispatch.
func (h *history) run() *history {
	h.dispatch++
	return h.add(&eventlog.DispatchStarted{Dispatch: h.dispatch})
}

// bindOpts is a resource.bound's policy and origin.
type bindOpts struct {
	From         string
	Every        int
	NoCompletion bool
	Reuse        bool
}

func (h *history) bind(key string, o bindOpts) *history {
	if o.Every == 0 {
		o.Every = 1
	}
	return h.add(&eventlog.ResourceBound{
		Key: key, DriverID: "test." + key, Configuration: json.RawMessage(`{"v":1}`),
		Binding: json.RawMessage(fmt.Sprintf(`{"n":%d}`, h.head()+1)), From: o.From,
		EverySteps: o.Every, OnCompletion: !o.NoCompletion, CoverageReuse: o.Reuse,
	})
}

// policy returns the options of key's newest resource.bound in the lineage,
// without From.
func (h *history) policy(key string) bindOpts {
	for i := len(h.events) - 1; i >= 0; i-- {
		if p, ok := h.events[i].Data.(*eventlog.ResourceBound); ok && p.Key == key {
			return bindOpts{Every: p.EverySteps, NoCompletion: !p.OnCompletion, Reuse: p.CoverageReuse}
		}
	}
	return bindOpts{}
}

// capture records a checkpoint of key at its current generation.
func (h *history) capture(key, ref string, reason eventlog.CaptureReason) *history {
	gen := naiveGeneration(h.events, key, len(h.events))
	return h.add(&eventlog.ResourceCaptured{Key: key, Ref: ref, Generation: gen, Reason: reason})
}

func (h *history) captureFailed(key string, reason eventlog.CaptureReason) *history {
	return h.add(&eventlog.ResourceCaptureFailed{Key: key, Reason: reason, Error: "driver: snapshot failed"})
}

// start writes a step.started. The step ID is id; its target the part of id
// before '#'.
func (h *history) start(id string, kind eventlog.StepKind, affects ...string) *history {
	return h.startWith(id, kind, eventlog.SafeToRetry, 1, affects...)
}

func (h *history) startWith(id string, kind eventlog.StepKind, idem eventlog.Idempotency, attempt uint32, affects ...string) *history {
	target, _, _ := strings.Cut(id, "#")
	return h.add(&eventlog.StepStarted{StepID: id, StepKind: kind, Target: target,
		Args: []byte(`{}`), Resources: affects, Idempotency: idem, Attempt: attempt})
}

func (h *history) succeed(id string) *history {
	return h.add(&eventlog.StepSucceeded{StepID: id, Result: []byte(`"ok"`)})
}

func (h *history) fail(id string) *history {
	return h.add(&eventlog.StepFailed{StepID: id, Error: "tool error"})
}

func (h *history) indeterminate(id string) *history {
	return h.add(&eventlog.StepFailed{StepID: id, Error: "orphaned at_most_once step", Indeterminate: true})
}

func (h *history) cancel(id string) *history { return h.add(&eventlog.StepCancelled{StepID: id}) }

func (h *history) deny(id string, kind eventlog.StepKind) *history {
	target, _, _ := strings.Cut(id, "#")
	return h.add(&eventlog.StepDenied{StepID: id, StepKind: kind, Target: target, Reason: "not allowed"})
}

// llm is one recorded LLM call.
func (h *history) llm(id string) *history { return h.start(id, eventlog.StepLLM).succeed(id) }

// tool is one live tool call that succeeded.
func (h *history) tool(id string, affects ...string) *history {
	return h.start(id, eventlog.StepTool, affects...).succeed(id)
}

func (h *history) completed() *history {
	return h.add(&eventlog.ExecutionCompleted{Output: []byte(`{"answer":"done"}`)})
}

func (h *history) failed(code eventlog.FailureCode) *history {
	return h.add(&eventlog.ExecutionFailed{Error: "failed", Code: code})
}

// fork returns the lineage of a fork (ID testID(n)) of h at seq at: h's
// events 1..at, then fork.created with the naive model's selections over
// all of h.
func (h *history) fork(n byte, at uint64) *history {
	f := &history{id: testID(n), events: slices.Clone(h.events[:at])}
	for _, ev := range f.events {
		if d, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			f.dispatch = d.Dispatch
		}
	}
	return f.add(&eventlog.ForkCreated{Parent: h.id, At: at, Selections: naiveSelections(h.events, at)})
}

// describe is the full text of an event for the golden files' history.
func describe(ev eventlog.Event) string {
	var b strings.Builder
	b.WriteString(ev.Kind().String())
	switch p := ev.Data.(type) {
	case *eventlog.ExecutionCreated:
		fmt.Fprintf(&b, " agent=%s", p.Agent)
	case *eventlog.DispatchStarted:
		fmt.Fprintf(&b, " dispatch=%d", p.Dispatch)
	case *eventlog.StepStarted:
		fmt.Fprintf(&b, " step=%s kind=%s", p.StepID, p.StepKind)
		if len(p.Resources) > 0 {
			fmt.Fprintf(&b, " affects=%s", strings.Join(p.Resources, ","))
		}
		fmt.Fprintf(&b, " %s attempt=%d", p.Idempotency, p.Attempt)
	case *eventlog.StepSucceeded:
		fmt.Fprintf(&b, " step=%s", p.StepID)
	case *eventlog.StepFailed:
		fmt.Fprintf(&b, " step=%s error=%q", p.StepID, p.Error)
		if p.Indeterminate {
			b.WriteString(" indeterminate")
		}
	case *eventlog.StepCancelled:
		fmt.Fprintf(&b, " step=%s", p.StepID)
	case *eventlog.StepDenied:
		fmt.Fprintf(&b, " step=%s kind=%s reason=%q", p.StepID, p.StepKind, p.Reason)
	case *eventlog.ResourceBound:
		from := p.From
		if from == "" {
			from = "(initial)"
		}
		fmt.Fprintf(&b, " key=%s from=%s every_steps=%d on_completion=%t", p.Key, from, p.EverySteps, p.OnCompletion)
		if p.CoverageReuse {
			b.WriteString(" coverage_reuse")
		}
	case *eventlog.ResourceCaptured:
		fmt.Fprintf(&b, " key=%s ref=%s generation=%d reason=%s", p.Key, p.Ref, p.Generation, p.Reason)
	case *eventlog.ResourceCaptureFailed:
		fmt.Fprintf(&b, " key=%s reason=%s error=%q", p.Key, p.Reason, p.Error)
	case *eventlog.ExecutionCompleted:
	case *eventlog.ExecutionFailed:
		fmt.Fprintf(&b, " code=%s", p.Code)
	case *eventlog.ForkCreated:
		fmt.Fprintf(&b, " parent=%s at=%d", p.Parent, p.At)
		for _, s := range p.Selections {
			fmt.Fprintf(&b, " %s=%s/g%d", s.Key, refAt(s.Ref, s.CapturedAt), s.Generation)
			if s.Covered {
				b.WriteString("/covered")
			}
		}
	}
	return b.String()
}

// subject is the short form of an event for the golden files' table.
func subject(ev eventlog.Event) string {
	s := ev.Kind().String()
	switch p := ev.Data.(type) {
	case *eventlog.StepStarted:
		return s + " " + p.StepID
	case *eventlog.StepSucceeded:
		return s + " " + p.StepID
	case *eventlog.StepFailed:
		return s + " " + p.StepID
	case *eventlog.StepCancelled:
		return s + " " + p.StepID
	case *eventlog.StepDenied:
		return s + " " + p.StepID
	case *eventlog.ResourceBound:
		return s + " " + p.Key
	case *eventlog.ResourceCaptured:
		return s + " " + p.Key
	case *eventlog.ResourceCaptureFailed:
		return s + " " + p.Key
	case *eventlog.ForkCreated:
		return fmt.Sprintf("%s at=%d", s, p.At)
	}
	return s
}

// refAt is a checkpoint as the golden files show it: ref@capturedAt, or
// (initial) for the initial environment.
func refAt(ref string, at uint64) string {
	if ref == "" {
		return "(initial)"
	}
	return fmt.Sprintf("%s@%d", ref, at)
}

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
