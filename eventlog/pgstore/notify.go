package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/jackc/pgx/v5"
)

// Wakeups across processes (DESIGN §15½.6, §15½.14). Every append (Append,
// AppendUnsynced, Take) that ends an execution — every append with
// NotifyEveryAppend —, every Request and every Release of a lease (the
// owner's last append was announced while it still held the lease, so a
// Serve told of it could not claim the execution yet) sends NOTIFY on the store's
// channel, "forkline_" and the schema's name, in its own transaction, so
// Postgres delivers it at the commit and never for a write that rolled
// back; the payload is the execution's ID in hex. A store's listener, one
// dedicated connection opened by the first Changes, LISTENs on the channel
// and hands each notification to every Changes channel; it reconnects
// after an error (waiting from 50 ms, doubling to 5 s) and, once
// listening again, sends the zero ID, since what was committed in between
// was not heard. Close stops it.

// notifyChannel is the NOTIFY channel of a schema's store: Postgres
// truncates an identifier to 63 bytes, and pg_notify refuses a longer one,
// so the name is cut to 63 bytes for both.
func notifyChannel(schema string) string {
	ch := "forkline_" + schema
	if len(ch) > 63 {
		ch = ch[:63]
	}
	return ch
}

// notifies reports whether an append of events NOTIFYs: with
// NotifyEveryAppend always, else when one of them ends the execution.
func (s *Store) notifies(events []eventlog.Event) bool {
	return s.notifyEvery || ends(events)
}

// ends reports whether one of events ends the execution.
func ends(events []eventlog.Event) bool {
	for _, ev := range events {
		switch ev.Kind() {
		case eventlog.KindExecutionCompleted, eventlog.KindExecutionFailed, eventlog.KindExecutionCancelled:
			return true
		}
	}
	return false
}

// notifySQL is the statement that announces a write to execution $1.
func (s *Store) notifySQL() string {
	return `SELECT pg_notify('` + s.q.channel + `', encode($1::bytea, 'hex'))`
}

// Listener back-off after a failed connection or a lost one.
const (
	listenRetryFirst = 50 * time.Millisecond
	listenRetryMax   = 5 * time.Second
	changesBuffer    = 64
)

// listener is a store's LISTEN connection and the channels it feeds.
type listener struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
	subs    map[chan eventlog.ID]struct{}
	// ready is closed when the listener first listens (Deltas waits for
	// it); dsubs are the Deltas channels, marks the SyncDeltas waiting for
	// their mark (deltas.go).
	ready chan struct{}
	dsubs map[chan eventlog.StreamDelta]struct{}
	marks map[string]chan struct{}
}

// Changes implements eventlog.Notifier. It announces requests, releases
// and the appends that end an execution; every append when the writing
// store has NotifyEveryAppend.
func (s *Store) Changes(ctx context.Context) (<-chan eventlog.ID, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	l := &s.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil, eventlog.ErrClosed
	}
	s.startListeningLocked()
	ch := make(chan eventlog.ID, changesBuffer)
	l.subs[ch] = struct{}{}
	go func() {
		select {
		case <-ctx.Done():
		case <-l.done:
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.subs[ch]; ok {
			delete(l.subs, ch)
			close(ch)
		}
	}()
	return ch, nil
}

// startListeningLocked starts the listener unless it runs. l.mu is held.
func (s *Store) startListeningLocked() {
	l := &s.listen
	if l.started {
		return
	}
	l.started = true
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done, l.ready = cancel, make(chan struct{}), make(chan struct{})
	l.subs = make(map[chan eventlog.ID]struct{})
	l.dsubs = make(map[chan eventlog.StreamDelta]struct{})
	l.marks = make(map[string]chan struct{})
	go s.listenLoop(lctx, l.done)
}

// broadcast hands id to every Changes channel that has room.
func (l *listener) broadcast(id eventlog.ID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.subs {
		select {
		case ch <- id:
		default: // the receiver is behind: it has a wakeup pending already
		}
	}
}

// listenLoop keeps a LISTEN connection until ctx ends, then closes every
// Changes channel.
func (s *Store) listenLoop(ctx context.Context, done chan struct{}) {
	l := &s.listen
	defer func() {
		l.mu.Lock()
		for ch := range l.subs {
			delete(l.subs, ch)
			close(ch)
		}
		for ch := range l.dsubs {
			delete(l.dsubs, ch)
			close(ch)
		}
		l.mu.Unlock()
		close(done)
	}()
	wait := listenRetryFirst
	for ctx.Err() == nil {
		if s.listenOnce(ctx, l) {
			wait = listenRetryFirst // it listened: a new outage starts short
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listenOnce connects, listens and forwards notifications until the
// connection fails or ctx ends; it reports whether it got to listen.
func (s *Store) listenOnce(ctx context.Context, l *listener) bool {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.q.channel}.Sanitize()); err != nil {
		return false
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.q.deltas}.Sanitize()); err != nil {
		return false
	}
	l.listening()
	l.broadcast(eventlog.ID{}) // what committed before now was not heard
	var asm assembly
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		if n.Channel == s.q.deltas {
			l.deliverDelta(&asm, n.Payload)
			continue
		}
		id, err := eventlog.ParseID(n.Payload)
		if err != nil {
			id = eventlog.ID{} // not ours: look at everything
		}
		l.broadcast(id)
	}
}

// stopListening ends the listener, if one started, and waits for it.
func (s *Store) stopListening() {
	l := &s.listen
	l.mu.Lock()
	l.stopped = true
	started, cancel, done := l.started, l.cancel, l.done
	l.mu.Unlock()
	if started {
		cancel()
		<-done
	}
}

// CommitPerAppend implements eventlog.CommitPerAppend: every append is a
// statement and a commit of its own, unsynced ones too, so the kernel
// writes a safe_to_retry step's step.started with its outcome (DESIGN §21).
func (s *Store) CommitPerAppend() bool { return true }
