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

// publishDelta passes a delta of execution id to this kernel's watchers
// and, through a store that carries deltas, to other processes'.
func (k *Kernel) publishDelta(id eventlog.ID, dl Delta) {
	k.deltas.publish(id, dl)
	k.carry.send(eventlog.StreamDelta{ID: id, StepID: dl.StepID, Index: dl.Index, Data: dl.Data, Origin: k.origin})
}

// deltaCarry sends a kernel's deltas to other processes through a store
// that carries them (eventlog.DeltaCarrier: NOTIFY on Postgres, DESIGN
// §21½.4), from a goroutine that runs while deltas wait, so that a
// stream's reads never wait for the store. A delta over
// eventlog.MaxCarriedDelta is not carried; when deltaBuffer deltas wait,
// new ones are dropped (a watcher sees the gap in Index).
type deltaCarry struct {
	to eventlog.DeltaCarrier // nil: the store carries none
	mu struct {
		sync.Mutex
		queue   []eventlog.StreamDelta
		sending bool
		idle    chan struct{} // closed when the sender finds the queue empty
	}
}

// carryTimeout bounds one send of deltas to the store, and a wait for the
// sender to be idle (flush).
const carryTimeout = 2 * time.Second

// send queues d to be carried; d.Data is copied.
func (c *deltaCarry) send(d eventlog.StreamDelta) {
	if c.to == nil || len(d.Data) > eventlog.MaxCarriedDelta {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.queue) >= deltaBuffer {
		return
	}
	d.Data = slices.Clone(d.Data)
	c.mu.queue = append(c.mu.queue, d)
	if !c.mu.sending {
		c.mu.sending = true
		c.mu.idle = make(chan struct{})
		go c.run()
	}
}

// run sends the queued deltas, as many at a time as wait, until none does.
func (c *deltaCarry) run() {
	for {
		c.mu.Lock()
		batch := c.mu.queue
		c.mu.queue = nil
		if len(batch) == 0 {
			c.mu.sending = false
			close(c.mu.idle)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), carryTimeout)
		_ = c.to.SendDeltas(ctx, batch) // best-effort: a watcher sees the gap
		cancel()
	}
}

// flush waits until the deltas queued so far were sent (or could not be),
// for at most carryTimeout or until ctx ends: a stream's deltas reach the
// store before its step's end does.
func (c *deltaCarry) flush(ctx context.Context) {
	if c.to == nil {
		return
	}
	c.mu.Lock()
	sending, idle := c.mu.sending, c.mu.idle
	c.mu.Unlock()
	if !sending {
		return
	}
	t := time.NewTimer(carryTimeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
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
// execution id's handler (DESIGN §16, §21½.4, §21½.15), as the handler
// reads them, from when the watch begins: in this kernel's process, and —
// on a store that carries deltas (eventlog.DeltaCarrier: Postgres's
// NOTIFY) — in another process, each delta of at most 8 KB
// (eventlog.MaxCarriedDelta; a larger one is not carried and leaves a gap
// in Index). Nothing is stored, so a watch sees no delta from before it
// began, and none of another process on a store that carries none. It
// ends when the execution ends (after its terminal event, as this kernel
// or the store tells; the deltas the handler read before it come first)
// or when ctx ends. A watcher more than 1024 deltas behind misses some
// (Index shows the gap); a stream never waits for it.
//
// The error is yielded at most once, and last: an unknown id
// (eventlog.ErrNotFound), a read error, or ctx's error when ctx ended
// first. Breaking out of the loop stops the watch.
func (k *Kernel) WatchDeltas(ctx context.Context, id eventlog.ID) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		// Other processes' deltas: listening before this watch counts as
		// subscribed, so that a delta sent after that is heard.
		var remote <-chan eventlog.StreamDelta
		if k.carry.to != nil {
			ch, err := k.carry.to.Deltas(wctx)
			if err != nil {
				k.logger.Debug("forkline: the store carries no deltas now; this process's only", "error", err.Error())
			} else {
				remote = ch
			}
		}
		changes := k.changes(wctx)
		ch := k.deltas.subscribe(id)
		defer k.deltas.unsubscribe(id, ch)
		// theirs reports whether a delta heard from the store is one of
		// id's streams in another kernel.
		theirs := func(d eventlog.StreamDelta) (Delta, bool) {
			return Delta{StepID: d.StepID, Index: d.Index, Data: d.Data}, d.ID == id && d.Origin != k.origin
		}
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
				// Deltas of the last stream came before its terminal
				// event; another process's, once the store delivered
				// what was sent before now.
				if remote != nil {
					sctx, cancel := context.WithTimeout(wctx, carryTimeout)
					_ = k.carry.to.SyncDeltas(sctx)
					cancel()
				}
				for {
					select {
					case dl := <-ch:
						if !yield(dl, nil) {
							return
						}
					case d, ok := <-remote:
						if !ok {
							remote = nil
							continue
						}
						if dl, ok := theirs(d); ok && !yield(dl, nil) {
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
				case d, ok := <-remote:
					if !ok {
						remote = nil
						continue
					}
					if dl, ok := theirs(d); ok && !yield(dl, nil) {
						poll.Stop()
						return
					}
				case got, ok := <-changes:
					if !ok {
						changes = nil
						continue
					}
					waiting = got != id && !got.IsZero()
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
