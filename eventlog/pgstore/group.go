package pgstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Group commit (DESIGN §21). The synced one-round-trip appends
// (pipeline.go) of concurrent executions in one process share a commit: the
// first append that finds no flush running flushes at once, alone — a lone
// append is never delayed, there is no timer — and appends that arrive
// while a flush runs queue for the next one. When a flush ends, its leader
// hands the queue to the first queued append, which flushes it: every
// statement of the group in one pgx pipeline up to one Sync, which
// Postgres runs as one implicit transaction, so the group costs one round
// trip, one commit and one fsync.
//
// Each statement of the group checks its own execution's head and lease
// epoch in its UPDATE's WHERE and writes nothing when they do not match
// (pipeline.go): a failed check touches only that append, which then runs
// the locking path alone and reports ErrConflict, ErrLeaseLost, ErrNotFound
// … exactly as a lone append does. That is the per-append savepoint of
// DESIGN §21½.12 without a SAVEPOINT statement: a refused append has
// nothing to roll back. Two appends of one execution in a group run in
// arrival order, and the second's check sees the first's write in the
// same transaction. A statement that fails with an error (a deadlock with
// another process, say) aborts the implicit transaction, so nothing of the
// group was written; each append is then flushed again alone, so only the
// one at fault fails. When the transaction itself fails (the connection is
// lost, the flush is cancelled), every append in it gets that error, as a
// lone append would, and none of them caches a fold. The statements carry
// their own NOTIFYs, which Postgres delivers at the commit.
//
// A group's statements are sent in the order of their executions' IDs, so
// that two processes' groups lock the rows they share in one order.

// groupCommit is the state of a store's group commit.
type groupCommit struct {
	off   bool // WithGroupCommit(false): every append flushes alone
	mu    sync.Mutex
	busy  bool           // a flush is running
	queue []*groupMember // appends waiting for the next flush
	// flushes and flushed count the flushes (transactions) and the
	// appends they held, for tests.
	flushes, flushed atomic.Uint64
	// hook, when set (tests), runs before a flush is sent with its
	// context, the backend's process ID and the number of appends.
	hook func(ctx context.Context, pid uint32, n int)
}

// groupMember is one synced one-round-trip append.
type groupMember struct {
	ctx  context.Context
	id   []byte
	sql  string
	args []any
	n    int64 // the statement's result: 1 wrote, 0 refused (wrote nothing)
	err  error
	// turn receives, once, the group this member must flush, or nil
	// when its result is in.
	turn chan []*groupMember
}

// WithGroupCommit turns group commit (DESIGN §21) on, the default, or
// off: with it, the synced appends of different executions that this store
// runs concurrently share one transaction per flush, and a lone append is
// never delayed.
func WithGroupCommit(on bool) Option {
	return func(o *options) error { o.noGroup = !on; return nil }
}

// commitGrouped runs m's statement in a flush, alone or with others, and
// leaves its result in m.
func (s *Store) commitGrouped(m *groupMember) {
	g := &s.group
	g.mu.Lock()
	if g.off || !g.busy {
		g.busy = !g.off
		g.mu.Unlock()
		s.lead([]*groupMember{m})
		return
	}
	m.turn = make(chan []*groupMember, 1)
	g.queue = append(g.queue, m)
	g.mu.Unlock()
	select {
	case grp := <-m.turn:
		if grp != nil {
			s.lead(grp)
		}
		return
	case <-m.ctx.Done():
	}
	g.mu.Lock()
	if i := slices.Index(g.queue, m); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
		g.mu.Unlock()
		m.err = m.ctx.Err()
		return
	}
	g.mu.Unlock()
	// Already in a group: its flush decides.
	if grp := <-m.turn; grp != nil {
		s.lead(grp)
	}
}

// lead flushes grp, whose first member is the caller's, hands the queue
// that formed meanwhile to its first member, and gives the others of grp
// their results.
func (s *Store) lead(grp []*groupMember) {
	s.flush(grp)
	g := &s.group
	if !g.off {
		g.mu.Lock()
		next := g.queue
		g.queue = nil
		g.busy = len(next) > 0
		g.mu.Unlock()
		if len(next) > 0 {
			next[0].turn <- next
		}
	}
	for _, m := range grp[1:] {
		m.turn <- nil
	}
}

// flush runs the statements of grp in one transaction and sets each
// member's result.
func (s *Store) flush(grp []*groupMember) {
	live := make([]*groupMember, 0, len(grp))
	for _, m := range grp {
		if err := m.ctx.Err(); err != nil {
			m.err = err
			continue
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		return
	}
	ctx := live[0].ctx
	if len(live) > 1 {
		// The flush is cancelled when every member's context is done,
		// not when one is: an append is not failed by another's caller.
		var stop func()
		ctx, stop = groupContext(live)
		defer stop()
		slices.SortStableFunc(live, func(a, b *groupMember) int { return bytes.Compare(a.id, b.id) })
	}
	s.group.flushes.Add(1)
	s.group.flushed.Add(uint64(len(live)))
	retry, err := s.send(ctx, live)
	if err == nil {
		return
	}
	for _, m := range live {
		m.n = 0 // nothing of the flush was written
	}
	if !retry {
		setErr(live, err)
		return
	}
	for _, m := range live {
		s.flush([]*groupMember{m})
	}
}

// send runs the statements of live, in one transaction, on one connection,
// and scans their results. retry reports that a group's statement failed
// and the server rolled the transaction back: each may run again alone.
func (s *Store) send(ctx context.Context, live []*groupMember) (retry bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	if h := s.group.hook; h != nil {
		h(ctx, conn.Conn().PgConn().PID(), len(live))
	}
	if len(live) == 1 {
		m := live[0]
		return false, conn.QueryRow(ctx, m.sql, m.args...).Scan(&m.n)
	}
	b := &pgx.Batch{}
	for _, m := range live {
		b.Queue(m.sql, m.args...).QueryRow(func(r pgx.Row) error { return r.Scan(&m.n) })
	}
	err = conn.SendBatch(ctx, b).Close()
	return err != nil && statementFailed(err, conn), err
}

// statementFailed reports whether err is a statement's error that the
// server answered on a connection still open: the implicit transaction was
// rolled back and nothing of it was written.
func statementFailed(err error, conn *pgxpool.Conn) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity == "ERROR" && !conn.Conn().IsClosed()
}

func setErr(ms []*groupMember, err error) {
	for _, m := range ms {
		m.err = err
	}
}

// groupContext is a context of the first member's values, cancelled when
// every member's context is done.
func groupContext(ms []*groupMember) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ms[0].ctx))
	left := atomic.Int64{}
	left.Store(int64(len(ms)))
	stops := make([]func() bool, len(ms))
	for i, m := range ms {
		stops[i] = context.AfterFunc(m.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
