package fork

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
)

// Plan is what a fork of Parent at At restores (DESIGN §5 "Forking"): one
// Selection per resource bound up to At, sorted by key, and whether the fork
// point is covered — every resource restores its exact state at At.
type Plan struct {
	Parent     eventlog.ID
	At         uint64
	Covered    bool
	Selections []coverage.Selection
}

// PlanFromFold plans a fork of parent at at from an in-memory fold of
// parent's lineage. It is pure. at must be in 1..f.Head() and parent must not
// be the zero ID; otherwise the error wraps [eventlog.ErrInvalid].
func PlanFromFold(f *coverage.Fold, parent eventlog.ID, at uint64) (Plan, error) {
	if f == nil {
		return Plan{}, fmt.Errorf("%w: fork: plan of %s at seq %d: nil fold", eventlog.ErrInvalid, parent, at)
	}
	if parent.IsZero() {
		return Plan{}, fmt.Errorf("%w: fork: plan at seq %d: zero parent ID", eventlog.ErrInvalid, at)
	}
	p, err := f.Point(at)
	if err != nil {
		return Plan{}, fmt.Errorf("fork: plan of %s: %w", parent, err)
	}
	return planOf(parent, p), nil
}

// PlanFromIndex plans a fork of parent at at from a store's checkpoint index
// ([coverage.At]), with a few index reads however long the lineage is. at
// must be in 1..head (otherwise the error wraps [eventlog.ErrInvalid]); an
// unknown parent is an error that wraps [eventlog.ErrNotFound].
func PlanFromIndex(ctx context.Context, idx eventlog.Index, parent eventlog.ID, at uint64) (Plan, error) {
	if parent.IsZero() {
		return Plan{}, fmt.Errorf("%w: fork: plan at seq %d: zero parent ID", eventlog.ErrInvalid, at)
	}
	p, err := coverage.At(ctx, idx, parent, at)
	if err != nil {
		return Plan{}, fmt.Errorf("fork: plan of %s: %w", parent, err)
	}
	return planOf(parent, p), nil
}

func planOf(parent eventlog.ID, p coverage.Point) Plan {
	return Plan{Parent: parent, At: p.Seq, Covered: p.Covered, Selections: p.Resources}
}

// Event returns the fork.created payload that records the plan: the fork's
// first own event.
func (p Plan) Event() *eventlog.ForkCreated {
	fc := &eventlog.ForkCreated{Parent: p.Parent, At: p.At}
	if len(p.Selections) > 0 {
		fc.Selections = make([]eventlog.ForkSelection, len(p.Selections))
		for i, s := range p.Selections {
			fc.Selections[i] = eventlog.ForkSelection{Key: s.Key, Ref: s.Ref, CapturedAt: s.CapturedAt,
				Generation: s.Generation, Covered: s.Covered}
		}
	}
	return fc
}

// Option edits the fork [Create] makes (DESIGN §12). Options are for any
// kernel, with or without the SDK: values are the bytes the kernel records
// (the SDK's are JSON).
type Option func(*options) error

type options struct {
	input     []byte
	overrides []eventlog.StepOverride
	messages  []eventlog.Message
	covered   bool
	deadline  time.Time
	version   *string // WithVersion; nil: the parent's
	budget    eventlog.Limits
	trace     string
}

// WithInput gives the fork a new handler input, recorded as fork.created's
// Input: the fork's run gets it instead of the lineage's. At seq 1 or 2 the
// fork is a clean re-run with the new input; later, recorded steps whose
// identity is unchanged replay and the rest run live (a kernel appends
// fork.diverged when it runs a live call while recorded steps of the prefix
// remain unconsumed). An empty input is [eventlog.ErrInvalid].
func WithInput(input []byte) Option {
	return func(o *options) error {
		if len(input) == 0 {
			return fmt.Errorf("%w: fork: empty input", eventlog.ErrInvalid)
		}
		o.input = slices.Clone(input)
		return nil
	}
}

// WithOverride makes the fork replay result as step stepID's result,
// whatever the lineage recorded; it is recorded in fork.created's
// Overrides. The step must have ended in the parent's lineage (succeeded
// or failed, not a retried attempt), and the fork point must be the
// terminal event of the earliest-ending overridden step — so a covered
// point restores the state right after it — with no other overridden step
// running at that point. A fork of an edited fork inherits its overrides,
// the newest per step winning. An empty stepID, or the same step twice, is
// [eventlog.ErrInvalid]; Create checks the rest against the lineage, which
// it then reads in full (up to the last overridden step's end).
func WithOverride(stepID string, result []byte) Option {
	return func(o *options) error {
		if stepID == "" {
			return fmt.Errorf("%w: fork: override of an empty step ID", eventlog.ErrInvalid)
		}
		for _, ov := range o.overrides {
			if ov.StepID == stepID {
				return fmt.Errorf("%w: fork: step %s overridden twice", eventlog.ErrInvalid, stepID)
			}
		}
		o.overrides = append(o.overrides, eventlog.StepOverride{StepID: stepID, Result: slices.Clone(result)})
		return nil
	}
}

// WithMessages injects msgs into the fork (DESIGN §18, §21½.16): they are
// received at fork.created, recorded in its Messages, after every message
// of the prefix, so that the fork's Recv calls return them once the
// prefix's are consumed (an edited conversation). A message without a
// MessageID or a topic, or two with one MessageID, is
// [eventlog.ErrInvalid]; Create refuses one whose MessageID the prefix
// received, reading the lineage up to the fork point.
func WithMessages(msgs ...eventlog.Message) Option {
	return func(o *options) error {
		for _, m := range msgs {
			switch {
			case m.MessageID == "":
				return fmt.Errorf("%w: fork: message without a message id", eventlog.ErrInvalid)
			case m.Topic == "":
				return fmt.Errorf("%w: fork: message %q without a topic", eventlog.ErrInvalid, m.MessageID)
			}
			for _, prev := range o.messages {
				if prev.MessageID == m.MessageID {
					return fmt.Errorf("%w: fork: message id %q twice", eventlog.ErrInvalid, m.MessageID)
				}
			}
			m.Value = slices.Clone(m.Value)
			o.messages = append(o.messages, m)
		}
		return nil
	}
}

// checkMessages refuses messages whose MessageID parent's lineage
// received at or before at.
func checkMessages(ctx context.Context, log eventlog.Log, parent eventlog.ID, at uint64, msgs []eventlog.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	st := replay.New()
	for ev, err := range log.Events(ctx, parent, 1) {
		if err != nil {
			return fmt.Errorf("fork: %s: %w", parent, err)
		}
		if ev.Seq > at {
			break
		}
		if err := st.Apply(ev); err != nil {
			return fmt.Errorf("fork: %s: %w", parent, err)
		}
	}
	for _, m := range msgs {
		if got, ok := st.Message(m.MessageID); ok {
			return fmt.Errorf("%w: fork: %s received message %q at seq %d, before the fork point %d",
				eventlog.ErrInvalid, parent, m.MessageID, got.ReceivedAt, at)
		}
	}
	return nil
}

// WithDeadline gives the fork its own deadline, recorded in fork.created's
// Deadline (a fork never inherits its parent's, DESIGN §8½). A zero t is
// [eventlog.ErrInvalid].
func WithDeadline(t time.Time) Option {
	return func(o *options) error {
		if t.IsZero() {
			return fmt.Errorf("%w: fork: zero deadline", eventlog.ErrInvalid)
		}
		o.deadline = eventlog.ClampWake(t.UTC())
		return nil
	}
}

// WithVersion moves the fork onto code version v (DESIGN §19, §21½.5):
// recorded in fork.created's Version, so that only workers of version v
// (or, for "", every worker) run it. Without it the fork keeps its
// parent's version (Info.Version). A version that is not valid UTF-8 or
// holds a NUL byte is [eventlog.ErrInvalid].
func WithVersion(v string) Option {
	return func(o *options) error {
		if err := eventlog.CheckVersionName(v); err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		o.version = &v
		return nil
	}
}

// WithBudget gives the fork its own budget, recorded in fork.created's
// Budget: it replaces the parent's, which a fork otherwise inherits (the
// one run setting it does, DESIGN §21½.9). The fork's spend still counts
// its prefix's. A budget without a limit is [eventlog.ErrInvalid]: it
// would record nothing and the parent's would apply.
func WithBudget(l eventlog.Limits) Option {
	return func(o *options) error {
		if l == (eventlog.Limits{}) {
			return fmt.Errorf("%w: fork: a budget without a limit", eventlog.ErrInvalid)
		}
		o.budget = l
		return nil
	}
}

// WithTraceParent records tp, the W3C traceparent of the fork's caller,
// in fork.created's TraceParent (DESIGN §13): a kernel's dispatches of the
// fork link their spans to it. Text that [eventlog.ParseTraceParent]
// refuses is [eventlog.ErrInvalid].
func WithTraceParent(tp string) Option {
	return func(o *options) error {
		if _, err := eventlog.ParseTraceParent(tp); err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		o.trace = tp
		return nil
	}
}

// RequireCovered makes Create refuse an uncovered fork point with an error
// wrapping [coverage.ErrUncovered], writing nothing.
func RequireCovered() Option {
	return func(o *options) error {
		o.covered = true
		return nil
	}
}

// Create forks parent at at: it plans the fork from log's index, then writes
// the fork — a new execution header pointing at (parent, at) and its
// fork.created — with log.Fork, copying no event. Its cost does not grow with
// at beyond the index lookups, except with [WithOverride], which reads the
// lineage to check the overrides. t is the fork's creation time (zero: the
// store's clock). opts edit the fork (DESIGN §12).
//
// Bad input (at 0 or past the head, an unknown parent, an override the
// lineage does not allow) writes nothing and returns an error that wraps
// [eventlog.ErrInvalid] or [eventlog.ErrNotFound]; so does an uncovered point
// under [RequireCovered], wrapping [coverage.ErrUncovered].
// The plan reflects the parent's log when it was read: a capture the parent
// appends between the plan and the write may cover at, and the fork will not
// know of it.
func Create(ctx context.Context, log eventlog.IndexedLog, parent eventlog.ID, at uint64, t time.Time, opts ...Option) (eventlog.ID, Plan, error) {
	if log == nil {
		return eventlog.ID{}, Plan{}, fmt.Errorf("%w: fork: nil log", eventlog.ErrInvalid)
	}
	var o options
	for _, opt := range opts {
		if opt == nil {
			return eventlog.ID{}, Plan{}, fmt.Errorf("%w: fork: nil option", eventlog.ErrInvalid)
		}
		if err := opt(&o); err != nil {
			return eventlog.ID{}, Plan{}, err
		}
	}
	plan, err := PlanFromIndex(ctx, log, parent, at)
	if err != nil {
		return eventlog.ID{}, Plan{}, err
	}
	if o.covered && !plan.Covered {
		return eventlog.ID{}, Plan{}, fmt.Errorf("%w: fork: %s at seq %d: %s", coverage.ErrUncovered, parent, at, uncoveredKeys(plan))
	}
	if err := CheckOverrides(ctx, log, parent, at, o.overrides); err != nil {
		return eventlog.ID{}, Plan{}, err
	}
	if err := checkMessages(ctx, log, parent, at, o.messages); err != nil {
		return eventlog.ID{}, Plan{}, err
	}
	fc := plan.Event()
	if o.version != nil {
		fc.Version = *o.version
	} else {
		info, err := log.Info(ctx, parent)
		if err != nil {
			return eventlog.ID{}, Plan{}, fmt.Errorf("fork: %s: %w", parent, err)
		}
		fc.Version = info.Version
	}
	fc.Input = o.input
	fc.Messages = o.messages
	fc.Deadline = o.deadline
	fc.Budget = o.budget
	fc.TraceParent = o.trace
	if len(o.overrides) > 0 {
		fc.Overrides = slices.Clone(o.overrides)
		slices.SortFunc(fc.Overrides, func(a, b eventlog.StepOverride) int { return strings.Compare(a.StepID, b.StepID) })
	}
	id, err := log.Fork(ctx, parent, at, fc, t)
	if err != nil {
		return eventlog.ID{}, Plan{}, fmt.Errorf("fork: %s at seq %d: %w", parent, at, err)
	}
	return id, plan, nil
}

// uncoveredKeys names the resources a plan does not restore exactly.
func uncoveredKeys(p Plan) string {
	var keys []string
	for _, s := range p.Selections {
		if !s.Covered {
			keys = append(keys, fmt.Sprintf("%q", s.Key))
		}
	}
	if len(keys) == 0 {
		return "uncovered"
	}
	return "resource(s) " + strings.Join(keys, ", ") + " not covered"
}

// CheckOverrides checks overrides of a fork of parent at at against the
// parent's lineage (DESIGN §12): every overridden step ended (succeeded,
// or failed for good) in the lineage; at is the terminal event of the one
// that ended first; and no other overridden step was running at at. The
// error names the step and wraps [eventlog.ErrInvalid]. It reads the
// lineage from seq 1 until every overridden step's end; no overrides read
// nothing.
func CheckOverrides(ctx context.Context, log eventlog.Log, parent eventlog.ID, at uint64, overrides []eventlog.StepOverride) error {
	if len(overrides) == 0 {
		return nil
	}
	if log == nil {
		return fmt.Errorf("%w: fork: nil log", eventlog.ErrInvalid)
	}
	type stepSeen struct {
		started   bool   // some attempt started
		running   bool   // an attempt is running (no terminal event since it started)
		runningAt bool   // an attempt was running at at
		ended     uint64 // seq of its step.succeeded or final step.failed
	}
	seen := make(map[string]*stepSeen, len(overrides))
	for _, o := range overrides {
		seen[o.StepID] = &stepSeen{}
	}
	left := len(overrides)
	land := func(id string, seq uint64, final bool) {
		if st := seen[id]; st != nil {
			st.running = false
			if final && st.ended == 0 {
				st.ended = seq
				left--
			}
		}
	}
	for ev, err := range log.Events(ctx, parent, 1) {
		if err != nil {
			return fmt.Errorf("fork: %s: read the lineage to check overrides: %w", parent, err)
		}
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if st := seen[p.StepID]; st != nil {
				st.started, st.running = true, true
			}
		case *eventlog.StepSucceeded:
			land(p.StepID, ev.Seq, true)
		case *eventlog.StepFailed:
			land(p.StepID, ev.Seq, p.RetryAt.IsZero())
		case *eventlog.StepCancelled:
			land(p.StepID, ev.Seq, false)
		case *eventlog.StepAbandoned:
			land(p.StepID, ev.Seq, false)
		}
		if ev.Seq == at {
			for _, st := range seen {
				st.runningAt = st.running
			}
		}
		if left == 0 && ev.Seq >= at {
			break
		}
	}
	first := ""
	for _, o := range overrides {
		st := seen[o.StepID]
		switch {
		case !st.started:
			return fmt.Errorf("%w: fork: %s: override of step %s, which the lineage never ran", eventlog.ErrInvalid, parent, o.StepID)
		case st.ended == 0:
			return fmt.Errorf("%w: fork: %s: override of step %s, which has not succeeded or failed in the lineage (its result is not recorded yet)",
				eventlog.ErrInvalid, parent, o.StepID)
		}
		if first == "" || st.ended < seen[first].ended {
			first = o.StepID
		}
	}
	if end := seen[first].ended; end != at {
		return fmt.Errorf("%w: fork: %s at seq %d: the fork point of an override must be the terminal event of the first overridden step to end: step %s ended at seq %d",
			eventlog.ErrInvalid, parent, at, first, end)
	}
	for _, o := range overrides {
		if st := seen[o.StepID]; st.runningAt && st.ended != at {
			return fmt.Errorf("%w: fork: %s at seq %d: overridden step %s is running at the fork point (it ends at seq %d)",
				eventlog.ErrInvalid, parent, at, o.StepID, st.ended)
		}
	}
	return nil
}
