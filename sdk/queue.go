package sdk

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// QueueOption configures a queue that Kernel.Queue declares.
type QueueOption func(*eventlog.Queue) error

// QueueConcurrency lets at most n executions of the queue run at once,
// across every kernel on the store (DESIGN §19). n ≤ 0 is ErrInvalid;
// a queue without it has no concurrency limit.
func QueueConcurrency(n int) QueueOption {
	return func(q *eventlog.Queue) error {
		if n <= 0 {
			return fmt.Errorf("%w: queue concurrency %d; it must be at least 1", ErrInvalid, n)
		}
		q.Concurrency = n
		return nil
	}
}

// QueueRate lets at most n executions of the queue start in any span of
// per, across every kernel on the store, through the store's Limiter
// (DESIGN §17): a start is the first dispatch of an execution, so a
// resumed one takes none. n ≤ 0, n above eventlog.MaxLimiterCalls or per
// ≤ 0 is ErrInvalid.
func QueueRate(n int, per time.Duration) QueueOption {
	return func(q *eventlog.Queue) error {
		if n <= 0 || n > eventlog.MaxLimiterCalls || per <= 0 {
			return fmt.Errorf("%w: queue rate %d per %v; it must be 1..%d per a positive duration", ErrInvalid, n, per, eventlog.MaxLimiterCalls)
		}
		q.Rate, q.Per = n, per
		return nil
	}
}

// QueuePriority makes the queue order its executions by their Priority:
// lower numbers run first, then creation order. A Start with a non-zero
// Priority into a queue without it is ErrInvalid.
func QueuePriority() QueueOption {
	return func(q *eventlog.Queue) error {
		q.Priority = true
		return nil
	}
}

// Queue declares the queue name on the kernel's store (DESIGN §19,
// §21½.13): a store record every kernel on the store reads, replaced
// whole by a later declaration of the name (the newest wins). Executions
// started with OnQueue(name) are claimed to run only while fewer than
// its concurrency hold a slot — a slot is held while a worker's lease on
// the execution is live and it has not ended; Serve releases the lease
// when a dispatch parks, so waiting executions hold none, and a worker
// that dies frees its slots when their leases expire — and start no
// faster than its rate. The count is the store's, taken in the claim's
// transaction on Postgres and under the store's queue lock on Pebble.
//
// A malformed name, a bad option, or a store that keeps no queues:
// ErrInvalid, and nothing is written.
func (k *Kernel) Queue(name string, opts ...QueueOption) error {
	q := eventlog.Queue{Name: name}
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil queue option", ErrInvalid)
		}
		if err := opt(&q); err != nil {
			return fmt.Errorf("queue %q: %w", name, err)
		}
	}
	if err := eventlog.CheckQueue(q); err != nil {
		return err
	}
	qr, err := k.queuer()
	if err != nil {
		return err
	}
	return qr.PutQueue(context.Background(), q)
}

// queuer returns the store's Queuer; ErrInvalid when it keeps no queues.
func (k *Kernel) queuer() (eventlog.Queuer, error) {
	var qr eventlog.Queuer
	if !eventlog.As(k.log, &qr) {
		return nil, fmt.Errorf("%w: this store keeps no queues", ErrInvalid)
	}
	return qr, nil
}

// QueueInfo is one queue as Kernel.Queues shows it: its declaration and
// what it holds now.
type QueueInfo struct {
	eventlog.Queue
	// Declared is false for a queue that executions not yet ended were
	// started in but whose record is gone (a store written by another
	// program); its executions run unlimited.
	Declared bool
	// Waiting is the queue's depth: executions not yet ended that hold no
	// slot (pending, waiting, or interrupted with no live lease).
	Waiting int
	// Running is how many hold a slot.
	Running int
}

// Queues returns the store's queues, ordered by name, with their counts;
// none for a store that keeps no queues.
func (k *Kernel) Queues(ctx context.Context) ([]QueueInfo, error) {
	var qr eventlog.Queuer
	if !eventlog.As(k.log, &qr) {
		return nil, nil
	}
	return QueuesOf(ctx, qr)
}

// QueuesOf is Kernel.Queues on a Queuer (the CLI's and the live page's
// read).
func QueuesOf(ctx context.Context, qr eventlog.Queuer) ([]QueueInfo, error) {
	qs, err := qr.Queues(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := qr.QueueCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, 0, len(qs))
	for _, q := range qs {
		c := counts[q.Name]
		delete(counts, q.Name)
		out = append(out, QueueInfo{Queue: q, Declared: true, Waiting: c.Waiting, Running: c.Running})
	}
	for name, c := range counts {
		out = append(out, QueueInfo{Queue: eventlog.Queue{Name: name}, Waiting: c.Waiting, Running: c.Running})
	}
	sortQueues(out)
	return out, nil
}

// OnQueue starts the execution in the queue name, which a Kernel.Queue
// declared on the store; an undeclared name is ErrInvalid at Start, and
// nothing is written. Recorded in execution.created Queue. Forks and
// children join no queue unless given it (DESIGN §21½.13).
func OnQueue(name string) StartOption {
	return startFunc(func(o *startOptions) error {
		if err := eventlog.CheckQueueName(name); err != nil {
			return err
		}
		o.queue = name
		return nil
	})
}

// Priority places the execution in its queue: lower numbers run first,
// then creation order. It needs OnQueue, into a queue declared with
// QueuePriority; p must fit in 32 bits. Recorded in execution.created
// Priority.
func Priority(p int) StartOption {
	return startFunc(func(o *startOptions) error {
		if p < math.MinInt32 || p > math.MaxInt32 {
			return fmt.Errorf("%w: priority %d out of the 32-bit range", ErrInvalid, p)
		}
		o.priority = p
		return nil
	})
}

// checkQueue checks a Start's queue options against the store's records.
func (k *Kernel) checkQueue(ctx context.Context, o *startOptions) error {
	if o.queue == "" {
		if o.priority != 0 {
			return fmt.Errorf("%w: priority %d without a queue (OnQueue)", ErrInvalid, o.priority)
		}
		return nil
	}
	qr, err := k.queuer()
	if err != nil {
		return err
	}
	qs, err := qr.Queues(ctx)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q.Name != o.queue {
			continue
		}
		if o.priority != 0 && !q.Priority {
			return fmt.Errorf("%w: priority %d on queue %q, which was declared without QueuePriority", ErrInvalid, o.priority, o.queue)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown queue %q (declare it with Kernel.Queue first)", ErrInvalid, o.queue)
}

// sortQueues orders queues by name.
func sortQueues(qs []QueueInfo) {
	slices.SortFunc(qs, func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
}
