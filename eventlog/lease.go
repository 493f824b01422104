package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrLeaseHeld is wrapped when an execution is claimed, or appended to
// without a lease, while another owner's lease on it is live. A *HeldError
// says whose lease it is and until when.
var ErrLeaseHeld = errors.New("eventlog: execution is owned by another owner")

// ErrLeaseLost is wrapped when an append, a renewal or a release carries an
// epoch that is no longer the execution's: another owner claimed it since
// (DESIGN §11). Nothing was written. The writer must stop: it never writes
// to that lineage again under that epoch.
var ErrLeaseLost = errors.New("eventlog: lease lost")

// Lease is one owner's claim on one execution (DESIGN §11). Epoch is the
// fencing token: every claim of an execution gets an epoch greater than
// every earlier claim's, and appends made under a lease carry its epoch
// (WithEpoch) so that a store refuses them once the lease was taken over.
type Lease struct {
	ID      ID
	Owner   string
	Epoch   uint64
	Expires time.Time
}

// Leaser keeps which executions have a live owner. Ownership lives in the
// store, not in a kernel, so two kernels on one store — in one process, or
// on many hosts over a shared database — agree on who runs what.
//
// A lease is live from Claim until it expires or is released. An expired
// lease that nobody claimed since still fences nothing: its owner's appends
// are accepted until another owner claims, which is what makes a paused
// worker harmless only once it matters.
type Leaser interface {
	// Claim makes owner the owner of id until ttl from now, with an epoch
	// greater than every earlier claim of id. While another claim's lease is
	// live — the same owner's too — it fails with an error wrapping
	// ErrLeaseHeld (a *HeldError). An unknown id wraps ErrNotFound; an empty
	// owner or a ttl ≤ 0 wraps ErrInvalid.
	Claim(ctx context.Context, id ID, owner string, ttl time.Duration) (Lease, error)

	// Renew extends l until ttl from now. When l's epoch is no longer id's
	// newest claim, or l was released, it fails with ErrLeaseLost.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)

	// Release ends l at once, so that another owner may claim id without
	// waiting for it to expire. Releasing a lease that was lost wraps
	// ErrLeaseLost; releasing one twice is no error.
	Release(ctx context.Context, l Lease) error

	// Holder returns id's live lease, if it has one.
	Holder(ctx context.Context, id ID) (Lease, bool, error)
}

// HeldError is the error of a claim or an unleased append refused because
// another lease is live.
type HeldError struct {
	Lease Lease // the live lease
}

// Error implements error.
func (e *HeldError) Error() string {
	return fmt.Sprintf("eventlog: execution %s is owned by %q (epoch %d) until %s",
		e.Lease.ID, e.Lease.Owner, e.Lease.Epoch, e.Lease.Expires.Format(time.RFC3339Nano))
}

// Is reports whether target is ErrLeaseHeld.
func (e *HeldError) Is(target error) bool { return target == ErrLeaseHeld }

type epochKey struct{}

// WithEpoch returns a context whose appends (Append, AppendUnsynced) are
// made under the lease of this epoch: a store that implements Leaser checks,
// in the same atomic write, that epoch is still the execution's newest claim
// and refuses the append with ErrLeaseLost otherwise. An append whose
// context carries no epoch is accepted only while no lease of the execution
// is live.
func WithEpoch(ctx context.Context, epoch uint64) context.Context {
	return context.WithValue(ctx, epochKey{}, epoch)
}

// EpochFrom returns the epoch WithEpoch put in ctx.
func EpochFrom(ctx context.Context) (uint64, bool) {
	if ctx == nil {
		return 0, false
	}
	e, ok := ctx.Value(epochKey{}).(uint64)
	return e, ok
}

// LeaseState is the lease bookkeeping of one execution that a store keeps;
// stores embed it to share one set of rules (Claim, Renew, Release, and the
// check of an append). It is not safe for concurrent use: the store holds
// the execution's lock around every call, and around the append a check
// admits, so that a claim never interleaves with an admitted write.
type LeaseState struct {
	// Epoch is the newest claim's epoch (0: never claimed).
	Epoch    uint64
	Owner    string
	Expires  time.Time
	Released bool
}

// live reports whether the newest claim is live at now.
func (s *LeaseState) live(now time.Time) bool {
	return s.Epoch > 0 && !s.Released && now.Before(s.Expires)
}

func (s *LeaseState) lease(id ID) Lease {
	return Lease{ID: id, Owner: s.Owner, Epoch: s.Epoch, Expires: s.Expires}
}

// CheckClaim validates a claim's arguments.
func CheckClaim(owner string, ttl time.Duration) error {
	if owner == "" {
		return fmt.Errorf("%w: claim with an empty owner", ErrInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: claim with a ttl of %v; it must be positive", ErrInvalid, ttl)
	}
	return nil
}

// Claim applies a claim of id by owner at now; the store persists
// s.Epoch if it keeps epochs across restarts.
func (s *LeaseState) Claim(id ID, owner string, ttl time.Duration, now time.Time) (Lease, error) {
	if err := CheckClaim(owner, ttl); err != nil {
		return Lease{}, err
	}
	if s.live(now) {
		return Lease{}, &HeldError{Lease: s.lease(id)}
	}
	s.Epoch++
	s.Owner, s.Expires, s.Released = owner, now.Add(ttl), false
	return s.lease(id), nil
}

// Renew applies a renewal of l at now.
func (s *LeaseState) Renew(l Lease, ttl time.Duration, now time.Time) (Lease, error) {
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: renewal with a ttl of %v; it must be positive", ErrInvalid, ttl)
	}
	if err := s.current(l); err != nil {
		return Lease{}, err
	}
	s.Expires = now.Add(ttl)
	return s.lease(l.ID), nil
}

// Release applies a release of l.
func (s *LeaseState) Release(l Lease) error {
	if l.Epoch == s.Epoch && s.Released {
		return nil
	}
	if err := s.current(l); err != nil {
		return err
	}
	s.Released = true
	return nil
}

func (s *LeaseState) current(l Lease) error {
	if l.Epoch == 0 || l.Epoch != s.Epoch || s.Released {
		return fmt.Errorf("%w: execution %s: epoch %d, the newest claim is epoch %d (owner %q)",
			ErrLeaseLost, l.ID, l.Epoch, s.Epoch, s.Owner)
	}
	return nil
}

// Holder returns the live lease at now, if any.
func (s *LeaseState) Holder(id ID, now time.Time) (Lease, bool) {
	if !s.live(now) {
		return Lease{}, false
	}
	return s.lease(id), true
}

// Admit checks an append to id made with ctx at now: under the epoch ctx
// carries, that epoch must be the newest claim's and not released; without
// one, no lease may be live.
func (s *LeaseState) Admit(ctx context.Context, id ID, now time.Time) error {
	epoch, ok := EpochFrom(ctx)
	if !ok {
		if s.live(now) {
			return fmt.Errorf("append without a lease: %w", &HeldError{Lease: s.lease(id)})
		}
		return nil
	}
	return s.current(Lease{ID: id, Epoch: epoch})
}

// Claimer is a Leaser that finds and claims runnable executions in bulk,
// for a Serve loop shared by many workers (DESIGN §11): on Postgres, one
// short transaction with FOR UPDATE SKIP LOCKED, so that workers never
// wait on each other's rows and never claim one execution twice. A kernel
// uses it when its store has it, and lists and claims one by one
// otherwise.
type Claimer interface {
	Leaser

	// ClaimRunnable claims for owner, until ttl from now, up to n
	// executions of the given agents that have no live lease and are
	// runnable: pending, running (an interrupted dispatch), or waiting and
	// due for the reason it waits — a wake time at or before now, a pending
	// request other than child.ended (an approval decision, a cancel), or,
	// with no wake time and no approval awaited (Info.Approvals), a
	// pending child.ended request: one of its children ended (DESIGN
	// §15½.6). It returns their leases in ID order; none when
	// nothing is runnable. An empty owner or a ttl ≤ 0 wraps ErrInvalid.
	//
	// On a store that is also a Queuer, an execution in a queue is
	// claimed only while its queue has a free slot (and, when pending, a
	// start of its rate), as ClaimToRun decides, under a lock of the
	// queue taken in the claim; runnable executions are taken lower
	// priority first, then in creation order (DESIGN §19).
	ClaimRunnable(ctx context.Context, owner string, ttl time.Duration, agents []string, n int, now time.Time) ([]Lease, error)
}
