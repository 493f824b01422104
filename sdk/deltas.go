package sdk

import (
	"context"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// Delta is one piece of a model response streaming to a handler (DESIGN
// §16): the bytes the handler's read got, in order. Deltas are ephemeral:
// never stored, seen only by a WatchDeltas running while the stream runs;
// the step's step.succeeded records the whole body.
type Delta struct {
	// StepID is the llm step whose response streams.
	StepID string
	// Index counts the step's deltas from 0 in this attempt; a gap says
	// the watcher fell behind and missed some.
	Index int
	// Data is the bytes, as the model sent them (server-sent events, for
	// the model APIs).
	Data []byte
}

// deltaBuffer is how many deltas a WatchDeltas may fall behind before it
// misses some: a stream never waits for a watcher.
const deltaBuffer = 1024

// deltaHub passes the deltas of this kernel's streams to its watchers.
type deltaHub struct {
	mu   sync.RWMutex
	subs map[eventlog.ID][]chan Delta
}

// publish offers a delta of execution id to its watchers without waiting
// for any; b is copied only when someone watches.
func (h *deltaHub) publish(id eventlog.ID, dl Delta) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	subs := h.subs[id]
	if len(subs) == 0 {
		return
	}
	dl.Data = slices.Clone(dl.Data)
	for _, ch := range subs {
		select {
		case ch <- dl:
		default: // the watcher is behind: it misses this one
		}
	}
}

func (h *deltaHub) subscribe(id eventlog.ID) chan Delta {
	ch := make(chan Delta, deltaBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = make(map[eventlog.ID][]chan Delta)
	}
	h.subs[id] = append(h.subs[id], ch)
	return ch
}

func (h *deltaHub) unsubscribe(id eventlog.ID, ch chan Delta) {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := slices.DeleteFunc(h.subs[id], func(c chan Delta) bool { return c == ch })
	if len(subs) == 0 {
		delete(h.subs, id)
		return
	}
	h.subs[id] = subs
}

// WatchDeltas yields the deltas of the model responses that stream to
// execution id's handler in this kernel's process (DESIGN §16, §21½.15),
// as the handler reads them, from when the watch begins; nothing is
// stored, so a watch sees no delta from before it began and none of a
// stream in another process. It ends when the execution ends (after its
// terminal event, as this kernel or the store tells) or when ctx ends. A
// watcher more than 1024 deltas behind misses some (Index shows the
// gap); a stream never waits for it.
//
// The error is yielded at most once, and last: an unknown id
// (eventlog.ErrNotFound), a read error, or ctx's error when ctx ended
// first. Breaking out of the loop stops the watch.
func (k *Kernel) WatchDeltas(ctx context.Context, id eventlog.ID) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		ch := k.deltas.subscribe(id)
		defer k.deltas.unsubscribe(id, ch)
		for {
			// The kernel's appends and the store's announcements say
			// when to look whether the execution ended.
			wake := k.appends.wait()
			info, err := k.log.Info(ctx, id)
			if err != nil {
				yield(Delta{}, err)
				return
			}
			if info.Status.Terminal() {
				// Deltas of the last stream came before its terminal event.
				for {
					select {
					case dl := <-ch:
						if !yield(dl, nil) {
							return
						}
					default:
						return
					}
				}
			}
			poll := time.NewTimer(watchPoll)
			for waiting := true; waiting; {
				select {
				case dl := <-ch:
					if !yield(dl, nil) {
						poll.Stop()
						return
					}
				case <-wake:
					waiting = false
				case <-poll.C:
					waiting = false
				case <-ctx.Done():
					poll.Stop()
					yield(Delta{}, ctx.Err())
					return
				}
			}
			poll.Stop()
		}
	}
}
