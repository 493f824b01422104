package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

// The inbox (DESIGN §8½). A request is a row of the requests table whose
// record is the request's time and payload encoded as an inbox record
// bound to its execution and number (eventlog.AppendRequest), so a
// damaged or moved request fails its checksum like a damaged event. Numbers start at 1 and are never given twice: the
// execution's row keeps the newest number given (inbox_last). A Request
// locks the execution's row only for its own short transaction, so it
// waits at most for one append's commit and never makes it fail.

// Request implements eventlog.Inbox. The request is committed (synced)
// when it returns. The store takes a request for an execution of any
// status: whether it still makes sense is the requester's question.
func (s *Store) Request(ctx context.Context, id eventlog.ID, p eventlog.Payload, at time.Time) (uint64, error) {
	return s.request(ctx, id, p, at, nil)
}

var _ eventlog.MessageInbox = (*Store)(nil)

// errSentBefore rolls back a SendMessage of a MessageID recorded with the
// same digest: nothing is written and SendMessage returns 0.
var errSentBefore = errors.New("pgstore: message sent before")

// SendMessage implements eventlog.MessageInbox: Request, whose transaction
// first inserts the MessageID's row into message_ids (ON CONFLICT DO
// NOTHING: a concurrent insert of the same key waits for the other
// transaction's end), and when the row exists compares its digest: the
// same rolls back and returns 0, another is ErrConflict.
func (s *Store) SendMessage(ctx context.Context, id eventlog.ID, m *eventlog.MessageReceived, at time.Time) (uint64, error) {
	if m == nil {
		return 0, fmt.Errorf("%w: message to %s: none", eventlog.ErrInvalid, id)
	}
	digest := eventlog.MessageDigest(m)
	n, err := s.request(ctx, id, m, at, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO `+s.q.messageIDs+` (execution, message_id, digest) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			id[:], m.MessageID, digest)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var had []byte
		if err := tx.QueryRow(ctx, `SELECT digest FROM `+s.q.messageIDs+` WHERE execution = $1 AND message_id = $2`, id[:], m.MessageID).Scan(&had); err != nil {
			return err
		}
		if !bytes.Equal(had, digest) {
			return fmt.Errorf("%w: execution %s: message id %q was sent before with another topic or value", eventlog.ErrConflict, id, m.MessageID)
		}
		return errSentBefore
	})
	if errors.Is(err, errSentBefore) {
		return 0, nil
	}
	return n, err
}

var _ eventlog.Decider = (*Store)(nil)

// Decide implements eventlog.Decider: Request, whose transaction first
// locks the execution's row (FOR UPDATE, the row every append, Take and
// Request of the execution updates) and checks, on the row's status and
// the inbox as they are under that lock, that p's step awaits a decision;
// of two concurrent decisions of one step exactly one commits.
func (s *Store) Decide(ctx context.Context, id eventlog.ID, p eventlog.Payload, at time.Time) (uint64, error) {
	if err := eventlog.CheckDecision(id, p); err != nil {
		return 0, err
	}
	stepID := eventlog.DecisionStep(p)
	return s.request(ctx, id, p, at, func(tx pgx.Tx) error {
		r, _, err := s.readRow(ctx, tx, id, true)
		if err != nil {
			return err
		}
		reqs, err := s.readRequests(ctx, tx, id)
		if err != nil {
			return err
		}
		return eventlog.Awaits(id, stepID, r.status, reqs)
	})
}

// request stores p in id's inbox; check, when not nil, runs first in the
// transaction and an error from it rolls it back.
func (s *Store) request(ctx context.Context, id eventlog.ID, p eventlog.Payload, at time.Time, check func(pgx.Tx) error) (uint64, error) {
	if p == nil {
		return 0, fmt.Errorf("%w: request to %s with no payload", eventlog.ErrInvalid, id)
	}
	if !eventlog.IsRequest(p.Kind()) {
		return 0, fmt.Errorf("%w: request to %s: %s is not a request kind", eventlog.ErrInvalid, id, p.Kind())
	}
	if at.IsZero() {
		at = time.Now()
	}
	req := eventlog.Event{Time: at, Data: p}
	// Checked before the number is known, so that bad input writes nothing;
	// encoded again in the transaction, bound to its number.
	if _, err := eventlog.AppendRequest(nil, id, 0, req); err != nil {
		return 0, fmt.Errorf("request to %s: %w", id, err)
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.leave()
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if check != nil {
			if err := check(tx); err != nil {
				return err
			}
		}
		err := tx.QueryRow(ctx, `UPDATE `+s.q.executions+` SET inbox_last = inbox_last + 1 WHERE id = $1 AND deleted_kept IS NULL RETURNING inbox_last`, id[:]).Scan(&n)
		if err == pgx.ErrNoRows {
			return fmt.Errorf("%w: execution %s", eventlog.ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		rec, err := eventlog.AppendRequest(nil, id, uint64(n), req)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.q.requests+` (execution, n, record, kind) VALUES ($1, $2, $3, $4)`,
			id[:], n, rec, int16(p.Kind())); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.notifySQL(), id[:]) // delivered at the commit (notify.go)
		return err
	})
	if err != nil {
		return 0, s.wrap(err, "execution %s: request", id)
	}
	return uint64(n), nil
}

// Requests implements eventlog.Inbox.
func (s *Store) Requests(ctx context.Context, id eventlog.ID) ([]eventlog.Request, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	if _, _, err := s.readRow(ctx, s.pool, id, false); err != nil {
		return nil, err // unknown or deleted
	}
	return s.readRequests(ctx, s.pool, id)
}

// readRequests reads and decodes id's pending requests through q.
func (s *Store) readRequests(ctx context.Context, q querier, id eventlog.ID) ([]eventlog.Request, error) {
	rows, err := q.Query(ctx, `SELECT n, record FROM `+s.q.requests+` WHERE execution = $1 ORDER BY n`, id[:])
	if err != nil {
		return nil, s.wrap(err, "execution %s: read inbox", id)
	}
	defer rows.Close()
	var out []eventlog.Request
	for rows.Next() {
		var (
			n   int64
			rec []byte
		)
		if err := rows.Scan(&n, &rec); err != nil {
			return nil, s.wrap(err, "execution %s: read inbox", id)
		}
		what := fmt.Sprintf("request %d", n)
		if n <= 0 {
			return nil, &eventlog.CorruptionError{Execution: id, What: what, Err: fmt.Errorf("request number %d", n)}
		}
		ev, err := eventlog.DecodeRequest(id, uint64(n), rec)
		if err != nil {
			return nil, &eventlog.CorruptionError{Execution: id, What: what, Err: err}
		}
		if !eventlog.IsRequest(ev.Kind()) {
			return nil, &eventlog.CorruptionError{Execution: id, What: what, Err: fmt.Errorf("%s is not a request kind", ev.Kind())}
		}
		out = append(out, eventlog.Request{Execution: id, N: uint64(n), Time: ev.Time, Data: ev.Data})
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err, "execution %s: read inbox", id)
	}
	return out, nil
}

// Take implements eventlog.Inbox: Append (synced, the same checks of head,
// seqs and epoch) whose transaction also deletes the requests ns; when one
// of them is not pending the transaction is rolled back (ErrConflict).
func (s *Store) Take(ctx context.Context, id eventlog.ID, expectedHead uint64, ns []uint64, events ...eventlog.Event) (uint64, error) {
	for i, n := range ns {
		if slices.Contains(ns[:i], n) {
			return 0, fmt.Errorf("%w: take from %s names request %d twice", eventlog.ErrInvalid, id, n)
		}
		if n == 0 || n > 1<<62 {
			return 0, fmt.Errorf("%w: execution %s: request %d is not pending", eventlog.ErrConflict, id, n)
		}
	}
	return s.append(ctx, id, expectedHead, false, events, ns)
}
