package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/forkline/forkline/eventlog"
)

// Deltas across processes (DESIGN §21½.4). SendDeltas NOTIFYs each delta on
// the store's deltas channel, "forkline." and the schema's name (a schema
// name has no dot, so it never equals the wakeups' "forkline_" channel),
// as JSON with the Data in base64: a NOTIFY payload must be text shorter
// than 8000 bytes, so a delta goes in parts of deltaPart bytes, all of one
// SendDeltas in one transaction, which Postgres delivers in order and
// without another transaction's notifications in between. The listener of
// notify.go LISTENs on both channels, puts the parts together and offers
// each delta to every Deltas channel. SyncDeltas NOTIFYs a mark and waits
// for the listener to hear it: Postgres delivers notifications in commit
// order, so every delta committed before it was heard first.

// deltaChannel is the deltas' NOTIFY channel of a schema's store, cut to
// 63 bytes as notifyChannel is.
func deltaChannel(schema string) string {
	ch := "forkline." + schema
	if len(ch) > 63 {
		ch = ch[:63]
	}
	return ch
}

// deltaPart is the most Data bytes one notification carries: 5464 bytes of
// base64, well under Postgres's 8000-byte payload with the other fields.
const deltaPart = 4096

// deltasBuffer is how many deltas a Deltas receiver may fall behind
// before it misses some.
const deltasBuffer = 1024

// deltaWire is one notification on the deltas channel: a part of a delta,
// or a SyncDeltas mark.
type deltaWire struct {
	Origin string `json:"o,omitempty"`
	ID     string `json:"e,omitempty"`
	StepID string `json:"s,omitempty"`
	Index  int    `json:"i,omitempty"`
	Part   int    `json:"p,omitempty"`
	Parts  int    `json:"n,omitempty"`
	Data   []byte `json:"d,omitempty"`
	Mark   string `json:"m,omitempty"`
}

// maxPayload is the longest NOTIFY payload Postgres accepts.
const maxPayload = 7999

var _ eventlog.DeltaCarrier = (*Store)(nil)

// SendDeltas implements eventlog.DeltaCarrier: one transaction of
// notifications, a delta longer than eventlog.MaxCarriedDelta (or whose
// names make a part too long for a payload) skipped.
func (s *Store) SendDeltas(ctx context.Context, ds []eventlog.StreamDelta) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	var payloads []string
	for _, d := range ds {
		p, ok := deltaPayloads(d)
		if ok {
			payloads = append(payloads, p...)
		}
	}
	if len(payloads) == 0 {
		return nil
	}
	// A batch runs in one implicit transaction: delivered together, in
	// order.
	b := &pgx.Batch{}
	for _, p := range payloads {
		b.Queue(`SELECT pg_notify($1, $2)`, s.q.deltas, p)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: send %d deltas: %w", len(ds), err)
	}
	return nil
}

// deltaPayloads splits d into its notifications' payloads; false when it
// is not carried.
func deltaPayloads(d eventlog.StreamDelta) ([]string, bool) {
	if len(d.Data) > eventlog.MaxCarriedDelta {
		return nil, false
	}
	parts := max(1, (len(d.Data)+deltaPart-1)/deltaPart)
	out := make([]string, 0, parts)
	for i := range parts {
		chunk := d.Data[min(i*deltaPart, len(d.Data)):min((i+1)*deltaPart, len(d.Data))]
		b, err := json.Marshal(deltaWire{Origin: d.Origin, ID: d.ID.String(), StepID: d.StepID, Index: d.Index,
			Part: i, Parts: parts, Data: chunk})
		if err != nil || len(b) > maxPayload {
			return nil, false
		}
		out = append(out, string(b))
	}
	return out, true
}

// Deltas implements eventlog.DeltaCarrier.
func (s *Store) Deltas(ctx context.Context) (<-chan eventlog.StreamDelta, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	l := &s.listen
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil, eventlog.ErrClosed
	}
	s.startListeningLocked()
	ch := make(chan eventlog.StreamDelta, deltasBuffer)
	l.dsubs[ch] = struct{}{}
	ready, done := l.ready, l.done
	l.mu.Unlock()
	drop := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.dsubs[ch]; ok {
			delete(l.dsubs, ch)
			close(ch)
		}
	}
	select {
	case <-ready:
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	case <-done:
		return nil, eventlog.ErrClosed
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		drop()
	}()
	return ch, nil
}

// SyncDeltas implements eventlog.DeltaCarrier.
func (s *Store) SyncDeltas(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	mark := hex.EncodeToString(raw[:])
	heard := make(chan struct{})
	l := &s.listen
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return eventlog.ErrClosed
	}
	s.startListeningLocked()
	l.marks[mark] = heard
	ready, done := l.ready, l.done
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.marks, mark)
		l.mu.Unlock()
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return eventlog.ErrClosed
	}
	b, _ := json.Marshal(deltaWire{Mark: mark})
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.q.deltas, string(b)); err != nil {
		return fmt.Errorf("pgstore: sync deltas: %w", err)
	}
	select {
	case <-heard:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return eventlog.ErrClosed
	}
}

// listening notes that the listener listens.
func (l *listener) listening() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.ready:
	default:
		close(l.ready)
	}
}

// assembly is the parts heard of each sender's delta in progress.
type assembly map[string]*partial

// partial is a delta whose first parts were heard.
type partial struct {
	delta eventlog.StreamDelta
	next  int
}

// deliverDelta handles one notification of the deltas channel: a mark
// wakes its SyncDeltas; a part joins its delta, offered to every Deltas
// channel once whole. A payload that does not parse, or a part out of
// order, is dropped (with its delta).
func (l *listener) deliverDelta(asm *assembly, payload string) {
	var w deltaWire
	if err := json.Unmarshal([]byte(payload), &w); err != nil {
		return
	}
	if w.Mark != "" {
		l.mu.Lock()
		if ch, ok := l.marks[w.Mark]; ok {
			close(ch)
			delete(l.marks, w.Mark)
		}
		l.mu.Unlock()
		return
	}
	id, err := eventlog.ParseID(w.ID)
	if err != nil || w.Parts < 1 || w.Part < 0 || w.Part >= w.Parts {
		return
	}
	if *asm == nil {
		*asm = make(assembly)
	}
	p := (*asm)[w.Origin]
	if w.Part == 0 {
		p = &partial{delta: eventlog.StreamDelta{ID: id, StepID: w.StepID, Index: w.Index, Origin: w.Origin}}
		(*asm)[w.Origin] = p
	}
	if p == nil || p.next != w.Part || p.delta.ID != id || p.delta.StepID != w.StepID || p.delta.Index != w.Index {
		delete(*asm, w.Origin)
		return
	}
	p.delta.Data = append(p.delta.Data, w.Data...)
	p.next++
	if p.next < w.Parts {
		return
	}
	delete(*asm, w.Origin)
	d := p.delta
	l.mu.Lock()
	defer l.mu.Unlock()
	first := true
	for ch := range l.dsubs {
		dd := d
		if !first {
			dd.Data = slices.Clone(d.Data)
		}
		select {
		case ch <- dd:
			first = false
		default: // the receiver is behind: it misses this one
		}
	}
}
