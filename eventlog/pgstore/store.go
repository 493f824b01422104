package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pageSize is how many rows a read fetches at a time: a read holds a
// connection only while it fetches a page, never while the caller's loop
// body runs, so a loop may call the store again.
const pageSize = 1024

// Create implements eventlog.Log.
func (s *Store) Create(ctx context.Context, created *eventlog.ExecutionCreated, at time.Time, opts ...eventlog.CreateOption) (eventlog.ID, error) {
	if created == nil {
		return eventlog.ID{}, fmt.Errorf("%w: nil execution.created", eventlog.ErrInvalid)
	}
	if at.IsZero() {
		at = time.Now()
	}
	ev := eventlog.Event{Seq: 1, Time: at, Data: created}
	id := eventlog.NewID()
	rec, err := eventlog.AppendRecord(nil, id, ev)
	if err != nil {
		return eventlog.ID{}, err
	}
	if err := s.enter(ctx); err != nil {
		return eventlog.ID{}, err
	}
	defer s.leave()
	o := eventlog.NewCreateOptions(opts)
	if o.CallerStep != "" && o.Caller.IsZero() {
		return eventlog.ID{}, fmt.Errorf("%w: create: a caller step (%q) with no caller", eventlog.ErrInvalid, o.CallerStep)
	}
	var st eventlog.StatusState
	st.Apply(ev)
	inserted := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// With a key, a concurrent Create of the same key waits on the
		// unique index until this one ends, then inserts nothing.
		tag, err := tx.Exec(ctx, `INSERT INTO `+s.q.executions+` (id, agent, parent, fork_seq, caller, created_ns, idem_key,
			head, status, updated_ns, wake_ns, deadline_ns, dispatched, parked, approvals,
			lease_epoch, lease_owner, lease_expires_ns, lease_released, inbox_last, caller_step, version, queue, priority)
			VALUES ($1, $2, NULL, 0, $3, $4, $5, 1, $6, $7, 0, $8, false, false, '{}', 0, '', 0, false, 0, $9, $10, $11, $12)
			ON CONFLICT (idem_key) DO NOTHING`,
			id[:], created.Agent, nullID(o.Caller), nanos(at), nullText(created.Key),
			int16(st.Status), nanos(st.Updated), nanos(st.Deadline), o.CallerStep, created.Version, created.Queue, int32(created.Priority))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		inserted = true
		_, err = tx.Exec(ctx, `INSERT INTO `+s.q.events+` (execution, seq, record) VALUES ($1, 1, $2)`, id[:], rec)
		return err
	})
	if err != nil {
		return eventlog.ID{}, s.wrap(err, "create execution")
	}
	if inserted {
		s.remember(id, &cachedIndex{head: 1, state: eventlog.NewIndexState(nil), status: normalStatus(st)})
		return id, nil
	}
	return s.keyed(ctx, created)
}

// keyed returns the execution created.Key names when its agent and input
// equal created's, and ErrConflict when they differ.
func (s *Store) keyed(ctx context.Context, created *eventlog.ExecutionCreated) (eventlog.ID, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT id FROM `+s.q.executions+` WHERE idem_key = $1`, created.Key).Scan(&b)
	if err != nil {
		return eventlog.ID{}, s.wrap(err, "read key %q", created.Key)
	}
	if len(b) != len(eventlog.ID{}) {
		return eventlog.ID{}, &eventlog.CorruptionError{What: "idempotency key " + strconv.Quote(created.Key), Err: fmt.Errorf("id of %d bytes", len(b))}
	}
	id := eventlog.ID(b)
	evs, err := s.readEvents(ctx, id, 1, 1)
	if err != nil {
		return eventlog.ID{}, err
	}
	first, _ := evs[0].Data.(*eventlog.ExecutionCreated)
	if first == nil {
		return eventlog.ID{}, &eventlog.CorruptionError{Execution: id, Seq: 1, What: "event",
			Err: fmt.Errorf("idempotency key %q names an execution without execution.created", created.Key)}
	}
	if first.Agent != created.Agent || !bytes.Equal(first.Input, created.Input) {
		return eventlog.ID{}, fmt.Errorf("%w: key %q is execution %s of agent %q with input %.100s; now agent %q with input %.100s",
			eventlog.ErrConflict, created.Key, id, first.Agent, first.Input, created.Agent, created.Input)
	}
	return id, nil
}

// LookupKey implements eventlog.KeyLookup: it reads the key's row and
// never creates.
func (s *Store) LookupKey(ctx context.Context, key string) (eventlog.ID, error) {
	if key == "" {
		return eventlog.ID{}, fmt.Errorf("%w: lookup of an empty key", eventlog.ErrInvalid)
	}
	if err := s.enter(ctx); err != nil {
		return eventlog.ID{}, err
	}
	defer s.leave()
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT id FROM `+s.q.executions+` WHERE idem_key = $1`, key).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventlog.ID{}, fmt.Errorf("%w: no execution has key %q", eventlog.ErrNotFound, key)
	}
	if err != nil {
		return eventlog.ID{}, s.wrap(err, "read key %q", key)
	}
	if len(b) != len(eventlog.ID{}) {
		return eventlog.ID{}, &eventlog.CorruptionError{What: "idempotency key " + strconv.Quote(key), Err: fmt.Errorf("id of %d bytes", len(b))}
	}
	return eventlog.ID(b), nil
}

// Head implements eventlog.Log.
func (s *Store) Head(ctx context.Context, id eventlog.ID) (uint64, error) {
	info, err := s.Info(ctx, id)
	return info.Head, err
}

// Info implements eventlog.Log. It reads the execution's row: it never
// folds the lineage.
func (s *Store) Info(ctx context.Context, id eventlog.ID) (eventlog.Info, error) {
	if err := s.enter(ctx); err != nil {
		return eventlog.Info{}, err
	}
	defer s.leave()
	r, _, err := s.readRow(ctx, s.pool, id, false)
	if err != nil {
		return eventlog.Info{}, err
	}
	return r.info(), nil
}

// List implements eventlog.Log: rows in ID order, a page at a time, the
// filter applied by the database.
func (s *Store) List(ctx context.Context, f eventlog.Filter) iter.Seq2[eventlog.Info, error] {
	return func(yield func(eventlog.Info, error) bool) {
		if err := f.Validate(); err != nil {
			yield(eventlog.Info{}, err)
			return
		}
		after := f.After
		left := f.Limit
		for {
			n := 256
			if left > 0 {
				n = min(n, left)
			}
			page, err := s.listPage(ctx, f, after, n)
			if err != nil {
				yield(eventlog.Info{}, err)
				return
			}
			for _, info := range page {
				if !yield(info, nil) {
					return
				}
			}
			if left > 0 {
				if left -= len(page); left == 0 {
					return
				}
			}
			if len(page) < n {
				return
			}
			after = page[len(page)-1].ID
		}
	}
}

func (s *Store) listPage(ctx context.Context, f eventlog.Filter, after eventlog.ID, n int) ([]eventlog.Info, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	sql := `SELECT ` + rowCols + ` FROM ` + s.q.executions + ` WHERE id > $1 AND deleted_kept IS NULL`
	args := []any{after[:]}
	add := func(cond string, v any) {
		args = append(args, v)
		sql += " AND " + cond + " $" + strconv.Itoa(len(args))
	}
	if f.Agent != "" {
		add("agent =", f.Agent)
	}
	if !f.Parent.IsZero() {
		add("parent =", f.Parent[:])
	}
	if !f.Caller.IsZero() {
		add("caller =", f.Caller[:])
	}
	if f.Version != "" {
		add("version =", f.Version)
	}
	if len(f.Status) > 0 {
		codes := make([]int16, len(f.Status))
		for i, st := range f.Status {
			codes[i] = int16(st)
		}
		sql += ` AND status = ANY($` + strconv.Itoa(len(args)+1) + `)`
		args = append(args, codes)
	}
	args = append(args, n)
	sql += ` ORDER BY id LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.wrap(err, "list")
	}
	defer rows.Close()
	var out []eventlog.Info
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, s.wrap(err, "list")
		}
		out = append(out, r.info())
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err, "list")
	}
	return out, nil
}

// Append implements eventlog.Log: one transaction checks the lease epoch
// and the head under the execution's row lock and writes the events, their
// index entries, the new status and head. When this store made the
// execution's previous write, that transaction is one statement and one
// round trip (pipeline.go); otherwise it locks and reads the row first.
func (s *Store) Append(ctx context.Context, id eventlog.ID, expectedHead uint64, events ...eventlog.Event) (uint64, error) {
	return s.append(ctx, id, expectedHead, false, events, nil)
}

// AppendUnsynced implements eventlog.Log: Append in a transaction with
// SET LOCAL synchronous_commit = off, which returns before the commit
// record reaches the disk. Postgres's write-ahead log is ordered, so the
// next synced commit (of any execution) makes these events durable too.
func (s *Store) AppendUnsynced(ctx context.Context, id eventlog.ID, expectedHead uint64, events ...eventlog.Event) (uint64, error) {
	return s.append(ctx, id, expectedHead, true, events, nil)
}

// prepare checks and encodes events for an append at expectedHead.
func prepare(id eventlog.ID, expectedHead uint64, events []eventlog.Event) ([]eventlog.Event, [][]byte, error) {
	if len(events) == 0 {
		return nil, nil, fmt.Errorf("%w: append of no events to %s", eventlog.ErrInvalid, id)
	}
	now := time.Now()
	events = slices.Clone(events) // seqs and times are set on a copy, not the caller's slice
	records := make([][]byte, len(events))
	for i := range events {
		ev := events[i]
		want := expectedHead + uint64(i) + 1
		if ev.Seq != 0 && ev.Seq != want {
			return nil, nil, fmt.Errorf("%w: execution %s: event %d of the append has seq %d, its position is %d",
				eventlog.ErrInvalid, id, i, ev.Seq, want)
		}
		switch ev.Kind() {
		case eventlog.KindExecutionCreated, eventlog.KindForkCreated:
			return nil, nil, fmt.Errorf("%w: execution %s: %s is written by Create or Fork, not Append",
				eventlog.ErrInvalid, id, ev.Kind())
		case eventlog.KindChildEnded:
			return nil, nil, fmt.Errorf("%w: execution %s: %s is an inbox request, never an event of a lineage",
				eventlog.ErrInvalid, id, ev.Kind())
		}
		if want > math.MaxInt64 {
			return nil, nil, fmt.Errorf("%w: execution %s: seq %d is past the largest a store keeps", eventlog.ErrInvalid, id, want)
		}
		ev.Seq = want
		if ev.Time.IsZero() {
			ev.Time = now
		}
		events[i] = ev
		var err error
		if records[i], err = eventlog.AppendRecord(nil, id, ev); err != nil {
			return nil, nil, fmt.Errorf("execution %s: %w", id, err)
		}
	}
	return events, records, nil
}

// append is Append, AppendUnsynced and Take (which removes the requests
// numbered take in the same transaction).
func (s *Store) append(ctx context.Context, id eventlog.ID, expectedHead uint64, unsynced bool, events []eventlog.Event, take []uint64) (uint64, error) {
	events, records, err := prepare(id, expectedHead, events)
	if err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.leave()
	if take == nil {
		c, ok, err := s.appendFast(ctx, id, expectedHead, unsynced, events, records)
		if err != nil {
			return 0, s.wrap(err, "execution %s: append", id)
		}
		if ok {
			s.remember(id, c)
			return c.head, nil
		}
	}
	segs, err := s.lineage(ctx, id)
	if err != nil {
		return 0, err
	}
	var (
		index  *eventlog.IndexState
		status eventlog.StatusState
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if unsynced {
			if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
				return err
			}
		}
		r, now, err := s.readRow(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := r.lease.Admit(ctx, id, now); err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		head := r.status.Head
		if head != expectedHead {
			return fmt.Errorf("%w: execution %s: head is %d, expected %d", eventlog.ErrConflict, id, head, expectedHead)
		}
		if err := eventlog.CheckAfterEnd(id, r.status.Status, head, events); err != nil {
			return err
		}
		if index, err = s.indexAt(ctx, tx, segs, id, head); err != nil {
			return err
		}
		status = r.status.Clone()
		b := &pgx.Batch{}
		for i, ev := range events {
			b.Queue(`INSERT INTO `+s.q.events+` (execution, seq, record) VALUES ($1, $2, $3)`, id[:], int64(ev.Seq), records[i])
			status.Apply(ev)
			changed, err := index.Apply(ev)
			if err != nil {
				return fmt.Errorf("execution %s: seq %d: %w", id, ev.Seq, err)
			}
			for _, st := range changed {
				s.queueState(b, id, st)
			}
		}
		if len(take) > 0 {
			ns := make([]int64, len(take))
			for i, n := range take {
				ns[i] = int64(n)
			}
			b.Queue(`DELETE FROM `+s.q.requests+` WHERE execution = $1 AND n = ANY($2)`, id[:], ns).Exec(func(tag pgconn.CommandTag) error {
				if int(tag.RowsAffected()) != len(take) {
					return fmt.Errorf("%w: execution %s: of requests %v, %d are pending", eventlog.ErrConflict, id, take, tag.RowsAffected())
				}
				return nil
			})
		}
		b.Queue(`UPDATE `+s.q.executions+` SET head = $2, status = $3, updated_ns = $4, wake_ns = $5, deadline_ns = $6,
			dispatched = $7, parked = $8, approvals = $9, tokens_in = $10, tokens_out = $11 WHERE id = $1`,
			id[:], int64(status.Head), int16(status.Status), nanos(status.Updated), nanos(status.WakeAt), nanos(status.Deadline),
			status.Dispatched, status.Parked, approvals(status.Approvals), tokenCount(status.Tokens.Input), tokenCount(status.Tokens.Output))
		if s.notifies(events) {
			b.Queue(s.notifySQL(), id[:])
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if !r.status.Status.Terminal() && status.Status.Terminal() && !r.hdr.Caller.IsZero() {
			return s.wakeCaller(ctx, tx, id, r.hdr.Caller, status.Updated)
		}
		return nil
	})
	if err != nil {
		return 0, s.wrap(err, "execution %s: append", id)
	}
	newHead := expectedHead + uint64(len(events))
	s.remember(id, &cachedIndex{head: newHead, state: index, status: normalStatus(status)})
	return newHead, nil
}

// wakeCaller writes, in the transaction tx of child id's terminal append,
// the child.ended request to its caller's inbox and NOTIFYs the caller
// (DESIGN §15½.6): both land with the child's end or not at all. A caller
// that is deleted gets none. The caller's row is locked after the
// child's, always in that order (a caller is never its child's
// descendant).
func (s *Store) wakeCaller(ctx context.Context, tx pgx.Tx, id, caller eventlog.ID, at time.Time) error {
	var step string
	if err := tx.QueryRow(ctx, `SELECT caller_step FROM `+s.q.executions+` WHERE id = $1`, id[:]).Scan(&step); err != nil {
		return err
	}
	var n int64
	err := tx.QueryRow(ctx, `UPDATE `+s.q.executions+` SET inbox_last = inbox_last + 1 WHERE id = $1 AND deleted_kept IS NULL RETURNING inbox_last`,
		caller[:]).Scan(&n)
	if err == pgx.ErrNoRows {
		return nil // deleted
	}
	if err != nil {
		return err
	}
	rec, err := eventlog.AppendRequest(nil, caller, uint64(n), eventlog.Event{Time: at, Data: &eventlog.ChildEnded{StepID: step}})
	if err != nil {
		return fmt.Errorf("execution %s: child.ended: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.q.requests+` (execution, n, record, kind) VALUES ($1, $2, $3, $4)`,
		caller[:], n, rec, int16(eventlog.KindChildEnded)); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, s.notifySQL(), caller[:]) // delivered at the commit (notify.go)
	return err
}

// queueState queues the insert of one index entry.
func (s *Store) queueState(b *pgx.Batch, id eventlog.ID, st eventlog.ResourceState) {
	inFlight := st.InFlight
	if inFlight == nil {
		inFlight = []string{}
	}
	b.Queue(`INSERT INTO `+s.q.states+` (execution, key, seq, generation, in_flight, coverage_reuse, bound, latest_ref, latest_at, latest_gen, diverged)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		id[:], st.Key, int64(st.Seq), int64(st.Generation), inFlight, st.CoverageReuse, int64(st.Bound),
		st.Latest.Ref, int64(st.Latest.At), int64(st.Latest.Generation), int64(st.Diverged))
}

// indexAt returns a fold of id's index as of head, from the cache or the
// index rows. The caller may apply events to it.
func (s *Store) indexAt(ctx context.Context, q querier, segs []segment, id eventlog.ID, head uint64) (*eventlog.IndexState, error) {
	if c, ok := s.cached(id, head); ok {
		return eventlog.NewIndexState(c.state.States()), nil
	}
	states, err := s.resourceStates(ctx, q, segs, head)
	if err != nil {
		return nil, err
	}
	return eventlog.NewIndexState(states), nil
}

// Fork implements eventlog.Log. It writes the fork's row (naming parent
// and fork point), fork.created and the index entries of the resources it
// inherits, in one transaction; it copies no event.
func (s *Store) Fork(ctx context.Context, parent eventlog.ID, at uint64, fc *eventlog.ForkCreated, t time.Time) (eventlog.ID, error) {
	if fc == nil {
		fc = &eventlog.ForkCreated{}
	}
	if (!fc.Parent.IsZero() && fc.Parent != parent) || (fc.At != 0 && fc.At != at) {
		return eventlog.ID{}, fmt.Errorf("%w: fork.created names %s@%d, the fork is of %s@%d",
			eventlog.ErrInvalid, fc.Parent, fc.At, parent, at)
	}
	info, err := s.Info(ctx, parent)
	if err != nil {
		return eventlog.ID{}, err
	}
	if at == 0 || at > info.Head {
		return eventlog.ID{}, fmt.Errorf("%w: fork of %s at seq %d: seqs run from 1 to %d",
			eventlog.ErrInvalid, parent, at, info.Head)
	}
	if t.IsZero() {
		t = time.Now()
	}
	created := *fc
	created.Parent, created.At = parent, at
	ev := eventlog.Event{Seq: at + 1, Time: t, Data: &created}
	id := eventlog.NewID()
	rec, err := eventlog.AppendRecord(nil, id, ev)
	if err != nil {
		return eventlog.ID{}, err
	}
	if err := s.enter(ctx); err != nil {
		return eventlog.ID{}, err
	}
	defer s.leave()
	segs, err := s.lineage(ctx, parent)
	if err != nil {
		return eventlog.ID{}, err
	}
	// The parent's events up to at never change: no lock is needed.
	states, err := s.resourceStates(ctx, s.pool, segs, at)
	if err != nil {
		return eventlog.ID{}, err
	}
	index := eventlog.NewIndexState(states)
	changed, err := index.Apply(ev)
	if err != nil {
		return eventlog.ID{}, fmt.Errorf("fork of %s at seq %d: %w", parent, at, err)
	}
	var status eventlog.StatusState // a fork's status is its own: pending
	status.Apply(ev)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The parent's row is held (shared) until the fork is in: a Delete
		// of the parent, which locks it for update and reads its forks,
		// either sees this one or comes first and this fails.
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM `+s.q.executions+` WHERE id = $1 AND deleted_kept IS NULL FOR SHARE`, parent[:]).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, parent)
		}
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO `+s.q.executions+` (id, agent, parent, fork_seq, caller, created_ns, idem_key,
			head, status, updated_ns, wake_ns, deadline_ns, dispatched, parked, approvals,
			lease_epoch, lease_owner, lease_expires_ns, lease_released, inbox_last, version)
			VALUES ($1, $2, $3, $4, NULL, $5, NULL, $6, $7, $8, 0, $9, false, false, '{}', 0, '', 0, false, 0, $10)`,
			id[:], info.Agent, parent[:], int64(at), nanos(t), int64(at+1), int16(status.Status), nanos(status.Updated), nanos(status.Deadline),
			created.Version)
		b.Queue(`INSERT INTO `+s.q.events+` (execution, seq, record) VALUES ($1, $2, $3)`, id[:], int64(at+1), rec)
		for _, st := range changed {
			s.queueState(b, id, st)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return eventlog.ID{}, s.wrap(err, "fork of %s at seq %d", parent, at)
	}
	s.remember(id, &cachedIndex{head: at + 1, state: index, status: normalStatus(status)})
	return id, nil
}

// VerifyPrefix implements eventlog.PrefixVerifier: it checks the records
// of id's lineage 1..at (eventlog.CheckRecord; no payload is decoded), a
// page at a time.
func (s *Store) VerifyPrefix(ctx context.Context, id eventlog.ID, at uint64) error {
	info, err := s.Info(ctx, id)
	if err != nil {
		return err
	}
	if at == 0 || at > info.Head {
		return fmt.Errorf("%w: verify %s to seq %d: seqs run from 1 to %d", eventlog.ErrInvalid, id, at, info.Head)
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	segs, err := s.lineage(ctx, id)
	if err != nil {
		return err
	}
	if err := s.verifyPrefix(ctx, segs, at); err != nil {
		return fmt.Errorf("verify %s to seq %d: %w", id, at, err)
	}
	return nil
}

// verifyPrefix checks the records of the lineage segs up to seq at —
// every one present and whole where it belongs (eventlog.CheckRecord:
// header and checksum, which binds the execution and seq; no payload is
// decoded), a page at a time. Damage is a *eventlog.CorruptionError
// naming the execution and seq. The caller has entered the store.
func (s *Store) verifyPrefix(ctx context.Context, segs []segment, at uint64) error {
	next := uint64(1)
	for _, seg := range segs {
		hi := min(seg.hi, at)
		for next <= hi {
			last := min(hi, next+pageSize-1)
			if err := s.verifyPage(ctx, seg.id, next, last); err != nil {
				return err
			}
			next = last + 1
		}
	}
	return nil
}

// verifyPage is verifyPrefix's check of the own events lo..hi of id.
func (s *Store) verifyPage(ctx context.Context, id eventlog.ID, lo, hi uint64) error {
	rows, err := s.pool.Query(ctx, `SELECT seq, record FROM `+s.q.events+` WHERE execution = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq`,
		id[:], int64(lo), int64(hi))
	if err != nil {
		return s.wrap(err, "execution %s: read events", id)
	}
	defer rows.Close()
	want := lo
	for rows.Next() {
		var (
			seq int64
			rec []byte
		)
		if err := rows.Scan(&seq, &rec); err != nil {
			return s.wrap(err, "execution %s: read events", id)
		}
		if uint64(seq) != want {
			return &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")}
		}
		if err := eventlog.CheckRecord(id, want, rec); err != nil {
			return &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: err}
		}
		want++
	}
	if err := rows.Err(); err != nil {
		return s.wrap(err, "execution %s: read events", id)
	}
	if want <= hi {
		return &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")}
	}
	return nil
}

// Events implements eventlog.Log. It reads the head, then each segment of
// the lineage a page at a time.
func (s *Store) Events(ctx context.Context, id eventlog.ID, from uint64) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		head, err := s.Head(ctx, id)
		if err != nil {
			yield(eventlog.Event{}, err)
			return
		}
		segs, err := s.lineageEntered(ctx, id)
		if err != nil {
			yield(eventlog.Event{}, err)
			return
		}
		next := max(from, 1)
		for _, seg := range segs {
			hi := min(seg.hi, head)
			for next <= hi {
				page, err := s.readEvents(ctx, seg.id, next, min(hi, next+pageSize-1))
				if err != nil {
					yield(eventlog.Event{}, err)
					return
				}
				for _, ev := range page {
					if !yield(ev, nil) {
						return
					}
				}
				next += uint64(len(page))
			}
		}
	}
}

// lineageEntered is lineage for a caller that has not entered the store.
func (s *Store) lineageEntered(ctx context.Context, id eventlog.ID) ([]segment, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	return s.lineage(ctx, id)
}

// readEvents reads the own events lo..hi of execution id, all of them: a
// missing one or one that does not decode is a *CorruptionError naming
// its seq.
func (s *Store) readEvents(ctx context.Context, id eventlog.ID, lo, hi uint64) ([]eventlog.Event, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	rows, err := s.pool.Query(ctx, `SELECT seq, record FROM `+s.q.events+` WHERE execution = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq`,
		id[:], int64(lo), int64(hi))
	if err != nil {
		return nil, s.wrap(err, "execution %s: read events", id)
	}
	defer rows.Close()
	out := make([]eventlog.Event, 0, hi-lo+1)
	want := lo
	for rows.Next() {
		var (
			seq int64
			rec []byte
		)
		if err := rows.Scan(&seq, &rec); err != nil {
			return nil, s.wrap(err, "execution %s: read events", id)
		}
		if uint64(seq) != want {
			return nil, &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")}
		}
		ev, err := eventlog.DecodeRecord(id, want, rec)
		if err != nil {
			return nil, &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: err}
		}
		out = append(out, ev)
		want++
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err, "execution %s: read events", id)
	}
	if want <= hi {
		return nil, &eventlog.CorruptionError{Execution: id, Seq: want, What: "event", Err: errors.New("event missing from the log")}
	}
	return out, nil
}

// ResourceStates implements eventlog.Index.
func (s *Store) ResourceStates(ctx context.Context, id eventlog.ID, at uint64) ([]eventlog.ResourceState, error) {
	head, err := s.Head(ctx, id)
	if err != nil {
		return nil, err
	}
	if at == 0 || at > head {
		return nil, fmt.Errorf("%w: execution %s: seq %d: seqs run from 1 to %d", eventlog.ErrInvalid, id, at, head)
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	segs, err := s.lineage(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.resourceStates(ctx, s.pool, segs, at)
}

const stateCols = `key, seq, generation, in_flight, coverage_reuse, bound, latest_ref, latest_at, latest_gen, diverged`

// resourceStates reads the newest state at or before at of every resource
// of the lineage segs. The segment holding at has an entry for every
// resource bound by then: a fork writes one for each inherited resource.
func (s *Store) resourceStates(ctx context.Context, q querier, segs []segment, at uint64) ([]eventlog.ResourceState, error) {
	seg := segmentOf(segs, at)
	// A skip scan: the execution's resource keys one index probe each (a
	// recursive CTE), then each key's newest row at or before at (a
	// LATERAL probe), so the cost grows with the number of resources, not
	// with at. Both are standard SQL.
	rows, err := q.Query(ctx, `WITH RECURSIVE keys (key) AS (
			(SELECT key FROM `+s.q.states+` WHERE execution = $1 ORDER BY key LIMIT 1)
			UNION ALL
			SELECT (SELECT r.key FROM `+s.q.states+` r WHERE r.execution = $1 AND r.key > keys.key ORDER BY r.key LIMIT 1)
			FROM keys WHERE keys.key IS NOT NULL)
		SELECT st.* FROM keys, LATERAL (
			SELECT `+stateCols+` FROM `+s.q.states+` r
			WHERE r.execution = $1 AND r.key = keys.key AND r.seq <= $2 ORDER BY r.seq DESC LIMIT 1) st
		WHERE keys.key IS NOT NULL`, seg.id[:], int64(at))
	if err != nil {
		return nil, s.wrap(err, "execution %s: read index", seg.id)
	}
	out, err := scanStates(seg.id, rows)
	if err != nil {
		return nil, s.wrap(err, "execution %s: read index", seg.id)
	}
	// Sorted by key in Go: the database's collation need not be bytewise.
	slices.SortFunc(out, func(a, b eventlog.ResourceState) int { return compareStrings(a.Key, b.Key) })
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// scanStates reads index rows of stateCols and closes rows.
func scanStates(id eventlog.ID, rows pgx.Rows) ([]eventlog.ResourceState, error) {
	defer rows.Close()
	var out []eventlog.ResourceState
	for rows.Next() {
		var (
			st                                             eventlog.ResourceState
			seq, gen, bound, latestAt, latestGen, diverged int64
		)
		if err := rows.Scan(&st.Key, &seq, &gen, &st.InFlight, &st.CoverageReuse, &bound, &st.Latest.Ref, &latestAt, &latestGen, &diverged); err != nil {
			return nil, err
		}
		if seq <= 0 || gen < 0 || bound < 0 || latestAt < 0 || latestGen < 0 || latestGen > gen || diverged < 0 || diverged > seq {
			return nil, &eventlog.CorruptionError{Execution: id, Seq: uint64(max(seq, 0)), What: "index entry of " + st.Key,
				Err: fmt.Errorf("generation %d, bound %d, latest %d at %d", gen, bound, latestGen, latestAt)}
		}
		st.Seq, st.Generation, st.Bound = uint64(seq), uint64(gen), uint64(bound)
		st.Latest.At, st.Latest.Generation = uint64(latestAt), uint64(latestGen)
		st.Diverged = uint64(diverged)
		if len(st.InFlight) == 0 {
			st.InFlight = nil
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// ResourceHistory implements eventlog.Index.
func (s *Store) ResourceHistory(ctx context.Context, id eventlog.ID, key string, after uint64) iter.Seq2[eventlog.ResourceState, error] {
	return func(yield func(eventlog.ResourceState, error) bool) {
		head, err := s.Head(ctx, id)
		if err != nil {
			yield(eventlog.ResourceState{}, err)
			return
		}
		segs, err := s.lineageEntered(ctx, id)
		if err != nil {
			yield(eventlog.ResourceState{}, err)
			return
		}
		// Pages grow from 16 rows: a caller often stops after the first
		// few states (a fork plan looks for the next checkpoint), and a
		// long history past after costs it nothing then.
		limit := 16
		for _, seg := range segs {
			hi := min(seg.hi, head)
			lo := max(seg.lo, after+1)
			for lo <= hi {
				page, err := s.historyPage(ctx, seg.id, key, lo, hi, limit)
				if err != nil {
					yield(eventlog.ResourceState{}, err)
					return
				}
				for _, st := range page {
					if !yield(st, nil) {
						return
					}
				}
				if len(page) < limit {
					break
				}
				lo = page[len(page)-1].Seq + 1
				limit = min(2*limit, pageSize)
			}
		}
	}
}

func (s *Store) historyPage(ctx context.Context, id eventlog.ID, key string, lo, hi uint64, limit int) ([]eventlog.ResourceState, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	rows, err := s.pool.Query(ctx, `SELECT `+stateCols+` FROM `+s.q.states+`
		WHERE execution = $1 AND key = $2 AND seq >= $3 AND seq <= $4 ORDER BY seq LIMIT `+strconv.Itoa(limit),
		id[:], key, int64(lo), int64(min(hi, math.MaxInt64)))
	if err != nil {
		return nil, s.wrap(err, "execution %s: read index", id)
	}
	out, err := scanStates(id, rows)
	if err != nil {
		return nil, s.wrap(err, "execution %s: read index", id)
	}
	return out, nil
}
