package sdk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// ServeOption configures Serve.
type ServeOption func(*serveOptions) error

type serveOptions struct {
	concurrency int
	poll        time.Duration
	giveUpAfter time.Duration // 0: retry the store until ctx ends
}

// maxSameLeaseResumes bounds how many times in a row runLeased resumes an
// execution under the same lease after a store error.
const maxSameLeaseResumes = 3

// maxServeBackoff bounds the wait between Serve's attempts to reach a
// failing store.
const maxServeBackoff = 5 * time.Second

// Concurrency lets Serve run up to n executions at once (default 8).
func Concurrency(n int) ServeOption {
	return func(o *serveOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d; it must be at least 1", ErrInvalid, n)
		}
		o.concurrency = n
		return nil
	}
}

// PollEvery sets how often Serve looks for runnable executions that no
// signal announced — started by another kernel on the store, or waiting
// for a wake time (default 250 ms). On a store that announces other
// processes' writes (eventlog.Notifier: Postgres), Serve also looks at
// each announcement, so a child's end or a request (Approve, Cancel) in
// another process wakes it at once; the poll is then the fallback.
func PollEvery(d time.Duration) ServeOption {
	return func(o *serveOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: poll interval %v; it must be positive", ErrInvalid, d)
		}
		o.poll = d
		return nil
	}
}

// GiveUpAfter makes Serve return the store's error once the store has failed
// every attempt for d (by default Serve retries a failing store until ctx
// ends; see Serve).
func GiveUpAfter(d time.Duration) ServeOption {
	return func(o *serveOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: give-up time %v; it must be positive", ErrInvalid, d)
		}
		o.giveUpAfter = d
		return nil
	}
}

// Serve runs, until ctx ends, every runnable execution of the agents
// registered in this kernel (DESIGN §9): pending ones, interrupted ones
// (running with no live owner — after a crash, all of them), and waiting
// ones whose wake time has passed. It keeps picking up new ones as they are
// started. Each is run by Run, so another kernel's live lease keeps it out.
// This is how a runtime recovers after a crash: Open, Register, Serve.
//
// A store that fails (a network cut, a database restart) does not stop
// Serve: it logs the error at Warn and tries again, waiting from the poll
// interval up to 5 s between attempts, until the store answers — the runs
// the outage cut short are then found and resumed like any interrupted
// run. Only an error no retry can mend ends it: a closed log
// (eventlog.ErrClosed), a corrupt one (eventlog.ErrCorrupt) or invalid
// input (eventlog.ErrInvalid); and GiveUpAfter bounds how long it retries.
//
// Serve returns when ctx ends, after the runs it started have returned
// (their dispatches stop with ctx and the executions stay resumable), and
// then returns nil: a stop by its context, cancelled or past its deadline,
// is a clean stop, as http.Server.Shutdown's is. It returns an error only
// for what ended it otherwise. A run's own failure is the execution's,
// recorded in the log, not Serve's.
func (k *Kernel) Serve(ctx context.Context, opts ...ServeOption) error {
	err := k.serve(ctx, opts...)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // stopped by its context: a clean stop
	}
	return err
}

// serve is Serve, returning ctx's error when ctx ends.
func (k *Kernel) serve(ctx context.Context, opts ...ServeOption) error {
	o := serveOptions{concurrency: 8, poll: 250 * time.Millisecond}
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil serve option", ErrInvalid)
		}
		if err := opt(&o); err != nil {
			return err
		}
	}
	var (
		wg    sync.WaitGroup
		runs  = newServeRuns()
		slots = make(chan struct{}, o.concurrency)
	)
	defer wg.Wait()
	t := time.NewTicker(o.poll)
	defer t.Stop()
	start := func(id eventlog.ID, run func() error) {
		runs.begin(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				runs.end(id)
				<-slots
				k.notify()
			}()
			k.ranInServe(ctx, runs, id, run(), o)
		}()
	}
	// A store that claims in bulk claims only what this kernel's version
	// runs (DESIGN §19); one that cannot filter by version is served
	// by listing, which skips other versions before it claims.
	var claimer eventlog.VersionedClaimer
	if c := (eventlog.Claimer)(nil); eventlog.As(k.log, &c) {
		claimer, _ = c.(eventlog.VersionedClaimer)
	}
	var sch eventlog.Scheduler
	eventlog.As(k.log, &sch)
	round := scheduleRound{prev: k.now()}
	changes := k.changes(ctx)
	var out outage
	for {
		if sch != nil && time.Since(round.wall) >= o.poll/2 {
			// Before the claim, so that a tick started now is claimed
			// in this round (schedule.go).
			k.tickSchedules(ctx, sch, &round)
		}
		var err error
		if claimer != nil {
			// The store finds and claims what to run in one short
			// transaction (FOR UPDATE SKIP LOCKED on Postgres): kernels
			// sharing it never wait on each other or claim one twice.
			// Only this loop fills slots, so they stay free until used.
			var leases []eventlog.Lease
			leases, err = claimer.ClaimRunnableVersion(ctx, k.owner, k.leaseTTL, k.agentNames(), k.version, o.concurrency-len(slots), k.now())
			for _, l := range leases {
				if runs.backsOff(l.ID, time.Now()) {
					// Backed off in this Serve, on a store that keeps no
					// note of it (eventlog.RetryKeeper), so the claim
					// did not skip it: released at once, neither loaded
					// nor dispatched, until its backoff passes.
					_ = claimer.Release(context.WithoutCancel(ctx), l)
					continue
				}
				slots <- struct{}{}
				start(l.ID, func() error { return k.runLeased(ctx, claimer, l, o, runs) })
			}
		} else {
			err = k.serveListed(ctx, &o, runs, slots, start)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			wait, stop := out.failed(err, o, time.Now())
			if stop {
				return fmt.Errorf("sdk: serve: %w", err)
			}
			k.logger.Warn("forkline: serve: the store failed; retrying", "error", err.Error(),
				"attempt", out.attempts, "retry_in", wait)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		if out.attempts > 0 {
			k.logger.Info("forkline: serve: the store answers again", "failed_attempts", out.attempts)
			out = outage{}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-k.wake:
		case _, ok := <-changes:
			if !ok {
				changes = nil // the store closed: the poll remains
			}
		case <-t.C:
		}
	}
}

// changes returns the channel on which a store shared by processes
// (eventlog.Notifier: pgstore's LISTEN/NOTIFY) announces their writes,
// until ctx ends; nil, which never delivers, when the store announces
// nothing, and then the poll alone finds them.
func (k *Kernel) changes(ctx context.Context) <-chan eventlog.ID {
	var n eventlog.Notifier
	if !eventlog.As(k.log, &n) {
		return nil
	}
	ch, err := n.Changes(ctx)
	if err != nil {
		k.logger.Debug("forkline: the store's change notifications are unavailable; polling", "error", err.Error())
		return nil
	}
	return ch
}

// ranInServe handles the end of a run Serve started (DESIGN §15½.11): an
// error the log does not record backs the execution off — noted in the
// store, so that Info shows it and ClaimRunnable skips it, and logged at
// Warn when it changes, not at every attempt; a later run that gets past
// it clears the note. Any other error is the execution's (recorded in the
// log) and is logged at Debug.
//
// A run that failed because a history is damaged (ErrCorrupt naming an
// execution: its own, or an ancestor's whose prefix it shares) would fail
// the same way every time: on a store that implements
// eventlog.Quarantiner, Serve quarantines the execution instead of
// backing it off — no Serve runs it again until a person lifts the
// quarantine (forkline unquarantine ID), deletes it or forks it before
// the damage — and logs that at Error, once.
//
// A recorded outcome is logged even when ctx ended after the run returned
// it; any other error of a run that ctx cut short says nothing.
func (k *Kernel) ranInServe(ctx context.Context, runs *serveRuns, id eventlog.ID, err error, o serveOptions) {
	var ee *ExecutionError
	var ce *CancelledError
	if ctx.Err() != nil && !errors.As(err, &ee) && !errors.As(err, &ce) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if k.quarantine(ctx, id, err) {
		return
	}
	var keeper eventlog.RetryKeeper
	eventlog.As(k.log, &keeper)
	if ae, ok := asAwaiting(err); ok {
		var leaser eventlog.Leaser
		if !eventlog.As(k.log, &leaser) {
			k.awaitingInServe(ctx, runs, ae, o) // with a Leaser, runLeased noted it before its release
		}
		return
	}
	if unrecorded(err) {
		b, changed := runs.failed(id, err, o.poll, time.Now())
		if keeper != nil {
			if nerr := keeper.SetRetry(ctx, id, b.err, k.now().Add(b.wait)); nerr != nil {
				k.logger.Debug("forkline: serve: cannot note the backoff", "execution", id.String(), "error", nerr)
			}
		}
		if changed {
			k.logger.Warn("forkline: serve: a run failed with an error the log does not record; backing off",
				"execution", id.String(), "error", err.Error(), "retry_in", b.wait)
		}
		return
	}
	if errors.Is(err, ErrBusy) || errors.Is(err, ErrVersion) {
		return // another kernel runs it, or one of its version will: says nothing of the execution
	}
	if runs.recovered(id) {
		if keeper != nil {
			if nerr := keeper.SetRetry(ctx, id, "", time.Time{}); nerr != nil && !errors.Is(nerr, eventlog.ErrNotFound) {
				k.logger.Debug("forkline: serve: cannot clear the backoff", "execution", id.String(), "error", nerr)
			}
		}
		k.logger.Info("forkline: serve: a run got past the error it backed off for", "execution", id.String())
	}
	if err != nil {
		k.logger.Debug("forkline: serve: run ended with an error", "execution", id.String(), "error", err)
	}
}

// awaitingInServe backs off an execution that this kernel left to its
// owner (DESIGN §15½.4): it is not claimed again before the backoff
// passes (a second, doubling to a minute), except by that owner. The
// note is the store's (eventlog.AwaitKeeper: Info shows LastError,
// RetryAt and AwaitedOwner, and ClaimRunnable skips the execution for
// every other owner; a plain RetryKeeper keeps LastError and RetryAt);
// this Serve keeps it too, for a store that keeps none. It is logged at
// Info when it changes. On a store with leases it is noted before the
// lease is released (runLeased).
func (k *Kernel) awaitingInServe(ctx context.Context, runs *serveRuns, ae *AwaitingOwnerError, o serveOptions) {
	b, changed := runs.failed(ae.ID, ae, max(o.poll, minAwaitBackoff), time.Now())
	retryAt := k.now().Add(b.wait)
	var nerr error
	var keeper eventlog.RetryKeeper
	eventlog.As(k.log, &keeper)
	var ak eventlog.AwaitKeeper
	switch {
	case eventlog.As(k.log, &ak):
		nerr = ak.SetAwaiting(ctx, ae.ID, ownerName(ae.Owner), b.err, retryAt)
	case keeper != nil:
		nerr = keeper.SetRetry(ctx, ae.ID, b.err, retryAt)
	}
	if nerr != nil {
		k.logger.Debug("forkline: serve: cannot note the backoff", "execution", ae.ID.String(), "error", nerr)
	}
	if changed {
		k.logger.Info("forkline: serve: execution left to its owner; backing off",
			"execution", ae.ID.String(), "owner", ae.Owner, "retry_in", b.wait)
	}
}

// ownerName is owner, or a stand-in for an owner no dispatch.started
// recorded (an AwaitKeeper needs a name).
func ownerName(owner string) string {
	if owner == "" {
		return "(unrecorded)"
	}
	return owner
}

// quarantine quarantines id when err says that a history it reads is
// damaged and the store keeps quarantines, logging it at Error when it is
// new; it reports whether id is quarantined now. runLeased calls it
// before it releases the lease, ranInServe again (a second call finds the
// quarantine and logs nothing). Damage to the store's
// files (a *CorruptionError naming no execution) is no execution's: it
// is backed off like any other unrecorded error.
func (k *Kernel) quarantine(ctx context.Context, id eventlog.ID, err error) bool {
	var ce *eventlog.CorruptionError
	if !errors.As(err, &ce) || ce.Execution.IsZero() {
		return false
	}
	var q eventlog.Quarantiner
	if !eventlog.As(k.log, &q) {
		return false
	}
	newly, qerr := q.Quarantine(ctx, id, err.Error())
	if qerr != nil {
		k.logger.Warn("forkline: serve: cannot quarantine an execution whose history is damaged; backing off",
			"execution", id.String(), "error", err.Error(), "quarantine_error", qerr.Error())
		return false
	}
	if newly {
		k.logger.Error("forkline: serve: the execution's history is damaged; quarantined: no Serve runs it until `forkline unquarantine` lifts it (or delete it, or fork it before the damage)",
			"execution", id.String(), "error", err.Error())
	}
	return true
}

// outage counts Serve's failed attempts to reach the store since it last
// answered.
type outage struct {
	since    time.Time // the first failure
	attempts int
	wait     time.Duration
}

// failed records a failed attempt at now and says how long to wait before
// the next, or that Serve must stop: err cannot be mended by retrying, or
// the store has failed for the GiveUpAfter time.
func (o *outage) failed(err error, opts serveOptions, now time.Time) (time.Duration, bool) {
	if mendless(err) {
		return 0, true
	}
	if o.attempts == 0 {
		o.since, o.wait = now, opts.poll
	} else {
		o.wait = min(2*o.wait, max(opts.poll, maxServeBackoff))
	}
	o.attempts++
	if opts.giveUpAfter > 0 && now.Sub(o.since) >= opts.giveUpAfter {
		return 0, true
	}
	return o.wait, false
}

// serveListed starts a run of every runnable execution that this Serve
// does not run yet, as slots free up: for a store without a Claimer, each
// run claims its execution itself, and ErrBusy means another kernel won.
// An execution whose run ended while the listing was read is left to the
// next round: the listing may show it runnable though it has just ended.
func (k *Kernel) serveListed(ctx context.Context, o *serveOptions, runs *serveRuns, slots chan struct{},
	start func(eventlog.ID, func() error)) error {
	mark := runs.mark()
	infos, err := k.runnable(ctx)
	if err != nil {
		return err
	}
	// Queues found full in this round: their later executions wait for
	// the next round even if a slot frees meanwhile, so that a slot goes
	// to the first listed (priority, then creation), not to whichever
	// claim came after its release.
	full := map[string]bool{}
	for _, info := range infos {
		id := info.ID
		if runs.skip(id, mark, time.Now()) || (info.Queue != "" && full[info.Queue]) {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		var leaser eventlog.Leaser
		if !eventlog.As(k.log, &leaser) {
			start(id, func() error {
				_, err := k.Run(ctx, id)
				return err
			})
			continue
		}
		// Claimed here, one after another in the listing's order
		// (priority, then creation: runnable), not in the runs'
		// goroutines, so that of a queue's executions the first listed
		// takes a free slot (DESIGN §19).
		l, err := k.claim(ctx, leaser, id, k.owner)
		if errors.Is(err, eventlog.ErrLeaseHeld) || errors.Is(err, eventlog.ErrQueueFull) {
			<-slots // another kernel won, or its queue is full: nothing to say
			if errors.Is(err, eventlog.ErrQueueFull) {
				full[info.Queue] = true
			}
			continue
		}
		if err != nil {
			start(id, func() error { return err }) // ranInServe judges it, as a run's
			continue
		}
		start(id, func() error { return k.runLeased(ctx, leaser, l, *o, runs) })
	}
	return nil
}

// runLeased runs dispatches of lease's execution under that lease. When a
// dispatch stops on an error of the store (an outage cut it short) rather
// than by ending, parking, losing the lease or ctx ending, Serve keeps the
// lease instead of releasing it: it renews it as soon as the store answers
// and runs the next dispatch itself. No other owner can have held the
// execution in between, so its resources that open only for this owner
// (DESIGN §11) reopen, where a takeover would have had to restore them
// from a checkpoint or leave to their owner (DESIGN §15½.4). A lease found
// taken over, or an error no retry mends, ends it; so does a dispatch that
// fails again after maxSameLeaseResumes resumptions — the store answers but
// this execution keeps failing, and Serve backs it off (DESIGN §15½.11)
// rather than hold a slot for it.
func (k *Kernel) runLeased(ctx context.Context, leaser eventlog.Leaser, lease eventlog.Lease, o serveOptions, runs *serveRuns) error {
	for resumes := 0; ; resumes++ {
		lctx, end := k.keep(ctx, leaser, lease)
		_, err := k.runOwned(lctx, lease.ID, lease)
		lease = end()
		if !k.resumable(ctx, err) || resumes == maxSameLeaseResumes {
			if ae, ok := asAwaiting(err); ok && ctx.Err() == nil {
				// Noted before the release, which other Serves hear of
				// (a NOTIFY on Postgres): none of them, nor this one,
				// claims it again in between without its note.
				k.awaitingInServe(context.WithoutCancel(ctx), runs, ae, o)
			}

			if ctx.Err() == nil {
				// Before the lease goes: released first, the execution
				// could be claimed again before its quarantine.
				k.quarantine(context.WithoutCancel(ctx), lease.ID, err)
			}
			k.release(ctx, leaser, lease)
			return err
		}
		var out outage
		for {
			wait, stop := out.failed(err, o, time.Now())
			if stop {
				k.release(ctx, leaser, lease)
				return err
			}
			select {
			case <-ctx.Done():
				k.release(ctx, leaser, lease)
				return err
			case <-time.After(wait):
			}
			renewed, rerr := leaser.Renew(context.WithoutCancel(ctx), lease, k.leaseTTL)
			if rerr == nil {
				lease = renewed
				break
			}
			if errors.Is(rerr, eventlog.ErrLeaseLost) {
				return err // another owner took it: nothing of ours to release
			}
			err = rerr
		}
		k.logger.Info("forkline: serve: resuming under the same lease after a store error",
			"execution", lease.ID.String(), "owner", k.owner, "epoch", lease.Epoch, "failed_attempts", out.attempts)
	}
}

// resumable reports whether a dispatch that returned err stopped on an
// error of the store that a later dispatch under the same lease may get
// past: not a recorded end, a park, a lost lease or ctx ending, and not an
// error no retry mends.
func (k *Kernel) resumable(ctx context.Context, err error) bool {
	var ee *ExecutionError
	var ce *CancelledError
	switch {
	case err == nil, ctx.Err() != nil,
		errors.As(err, &ee), errors.As(err, &ce),
		errors.Is(err, ErrWaiting), errors.Is(err, ErrCancelled), errors.Is(err, ErrBusy),
		errors.Is(err, ErrResourceUnavailable), // left to its owner: release at once
		errors.Is(err, eventlog.ErrLeaseLost), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return !errors.Is(err, eventlog.ErrNotFound) && !mendless(err)
}

// mendless reports whether err is one no retry mends: a closed log, a
// corrupt one, or input the store refuses.
func mendless(err error) bool {
	return errors.Is(err, eventlog.ErrClosed) || errors.Is(err, eventlog.ErrCorrupt) || errors.Is(err, eventlog.ErrInvalid)
}

// agentNames lists the registered agents.
func (k *Kernel) agentNames() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	names := make([]string, 0, len(k.mu.agents))
	for name := range k.mu.agents {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// runnable lists the executions Serve should run now: of a registered
// agent; pending; running with no live owner; or waiting and due for the
// reason it waits (DESIGN §15½.6): a wake time that has passed, a request
// in its inbox (an approval decision, a cancel), or — parked for a child,
// with no wake time and no approval awaited — a child.ended request in
// its inbox.
func (k *Kernel) runnable(ctx context.Context) ([]eventlog.Info, error) {
	infos, err := k.List(ctx, Filter{Status: []eventlog.Status{
		eventlog.StatusPending, eventlog.StatusRunning, eventlog.StatusWaiting}})
	if err != nil {
		return nil, err
	}
	var leaser eventlog.Leaser
	eventlog.As(k.log, &leaser)
	var inbox eventlog.Inbox
	eventlog.As(k.log, &inbox)
	now := k.now()
	var ready []eventlog.Info
	for _, info := range infos {
		if _, ok := k.handler(info.Agent); !ok {
			continue
		}
		if !eventlog.RunsOn(info.Version, k.version) {
			continue // left to a worker of its version (DESIGN §19)
		}
		if leaser != nil {
			if _, held, err := leaser.Holder(ctx, info.ID); err != nil {
				return nil, err
			} else if held {
				continue
			}
		}
		if info.RetryAt.After(now) && info.AwaitedOwner != k.owner {
			continue // a Serve backs it off (DESIGN §15½.11), unless it awaits this owner (§15½.4)
		}
		if info.Quarantined {
			continue // its history is damaged: a person acts first (ranInServe)
		}
		if info.Status == eventlog.StatusWaiting && (info.WakeAt.IsZero() || info.WakeAt.After(now)) {
			// A wake time (a sleep, a retry's backoff) is awaited until it
			// passes, and an approval until its decision: only a request
			// wakes them earlier, not a child's end (child.ended).
			ready, err := k.awaitedHappened(ctx, inbox, info.ID, !info.WakeAt.IsZero() || len(info.Approvals) > 0)
			if err != nil {
				return nil, err
			}
			if !ready {
				continue
			}
		}
		ready = append(ready, info)
	}
	// Lower priorities first, then creation order (DESIGN §19); executions
	// in no queue have priority 0.
	slices.SortStableFunc(ready, func(a, b eventlog.Info) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return a.Created.Compare(b.Created)
	})
	return ready, nil
}

// awaitedHappened reports whether a waiting execution whose wake time (if
// any) has not come can go on: a request other than child.ended arrived
// in its inbox (an approval decision, a cancel), or — unless
// requestsOnly, so parked for a child — a child.ended request, which a
// child's end writes into its caller's inbox (DESIGN §15½.6): the
// children themselves are not read.
func (k *Kernel) awaitedHappened(ctx context.Context, inbox eventlog.Inbox, id eventlog.ID, requestsOnly bool) (bool, error) {
	if inbox == nil {
		return false, nil
	}
	reqs, err := inbox.Requests(ctx, id)
	if err != nil {
		return false, err
	}
	for _, r := range reqs {
		if r.Data.Kind() != eventlog.KindChildEnded || !requestsOnly {
			return true, nil
		}
	}
	return false, nil
}
