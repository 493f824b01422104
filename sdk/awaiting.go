package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
)

// AwaitingOwnerError is returned by Run when this kernel may not run the
// execution because its head is uncovered for a resource whose binding is
// not portable and opens only for the owner that made it (DESIGN §15½.4).
// Nothing was appended — not even a dispatch.started — so that owner
// resumes the execution when it returns. If it never will, fork the
// execution at its latest covered event (forkline fork ID
// --latest-covered) or cancel it. It wraps ErrResourceUnavailable.
type AwaitingOwnerError struct {
	ID       eventlog.ID
	Key      string // the resource
	DriverID string
	Owner    string // the owner the execution is left to
}

// Error implements error.
func (e *AwaitingOwnerError) Error() string {
	return fmt.Sprintf("sdk: execution %s: running, awaiting owner %s: resource %q (%s) is not portable, was bound by %s and no checkpoint covers the head; it resumes when that owner runs it (or fork it with --latest-covered)",
		e.ID, ownerText(e.Owner), e.Key, e.DriverID, ownerText(e.Owner))
}

// Unwrap makes errors.Is(err, ErrResourceUnavailable) hold.
func (e *AwaitingOwnerError) Unwrap() error { return ErrResourceUnavailable }

// ownerText names an owner for people ("" is an owner no dispatch.started
// recorded).
func ownerText(owner string) string {
	if owner == "" {
		return `"" (unrecorded)`
	}
	return fmt.Sprintf("%q", owner)
}

// awaitedOwner decides, from the folded lineage and before the dispatch
// appends anything, whether owner me may run it (DESIGN §15½.4). A binding
// that is not portable opens only for the owner that made it, and only
// while no other owner held the execution since (§11); another owner binds
// anew from the checkpoint that covers the head. When no checkpoint covers
// it, the execution is left to the binding's owner: awaitedOwner returns
// the error that says so. The owner that made the binding is then let open
// it even if another owner held the execution since (that owner could only
// hold it while the resource was covered, and could not change it without
// binding its own): otherwise nobody could ever resume it.
func (d *dispatch) awaitedOwner(me string) error {
	for _, rec := range d.state.Bindings() {
		if !rec.Own || rec.Portable {
			continue
		}
		if d.holder == me && rec.Seq >= d.holderSince {
			continue // made in the current owner's run of dispatches: it opens here
		}
		if rec.Owner == me {
			continue // ours: rebound from a covering checkpoint, else reopened (obtain)
		}
		if _, covered := d.coveringRef(rec.Key, d.state.Head); covered {
			continue // a takeover binds anew from the checkpoint
		}
		return &AwaitingOwnerError{ID: d.id, Key: rec.Key, DriverID: rec.DriverID, Owner: rec.Owner}
	}
	return nil
}

// coveringRef returns the checkpoint that covers resource key at event
// at: the head before a dispatch starts, or its dispatch.started (which
// advances nothing, so the same) once it has. d.mu is held, or d is not
// shared yet.
func (d *dispatch) coveringRef(key string, at uint64) (string, bool) {
	if at == 0 {
		return "", false
	}
	pt, err := d.cov.Point(at)
	if err != nil {
		return "", false
	}
	for _, sel := range pt.Resources {
		if sel.Key == key && sel.Covered && sel.Ref != "" {
			return sel.Ref, true
		}
	}
	return "", false
}

// minAwaitBackoff is the first wait before Serve tries again an
// execution it left to its owner (it doubles, as every backoff of Serve,
// to a minute: DESIGN §15½.11).
const minAwaitBackoff = time.Second

// asAwaiting returns the *AwaitingOwnerError in err's chain.
func asAwaiting(err error) (*AwaitingOwnerError, bool) {
	var ae *AwaitingOwnerError
	ok := errors.As(err, &ae)
	return ae, ok
}

// AwaitedOwner reports whether execution id of log waits for an owner
// (DESIGN §15½.4): it is running, no live lease holds it, and its head is
// uncovered for a resource whose binding is not portable — only owner, the
// one that made that binding, may resume it. forkline ls shows it as
// "running, awaiting owner X"; if X never returns, fork at LatestCovered
// (forkline fork ID --latest-covered) or cancel. It folds the lineage, so
// it is meant for running executions a person looks at, not for listing
// every execution. A log without leases has no live lease to check.
func AwaitedOwner(ctx context.Context, log eventlog.IndexedLog, id eventlog.ID) (owner string, awaiting bool, err error) {
	if leaser, ok := log.(eventlog.Leaser); ok {
		if _, held, err := leaser.Holder(ctx, id); err != nil {
			return "", false, err
		} else if held {
			return "", false, nil
		}
	}
	st := replay.NewWith(replay.Options{DropArgs: true})
	cov := coverage.New()
	for ev, err := range log.Events(ctx, id, 1) {
		if err != nil {
			return "", false, err
		}
		if err := st.Apply(ev); err != nil {
			return "", false, fmt.Errorf("sdk: execution %s: %w", id, err)
		}
		if err := cov.Apply(ev); err != nil {
			return "", false, fmt.Errorf("sdk: execution %s: %w", id, err)
		}
	}
	if st.Status != replay.StatusRunning || st.Head == 0 {
		return "", false, nil
	}
	pt, err := cov.Point(st.Head)
	if err != nil {
		return "", false, err
	}
	for _, rec := range st.Bindings() {
		if !rec.Own || rec.Portable {
			continue
		}
		for _, sel := range pt.Resources {
			if sel.Key == rec.Key && !sel.Covered {
				return rec.Owner, true, nil
			}
		}
	}
	return "", false, nil
}
