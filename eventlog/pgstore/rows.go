package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// queries holds the schema-qualified table names.
type queries struct {
	schema     string // quoted
	executions string
	events     string
	states     string
	requests   string
	messageIDs string
	channel    string // the NOTIFY channel (notify.go), unquoted
	deltas     string // the deltas' NOTIFY channel (deltas.go), unquoted
}

func newQueries(schema string) queries {
	sc := pgx.Identifier{schema}.Sanitize()
	return queries{schema: sc, executions: sc + ".executions", events: sc + ".events",
		states: sc + ".resource_states", requests: sc + ".requests",
		messageIDs: sc + ".message_ids",
		channel:    notifyChannel(schema), deltas: deltaChannel(schema)}
}

// querier is what a read needs: the pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// header is what never changes about an execution.
type header struct {
	Agent   string
	Parent  eventlog.ID
	At      uint64 // fork point; 0 for a root
	Caller  eventlog.ID
	Created time.Time
	Version string // the code version (eventlog.Info.Version); "" for none
	// Queue and Priority are the execution.created's (eventlog.Info.Queue).
	Queue    string
	Priority int
}

// row is an execution's row: header, status, lease and inbox counter.
type row struct {
	id        eventlog.ID
	hdr       header
	status    eventlog.StatusState
	lease     eventlog.LeaseState
	inboxLast uint64
	retry     retryNote
	key       string // idem_key: the start key, "" for none
	// quarantine is the error that quarantined the execution
	// (eventlog.Quarantiner); "" for none.
	quarantine string
}

// retryNote is the backoff a Serve loop noted (eventlog.RetryKeeper).
type retryNote struct {
	lastError string
	at        time.Time
	owner     string // the owner it is left to (eventlog.AwaitKeeper)
}

const rowCols = `id, agent, parent, fork_seq, caller, created_ns, head, status, updated_ns, wake_ns, deadline_ns,
	dispatched, parked, approvals, lease_epoch, lease_owner, lease_expires_ns, lease_released, inbox_last,
	last_error, retry_ns, coalesce(idem_key, ''), await_owner, quarantine, tokens_in, tokens_out, version, queue, priority`

// scanRow reads one row of rowCols (and then extra) from r.
func scanRow(r pgx.Row, extra ...any) (row, error) {
	var (
		id, parent, caller                              []byte
		forkSeq, created, head, updated, wake, deadline int64
		epoch, expires, inboxLast, retryAt              int64
		tokensIn, tokensOut                             int64
		status                                          int16
		dispatched, parked, released                    bool
		agent, owner, lastError, key, awaitOwner        string
		quarantine, version, queue                      string
		priority                                        int32
		approvals                                       []string
	)
	dest := append([]any{&id, &agent, &parent, &forkSeq, &caller, &created, &head, &status, &updated, &wake, &deadline,
		&dispatched, &parked, &approvals, &epoch, &owner, &expires, &released, &inboxLast,
		&lastError, &retryAt, &key, &awaitOwner, &quarantine, &tokensIn, &tokensOut, &version, &queue, &priority}, extra...)
	if err := r.Scan(dest...); err != nil {
		return row{}, err
	}
	var out row
	bad := func(format string, args ...any) (row, error) {
		return row{}, &eventlog.CorruptionError{Execution: out.id, What: "execution row", Err: fmt.Errorf(format, args...)}
	}
	if len(id) != len(out.id) {
		return bad("id of %d bytes", len(id))
	}
	out.id = eventlog.ID(id)
	if parent != nil && len(parent) != len(out.id) || caller != nil && len(caller) != len(out.id) {
		return bad("parent or caller of the wrong length")
	}
	if parent != nil {
		out.hdr.Parent = eventlog.ID(parent)
	}
	if caller != nil {
		out.hdr.Caller = eventlog.ID(caller)
	}
	if agent == "" || forkSeq < 0 || out.hdr.Parent.IsZero() != (forkSeq == 0) {
		return bad("inconsistent header (agent %q, parent %s, fork seq %d)", agent, out.hdr.Parent, forkSeq)
	}
	if head <= forkSeq || !eventlog.Status(status).Valid() || epoch < 0 || inboxLast < 0 {
		return bad("head %d (fork point %d), status %d, lease epoch %d, inbox %d", head, forkSeq, status, epoch, inboxLast)
	}
	if tokensIn < 0 || tokensOut < 0 {
		return bad("tokens %d+%d", tokensIn, tokensOut)
	}
	out.hdr.Agent, out.hdr.At, out.hdr.Created, out.hdr.Version = agent, uint64(forkSeq), fromNanos(created), version
	out.hdr.Queue, out.hdr.Priority = queue, int(priority)
	out.status = eventlog.StatusState{
		Status: eventlog.Status(status), Head: uint64(head), Updated: fromNanos(updated), WakeAt: fromNanos(wake),
		Deadline: fromNanos(deadline), Dispatched: dispatched, Parked: parked, Approvals: approvals,
		Tokens: eventlog.Tokens{Input: uint64(tokensIn), Output: uint64(tokensOut)},
	}
	if len(out.status.Approvals) == 0 {
		out.status.Approvals = nil
	}
	out.lease = eventlog.LeaseState{Epoch: uint64(epoch), Owner: owner, Expires: fromNanos(expires), Released: released}
	out.inboxLast, out.key, out.quarantine = uint64(inboxLast), key, quarantine
	if lastError != "" {
		out.retry = retryNote{lastError: lastError, at: fromNanos(retryAt), owner: awaitOwner}
	}
	return out, nil
}

// info describes r.
func (r *row) info() eventlog.Info {
	st := r.status
	if len(st.Approvals) == 0 {
		st.Approvals = nil // as the Pebble store says it
	}
	return eventlog.Info{
		ID: r.id, Agent: r.hdr.Agent, Parent: r.hdr.Parent, ForkSeq: r.hdr.At, Head: st.Head,
		Created: r.hdr.Created, Status: st.Status, Updated: st.Updated, WakeAt: st.WakeAt,
		Deadline: st.Deadline, Tokens: st.Tokens, Caller: r.hdr.Caller, Approvals: st.Approvals, Key: r.key,
		Version: r.hdr.Version, Queue: r.hdr.Queue, Priority: r.hdr.Priority,
		LastError: r.retry.lastError, RetryAt: r.retry.at, AwaitedOwner: r.retry.owner,
		Quarantined: r.quarantine != "", QuarantineError: r.quarantine,
	}
}

// readRow reads id's row; lock adds FOR UPDATE, and the database's clock is
// read with it.
func (s *Store) readRow(ctx context.Context, q querier, id eventlog.ID, lock bool) (row, time.Time, error) {
	sql := `SELECT ` + rowCols + `, clock_timestamp() FROM ` + s.q.executions + ` WHERE id = $1 AND deleted_kept IS NULL`
	if lock {
		sql += ` FOR UPDATE`
	}
	var now time.Time
	r, err := scanRow(q.QueryRow(ctx, sql, id[:]), &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, time.Time{}, fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, id)
	}
	if err != nil {
		return row{}, time.Time{}, s.wrap(err, "execution %s: read", id)
	}
	return r, now.UTC(), nil
}

// wrap describes a database error, keeping the classification of errors
// that are already the contract's.
func (s *Store) wrap(err error, format string, args ...any) error {
	var ce *eventlog.CorruptionError
	switch {
	case errors.As(err, &ce), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, eventlog.ErrNotFound), errors.Is(err, eventlog.ErrConflict), errors.Is(err, eventlog.ErrInvalid),
		errors.Is(err, eventlog.ErrLeaseLost), errors.Is(err, eventlog.ErrLeaseHeld), errors.Is(err, eventlog.ErrClosed):
		return err
	}
	if isReadOnlyRefusal(err) {
		return fmt.Errorf("pgstore: %s: %w: %w", fmt.Sprintf(format, args...), ErrReadOnly, err)
	}
	return fmt.Errorf("pgstore: %s: %w", fmt.Sprintf(format, args...), err)
}

// segment is the part of a lineage held by one execution: seqs lo..hi.
type segment struct {
	id     eventlog.ID
	lo, hi uint64
}

// lineage returns id's segments, root first, from the cached headers of
// id and its ancestors (read on first use). An unknown id wraps
// ErrNotFound.
func (s *Store) lineage(ctx context.Context, id eventlog.ID) ([]segment, error) {
	return s.lineageBelow(ctx, id, nil)
}

func (s *Store) lineageBelow(ctx context.Context, id eventlog.ID, descendants []eventlog.ID) ([]segment, error) {
	if v, ok := s.lineages.Load(id); ok {
		return v.([]segment), nil
	}
	var (
		parent  []byte
		forkSeq int64
	)
	err := s.pool.QueryRow(ctx, `SELECT parent, fork_seq FROM `+s.q.executions+` WHERE id = $1`, id[:]).Scan(&parent, &forkSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, id)
	}
	if err != nil {
		return nil, s.wrap(err, "execution %s: read header", id)
	}
	var segs []segment
	if parent == nil {
		segs = []segment{{id: id, lo: 1, hi: math.MaxUint64}}
	} else {
		if len(parent) != len(id) || forkSeq <= 0 {
			return nil, &eventlog.CorruptionError{Execution: id, What: "header", Err: fmt.Errorf("parent of %d bytes at seq %d", len(parent), forkSeq)}
		}
		p := eventlog.ID(parent)
		descendants = append(descendants, id)
		for _, d := range descendants {
			if d == p {
				return nil, &eventlog.CorruptionError{Execution: id, What: "header", Err: fmt.Errorf("parent %s is its own descendant", p)}
			}
		}
		up, err := s.lineageBelow(ctx, p, descendants)
		if err != nil {
			if errors.Is(err, eventlog.ErrNotFound) {
				return nil, &eventlog.CorruptionError{Execution: id, What: "header", Err: fmt.Errorf("parent %s is missing", p)}
			}
			return nil, err
		}
		at := uint64(forkSeq)
		for _, seg := range up {
			if seg.lo > at {
				break
			}
			seg.hi = min(seg.hi, at)
			segs = append(segs, seg)
		}
		segs = append(segs, segment{id: id, lo: at + 1, hi: math.MaxUint64})
	}
	s.lineages.Store(id, segs)
	return segs, nil
}

// segmentOf returns the segment of segs that holds seq.
func segmentOf(segs []segment, seq uint64) segment {
	for _, sg := range segs {
		if sg.lo <= seq && seq <= sg.hi {
			return sg
		}
	}
	return segs[len(segs)-1]
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// nanos is t as the store keeps it: eventlog.StoredNanos (0 for the zero
// time, saturated at eventlog.MaxWakeTime).
func nanos(t time.Time) int64 { return eventlog.StoredNanos(t) }

// nullID is id as a bytea, NULL for the zero ID.
func nullID(id eventlog.ID) any {
	if id.IsZero() {
		return nil
	}
	return id[:]
}

// nullText is t, NULL for "".
func nullText(t string) any {
	if t == "" {
		return nil
	}
	return t
}

// approvals is a never-nil slice for a NOT NULL array column.
func approvals(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

// isReadOnlyRefusal reports whether err is the server refusing a write in
// a read-only transaction (SQLSTATE 25006, ReadOnly).
func isReadOnlyRefusal(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}
