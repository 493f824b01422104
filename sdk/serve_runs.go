package sdk

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// maxRunBackoff bounds the wait before Serve runs again an execution whose
// runs keep failing with an error the log does not record (DESIGN §15½.11).
const maxRunBackoff = time.Minute

// serveRuns is what one Serve knows of the runs it started: which are
// running, which ended since a listing began, and which keep failing.
type serveRuns struct {
	mu struct {
		sync.Mutex
		running map[eventlog.ID]bool
		// ended holds, for each run that ended since the oldest listing
		// still in use began, the count of ends at its end.
		ended map[eventlog.ID]uint64
		ends  uint64
		// failing holds the executions whose last run failed with an
		// error the log does not record.
		failing map[eventlog.ID]runBackoff
	}
}

// runBackoff is the per-execution backoff of Serve: the last unrecorded
// error, the wait it doubles, and when the execution runs again.
type runBackoff struct {
	err     string
	wait    time.Duration
	retryAt time.Time
}

func newServeRuns() *serveRuns {
	r := &serveRuns{}
	r.mu.running = map[eventlog.ID]bool{}
	r.mu.ended = map[eventlog.ID]uint64{}
	r.mu.failing = map[eventlog.ID]runBackoff{}
	return r
}

// begin records that a run of id starts.
func (r *serveRuns) begin(id eventlog.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.running[id] = true
}

// end records that the run of id returned.
func (r *serveRuns) end(id eventlog.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.mu.running, id)
	r.mu.ends++
	r.mu.ended[id] = r.mu.ends
}

// mark is taken before a listing (one at a time): it returns the count of
// ends so far and forgets the runs that ended before, whose end a listing
// begun now sees.
func (r *serveRuns) mark() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.mu.ended)
	return r.mu.ends
}

// skip reports whether a listing begun at mark must not start id: a run of
// id is running, or ended after the listing began, so that the listing may
// show it runnable though it has just ended (a run started then would only
// read its recorded outcome and report its error a second time), or id
// backs off until after now.
func (r *serveRuns) skip(id eventlog.ID, mark uint64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.running[id] || r.mu.ended[id] > mark {
		return true
	}
	b, ok := r.mu.failing[id]
	return ok && now.Before(b.retryAt)
}

// failed records that a run of id failed with err, which the log does not
// record, at now: the first wait is first, each next one doubles, up to
// maxRunBackoff. It returns the backoff and whether the error changed (a
// first failure, or another message), which is when Serve logs it.
func (r *serveRuns) failed(id eventlog.ID, err error, first time.Duration, now time.Time) (runBackoff, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.mu.failing[id]
	changed := !ok || b.err != err.Error()
	if !ok {
		b.wait = min(first, maxRunBackoff)
	} else {
		b.wait = min(2*b.wait, maxRunBackoff)
	}
	b.err, b.retryAt = err.Error(), now.Add(b.wait)
	r.mu.failing[id] = b
	return b, changed
}

// backsOff reports whether id backs off until after now.
func (r *serveRuns) backsOff(id eventlog.ID, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.mu.failing[id]
	return ok && now.Before(b.retryAt)
}

// recovered forgets id's backoff and reports whether it had one.
func (r *serveRuns) recovered(id eventlog.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.mu.failing[id]
	delete(r.mu.failing, id)
	return ok
}

// unrecorded reports whether a run's err is an error the log does not
// record and that a later run may get past, so that Serve backs the
// execution off (DESIGN §15½.11): not a recorded end, a park, another
// owner's claim or lease, an owner away (§15½.4), a deleted execution,
// and not ctx ending.
// ErrCorrupt counts: one execution's damaged lineage must not stop Serve
// nor take its slots.
func unrecorded(err error) bool {
	var ee *ExecutionError
	var ce *CancelledError
	switch {
	case err == nil, errors.As(err, &ee), errors.As(err, &ce),
		errors.Is(err, ErrWaiting), errors.Is(err, ErrCancelled), errors.Is(err, ErrBusy), errors.Is(err, ErrVersion),
		errors.Is(err, ErrResourceUnavailable),
		errors.Is(err, eventlog.ErrLeaseLost), errors.Is(err, eventlog.ErrLeaseHeld),
		errors.Is(err, eventlog.ErrNotFound), // deleted: no listing shows it again
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}
