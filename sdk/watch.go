package sdk

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// watchPoll is how often a Watch reads the log when this kernel wrote
// nothing: it sees in time what another kernel or process appends to a
// shared store.
const watchPoll = time.Second

// appendSignal wakes every Watch of a kernel when the kernel appended to a
// lineage: a channel closed (and replaced) on every append.
type appendSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel that is closed at the next append.
func (s *appendSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// appended wakes the watchers.
func (s *appendSignal) appended() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// Watch yields the events of execution id's lineage from the first, then
// each event as it is appended, and ends after the execution's own
// terminal event (execution.completed, .failed or .cancelled) or when ctx
// ends. A fork's Watch ends at the fork's own terminal event, never at one
// in its prefix (DESIGN §8½). Appends by this kernel are yielded at once;
// appends by another kernel or process on the same store as soon as the
// store announces them (eventlog.Notifier: Postgres's LISTEN/NOTIFY,
// DESIGN §15½.14 — terminal appends, or every append with
// pgstore.NotifyEveryAppend), and otherwise within about a second
// (watchPoll).
//
// The error is yielded at most once, and last: an unknown id
// (eventlog.ErrNotFound), a read error, or ctx's error when ctx ended
// before the terminal event. Breaking out of the loop stops the watch. The
// events are the caller's to keep.
func (k *Kernel) Watch(ctx context.Context, id eventlog.ID) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		info, err := k.log.Info(ctx, id)
		if err != nil {
			yield(eventlog.Event{}, fmt.Errorf("sdk: watch %s: %w", id, err))
			return
		}
		own := info.ForkSeq + 1 // the first event of the execution's own
		next := uint64(1)
		// Another process's appends are announced by a store that
		// implements eventlog.Notifier; subscribed before the first read,
		// so none after it is missed.
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		changes := k.changes(wctx)
		for {
			// Take the signal before reading, so that an append between
			// the read and the wait is not missed.
			appended := k.appends.wait()
			for ev, err := range k.log.Events(ctx, id, next) {
				if err != nil {
					yield(eventlog.Event{}, fmt.Errorf("sdk: watch %s: %w", id, err))
					return
				}
				if !yield(ev, nil) {
					return
				}
				next = ev.Seq + 1
				if ev.Seq >= own && terminalKind(ev.Kind()) {
					return
				}
			}
			if !k.watchWait(ctx, id, appended, &changes) {
				yield(eventlog.Event{}, fmt.Errorf("sdk: watch %s: %w", id, ctx.Err()))
				return
			}
		}
	}
}

// terminalKind reports whether k ends an execution.
func terminalKind(k eventlog.Kind) bool {
	return k == eventlog.KindExecutionCompleted || k == eventlog.KindExecutionFailed || k == eventlog.KindExecutionCancelled
}

// watchWait waits until Watch of id should read again: this kernel
// appended, the store announced a write to id (or possibly missed ones, the
// zero ID), or watchPoll passed. It reports false when ctx ended first. A
// closed changes channel is set to nil.
func (k *Kernel) watchWait(ctx context.Context, id eventlog.ID, appended <-chan struct{}, changes *<-chan eventlog.ID) bool {
	t := time.NewTimer(watchPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-appended:
			return true
		case got, ok := <-*changes:
			if !ok {
				*changes = nil
				continue
			}
			if got == id || got.IsZero() {
				return true
			}
		case <-t.C:
			return true
		}
	}
}
