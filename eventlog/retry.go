package eventlog

import (
	"context"
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
