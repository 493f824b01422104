package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Queue is a queue's store record (DESIGN §19, §21½.13): executions started
// in it (execution.created Queue) are claimed to run only while fewer than
// Concurrency of them hold a slot, and start no faster than Rate per Per.
// A second PutQueue of a name replaces the record: the newest declaration
// wins.
//
// A slot is held by an execution of the queue that has not ended and whose
// lease is live: a worker claims it to run a dispatch, and Serve releases
// the lease when the dispatch ends or parks, so waiting and parked
// executions hold none, and a worker that dies holding one frees it when
// its lease expires. The count is taken under the lock the claim takes
// (the queue's row on Postgres, the store's queue lock on Pebble), so no
// two claims of any kernels on one store both take the last slot.
type Queue struct {
	// Name identifies the queue: non-empty UTF-8 of at most MaxQueueName
	// bytes without NUL.
	Name string
	// Concurrency is how many of the queue's executions may hold a slot
	// at once, across every kernel on the store; 0 for no limit.
	Concurrency int
	// Rate and Per limit how many of the queue's executions start (leave
	// the queue: a claim of a pending execution) in any span of Per,
	// through the store's Limiter (DESIGN §17) under the key RateKey(Name);
	// 0 and 0 for no limit.
	Rate int
	Per  time.Duration
	// Priority says that the queue orders its executions by their
	// Priority (lower first, then creation order); a Start with a
	// non-zero priority into a queue without it is refused.
	Priority bool
}

// MaxQueueName bounds a queue's name.
const MaxQueueName = 256

// ErrQueueFull is wrapped when a claim to run an execution is refused
// because its queue has no free slot, or its rate admits no start now. A
// *QueueFullError says which.
var ErrQueueFull = errors.New("eventlog: the execution's queue is full")

// QueueFullError is the error of a claim refused by the execution's queue.
type QueueFullError struct {
	ID    ID
	Queue string
	// Running and Concurrency are the slots held and the limit, when the
	// concurrency refused it.
	Running, Concurrency int
	// RetryAt is when the rate admits a start again, when the rate
	// refused it; zero otherwise.
	RetryAt time.Time
}

// Error implements error.
func (e *QueueFullError) Error() string {
	if !e.RetryAt.IsZero() {
		return fmt.Sprintf("eventlog: execution %s: queue %q admits no start before %s (rate)", e.ID, e.Queue, e.RetryAt.Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("eventlog: execution %s: queue %q has %d of %d slots held", e.ID, e.Queue, e.Running, e.Concurrency)
}

// Is reports whether target is ErrQueueFull.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// RateKey is the Limiter key of queue's rate.
func RateKey(queue string) string { return "queue:" + queue }

// CheckQueueName refuses a name no store keeps alike: empty, longer than
// MaxQueueName bytes, not UTF-8, or holding NUL. The error wraps ErrInvalid.
func CheckQueueName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty queue name", ErrInvalid)
	case len(name) > MaxQueueName:
		return fmt.Errorf("%w: queue name of %d bytes, more than %d", ErrInvalid, len(name), MaxQueueName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: queue name %q is not UTF-8", ErrInvalid, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: queue name %q has a NUL byte", ErrInvalid, name)
	}
	return nil
}

// CheckQueue refuses a record that breaks Queue's rules: a bad name, a
// negative concurrency, a rate and period not both zero or both positive,
// or a rate above MaxLimiterCalls. The error wraps ErrInvalid.
func CheckQueue(q Queue) error {
	if err := CheckQueueName(q.Name); err != nil {
		return err
	}
	switch {
	case q.Concurrency < 0:
		return fmt.Errorf("%w: queue %q: concurrency %d; it must be positive (or 0 for no limit)", ErrInvalid, q.Name, q.Concurrency)
	case q.Rate < 0 || q.Per < 0 || (q.Rate == 0) != (q.Per == 0):
		return fmt.Errorf("%w: queue %q: rate %d per %v; both must be positive (or both 0 for no limit)", ErrInvalid, q.Name, q.Rate, q.Per)
	case q.Rate > MaxLimiterCalls:
		return fmt.Errorf("%w: queue %q: rate %d, more than %d", ErrInvalid, q.Name, q.Rate, MaxLimiterCalls)
	}
	return nil
}

// QueueCount is what a queue holds now: Waiting executions that have not
// ended and hold no slot (the queue's depth), and Running ones that hold
// a slot.
type QueueCount struct {
	Waiting, Running int
}

// Queuer keeps queues as store records and enforces them in the claims
// that run executions (DESIGN §19): every kernel on the store shares one
// count. Kernels find it with As; a store without one has no queues.
// Both stores of this module implement it; storetest's TestQueues checks
// it.
type Queuer interface {
	// PutQueue creates the record q.Name or replaces it whole, synced
	// before it returns. A record that breaks CheckQueue wraps ErrInvalid
	// and nothing is written.
	PutQueue(ctx context.Context, q Queue) error
	// Queues returns every record, ordered by name.
	Queues(ctx context.Context) ([]Queue, error)
	// QueueCounts returns, for every queue name that executions not yet
	// ended were started in (declared or not), its counts.
	QueueCounts(ctx context.Context) (map[string]QueueCount, error)
	// ClaimToRun is VersionClaimer.ClaimVersion for a worker that claims
	// id to run a dispatch: when id is in a queue, the queue's concurrency
	// and, for a pending execution, its rate are checked under the
	// claim's lock, and a refusal is a *QueueFullError with nothing
	// written. An execution whose queue has no record runs unlimited.
	ClaimToRun(ctx context.Context, id ID, owner string, ttl time.Duration, worker string) (Lease, error)
}

// SlotHeld reports whether an execution of a queue with status st and a
// lease live or not holds one of the queue's slots.
func SlotHeld(st Status, leaseLive bool) bool {
	return leaseLive && !st.Terminal()
}
