package eventlog

import (
	"context"
	"fmt"
	"time"
)

// RetryKeeper keeps, beside each execution, the backoff of the Serve loop
// that runs it (DESIGN §15½.11): the error its last run failed with — one
// the log does not record, such as a store error or a corrupt lineage —
// and the time before which no Serve runs it again. Info reports them as
// LastError and RetryAt, and a Claimer's ClaimRunnable skips an execution
// until its RetryAt. It is a note, not an event: it needs no lease and
// never conflicts with the owner's appends.
type RetryKeeper interface {
	// SetRetry records that a run of id failed with lastError and waits
	// until retryAt; an empty lastError clears both. An unknown id wraps
	// ErrNotFound.
	SetRetry(ctx context.Context, id ID, lastError string, retryAt time.Time) error
}

// AwaitKeeper is a RetryKeeper that also notes whom a backed-off
// execution is left to (DESIGN §15½.4): a kernel that may not run it —
// its head is uncovered for a resource that opens only for the owner that
// bound it — backs it off with SetAwaiting rather than claim it at every
// poll. Info reports the owner as AwaitedOwner beside LastError and
// RetryAt, and a Claimer's ClaimRunnable skips the execution until its
// RetryAt for every owner but that one, which may resume it at once. A
// claim of the execution by that owner clears the note.
type AwaitKeeper interface {
	RetryKeeper

	// SetAwaiting records, as SetRetry(lastError, retryAt) does, that id
	// is left to owner until retryAt. An empty owner or lastError wraps
	// ErrInvalid; an unknown id wraps ErrNotFound. SetRetry replaces the
	// note and clears its owner.
	SetAwaiting(ctx context.Context, id ID, owner, lastError string, retryAt time.Time) error
}

// CheckAwaiting checks SetAwaiting's input: an owner and an error are
// required.
func CheckAwaiting(owner, lastError string) error {
	if owner == "" || lastError == "" {
		return fmt.Errorf("%w: an awaiting note needs an owner (%q) and an error (%q)", ErrInvalid, owner, lastError)
	}
	return nil
}

// Quarantiner keeps, beside each execution, its quarantine: the mark Serve
// sets on an execution whose run failed with ErrCorrupt (its history is
// damaged, so every run would fail the same way). Info reports it as
// Quarantined with the error; a Claimer's ClaimRunnable never claims a
// quarantined execution, and Serve never runs one, until a person acts:
// Unquarantine (forkline unquarantine ID, once the damage is mended),
// Delete, or a fork before the damage. Like a RetryKeeper's note it is
// not an event: it needs no lease, and it survives the process.
type Quarantiner interface {
	// Quarantine marks id quarantined by the error why (not empty).
	// Quarantining a quarantined execution keeps the first error and says
	// so with newly false. An unknown id wraps ErrNotFound; an empty why,
	// ErrInvalid.
	Quarantine(ctx context.Context, id ID, why string) (newly bool, err error)
	// Unquarantine lifts id's quarantine, if any, and reports whether it
	// had one. An unknown id wraps ErrNotFound.
	Unquarantine(ctx context.Context, id ID) (was bool, err error)
}
