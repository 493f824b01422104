package sdk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/replay"
)

// Kernel runs registered agents' executions on an event log.
type Kernel struct {
	log     eventlog.IndexedLog
	ownsLog bool
	gate    policy.Gate
	bundle  *policy.Bundle // WithBundle; nil: none
	// agentBundles are the bundles of SetAgentBundle, by agent: a map
	// replaced whole on every change, so a call's decision reads it
	// without a lock.
	agentBundles atomic.Pointer[map[string]*policy.Bundle]
	bundleMu     sync.Mutex       // serializes SetAgentBundle
	now          func() time.Time // clock.Now
	clock        Clock            // WithClock; the system clock by default
	retry        *RetryPolicy     // WithRetry; nil: no retry

	// owner names this kernel in the store's leases (eventlog.Leaser);
	// leaseTTL is how long a claim lasts unless renewed.
	owner      string
	leaseTTL   time.Duration
	logger     *slog.Logger  // WithLogger; discards by default
	parkAfter  time.Duration // ParkAfter
	strict     bool          // Strict
	version    string        // WithVersion; "": unversioned
	replayOnly bool          // ReplayOnly

	// formerOwners are names this kernel's owner had before (WithLocalOwner:
	// a folder's name before it had an identity); a dispatch.started that
	// recorded one of them is this kernel's own (sameOwner).
	formerOwners []string

	// wake is signalled (without blocking) when work may be waiting for
	// Serve: a Start, a Cancel, an ended Run.
	wake chan struct{}
	// appends wakes Watch when a dispatch appended (watch.go).
	appends appendSignal
	// commitPerAppend says that the log commits each append on its own
	// (eventlog.CommitPerAppend): safe_to_retry starts ride their
	// outcomes' appends (dispatch.defers, DESIGN §21).
	commitPerAppend bool
	// durability is Durability's mode: under SyncAtEffects a safe_to_retry
	// call's outcome is appended unsynced (lazyOutcome, DESIGN §21).
	durability DurabilityMode
	// deltas passes streaming model responses to WatchDeltas (deltas.go);
	// carry sends them to other processes through a store that carries
	// them (eventlog.DeltaCarrier), under origin, which names this kernel.
	deltas deltaHub
	carry  deltaCarry
	origin string
	// tel is the OpenTelemetry instruments (otel.go).
	tel telemetry
	// pokes wakes a running dispatch's inbox watch on a Send (message.go).
	pokes pokes

	mu struct {
		sync.Mutex
		agents  map[string]registered
		running map[eventlog.ID]string // id → the owner that runs or settles it here
	}
}

// handler runs an agent on encoded input and returns encoded output.
type handler func(ctx context.Context, input []byte) ([]byte, error)

// registered is an agent of the kernel: its handler, and the check that an
// input decodes into the handler's input type.
type registered struct {
	run   handler
	check func(input []byte) error
	// nullable reports that JSON null is a value of the input type (a
	// pointer, interface, map or slice): a fork's new input of null is
	// refused otherwise.
	nullable bool
}

// Option configures a Kernel.
type Option func(*Kernel) error

// WithGate makes g decide on every call before it runs live (DESIGN §7). A
// denied call is recorded as step.denied and never runs. Without a gate
// every call is allowed.
func WithGate(g policy.Gate) Option {
	return func(k *Kernel) error {
		if g == nil {
			return fmt.Errorf("%w: nil gate", ErrInvalid)
		}
		k.gate = g
		return nil
	}
}

// DefaultLeaseTTL is how long a kernel's claim on an execution lasts without
// renewal; a running dispatch renews it every third of that.
const DefaultLeaseTTL = 30 * time.Second

// WithOwner names the kernel in the store's leases: two kernels on one store
// (in one process, or on many hosts) must have different names. The default
// is the host name, the process ID and a random suffix — except for a kernel
// Open makes on a Pebble folder, named [LocalOwner] of that folder
// ([WithLocalOwner]). WithOwner drops the former names WithLocalOwner
// gave.
//
// The name is also what DESIGN §11's rule for resources that are not
// portable (driver.Portable) goes by: only the owner that bound a dirfs
// workspace or a sqlitedb database reopens it; a new owner binds anew from
// the checkpoint covering the head, or, with the head uncovered, appends
// nothing and leaves the execution to that owner (DESIGN §15½.4). A worker that should resume its own executions
// after a restart, with its workspaces as it left them, keeps its name
// across restarts.
func WithOwner(name string) Option {
	return func(k *Kernel) error {
		if name == "" {
			return fmt.Errorf("%w: empty owner name", ErrInvalid)
		}
		k.owner, k.formerOwners = name, nil
		return nil
	}
}

// WithLocalOwner names the kernel as the one kernel that holds the Pebble
// log in folder dir: WithOwner(LocalOwner(dir)), and, for a folder created
// before folders had an identity, the name its older executions recorded
// (the host and the folder's path then) is taken as this kernel's too, so
// that the upgrade is not a takeover of them (the path is the one at the
// folder's first writable open by a build with identities: a folder moved
// before that open recorded another path, and resuming its executions that
// hold an uncovered non-portable resource is a takeover). Open names its
// kernel so; a
// program that opens the store itself (pebblestore.Open, for writing,
// before this option runs) and calls New passes it to get the same.
func WithLocalOwner(dir string) Option {
	return func(k *Kernel) error {
		if dir == "" {
			return fmt.Errorf("%w: WithLocalOwner of an empty folder name", ErrInvalid)
		}
		k.owner, k.formerOwners = localOwner(dir)
		return nil
	}
}

// sameOwner reports whether a recorded owner name is this kernel's.
func (k *Kernel) sameOwner(name string) bool {
	return name == k.owner || slices.Contains(k.formerOwners, name)
}

// canonicalOwner returns k.owner for a recorded owner name that is this
// kernel's (sameOwner), and name otherwise.
func (k *Kernel) canonicalOwner(name string) string {
	if k.sameOwner(name) {
		return k.owner
	}
	return name
}

// WithLeaseTTL sets how long a claim on an execution lasts without renewal
// (default DefaultLeaseTTL). A kernel that stops renewing — a paused or
// partitioned process — loses its executions to another kernel after it,
// and every append it tries after that is refused (eventlog.ErrLeaseLost).
func WithLeaseTTL(d time.Duration) Option {
	return func(k *Kernel) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease TTL %v; it must be positive", ErrInvalid, d)
		}
		k.leaseTTL = d
		return nil
	}
}

// DefaultParkAfter is how long a handler waits (for a child, a retry's
// backoff, a Sleep) before its dispatch parks.
const DefaultParkAfter = time.Minute

// ParkAfter sets how long a handler's wait — for a child execution
// (Agent.Call), a retry's backoff, a Sleep, an approval, a message (Recv) —
// may last before
// the dispatch parks (default DefaultParkAfter): it records
// dispatch.parked, the execution is waiting and costs no goroutine, and
// Serve dispatches it again once the child has ended, at the wake time, or
// once the approval is decided; the replayed call then finds the same
// child, runs the next attempt, ends the sleep, or follows the decision.
func ParkAfter(d time.Duration) Option {
	return func(k *Kernel) error {
		if d <= 0 {
			return fmt.Errorf("%w: ParkAfter %v; it must be positive", ErrInvalid, d)
		}
		k.parkAfter = d
		return nil
	}
}

// LocalOwner is the owner name of the one kernel that holds the Pebble log
// in folder dir: the host name and the folder's identity, an ID written
// into the folder when it was created (pebblestore.ReadIdentity), not its
// path — so a folder moved on its host keeps its owner (DESIGN §15½.2).
// Pebble lets one process at a time open a log, so a process restarted
// after a crash on the same folder, moved or not, is the same owner, and
// reopens the workspaces it bound (DESIGN §11) as Part I's recovery does.
// A copy of the folder is the same owner too: remove the copy's FORKLINE-ID
// file, before its first open, to make it another.
//
// A folder without an identity — one created before identities that no
// writable open has given one yet, or no log at all — is named as it was
// then: the host name, a colon and the folder's absolute path. Call it
// after opening the log for writing. Open names its kernel so
// (WithLocalOwner, which also keeps the folder's former name).
func LocalOwner(dir string) string {
	owner, _ := localOwner(dir)
	return owner
}

// localOwner returns LocalOwner(dir) and the folder's former owner name,
// if it got its identity from a build that named owners by path.
func localOwner(dir string) (string, []string) {
	host := hostName()
	id, err := pebblestore.ReadIdentity(dir)
	if err != nil {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		return host + ":" + dir, nil
	}
	owner := host + ":folder-" + id.ID
	if id.FormerPath == "" {
		return owner, nil
	}
	return owner, []string{host + ":" + id.FormerPath}
}

// hostName is os.Hostname, "localhost" when it has none.
func hostName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "localhost"
	}
	return host
}

// defaultOwner names a kernel uniquely: host, process and a random suffix.
func defaultOwner() string {
	host := hostName()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// Open opens a kernel on the Pebble log in dir, or in memory when dir is
// "". A dir that is a postgres:// or postgresql:// URL opens the Postgres
// log (eventlog/pgstore, in its default schema) in that database instead,
// which kernels of many processes and hosts may share (DESIGN §11).
func Open(dir string, opts ...Option) (*Kernel, error) {
	store, err := OpenLog(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	if dir != "" && !IsPostgresURL(dir) {
		opts = append([]Option{WithLocalOwner(dir)}, opts...)
	}
	k, err := New(store, opts...)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	k.ownsLog = true
	return k, nil
}

// IsPostgresURL reports whether where names a Postgres database (it starts
// with postgres:// or postgresql://) rather than a folder.
func IsPostgresURL(where string) bool {
	return strings.HasPrefix(where, "postgres://") || strings.HasPrefix(where, "postgresql://")
}

// OpenLog opens the log Open would open: the Postgres store
// (pgstore.Open, default schema) when where is a Postgres URL, else the
// Pebble store in the folder where ("" for memory).
func OpenLog(ctx context.Context, where string) (eventlog.IndexedLog, error) {
	if IsPostgresURL(where) {
		s, err := pgstore.Open(ctx, where)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := pebblestore.Open(where)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// New makes a kernel on a log the caller opened (any backend that implements
// eventlog.IndexedLog). Close does not close that log.
func New(log eventlog.IndexedLog, opts ...Option) (*Kernel, error) {
	if log == nil {
		return nil, fmt.Errorf("%w: nil log", ErrInvalid)
	}
	k := &Kernel{log: log, now: time.Now, clock: systemClock{}, owner: defaultOwner(), leaseTTL: DefaultLeaseTTL,
		logger: slog.New(slog.DiscardHandler), parkAfter: DefaultParkAfter}
	k.mu.agents = make(map[string]registered)
	k.wake = make(chan struct{}, 1)
	k.mu.running = make(map[eventlog.ID]string)
	for _, opt := range opts {
		if err := opt(k); err != nil {
			return nil, err
		}
	}
	var r [8]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand)
	k.origin = hex.EncodeToString(r[:])
	eventlog.As(k.log, &k.carry.to)
	var cpa eventlog.CommitPerAppend
	k.commitPerAppend = eventlog.As(k.log, &cpa) && cpa.CommitPerAppend()
	return k, nil
}

// Log returns the kernel's event log as it was given to New (a wrapper
// stays a wrapper): find its optional capabilities with eventlog.As, never
// with a type assertion.
func (k *Kernel) Log() eventlog.IndexedLog { return k.log }

// Close closes the log if Open opened it.
func (k *Kernel) Close() error {
	if k.ownsLog {
		return k.log.Close()
	}
	return nil
}

// Result is the outcome of a completed execution.
type Result struct {
	ID     eventlog.ID
	Output []byte // JSON
}

// Decode decodes the output into out.
func (r *Result) Decode(out any) error {
	if err := decodeValue(r.Output, out); err != nil {
		return fmt.Errorf("sdk: execution %s: output does not decode into %T: %w", r.ID, out, err)
	}
	return nil
}

// Run runs one dispatch of execution id: the handler from the top, replaying
// every recorded call and running the rest live, until it returns. It returns
// the result of a completed execution, and an error whenever the dispatch
// did not end in one: the handler's error or the kernel's reason for failing
// the execution (an *ExecutionError), or the context's error when ctx was
// cancelled (the execution stays resumable). Running a finished execution
// returns its recorded outcome and runs nothing.
//
// When ctx ends before the dispatch has recorded its end — a shutdown;
// not [Kernel.Cancel] nor a [Deadline], which end the execution — the
// dispatch records no outcome (DESIGN §15½.1), whatever the handler
// returns: calls in flight get step.cancelled (a body that returns a
// value after ctx ended included), every uncovered resource whose driver
// is not portable gets resource.captured{Reason: shutdown} (DESIGN
// §21½.2), taken on a context detached from ctx with a bounded timeout,
// and nothing else is appended — no step outcome, no
// execution.completed or execution.failed. So a handler that swallows a
// step's cancellation error and returns a fallback answer does not turn
// a shutdown into a permanent result: Run returns an error wrapping
// ctx's error (errors.Is context.Canceled or context.DeadlineExceeded),
// and a later Run resumes the execution and ends it as an uninterrupted
// run would. A dispatch stopped by a lost lease records nothing either.
func (k *Kernel) Run(ctx context.Context, id eventlog.ID) (*Result, error) {
	ctx, lease, release, err := k.own(ctx, id)
	if err != nil {
		return nil, err
	}
	defer release()
	return k.runOwned(ctx, id, lease)
}

// runUnlessWaiting is Run for the background run that Agent.Call starts
// beside a child's wait: it runs no dispatch of an execution that waits
// for a wake time still to come — a child that another run (Serve's)
// dispatched and parked while this one was being started; Serve runs it
// at its wake time. It returns ErrWaiting then. The status is read under
// the lease, so no other owner can park the child in between.
func (k *Kernel) runUnlessWaiting(ctx context.Context, id eventlog.ID) (*Result, error) {
	ctx, lease, release, err := k.own(ctx, id)
	if err != nil {
		return nil, err
	}
	defer release()
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.Status == eventlog.StatusWaiting && info.WakeAt.After(k.now()) {
		return nil, fmt.Errorf("sdk: execution %s: %w until %s", id, ErrWaiting, info.WakeAt.Format(time.RFC3339Nano))
	}
	return k.runOwned(ctx, id, lease)
}

// runOwned runs one dispatch of id, which this kernel owns.
func (k *Kernel) runOwned(ctx context.Context, id eventlog.ID, lease eventlog.Lease) (*Result, error) {

	d, err := k.load(ctx, id)
	if err != nil {
		return nil, err
	}
	d.lease = lease
	if !eventlog.RunsOn(d.state.Version, k.version) {
		// Left to a worker of its version (DESIGN §19), before anything
		// is appended.
		return nil, &VersionError{ID: id, Version: d.state.Version, Worker: k.version}
	}
	switch d.state.Status {
	case replay.StatusCompleted:
		return &Result{ID: id, Output: d.state.Output}, nil
	case replay.StatusFailed:
		return nil, recordedFailure(id, d.state.Code, d.state.Error)
	case replay.StatusCancelled:
		return nil, &CancelledError{ID: id, Reason: d.state.CancelReason}
	}
	h, ok := k.handler(d.state.Agent)
	if !ok {
		return nil, fmt.Errorf("%w: execution %s is of agent %q, which is not registered", ErrInvalid, id, d.state.Agent)
	}
	// Decided before anything is appended (DESIGN §15½.4): an execution
	// whose uncovered resource opens only for another owner is left to
	// that owner, with its right to reopen it untouched.
	err = d.awaitedOwner(lease.Owner)
	if err != nil {
		k.logger.Info("forkline: execution left to its owner", "execution", id.String(), "error", err.Error())
		return nil, err
	}
	if d.state.Status == replay.StatusRunning {
		// The previous dispatch never ended: its owner crashed, was
		// stopped, or lost its lease. When another owner held it, one
		// line says who held it and who holds it now.
		k.tel.tookOver(ctx)
		if d.holder != lease.Owner {
			k.logger.Info("forkline: takeover", "execution", id.String(), "agent", d.state.Agent,
				"previous_owner", d.holder, "owner", lease.Owner, "epoch", lease.Epoch)
		}
	}
	ctx, span := k.tel.startDispatch(ctx, d.exec, d.state.Agent, d.state.TraceParent)
	res, err := d.run(ctx, h)
	endDispatchSpan(span, err)
	k.logEnd(d, err)
	return res, err
}

// notify wakes Serve, if it sleeps.
func (k *Kernel) notify() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// logEnd logs how a dispatch ended.
func (k *Kernel) logEnd(d *dispatch, err error) {
	attrs := []any{"execution", d.id.String(), "agent", d.state.Agent, "dispatch", d.state.Dispatches, "head", d.state.Head}
	var ee *ExecutionError
	d.mu.Lock()
	shutdown := d.shutdown
	d.mu.Unlock()
	switch {
	case err == nil:
		k.logger.Info("forkline: execution completed", attrs...)
	case errors.Is(err, ErrWaiting):
		// A park is how a dispatch waits (a timer, an approval, a child, a
		// message): no error, and routine enough for Debug.
		d.mu.Lock()
		reason, wake := d.parked, d.wakeAt
		d.mu.Unlock()
		attrs = append(attrs, "reason", string(reason))
		if !wake.IsZero() {
			attrs = append(attrs, "wake_at", wake.Format(time.RFC3339Nano))
		}
		k.logger.Debug("forkline: dispatch parked", attrs...)
	case shutdown:
		k.logger.Info("forkline: dispatch stopped by its caller; the execution can resume", append(attrs, "error", err.Error())...)
	case errors.As(err, &ee) && ee.ID == d.id:
		k.logger.Info("forkline: execution failed", append(attrs, "code", string(ee.Code), "error", ee.Message)...)
	default:
		k.logger.Info("forkline: dispatch stopped; the execution can resume", append(attrs, "error", err.Error())...)
	}
}

// own makes this kernel the owner of id for one Run: through the store's
// eventlog.Leaser when the log (or a log it wraps, eventlog.As) has one, so
// that every kernel on the store agrees, else in this kernel alone. Either
// way the lease names k.owner, which dispatch.started records. The returned context carries the
// lease's epoch, so every append of the dispatch is fenced, and is
// cancelled, with a cause wrapping eventlog.ErrLeaseLost, if a renewal
// finds the lease taken over. release ends the ownership.
func (k *Kernel) own(ctx context.Context, id eventlog.ID) (context.Context, eventlog.Lease, func(), error) {
	delay := time.Millisecond
	for {
		lctx, lease, release, holder, err := k.ownAs(ctx, id, k.owner)
		if !errors.Is(err, ErrBusy) || !strings.HasSuffix(holder, settleMark) {
			return lctx, lease, release, err
		}
		// A Send, Cancel or decision is settling the execution's
		// inbox under a claim of its own, for the few milliseconds an
		// append takes (or until its lease expires, if its process
		// died): wait for it rather than report the execution running.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, eventlog.Lease{}, nil, fmt.Errorf("sdk: execution %s: waiting for a settling claim to end: %w", id, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// settleMark ends the owner name of the short claim settle makes (owner +
// settleMark): a Run that finds the execution claimed by one waits for it
// to end instead of failing with ErrBusy.
const settleMark = "+settle"

// ownAs is own with the owner name given; on ErrBusy it also returns the
// owner that holds the execution.
func (k *Kernel) ownAs(ctx context.Context, id eventlog.ID, owner string) (context.Context, eventlog.Lease, func(), string, error) {
	var leaser eventlog.Leaser
	if !eventlog.As(k.log, &leaser) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if holder, ok := k.mu.running[id]; ok {
			return nil, eventlog.Lease{}, nil, holder, fmt.Errorf("%w: %s", ErrBusy, id)
		}
		k.mu.running[id] = owner
		// No store lease, no epoch; the owner is still this kernel's name,
		// which dispatch.started records (DESIGN §15½.2).
		return ctx, eventlog.Lease{ID: id, Owner: owner}, func() {
			k.mu.Lock()
			delete(k.mu.running, id)
			k.mu.Unlock()
		}, "", nil
	}
	lease, err := k.claim(ctx, leaser, id, owner)
	if errors.Is(err, eventlog.ErrQueueFull) {
		return nil, eventlog.Lease{}, nil, "", fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if held := (*eventlog.HeldError)(nil); errors.As(err, &held) {
		return nil, eventlog.Lease{}, nil, held.Lease.Owner, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if errors.Is(err, eventlog.ErrLeaseHeld) {
		return nil, eventlog.Lease{}, nil, "", fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if err != nil {
		return nil, eventlog.Lease{}, nil, "", err
	}
	lctx, end := k.keep(ctx, leaser, lease)
	return lctx, lease, func() { k.release(ctx, leaser, end()) }, "", nil
}

// claim claims id for owner (this kernel, or its settle) through leaser: when leaser is an
// eventlog.VersionClaimer, only if id is of this kernel's code version or
// unversioned (DESIGN §21½.5), checked by the store under the claim's
// lock; a *VersionError otherwise. runOwned checks the version again from
// the fold, for a store that cannot.
//
// A claim by this kernel to run id (owner is k.owner) goes through the
// store's eventlog.Queuer when it has one, which refuses it with
// eventlog.ErrQueueFull while id's queue has no free slot or start
// (DESIGN §19); a settle's claim (owner + settleMark), which runs no
// body, does not: a Cancel or a decision reaches a queued execution at
// once.
func (k *Kernel) claim(ctx context.Context, leaser eventlog.Leaser, id eventlog.ID, owner string) (eventlog.Lease, error) {
	if owner == k.owner {
		qr, ok := leaser.(eventlog.Queuer)
		if !ok {
			ok = eventlog.As(k.log, &qr) // a wrapper of the store that leases through it
		}
		if ok {
			return qr.ClaimToRun(ctx, id, owner, k.leaseTTL, k.version)
		}
	}
	if vc, ok := leaser.(eventlog.VersionClaimer); ok {
		return vc.ClaimVersion(ctx, id, owner, k.leaseTTL, k.version)
	}
	return leaser.Claim(ctx, id, owner, k.leaseTTL)
}

// keep holds lease for one dispatch: it renews it every third of the TTL
// until end. The returned context carries the lease's epoch and is
// cancelled, with a cause wrapping eventlog.ErrLeaseLost, if a renewal
// finds the lease taken over. end stops the renewals and returns the lease
// as last renewed, still held: the caller releases it, or runs another
// dispatch under it.
func (k *Kernel) keep(ctx context.Context, leaser eventlog.Leaser, lease eventlog.Lease) (context.Context, func() eventlog.Lease) {
	id := lease.ID
	lctx, cancel := context.WithCancelCause(eventlog.WithEpoch(ctx, lease.Epoch))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(k.leaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				renewed, err := leaser.Renew(context.WithoutCancel(ctx), lease, k.leaseTTL)
				if errors.Is(err, eventlog.ErrLeaseLost) {
					k.logger.Warn("forkline: lease lost; the dispatch stops", "execution", id.String(), "owner", k.owner, "error", err)
					cancel(fmt.Errorf("sdk: execution %s: %w", id, err))
					return
				}
				if err == nil {
					lease = renewed
				}
				// Another error (a closed store) is retried at the next
				// tick; the lease still holds until it expires, and a
				// takeover after that is refused at the next append.
			}
		}
	}()
	return lctx, func() eventlog.Lease {
		close(stop)
		<-done
		cancel(nil)
		return lease
	}
}

// release ends lease, so that another owner may claim its execution at
// once; a release that fails leaves the lease to expire.
func (k *Kernel) release(ctx context.Context, leaser eventlog.Leaser, lease eventlog.Lease) {
	_ = leaser.Release(context.WithoutCancel(ctx), lease)
	k.notify() // a Serve may run what this owner leaves behind
}

// load folds id's lineage into a new dispatch.
func (k *Kernel) load(ctx context.Context, id eventlog.ID) (*dispatch, error) {
	d := &dispatch{
		k:     k,
		id:    id,
		exec:  k.tel.execAttr(id),
		state: replay.NewWith(replay.Options{DropArgs: true}), // args are read from the log when an error quotes them
		cov:   coverage.New(),
		occ:   make(map[[16]byte]uint64),
		res:   make(map[string]*bound),
	}
	// The counter asks the replay state, which apply folds first, whether
	// a step started, instead of keeping a second set of every StepID.
	d.counter = policy.NewCounterOver(d.state.Started)
	edited := false
	for ev, err := range k.log.Events(ctx, id, 1) {
		if err != nil {
			return nil, err
		}
		if err := d.apply(ev); err != nil {
			return nil, fmt.Errorf("sdk: execution %s: %w", id, err)
		}
		if e, ok := editedFork(ev); ok {
			edited = e
		}
		if fc, ok := ev.Data.(*eventlog.ForkCreated); ok && len(fc.Input) > 0 {
			d.newInput = true
		}
	}
	d.recorded = d.state.Len()
	d.pos = newPositions(d.state, k.strict, edited)
	return d, nil
}

// Coverage says whether a fork at event at of execution id would restore
// every resource exactly, and what it would restore each from; its
// InFlight lists the at_most_once calls in flight at at, which a fork
// there sees as indeterminate (DESIGN §4: its handler gets
// ErrIndeterminate and the call is not run again), whatever the coverage.
// The selections come from the store's index; InFlight folds the lineage's
// events up to at (coverage.InFlightAt), so its cost grows with at.
func (k *Kernel) Coverage(ctx context.Context, id eventlog.ID, at uint64) (coverage.Point, error) {
	p, err := coverage.At(ctx, k.log, id, at)
	if err != nil {
		return p, err
	}
	if p.InFlight, err = coverage.InFlightAt(k.log.Events(ctx, id, 1), at); err != nil {
		return coverage.Point{}, fmt.Errorf("sdk: coverage of %s at seq %d: %w", id, at, err)
	}
	return p, nil
}

// Events yields the events of id's lineage. The error is yielded at most
// once, and last.
func (k *Kernel) Events(ctx context.Context, id eventlog.ID) iter.Seq2[eventlog.Event, error] {
	return k.log.Events(ctx, id, 1)
}

// panicError turns a recovered panic value into an error with its stack.
func panicError(where string, r any) error {
	return fmt.Errorf("panic in %s: %v\n%s", where, r, debug.Stack())
}
