package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/driver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/replay"
	"github.com/forkline/forkline/resource"
)

// dispatch is one Run of one execution: the folds of its lineage, kept
// current with every append, and the resources this dispatch obtained.
type dispatch struct {
	k  *Kernel
	id eventlog.ID
	// exec is id's forkline.execution.id attribute when the kernel traces
	// (telemetry.execAttr), made once for every span of the dispatch.
	exec attribute.KeyValue

	// mu guards the fields below and orders appends: every append, and every
	// capture taken for one, happens under it.
	mu      sync.Mutex
	state   *replay.State
	cov     *coverage.Fold
	counter *policy.Counter
	occ     map[[16]byte]uint64 // occurrences of (kind, target, args), by StepID at occurrence 0
	res     map[string]*bound   // resources obtained in this dispatch
	dead    error               // an append failed: the dispatch stops
	// deferred holds step.started events folded but not yet written: on a
	// log that commits each append (eventlog.CommitPerAppend), a
	// safe_to_retry step's start rides the next append, its outcome's
	// when nothing else is written first (DESIGN §21). Their seqs follow
	// the log's head; state.Head counts them.
	deferred []eventlog.Event
	fatal    *ExecutionError     // the kernel fails the execution when the handler returns
	ended    bool                // the handler returned: calls are refused
	lease    eventlog.Lease      // the lease the dispatch runs under; without a Leaser, only ID and Owner
	expired  bool                // the deadline stopped the handler
	parked   eventlog.ParkReason // the dispatch parks (DESIGN §10): calls return ErrWaiting
	wakeAt   time.Time           // when the parked dispatch is to run again (the earliest wait); zero if none

	// decided is closed when an approval decision is folded (approval.go);
	// awaiting lists the steps whose calls parked waiting for one; drops
	// are inbox requests to remove without an event (decisions that decide
	// nothing), at the next synced append.
	decided  chan struct{}
	awaiting []string
	drops    []uint64

	// arrived is closed when a message.received is folded (message.go);
	// recvTopics lists the topics whose Recv calls parked waiting for one.
	arrived    chan struct{}
	recvTopics []string
	// recvWaiting lists the recv steps waiting live for a message, oldest
	// first: a take that brings one of a waiting step's topic appends the
	// step's step.succeeded in the same synced write (message.go).
	recvWaiting []recvWaiter
	// poke makes watchRequests look in the inbox at once (Send in this
	// process); nil until the handler runs.
	poke chan struct{}
	// begun reports that dispatch.started was appended: from then on a
	// child.ended request is dropped only once its step's outcome is in
	// the lineage (childEndedLocked).
	begun bool

	// recorded is how many steps the lineage recorded when the dispatch
	// began (the first recorded of replay.State.At); consumed marks, by
	// index, the steps this dispatch reached again, and nConsumed counts
	// them. It replays while some remain (IsReplaying). An override of a
	// step the lineage does not hold is not a recorded step (DESIGN §13)
	// and is not counted: reaching it first must not end replaying.
	recorded  int
	consumed  []uint64
	nConsumed int
	pos       *positions // call positions and Strict's checks (DESIGN §15)

	// wentLive reports that a call of this dispatch was not answered from
	// the record (it ran, or was gated, live): replaying ended there,
	// whatever recorded steps remain (DESIGN §15½.9).
	wentLive bool

	// Who held the execution (DESIGN §11, where a resource may be opened):
	// holder is the Owner of the newest dispatch.started, holderSince the
	// seq of the first dispatch.started of the newest run of dispatches
	// by that owner, startedAt the seq of the newest dispatch.started
	// (this dispatch's, once it began). A binding that is not portable is
	// opened only when it was made after holderSince.
	holder      string
	holderSince uint64
	startedAt   uint64
	// newInput reports a lineage that a fork.created gave a new input
	// (DESIGN §12): its run may leave recorded steps of its prefix behind,
	// which divergedLocked records.
	newInput bool

	// calls counts the calls (do, obtain) in progress; once ended is set
	// no call joins, and the dispatch waits for those in progress before it
	// records how it ended, so nothing lands after a terminal event.
	calls sync.WaitGroup

	// streams are the llm steps whose responses still stream to the
	// handler (stream.go), in the order they opened; streamMu guards it
	// and is never held with d.mu.
	streamMu sync.Mutex
	streams  []*liveStream

	// resMu serializes Resource calls; bodyMu serializes tool and local
	// step bodies while the execution has resources (DESIGN §5).
	resMu  sync.Mutex
	bodyMu sync.Mutex

	// ctx is the dispatch's context without its cancellation: the kernel's
	// own writes (terminal events, captures) must land after a cancel.
	ctx context.Context
	// caller is the context Run or Serve gave the dispatch (it ends with
	// the lease, too). When it ends the dispatch is shut down (DESIGN
	// §15½.1): stopped latches that under mu (stoppedLocked), and from
	// then on writeLocked appends only step.cancelled and captures.
	// shutdown says the dispatch ended so, with its caller's cancellation
	// rather than a lost lease.
	caller   context.Context
	stopped  bool
	shutdown bool
}

// shutdownTimeout bounds each write and checkpoint the kernel makes once
// the caller's context has ended (DESIGN §21½.2): they run on a context
// detached from the cancelled one, and a store or driver that does not
// answer must not hold the shutdown forever.
const shutdownTimeout = 30 * time.Second

// errStopped marks an append refused because the caller's context ended:
// a stopped dispatch records no outcome (DESIGN §15½.1).
var errStopped = errors.New("the dispatch's context ended; nothing more is recorded")

// bound is a resource obtained in this dispatch.
type bound struct {
	key    string
	driver resource.Driver
	handle any
	pol    policy.Checkpoints
}

type dispatchKey struct{}

// stepInfo marks a context as the body of a step.
type stepInfo struct {
	id      string
	target  string
	idem    string
	note    string // the note of the grant that let it run (ApprovalNote)
	retried uint32 // the step's failed attempts that were retried (childKey)
	attempt uint32 // the attempt step.started records (Info)
}

type stepKey struct{}

func dispatchFrom(ctx context.Context) (*dispatch, error) {
	if ctx == nil {
		return nil, ErrNotInExecution
	}
	d, ok := ctx.Value(dispatchKey{}).(*dispatch)
	if !ok {
		return nil, ErrNotInExecution
	}
	return d, nil
}

// apply folds one event into every fold. d.mu is held (or d is not shared).
func (d *dispatch) apply(ev eventlog.Event) error {
	if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
		// A name this kernel had before (WithLocalOwner) is this kernel.
		if owner := d.k.canonicalOwner(ds.Owner); owner != d.holder {
			d.holder, d.holderSince = owner, ev.Seq
		}
		d.startedAt = ev.Seq
	}
	if err := d.state.Apply(ev); err != nil {
		return err
	}
	if err := d.cov.Apply(ev); err != nil {
		return err
	}
	return d.counter.Apply(ev)
}

// stoppedLocked reports whether the caller's context has ended: the
// dispatch is shut down and records no outcome (DESIGN §15½.1). Once it
// has said so it keeps saying so. d.mu is held.
func (d *dispatch) stoppedLocked() bool {
	if !d.stopped && d.caller != nil && d.caller.Err() != nil {
		d.stopped = true
	}
	return d.stopped
}

// ownCtxLocked returns the context of the kernel's own writes and
// checkpoints: d.ctx, which the caller's cancellation does not reach,
// bounded by shutdownTimeout once the dispatch is stopped. d.mu is held.
func (d *dispatch) ownCtxLocked() (context.Context, context.CancelFunc) {
	if d.stopped {
		return context.WithTimeout(d.ctx, shutdownTimeout)
	}
	return d.ctx, func() {}
}

// stopCause returns ctx's error, with its cause when that says more (a
// lost lease, the caller's own cause): errors.Is sees both.
func stopCause(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// shutdownWrite reports whether payloads may be appended by a stopped
// dispatch: step.cancelled of the calls in flight, and captures (those
// due with a cancelled step, and the shutdown captures) — nothing else
// (DESIGN §15½.1, §21½.2).
func shutdownWrite(payloads []eventlog.Payload) bool {
	for _, p := range payloads {
		switch p.(type) {
		case *eventlog.StepCancelled, *eventlog.ResourceCaptured, *eventlog.ResourceCaptureFailed:
		default:
			return false
		}
	}
	return true
}

// defers reports whether c's step.started waits for the next append
// (dispatch.deferred): on a log that commits each append, a
// safe_to_retry tool, local or llm call that affects no resource.
func (d *dispatch) defers(c call) bool {
	if !d.k.commitPerAppend || c.idem != eventlog.SafeToRetry || len(c.affects) > 0 {
		return false
	}
	switch c.kind {
	case eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM:
		return true
	}
	return false
}

// deferLocked folds the step.started p as the next event and keeps it to
// be written with the next append (dispatch.deferred), which its
// outcome's is unless another write comes first. d.mu is held.
func (d *dispatch) deferLocked(p *eventlog.StepStarted) error {
	if err := d.usableLocked(); err != nil {
		return err
	}
	if d.stoppedLocked() {
		return fmt.Errorf("sdk: execution %s: %w: %w", d.id, errStopped, stopCause(d.caller))
	}
	ev := eventlog.Event{Seq: d.state.Head + 1, Time: d.k.now(), Data: p}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("sdk: execution %s: %w", d.id, err)
	}
	if err := d.apply(ev); err != nil {
		d.dead = fmt.Errorf("sdk: execution %s: fold seq %d: %w", d.id, ev.Seq, err)
		return d.dead
	}
	d.deferred = append(d.deferred, ev)
	return nil
}

// appendLocked writes payloads as one group, synced unless lazy, and folds
// them. A failure makes the dispatch dead: nothing more is written.
func (d *dispatch) appendLocked(lazy bool, payloads ...eventlog.Payload) error {
	return d.writeLocked(lazy, nil, payloads)
}

// takeRequestsLocked moves the inbox's pending requests into the lineage
// (DESIGN §8½), in one synced append that also removes them from the inbox:
// cancel requests, and the approval decisions of steps that await one
// (DESIGN §12). A decision that decides nothing is removed without an
// event, and so is a child.ended request (DESIGN §15½.6) once
// childEndedLocked says it has done its work.
func (d *dispatch) takeRequestsLocked() error {
	var inbox eventlog.Inbox
	if !eventlog.As(d.k.log, &inbox) || d.dead != nil || d.stoppedLocked() {
		return nil // a stopped dispatch leaves the requests to the next one
	}
	reqs, err := inbox.Requests(d.ctx, d.id)
	if err != nil {
		d.dead = fmt.Errorf("sdk: execution %s: read requests: %w", d.id, err)
		return d.dead
	}
	var ns []uint64
	var payloads []eventlog.Payload
	var decided, received []string
	for _, r := range reqs {
		if slices.Contains(d.drops, r.N) {
			continue
		}
		switch r.Data.Kind() {
		case eventlog.KindCancelRequested:
		case eventlog.KindMessageReceived:
			m := r.Data.(*eventlog.MessageReceived)
			if !d.takeMessageLocked(m, received) {
				d.drops = append(d.drops, r.N)
				continue
			}
			received = append(received, m.MessageID)
		case eventlog.KindApprovalGranted, eventlog.KindApprovalRejected:
			if !d.takeDecisionLocked(r.Data, decided) {
				d.drops = append(d.drops, r.N)
				continue
			}
			decided = append(decided, decisionStep(r.Data))
		case eventlog.KindChildEnded:
			if d.childEndedLocked(r.Data.(*eventlog.ChildEnded)) {
				d.drops = append(d.drops, r.N)
			}
			continue
		default:
			continue
		}
		ns = append(ns, r.N)
		payloads = append(payloads, r.Data)
	}
	if len(ns) == 0 {
		return nil
	}
	return d.writeLocked(false, ns, d.answerRecvLocked(payloads))
}

// childEndedLocked reports whether the child.ended request p has done its
// work — woken this execution for a child that ended — and leaves the
// inbox with the next synced append. Before dispatch.started, every one
// has: the child ended before this dispatch began, so the dispatch finds
// it ended when it reaches the child's step. Later, only one whose step
// has its outcome in the lineage: a child that ended while this dispatch
// waits for it, but too late for the wait, leaves its request pending,
// so that the dispatch that parks for it is woken again.
func (d *dispatch) childEndedLocked(p *eventlog.ChildEnded) bool {
	if !d.begun {
		return true
	}
	st, ok := d.state.Step(p.StepID)
	return ok && st.EndedAt > st.StartedAt
}

// writeLocked appends payloads, taking the inbox requests ns in the same
// write when there are any. Once the caller's context has ended it
// appends only what shutdownWrite allows — nothing at all when the context
// ended because the lease was lost: the dispatch may no longer write — and
// refuses the rest with an error wrapping errStopped and the context's
// error; a refusal does not make the dispatch dead.
func (d *dispatch) writeLocked(lazy bool, ns []uint64, payloads []eventlog.Payload) error {
	if d.dead != nil {
		return d.dead
	}
	if d.stoppedLocked() && (!shutdownWrite(payloads) || errors.Is(context.Cause(d.caller), eventlog.ErrLeaseLost)) {
		return fmt.Errorf("sdk: execution %s: %w: %w", d.id, errStopped, stopCause(d.caller))
	}
	ctx, cancel := d.ownCtxLocked()
	defer cancel()
	if len(d.drops) > 0 {
		// Requests that decide nothing leave the inbox with this write.
		ns, lazy = append(slices.Clone(ns), d.drops...), false
	}
	now := d.k.now()
	// Deferred starts go first, under the seqs they were folded at: the
	// log's head is below the fold's by their number.
	nd := len(d.deferred)
	events := make([]eventlog.Event, nd, nd+len(payloads))
	copy(events, d.deferred)
	head := d.state.Head - uint64(nd)
	for i, p := range payloads {
		events = append(events, eventlog.Event{Seq: d.state.Head + uint64(i) + 1, Time: now, Data: p})
	}
	var err error
	switch {
	case len(ns) > 0:
		var inbox eventlog.Inbox
		if !eventlog.As(d.k.log, &inbox) {
			err = fmt.Errorf("%w: the log keeps no inbox (eventlog.Inbox)", ErrInvalid)
			break
		}
		_, err = inbox.Take(ctx, d.id, head, ns, events...)
	case lazy:
		_, err = d.k.log.AppendUnsynced(ctx, d.id, head, events...)
	default:
		_, err = d.k.log.Append(ctx, d.id, head, events...)
	}
	if err != nil {
		d.dead = fmt.Errorf("sdk: execution %s: append at seq %d: %w", d.id, head+1, err)
		return d.dead
	}
	d.k.appends.appended()
	d.drops = nil
	d.deferred = nil
	for _, ev := range events[nd:] {
		if err := d.apply(ev); err != nil {
			d.dead = fmt.Errorf("sdk: execution %s: fold seq %d: %w", d.id, ev.Seq, err)
			return d.dead
		}
		d.k.tel.appended(d.state, ev)
		switch ev.Kind() {
		case eventlog.KindApprovalGranted, eventlog.KindApprovalRejected:
			d.foldedDecisionLocked()
		case eventlog.KindMessageReceived:
			d.foldedMessageLocked()
		}
	}
	return nil
}

// failLocked records the reason the kernel fails the execution; the first
// reason wins.
func (d *dispatch) failLocked(code eventlog.FailureCode, err error) {
	if d.fatal == nil {
		d.fatal = &ExecutionError{ID: d.id, Code: code, Message: err.Error(), cause: err}
	}
}

// usable reports why no more calls may run: a dead dispatch or a failed
// execution.
func (d *dispatch) usableLocked() error {
	if d.dead != nil {
		return d.dead
	}
	if d.parked != "" {
		return fmt.Errorf("%w: the dispatch parked (%s)", ErrWaiting, d.parked)
	}
	if d.fatal != nil {
		return d.fatal
	}
	return nil
}

// run runs the handler and records how it ended. When ctx ends first (a
// shutdown, DESIGN §15½.1) it records no end: see shutdownLocked.
func (d *dispatch) run(ctx context.Context, h handler) (*Result, error) {
	d.ctx, d.caller = context.WithoutCancel(ctx), ctx
	d.mu.Lock()
	if res, err, ended := d.beginLocked(); ended {
		d.mu.Unlock()
		return res, err
	}
	d.mu.Unlock()
	d.k.logger.Info("forkline: dispatch started", "execution", d.id.String(), "agent", d.state.Agent,
		"dispatch", d.state.Dispatches, "recorded_steps", d.recorded)

	defer d.closeHandles()
	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	cancelCalls := func() { stop(nil) }
	if dl := d.state.Deadline; !dl.IsZero() {
		t := time.AfterFunc(dl.Sub(d.k.now()), func() {
			d.mu.Lock()
			d.expired = true
			d.mu.Unlock()
			stop(fmt.Errorf("sdk: execution %s: deadline %s passed: %w", d.id, dl.Format(time.RFC3339Nano), context.DeadlineExceeded))
		})
		defer t.Stop()
	}
	defer d.watchRequests(stop)()
	hctx := context.WithValue(cctx, dispatchKey{}, d)
	out, herr := func() (out []byte, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = panicError("handler", r)
				d.mu.Lock()
				d.failLocked(eventlog.FailPanic, err)
				d.mu.Unlock()
			}
		}()
		return h(hctx, d.state.Input)
	}()
	d.endCalls(cancelCalls)
	d.k.carry.flush(ctx) // the deltas reach other processes before the end

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead != nil {
		return nil, d.dead
	}
	if !d.stoppedLocked() {
		res, err := d.endLocked(out, herr)
		if !errors.Is(err, errStopped) {
			return res, err
		}
		// The caller's context ended while the end was being recorded:
		// what landed before stays, the rest is refused.
	}
	return nil, d.shutdownLocked(herr)
}

// endLocked records how the handler's run ended, which returned out and
// herr: cancelled by a request, past its deadline, parked, failed by the
// kernel or by the handler, or completed with its completion captures.
func (d *dispatch) endLocked(out []byte, herr error) (*Result, error) {
	if err := d.takeRequestsLocked(); err != nil {
		return nil, err
	}
	if d.state.CancelRequested {
		return d.cancelledLocked()
	}
	if d.expired {
		return d.deadlineLocked()
	}
	if d.parked != "" {
		return d.parkLocked()
	}
	if d.fatal != nil {
		if err := d.appendLocked(false, &eventlog.ExecutionFailed{Error: d.fatal.Message, Code: d.fatal.Code}); err != nil {
			return nil, err
		}
		return nil, d.fatal
	}
	if herr != nil {
		fail := &ExecutionError{ID: d.id, Code: eventlog.FailHandler, Message: herr.Error(), cause: herr}
		if err := d.appendLocked(false, &eventlog.ExecutionFailed{Error: fail.Message, Code: fail.Code}); err != nil {
			return nil, err
		}
		return nil, fail
	}
	if res, err, failed := d.settleLocked(); failed {
		return res, err
	}
	payloads := d.completionCapturesLocked()
	payloads = append(payloads, &eventlog.ExecutionCompleted{Output: out})
	if err := d.appendLocked(false, payloads...); err != nil {
		return nil, err
	}
	d.logCaptures(payloads)
	return &Result{ID: d.id, Output: out}, nil
}

// shutdownLocked ends a dispatch whose caller's context ended (DESIGN
// §15½.1, §21½.2) — Serve stopping, a shutdown — whatever the handler
// returned (herr, or a fallback answer): its calls in flight have
// appended step.cancelled, and all that is added is a capture (reason
// shutdown) of every uncovered resource whose driver is not portable, so
// that the next owner, perhaps on another host, binds anew from the head;
// a portable one the next owner opens as it is. No outcome of a step or
// of the execution is recorded: the execution stays resumable, and the
// error returned wraps the context's error. A capture that cannot be
// written changes nothing; a dispatch stopped by a lost lease captures
// nothing, since it may no longer write.
func (d *dispatch) shutdownLocked(herr error) error {
	cause := stopCause(d.caller)
	if errors.Is(cause, eventlog.ErrLeaseLost) {
		return fmt.Errorf("sdk: execution %s: dispatch stopped: %w", d.id, cause)
	}
	d.shutdown = true
	local := func(b *bound) bool { return !driver.IsPortable(b.driver.Unwrap()) }
	if caps := d.uncoveredCapturesLocked(local, eventlog.CaptureShutdown); len(caps) > 0 {
		if err := d.appendLocked(false, caps...); err == nil {
			d.logCaptures(caps)
		}
	}
	err := fmt.Errorf("sdk: execution %s: dispatch stopped by its caller: %w", d.id, cause)
	if herr != nil {
		err = fmt.Errorf("%w (handler: %v)", err, herr)
	}
	return err
}

// beginLocked starts the dispatch: it takes the inbox's requests and
// appends dispatch.started, unless the execution ends first — cancelled by
// a request, or past its deadline (then ended is true).
func (d *dispatch) beginLocked() (res *Result, err error, ended bool) {
	if err := d.takeRequestsLocked(); err != nil {
		return nil, err, true
	}
	if d.state.CancelRequested {
		res, err := d.cancelledLocked()
		return res, err, true
	}
	if dl := d.state.Deadline; !dl.IsZero() && !d.k.now().Before(dl) {
		res, err := d.deadlineLocked()
		return res, err, true
	}
	err = d.appendLocked(false, &eventlog.DispatchStarted{
		Dispatch: d.state.Dispatches + 1, Owner: d.lease.Owner, Epoch: d.lease.Epoch,
	})
	d.begun = err == nil
	return nil, err, err != nil
}

// cancelledLocked ends the execution cancelled (no completion capture
// precedes execution.cancelled, DESIGN §8½).
func (d *dispatch) cancelledLocked() (*Result, error) {
	reason := d.state.CancelReason
	if err := d.appendLocked(false, &eventlog.ExecutionCancelled{Reason: reason}); err != nil {
		return nil, err
	}
	return nil, &CancelledError{ID: d.id, Reason: reason}
}

// parkError is what a step body returns to park the dispatch: it waits
// for something (a child) longer than ParkAfter.
type parkError struct {
	reason eventlog.ParkReason
	what   string
}

func (e *parkError) Error() string { return "parked: waiting for " + e.what }

func (e *parkError) Unwrap() error { return ErrWaiting }

// parkLocked ends a parking dispatch with the captures of its uncovered
// resources and dispatch.parked (parkedLocked): the handler's return is
// ignored, and Run returns ErrWaiting.
func (d *dispatch) parkLocked() (*Result, error) {
	payloads := d.parkedLocked()
	if err := d.appendLocked(false, payloads...); err != nil {
		return nil, err
	}
	d.logCaptures(payloads[:len(payloads)-1])
	return nil, d.parkErr()
}

// deadlineLocked fails the execution with Code deadline.
func (d *dispatch) deadlineLocked() (*Result, error) {
	msg := fmt.Sprintf("deadline %s passed", d.state.Deadline.Format(time.RFC3339Nano))
	fail := &ExecutionError{ID: d.id, Code: eventlog.FailDeadline, Message: msg, cause: context.DeadlineExceeded}
	if err := d.appendLocked(false, &eventlog.ExecutionFailed{Error: msg, Code: eventlog.FailDeadline}); err != nil {
		return nil, err
	}
	return nil, fail
}

// requestPoll is how often a running dispatch looks in its inbox: a cancel
// reaches the handler's context within it (DESIGN §8½ asks 100 ms).
const requestPoll = 40 * time.Millisecond

// watchRequests takes the inbox's requests while the handler runs — every
// requestPoll, at once when a Send of this process pokes it, and when the
// store announces a request from another process — and stops the handler
// when one of them cancels the execution. It returns the function that
// ends the watch.
func (d *dispatch) watchRequests(stop context.CancelCauseFunc) func() {
	var inbox eventlog.Inbox
	if !eventlog.As(d.k.log, &inbox) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	poke := make(chan struct{}, 1)
	d.mu.Lock()
	d.poke = poke
	d.mu.Unlock()
	d.k.pokes.m.Store(d.id, d)
	// Another process's request is announced by a store shared by
	// processes (eventlog.Notifier: Postgres's NOTIFY at the request's
	// commit): taken then, not at the next poll.
	cctx, endChanges := context.WithCancel(context.WithoutCancel(d.ctx))
	changes := d.k.changes(cctx)
	go func() {
		defer close(finished)
		t := time.NewTicker(requestPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			case <-poke:
			case got, ok := <-changes:
				if !ok {
					changes = nil
					continue
				}
				if got != d.id && !got.IsZero() {
					continue
				}
			}
			d.mu.Lock()
			if !d.ended {
				_ = d.takeRequestsLocked() // a failure makes the dispatch dead
			}
			cancelled, reason, dead := d.state.CancelRequested, d.state.CancelReason, d.dead
			d.mu.Unlock()
			switch {
			case cancelled:
				stop(&CancelledError{ID: d.id, Reason: reason})
				return
			case dead != nil:
				stop(dead)
				return
			}
		}
	}()
	return func() {
		d.k.pokes.m.CompareAndDelete(d.id, d)
		close(done)
		<-finished
		endChanges()
	}
}

// endCalls ends the handler's part of the dispatch: a call made from now on
// (by a goroutine the handler left behind) returns ErrNotInExecution and
// appends nothing, and calls still in progress see their context cancelled
// and are waited for, so their terminal events land before the dispatch's
// own. Bodies never overlap a dispatch's end.
//
// A model response still streaming is recorded Truncated first (DESIGN
// §21½.8), before the calls' contexts are cancelled; one that a call in
// progress opens is ended once that call has returned.
func (d *dispatch) endCalls(cancel context.CancelFunc) {
	d.mu.Lock()
	d.ended = true
	d.mu.Unlock()
	d.endStreams()
	cancel()
	d.calls.Wait()
	d.endStreams()
}

// enterCall admits a call of the handler, or refuses it once the handler
// has returned. d.mu is held. A nil error must be paired with calls.Done.
func (d *dispatch) enterCallLocked(kind, target string) error {
	if d.ended {
		return fmt.Errorf("%w: %s %q called after its handler returned", ErrNotInExecution, kind, target)
	}
	d.calls.Add(1)
	return nil
}

// closeHandles closes, when the dispatch ends, every handle it obtained that
// is an io.Closer (an open database, a directory root): the next dispatch
// opens its binding again, and a handle must not outlive the dispatch.
func (d *dispatch) closeHandles() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.res {
		if c, ok := b.handle.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// completionCapturesLocked checkpoints every obtained resource whose policy
// says OnCompletion and that is uncovered now (DESIGN §5).
func (d *dispatch) completionCapturesLocked() []eventlog.Payload {
	return d.uncoveredCapturesLocked(func(b *bound) bool { return b.pol.OnCompletion }, eventlog.CaptureCompletion)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// call is one tool call, local step or LLM call.
type call struct {
	kind    eventlog.StepKind
	target  string
	args    []byte // canonical
	affects []string
	idem    eventlog.Idempotency
	retry   *RetryPolicy  // Retry, TransportRetry; nil: the kernel's
	timeout time.Duration // Timeout; 0: none
	body    func(ctx context.Context) ([]byte, error)
	idOut   *string // RemoteCall: receives the StepID; nil otherwise
}

// do runs c by the three cases of DESIGN §4 and returns its encoded result.
func (d *dispatch) do(ctx context.Context, c call) ([]byte, error) {
	if si, ok := ctx.Value(stepKey{}).(*stepInfo); ok && c.kind != eventlog.StepLLM {
		return nil, fmt.Errorf("%w: %s %q called inside the body of %q", ErrNestedStep, c.kind, c.target, si.target)
	}
	d.mu.Lock()
	if err := d.enterCallLocked(string(c.kind), c.target); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	defer d.calls.Done()
	if err := d.usableLocked(); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	for _, key := range c.affects {
		if _, ok := d.res[key]; !ok {
			d.mu.Unlock()
			return nil, fmt.Errorf("%w: %s %q affects resource %q, which this dispatch has not obtained with Resource",
				ErrInvalid, c.kind, c.target, key)
		}
	}
	stepID := callIdentity(d.occ, c.kind, c.target, c.args)
	if c.idOut != nil {
		*c.idOut = stepID
	}
	// Read-only: rec's slices are the fold's; nothing here writes to them.
	rec, index, seen := d.state.Lookup(stepID)
	if seen {
		d.consumeLocked(index)
	}
	if err := d.positionLocked(c, stepID, seen); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if err := d.replayOnlyLocked(c, rec, seen); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if !seen || rec.Status != replay.StepSucceeded && rec.Status != replay.StepFailed && rec.Status != replay.StepDenied {
		// Not answered from the record: replaying ends here (DESIGN §15½.9).
		d.wentLive = true
	}
	d.mu.Unlock()

	attempt := uint32(1)
	if seen {
		switch rec.Status {
		case replay.StepSucceeded, replay.StepFailed, replay.StepDenied:
			d.k.tel.replayed(c.kind)
		}
		switch rec.Status {
		case replay.StepSucceeded:
			return rec.Result, nil
		case replay.StepFailed:
			return nil, &StepError{StepID: stepID, Target: c.target, Message: rec.Error, Indeterminate: rec.Indeterminate}
		case replay.StepDenied:
			return nil, d.recordedDenial(stepID, c, rec)
		case replay.StepRetrying:
			return d.attempts(ctx, stepID, rec.Attempts+1, rec.RetryAt, c)
		}
		// Started (orphaned by a dead dispatch), cancelled or abandoned.
		if rec.Idempotency == eventlog.AtMostOnce {
			return nil, d.resolveIndeterminate(stepID, c)
		}
		if d.exhausted(c, rec) {
			return nil, d.giveUp(stepID, rec, c)
		}
		// A re-run is a live attempt: gated in a fork (DESIGN §8½).
		if err := d.admit(ctx, stepID, c, d.inFork()); err != nil {
			return nil, err
		}
		attempt = rec.Attempts + 1
	} else if err := notStarted(ctx, c); err != nil {
		return nil, err
	} else if err := d.admit(ctx, stepID, c, true); err != nil {
		return nil, err
	}
	return d.attempts(ctx, stepID, attempt, time.Time{}, c)
}

// retriedLocked returns how many failed attempts of step stepID were
// retried (replay.Step.Retried). d.mu is held.
func (d *dispatch) retriedLocked(stepID string) uint32 {
	st, _ := d.state.Step(stepID)
	return st.Retried
}

// consumeLocked marks the step at index as reached again by this dispatch;
// index is -1 for an override of a step the lineage does not hold, which
// is not one of the recorded steps replaying waits for.
func (d *dispatch) consumeLocked(index int) {
	if index < 0 {
		return
	}
	w, bit := index/64, uint64(1)<<(index%64)
	if w >= len(d.consumed) {
		d.consumed = append(d.consumed, make([]uint64, w+1-len(d.consumed))...)
	}
	if d.consumed[w]&bit == 0 {
		d.consumed[w] |= bit
		d.nConsumed++
	}
}

// consumedLocked reports whether the step at index was reached again.
func (d *dispatch) consumedLocked(index int) bool {
	w := index / 64
	return w < len(d.consumed) && d.consumed[w]&(uint64(1)<<(index%64)) != 0
}

// notStarted refuses to start c live once ctx is done: a cancelled
// dispatch runs nothing more (its recorded calls still replay).
func notStarted(ctx context.Context, c call) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sdk: %s %q not started: %w", c.kind, c.target, err)
	}
	return nil
}

// inFork reports whether the execution is a fork: every call it runs live
// runs past its fork point.
func (d *dispatch) inFork() bool { return !d.state.Parent.IsZero() }

// resolveIndeterminate fails an orphaned at_most_once step without running it.
func (d *dispatch) resolveIndeterminate(stepID string, c call) error {
	return d.resolveIndeterminateMsg(stepID, c, "started on an earlier dispatch and never finished; it may or may not have taken effect")
}

// resolveIndeterminateMsg fails an unfinished step as indeterminate with msg.
func (d *dispatch) resolveIndeterminateMsg(stepID string, c call, msg string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	payloads := []eventlog.Payload{&eventlog.StepFailed{StepID: stepID, Error: msg, Indeterminate: true}}
	payloads = append(payloads, d.dueCapturesLocked(stepID, c)...)
	if err := d.appendLocked(false, payloads...); err != nil {
		return err
	}
	d.k.tel.stepEnded(nil, c.kind, "indeterminate", nil, time.Time{})
	return &StepError{StepID: stepID, Target: c.target, Message: msg, Indeterminate: true}
}

// live runs attempt attempt of c's body: step.started, the body, then its
// terminal event and any capture that is due, in one append. A failed
// attempt that its retry policy retries returns the time of the next
// attempt (next), recorded as the step.failed's RetryAt.
func (d *dispatch) live(ctx context.Context, stepID string, attempt uint32, c call) ([]byte, time.Time, error) {
	var next time.Time
	if (c.kind == eventlog.StepTool || c.kind == eventlog.StepLocal) && d.hasResources() {
		d.bodyMu.Lock()
		defer d.bodyMu.Unlock()
	}
	if err := notStarted(ctx, c); err != nil {
		return nil, time.Time{}, err
	}
	d.mu.Lock()
	if err := d.usableLocked(); err != nil {
		d.mu.Unlock()
		return nil, time.Time{}, err
	}
	if p := d.divergedLocked(); p != nil {
		if err := d.appendLocked(false, p); err != nil {
			d.mu.Unlock()
			return nil, time.Time{}, err
		}
	}
	started := &eventlog.StepStarted{
		StepID: stepID, StepKind: c.kind, Target: c.target, Args: c.args,
		Resources: c.affects, Idempotency: c.idem, Attempt: attempt,
	}
	// An at_most_once intent is synced before the body runs; a safe_to_retry
	// one rides on the terminal event's sync (DESIGN §4) — and, on a log
	// that commits each append, in its append (deferLocked, DESIGN §21).
	var err error
	if d.defers(c) {
		err = d.deferLocked(started)
	} else {
		err = d.appendLocked(c.idem == eventlog.SafeToRetry, started)
	}
	note, retried := d.grantNoteLocked(stepID), d.retriedLocked(stepID)
	d.mu.Unlock()
	if err != nil {
		return nil, time.Time{}, err
	}
	ctx, span := d.k.tel.startStep(ctx, d.exec, started)
	start := d.k.tel.stepStart()
	outcome, serr := "succeeded", error(nil)
	defer func() {
		if outcome != "streaming" {
			d.k.tel.stepEnded(span, c.kind, outcome, serr, start)
		}
	}()

	bctx := context.WithValue(ctx, stepKey{}, &stepInfo{id: stepID, target: c.target, idem: idempotencyKey(d.id, stepID), note: note, retried: retried, attempt: attempt})
	bctx, endTimeout := withTimeout(bctx, c.timeout)
	result, berr, panicked := runBody(bctx, c.body)
	timedOut := endTimeout()
	if pe := (*parkError)(nil); !panicked && errors.As(berr, &pe) {
		// The body parks the dispatch: its step stays in flight and the
		// next dispatch runs it again (DESIGN §10). Nothing is appended.
		d.mu.Lock()
		defer d.mu.Unlock()
		d.parkUntilLocked(pe.reason, time.Time{})
		outcome = "parked"
		return nil, time.Time{}, fmt.Errorf("sdk: %s %q: %w", c.kind, c.target, berr)
	}
	if sh := (*streamHandoff)(nil); !panicked && errors.As(berr, &sh) {
		// The response streams to the caller: the step stays started and
		// the stream appends its terminal event when it ends (stream.go).
		sh.s.ctx, sh.s.span, sh.s.start = ctx, span, start
		d.addStream(sh.s)
		outcome = "streaming"
		return nil, time.Time{}, berr
	}

	var terminal eventlog.Payload
	switch {
	case panicked:
		terminal = &eventlog.StepFailed{StepID: stepID, Error: berr.Error()}
	case berr != nil && ctx.Err() != nil:
		terminal = &eventlog.StepCancelled{StepID: stepID}
	case berr != nil:
		terminal, next = d.outcome(stepID, usedAttempts(c, attempt, retried), c, berr, timedOut)
	case c.kind == eventlog.StepLLM:
		terminal = &eventlog.StepSucceeded{StepID: stepID, Result: result, Tokens: llmResultTokens(result)}
	default:
		terminal = &eventlog.StepSucceeded{StepID: stepID, Result: result}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stoppedLocked() {
		// The caller's context ended (a shutdown, DESIGN §15½.1): whatever
		// the body returned, no outcome is recorded after that; the next
		// dispatch runs the step again.
		terminal, next = &eventlog.StepCancelled{StepID: stepID}, time.Time{}
	}
	payloads := append([]eventlog.Payload{terminal}, d.dueCapturesLocked(stepID, c)...)
	// Under SyncAtEffects a safe_to_retry outcome with no capture rides on
	// the next synced append (DESIGN §21).
	err = d.appendLocked(d.k.lazyOutcome(c, payloads), payloads...)
	if errors.Is(err, errStopped) {
		// It ended as the outcome was being recorded.
		terminal, next = &eventlog.StepCancelled{StepID: stepID}, time.Time{}
		payloads[0] = terminal
		err = d.appendLocked(false, payloads...)
	}
	if err != nil {
		outcome, serr = "unrecorded", err
		return nil, time.Time{}, err
	}
	d.logCaptures(payloads[1:])
	switch terminal.(type) {
	case *eventlog.StepFailed:
		outcome, serr = "failed", berr
	case *eventlog.StepCancelled:
		cause := ctx.Err()
		if d.stopped || cause == nil {
			cause = stopCause(d.caller)
		}
		err := fmt.Errorf("sdk: %s %q cancelled: %w", c.kind, c.target, cause)
		outcome, serr = "cancelled", cmp.Or(berr, err)
		return nil, time.Time{}, err
	}
	switch {
	case panicked:
		d.failLocked(eventlog.FailPanic, berr)
		return nil, time.Time{}, d.fatal
	case !next.IsZero():
		return nil, next, nil
	}
	res, err := liveOutcome(stepID, c.target, terminal)
	return res, time.Time{}, err
}

// divergedLocked returns the fork.diverged to append before a live call
// (DESIGN §12), or nil: in a fork whose lineage got a new input, the first
// live call made while recorded steps of the prefix (at or before the
// newest fork point) remain unconsumed by this dispatch is recorded once,
// naming them in lineage order. d.mu is held.
func (d *dispatch) divergedLocked() eventlog.Payload {
	if !d.newInput || d.state.ForkAt == 0 || d.state.DivergedAt != 0 {
		return nil
	}
	var ids []string
	for _, st := range d.unreachedLocked() {
		seq := st.StartedAt
		if seq == 0 {
			seq = st.EndedAt // denied: it never started
		}
		if seq <= d.state.ForkAt {
			ids = append(ids, st.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return &eventlog.ForkDiverged{Unconsumed: ids}
}

func runBody(ctx context.Context, body func(context.Context) ([]byte, error)) (res []byte, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			res, err, panicked = nil, panicError("step body", r), true
		}
	}()
	res, err = body(ctx)
	return res, err, false
}

func (d *dispatch) hasResources() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.res) > 0 || len(d.state.Bindings()) > 0
}

// dueCapturesLocked returns the captures due once the call c (step stepID)
// reaches its terminal event: for each resource whose capture
// policy.Counter says is due after it (DESIGN §5: each attempt counts once),
// that this dispatch has obtained and that no other step advancing it is in
// flight for.
func (d *dispatch) dueCapturesLocked(stepID string, c call) []eventlog.Payload {
	if c.kind == eventlog.StepLLM {
		return nil
	}
	var out []eventlog.Payload
	for _, key := range d.counter.DueAfter(stepID) {
		b, ok := d.res[key]
		if !ok {
			continue
		}
		st, ok := d.cov.State(key)
		if !ok || slices.ContainsFunc(st.InFlight, func(s string) bool { return s != stepID }) {
			continue
		}
		ctx, cancel := d.ownCtxLocked()
		out = append(out, d.k.capture(ctx, d.exec, b.driver, b.handle, key, st.Generation, eventlog.CaptureSteps))
		cancel()
	}
	return out
}

// obtain is Resource for an erased driver (DESIGN §5 steps 1–5).
func (d *dispatch) obtain(ctx context.Context, key string, drv resource.Driver, pol policy.Checkpoints) (any, error) {
	d.resMu.Lock()
	defer d.resMu.Unlock()
	d.mu.Lock()
	if err := d.enterCallLocked("resource", key); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	defer d.calls.Done()
	if err := d.usableLocked(); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if b, ok := d.res[key]; ok {
		d.mu.Unlock()
		if b.driver.DriverID() != drv.DriverID() {
			return nil, fmt.Errorf("%w: resource %q was obtained in this dispatch with driver %q, now %q",
				ErrResourceMismatch, key, b.driver.DriverID(), drv.DriverID())
		}
		return b.handle, nil
	}
	rec, hasBinding := d.state.Binding(key)
	var sel eventlog.ForkSelection
	if hasBinding && !rec.Own {
		sel, _ = d.state.Selection(key)
	}
	d.mu.Unlock()

	recorded := func() *eventlog.ResourceBound {
		return &eventlog.ResourceBound{Key: rec.Key, DriverID: rec.DriverID, Configuration: rec.Configuration, Binding: rec.Binding}
	}
	// Whether the binding opens from any host is what resource.bound
	// recorded (DESIGN §15½.4), the fact awaitedOwner decided on.
	takeover := hasBinding && rec.Own && !rec.Portable && rec.Seq < d.holderSince
	if takeover && rec.Owner == d.lease.Owner {
		d.mu.Lock()
		_, covered := d.coveringRef(key, d.startedAt)
		d.mu.Unlock()
		if !covered {
			// Its own binding, uncovered: awaitedOwner left the execution
			// to this owner, which reopens it (no checkpoint holds its
			// state).
			takeover = false
		}
	}
	if hasBinding && rec.Own && !takeover {
		// An earlier dispatch of this execution bound it, and this owner
		// may open it: open that binding.
		h, err := resource.Open(ctx, drv, recorded())
		if err != nil {
			return nil, d.resourceError(err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.res[key] = &bound{key: key, driver: drv, handle: h, pol: policy.Checkpoints{EverySteps: rec.EverySteps, OnCompletion: rec.OnCompletion}}
		return h, nil
	}

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sdk: resource %q not created: %w", key, err)
	}
	from, reuse := "", drv.CoverageReuse()
	switch {
	case takeover:
		// Another owner made the binding, or held the execution since: the
		// resource may live on another host. Bind anew from the checkpoint
		// that covers the head, by the same driver, with the recorded
		// policy (DESIGN §11).
		if err := resource.Match(drv, recorded()); err != nil {
			return nil, d.resourceError(err)
		}
		ref, err := d.headCheckpoint(key, drv.DriverID())
		if err != nil {
			return nil, d.resourceError(err)
		}
		from, reuse = ref, rec.CoverageReuse
		pol = policy.Checkpoints{EverySteps: rec.EverySteps, OnCompletion: rec.OnCompletion}
	case hasBinding:
		// Inherited from the parent: never opened; the fork gets its own
		// resource from its selection, by the same driver, with the
		// lineage's policy.
		if err := resource.Match(drv, recorded()); err != nil {
			return nil, d.resourceError(err)
		}
		from, reuse = sel.Ref, rec.CoverageReuse
		pol = policy.Checkpoints{EverySteps: rec.EverySteps, OnCompletion: rec.OnCompletion}
	}
	rctx, span := ctx, trace.Span(nil)
	if from != "" {
		rctx, span = d.k.tel.startRestore(ctx, d.exec, key, from)
	}
	h, ev, err := resource.Bind(rctx, drv, key, from, pol, reuse)
	endSpan(span, err)
	if err != nil {
		return nil, d.resourceError(err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	payloads := []eventlog.Payload{ev}
	if from == "" {
		var gen uint64 = 1
		if st, ok := d.cov.State(key); ok {
			gen = st.Generation + 1
		}
		payloads = append(payloads, d.k.capture(d.ctx, d.exec, drv, h, key, gen, eventlog.CaptureBaseline))
	}
	if err := d.appendLocked(false, payloads...); err != nil {
		return nil, err
	}
	d.res[key] = &bound{key: key, driver: drv, handle: h, pol: pol}
	return h, nil
}

// headCheckpoint returns the checkpoint that covers resource key at the
// start of this dispatch (its dispatch.started, which advances nothing, so
// at the head it took over), or an error wrapping ErrResourceUnavailable
// when the resource is uncovered there.
func (d *dispatch) headCheckpoint(key, driverID string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ref, ok := d.coveringRef(key, d.startedAt); ok {
		return ref, nil
	}
	return "", fmt.Errorf("%w: resource %q was bound under another owner than %q, its driver %s is not portable, and no checkpoint covers the head",
		ErrResourceUnavailable, key, d.lease.Owner, driverID)
}

// resourceError fails the execution for the errors DESIGN §5 says fail it
// and passes the others (bad input, a driver's transient failure) through.
// ErrResourceUnavailable no longer fails it (DESIGN §15½.4): awaitedOwner
// leaves such an execution to its owner before a dispatch starts, so a
// takeover finds a covering checkpoint; the code resource_unavailable is
// only read in old logs.
func (d *dispatch) resourceError(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case errors.Is(err, resource.ErrMismatch):
		d.failLocked(eventlog.FailResourceMismatch, err)
	case errors.Is(err, driver.ErrCheckpointUnavailable):
		d.failLocked(eventlog.FailCheckpointUnavailable, err)
	default:
		return err
	}
	return d.fatal
}
