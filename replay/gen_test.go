package replay

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
	"pgregory.net/rapid"
)

// chooser makes the generator's choices: rapid's draws in property tests,
// a seeded PRNG in benchmarks.
type chooser interface {
	// choose returns a number in [0, n), n ≥ 1.
	choose(n int, label string) int
}

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) choose(n int, label string) int { return rapid.IntRange(0, n-1).Draw(c.t, label) }

type randChooser struct{ r *rand.Rand }

func (c randChooser) choose(n int, _ string) int { return c.r.IntN(n) }

// action is one kind of next event the generator can write.
type action int

const (
	actDispatch      action = iota // dispatch.started
	actStart                       // step.started of a new step
	actLand                        // succeeded, failed or cancelled of a started step
	actResolve                     // re-run (safe_to_retry) or indeterminate failure (at_most_once) of an orphan or cancelled step
	actDeny                        // step.denied of a new step
	actBind                        // resource.bound
	actCapture                     // resource.captured
	actCaptureFailed               // resource.capture_failed
	actComplete                    // execution.completed
	actFail                        // execution.failed
	actFork                        // fork.created at the head
	actRetry                       // step.failed{RetryAt} of a started step: the attempt ends, a retry is pending
	actAbandon                     // step.abandoned of a started, cancelled or retrying step
	actPark                        // dispatch.parked
	actRequest                     // approval.requested of a new step
	actDecide                      // approval.granted or approval.rejected of an awaited approval
	actTimer                       // timer.started
	actFire                        // timer.fired of a started timer
	actMarker                      // marker.recorded, message.received or event.set
	actCancelRequest               // execution.cancel_requested
	actCancelled                   // execution.cancelled
	actDiverge                     // fork.diverged (in a fork)
	numActions
)

// weights says how often each action is drawn when it is possible, and
// how often a landing step succeeds, fails or is cancelled.
type weights struct {
	actions  [numActions]int
	outcomes [3]int // succeeded, failed, cancelled
}

// uniform explores every transition evenly: the property tests.
var uniform = weights{
	actions:  [numActions]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	outcomes: [3]int{1, 1, 1},
}

// workload is a long agent run: mostly tool, local and LLM steps that
// succeed, a checkpoint every few steps, the odd failure, cancellation,
// denial, retry, new dispatch and fork.
var workload = weights{
	actions: [numActions]int{
		actDispatch: 1, actStart: 40, actLand: 42, actResolve: 1, actDeny: 1, actBind: 1,
		actCapture: 8, actCaptureFailed: 1, actComplete: 1, actFail: 0, actFork: 1,
	},
	outcomes: [3]int{18, 1, 1},
}

// pick draws an index of w with probability proportional to its weight;
// at least one weight must be positive.
func pick(ch chooser, label string, w []int) int {
	total := 0
	for _, x := range w {
		total += x
	}
	r := ch.choose(total, label)
	for i, x := range w {
		if r < x {
			return i
		}
		r -= x
	}
	return len(w) - 1
}

// modelStep is what the generator believes about a step.
type modelStep struct {
	status   StepStatus
	attempts uint32
	kind     eventlog.StepKind
	target   string
	idem     eventlog.Idempotency
}

// history is a generated well-formed lineage with the generator's model of
// the state it folds into.
type history struct {
	events     []eventlog.Event
	status     Status
	terminal   bool     // the run ended (completed, failed, cancelled)
	dispatched bool     // a dispatch of this run started
	parked     bool     // the newest dispatch event is dispatch.parked
	approvals  []string // awaited approvals of this run
	timers     []string // started, not fired
	nTimers    int
	cancelReq  bool
	diverged   []string
	overridden map[string]bool
	dispatches uint64
	steps      map[string]*modelStep
	order      []string // step ids in order of first appearance
	running    []string // started steps without a terminal event
	cancelled  []string // cancelled steps not yet run again or resolved
	retrying   []string // steps whose newest attempt failed with a RetryAt
	abandoned  []string // abandoned steps not yet run again or resolved
	bound      []string // sorted
	boundAt    map[string]uint64
	forkSeq    uint64
}

var (
	stepKinds = []eventlog.StepKind{eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM, eventlog.StepChild, eventlog.StepRecv}
	// gatedKinds are the kinds a gate sees: recv is never gated (DESIGN §21½.1).
	gatedKinds = []eventlog.StepKind{eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM, eventlog.StepChild}
	targets    = []string{"read_file", "write_file", "run"}
	keys       = []string{"cache", "db", "ws"}
)

// generate returns a well-formed lineage of n ≥ 1 events.
func generate(ch chooser, n int, w weights) *history {
	h := &history{steps: make(map[string]*modelStep), boundAt: make(map[string]uint64), overridden: make(map[string]bool)}
	h.add(&eventlog.ExecutionCreated{Agent: "coder", Input: []byte(`{"task":"gen"}`)})
	for len(h.events) < n {
		var ws [numActions]int
		any := false
		for a := range numActions {
			if h.possible(a) {
				ws[a] = w.actions[a]
				any = any || ws[a] > 0
			}
		}
		if !any { // a finished execution with forks weighted 0: fork anyway
			ws[actFork] = 1
		}
		h.do(ch, action(pick(ch, "action", ws[:])), w)
		h.updateStatus()
	}
	return h
}

// updateStatus is the model of DESIGN §9's status.
func (h *history) updateStatus() {
	switch {
	case h.terminal:
	case h.parked || len(h.approvals) > 0:
		h.status = StatusWaiting
	case h.dispatched:
		h.status = StatusRunning
	default:
		h.status = StatusPending
	}
}

func (h *history) head() uint64 { return uint64(len(h.events)) }

func (h *history) add(p eventlog.Payload) {
	h.events = append(h.events, eventlog.Event{Seq: h.head() + 1, Data: p})
	if _, ok := p.(*eventlog.ExecutionCreated); ok {
		h.status = StatusPending
	}
}

func (h *history) possible(a action) bool {
	if h.terminal {
		return a == actFork
	}
	switch a {
	case actLand, actRetry:
		return len(h.running) > 0
	case actResolve:
		return len(h.running)+len(h.cancelled)+len(h.retrying)+len(h.abandoned) > 0
	case actAbandon:
		return len(h.running)+len(h.cancelled)+len(h.retrying) > 0
	case actPark:
		return h.dispatched && !h.parked
	case actDecide:
		return len(h.approvals) > 0
	case actFire:
		return len(h.timers) > 0
	case actDiverge:
		return h.forkSeq > 0 && len(h.order) > 0
	case actCapture, actCaptureFailed:
		return len(h.bound) > 0
	}
	return true
}

func (h *history) newStep(kind eventlog.StepKind, target string) string {
	id := fmt.Sprintf("s%d", len(h.order)+1)
	h.order = append(h.order, id)
	h.steps[id] = &modelStep{kind: kind, target: target}
	return id
}

func (h *history) do(ch chooser, a action, w weights) {
	seq := h.head() + 1
	switch a {
	case actDispatch:
		h.dispatches++
		h.dispatched, h.parked = true, false
		h.add(&eventlog.DispatchStarted{Dispatch: h.dispatches})

	case actStart:
		kind := stepKinds[ch.choose(len(stepKinds), "kind")]
		target := targets[ch.choose(len(targets), "target")]
		id := h.newStep(kind, target)
		st := h.steps[id]
		st.status, st.attempts = StepStarted, 1
		st.idem = []eventlog.Idempotency{eventlog.SafeToRetry, eventlog.AtMostOnce}[ch.choose(2, "idem")]
		var res []string
		var wake time.Time
		if kind == eventlog.StepRecv {
			wake = genTime(seq) // a recv step records its timeout, affects nothing
		} else if kind != eventlog.StepLLM && len(h.bound) > 0 {
			mask := ch.choose(1<<len(h.bound), "affects")
			for i, k := range h.bound {
				if mask&(1<<i) != 0 {
					res = append(res, k)
				}
			}
		}
		h.running = append(h.running, id)
		h.add(&eventlog.StepStarted{StepID: id, StepKind: kind, Target: target,
			Args: fmt.Appendf(nil, `{"seq":%d}`, seq), Resources: res, Idempotency: st.idem, Attempt: 1, WakeAt: wake})

	case actLand:
		i := ch.choose(len(h.running), "land")
		id := h.running[i]
		h.running = remove(h.running, i)
		st := h.steps[id]
		switch pick(ch, "outcome", w.outcomes[:]) {
		case 0:
			st.status = StepSucceeded
			if st.kind == eventlog.StepRecv {
				// A recv step returns a message of its topic: one arrives
				// first (DESIGN §18).
				h.add(&eventlog.MessageReceived{MessageID: fmt.Sprintf("for%d", seq), Topic: st.target, Value: []byte(`"m"`)})
			}
			h.add(&eventlog.StepSucceeded{StepID: id, Result: fmt.Appendf(nil, "result %d", seq)})
		case 1:
			st.status = StepFailed
			h.add(&eventlog.StepFailed{StepID: id, Error: fmt.Sprintf("error %d", seq)})
		default:
			st.status = StepCancelled
			h.cancelled = append(h.cancelled, id)
			h.add(&eventlog.StepCancelled{StepID: id})
		}

	case actRetry:
		i := ch.choose(len(h.running), "retry")
		id := h.running[i]
		h.running = remove(h.running, i)
		h.steps[id].status = StepRetrying
		h.retrying = append(h.retrying, id)
		h.add(&eventlog.StepFailed{StepID: id, Error: fmt.Sprintf("attempt failed %d", seq), RetryAt: genTime(seq)})

	case actAbandon:
		var id string
		i := ch.choose(len(h.running)+len(h.cancelled)+len(h.retrying), "abandon")
		switch {
		case i < len(h.running):
			id = h.running[i]
			h.running = remove(h.running, i)
		case i < len(h.running)+len(h.cancelled):
			i -= len(h.running)
			id = h.cancelled[i]
			h.cancelled = remove(h.cancelled, i)
		default:
			i -= len(h.running) + len(h.cancelled)
			id = h.retrying[i]
			h.retrying = remove(h.retrying, i)
		}
		h.steps[id].status = StepAbandoned
		h.abandoned = append(h.abandoned, id)
		h.add(&eventlog.StepAbandoned{StepID: id})

	case actPark:
		h.parked = true
		switch ch.choose(4, "park reason") {
		case 0:
			h.add(&eventlog.DispatchParked{WakeAt: genTime(seq), Reason: eventlog.ParkTimer})
		case 1:
			h.add(&eventlog.DispatchParked{Reason: eventlog.ParkApproval})
		case 2:
			h.add(&eventlog.DispatchParked{WakeAt: genTime(seq), Reason: eventlog.ParkRateLimit})
		default:
			h.add(&eventlog.DispatchParked{Reason: eventlog.ParkMessage})
		}

	case actRequest:
		id := fmt.Sprintf("a%d", seq) // never a step of the lineage
		i, _ := slices.BinarySearch(h.approvals, id)
		h.approvals = slices.Insert(h.approvals, i, id)
		h.add(&eventlog.ApprovalRequested{StepID: id, StepKind: eventlog.StepTool, Target: "rm", Reason: "ask"})

	case actDecide:
		i := ch.choose(len(h.approvals), "decide")
		id := h.approvals[i]
		h.approvals = remove(h.approvals, i)
		if ch.choose(2, "grant") == 0 {
			h.add(&eventlog.ApprovalGranted{StepID: id, By: "bob"})
		} else {
			h.add(&eventlog.ApprovalRejected{StepID: id, By: "bob"})
		}

	case actTimer:
		h.nTimers++
		id := fmt.Sprintf("t%d", seq)
		h.timers = append(h.timers, id)
		h.add(&eventlog.TimerStarted{TimerID: id, WakeAt: genTime(seq)})

	case actFire:
		i := ch.choose(len(h.timers), "fire")
		id := h.timers[i]
		h.timers = remove(h.timers, i)
		h.add(&eventlog.TimerFired{TimerID: id})

	case actMarker:
		// The bodiless records: a marker, or Part III's message.received
		// and event.set (they advance nothing, DESIGN §8½).
		switch ch.choose(3, "bodiless") {
		case 0:
			h.add(&eventlog.MarkerRecorded{Name: fmt.Sprintf("m%d", ch.choose(3, "marker"))})
		case 1:
			h.add(&eventlog.MessageReceived{MessageID: fmt.Sprintf("msg%d", seq), Topic: "chat", Value: []byte(`"hi"`), From: "user"})
		default:
			h.add(&eventlog.EventSet{Key: "progress", Value: fmt.Appendf(nil, "%d", seq)})
		}

	case actCancelRequest:
		h.cancelReq = true
		h.add(&eventlog.CancelRequested{Reason: "stop", By: "user"})

	case actCancelled:
		h.status, h.terminal = StatusCancelled, true
		h.parked, h.approvals = false, nil
		h.add(&eventlog.ExecutionCancelled{Reason: "stop"})

	case actDiverge:
		n := 1 + ch.choose(min(3, len(h.order)), "unconsumed")
		h.diverged = nil
		for range n {
			h.diverged = append(h.diverged, h.order[ch.choose(len(h.order), "step")])
		}
		h.add(&eventlog.ForkDiverged{Unconsumed: slices.Clone(h.diverged)})

	case actResolve:
		var id string
		i := ch.choose(len(h.running)+len(h.cancelled)+len(h.retrying)+len(h.abandoned), "resolve")
		switch {
		case i < len(h.running):
			id = h.running[i]
			h.running = remove(h.running, i)
		case i < len(h.running)+len(h.cancelled):
			i -= len(h.running)
			id = h.cancelled[i]
			h.cancelled = remove(h.cancelled, i)
		case i < len(h.running)+len(h.cancelled)+len(h.retrying):
			i -= len(h.running) + len(h.cancelled)
			id = h.retrying[i]
			h.retrying = remove(h.retrying, i)
		default:
			i -= len(h.running) + len(h.cancelled) + len(h.retrying)
			id = h.abandoned[i]
			h.abandoned = remove(h.abandoned, i)
		}
		st := h.steps[id]
		if st.idem == eventlog.AtMostOnce && st.status != StepRetrying {
			st.status = StepFailed
			h.add(&eventlog.StepFailed{StepID: id, Error: "orphan", Indeterminate: true})
			return
		}
		h.running = append(h.running, id)
		st.status = StepStarted
		st.attempts++
		var res []string
		var wake time.Time
		if st.kind == eventlog.StepRecv {
			wake = genTime(seq)
		}
		for _, k := range h.bound {
			if st.kind != eventlog.StepLLM && st.kind != eventlog.StepRecv && ch.choose(2, "affects") == 1 {
				res = append(res, k)
			}
		}
		h.add(&eventlog.StepStarted{StepID: id, StepKind: st.kind, Target: st.target,
			Args: fmt.Appendf(nil, `{"seq":%d}`, seq), Resources: res, Idempotency: st.idem, Attempt: st.attempts, WakeAt: wake})

	case actDeny:
		kind := gatedKinds[ch.choose(len(gatedKinds), "kind")]
		target := targets[ch.choose(len(targets), "target")]
		id := h.newStep(kind, target)
		h.steps[id].status = StepDenied
		code := []eventlog.DenialCode{"", eventlog.DenyPolicy, eventlog.DenyRateLimited, eventlog.DenyBudget,
			eventlog.DenyApprovalExpired, eventlog.DenyApprovalRejected}[ch.choose(6, "code")]
		h.add(&eventlog.StepDenied{StepID: id, StepKind: kind, Target: target, Reason: "no", Code: code})

	case actBind:
		key := keys[ch.choose(len(keys), "key")]
		if i, found := slices.BinarySearch(h.bound, key); !found {
			h.bound = slices.Insert(h.bound, i, key)
		}
		h.boundAt[key] = seq
		from := ""
		if ch.choose(2, "from") == 1 {
			from = fmt.Sprintf("r%d", seq)
		}
		h.add(&eventlog.ResourceBound{Key: key, DriverID: "d-" + key,
			Configuration: json.RawMessage(`{"v":1}`), Binding: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq)),
			From: from, EverySteps: 1 + ch.choose(5, "every"), OnCompletion: ch.choose(2, "completion") == 1,
			CoverageReuse: ch.choose(2, "reuse") == 1})

	case actCapture:
		key := h.bound[ch.choose(len(h.bound), "key")]
		h.add(&eventlog.ResourceCaptured{Key: key, Ref: fmt.Sprintf("r%d", seq), Generation: 1, Reason: eventlog.CaptureSteps})

	case actCaptureFailed:
		key := h.bound[ch.choose(len(h.bound), "key")]
		h.add(&eventlog.ResourceCaptureFailed{Key: key, Reason: eventlog.CaptureSteps, Error: "disk full"})

	case actComplete:
		h.status, h.terminal = StatusCompleted, true
		h.parked, h.approvals = false, nil
		h.add(&eventlog.ExecutionCompleted{Output: fmt.Appendf(nil, "output %d", seq)})

	case actFail:
		h.status, h.terminal = StatusFailed, true
		h.parked, h.approvals = false, nil
		h.add(&eventlog.ExecutionFailed{Code: eventlog.FailHandler, Error: "boom"})

	case actFork:
		var sels []eventlog.ForkSelection
		for _, k := range h.bound {
			sel := eventlog.ForkSelection{Key: k, Generation: 1}
			if ch.choose(2, "selected") == 1 {
				sel.Ref, sel.CapturedAt = fmt.Sprintf("r%d", h.boundAt[k]), h.boundAt[k]
				sel.Covered = ch.choose(2, "covered") == 1
			}
			sels = append(sels, sel)
		}
		// Override some terminal steps, and now and then one the lineage
		// does not hold (a step past the fork point).
		var overrides []eventlog.StepOverride
		for _, id := range h.order {
			st := h.steps[id]
			if (st.status == StepSucceeded || st.status == StepFailed) && ch.choose(4, "override") == 0 {
				st.status = StepSucceeded
				h.overridden[id] = true
				overrides = append(overrides, eventlog.StepOverride{StepID: id, Result: fmt.Appendf(nil, "edited %d", seq)})
			}
		}
		if ch.choose(4, "override later") == 0 {
			id := fmt.Sprintf("later%d", seq)
			h.overridden[id] = true
			overrides = append(overrides, eventlog.StepOverride{StepID: id, Result: []byte("later")})
		}
		slices.SortFunc(overrides, func(a, b eventlog.StepOverride) int { return strings.Compare(a.StepID, b.StepID) })
		h.status, h.terminal, h.dispatched, h.parked = StatusPending, false, false, false
		h.approvals, h.cancelReq, h.diverged = nil, false, nil
		h.forkSeq = seq
		h.add(&eventlog.ForkCreated{Parent: eventlog.ID{'P'}, At: h.head(), Selections: sels, Overrides: overrides})
	}
}

// genTime is a fixed time that depends on seq only.
func genTime(seq uint64) time.Time {
	return time.Date(2025, 1, 1, 0, 0, int(seq), 0, time.UTC)
}

// remove returns ids without its i-th element, order kept.
func remove(ids []string, i int) []string { return slices.Delete(ids, i, i+1) }
