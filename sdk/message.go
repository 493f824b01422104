package sdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
)

// ErrEnded is returned by Send to an execution that has ended, and by
// GetEvent when the execution ended without publishing the key: only a
// running, pending or waiting execution receives messages (DESIGN §18,
// §21½.16).
var ErrEnded = errors.New("sdk: execution has ended")

// ErrTimeout is wrapped by the error of a Recv that no message reached
// before its timeout (recorded as the recv step's step.failed, and
// replayed so), and of a GetEvent whose timeout passed first.
var ErrTimeout = errors.New("sdk: timed out")

// SendOption configures Send.
type SendOption func(*sendOptions) error

type sendOptions struct {
	id string
}

// MessageID makes Send idempotent (DESIGN §18): a message whose ID the
// execution already received, or has pending in its inbox, is not sent
// again when its value is the same, and is an error wrapping
// eventlog.ErrConflict when it is not. Nothing is written in either case.
// An ID is UTF-8 text without NUL bytes of at most MaxKeyLen bytes; any
// other is ErrInvalid. Without MessageID, Send draws a random ID: a retried
// Send then sends a second message.
func MessageID(id string) SendOption {
	return func(o *sendOptions) error {
		if err := checkName("message id", id); err != nil {
			return err
		}
		o.id = id
		return nil
	}
}

// checkName refuses an empty name, one over MaxKeyLen bytes, one that is
// not UTF-8 or that holds a NUL byte (what both stores keep and compare
// alike).
func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(s) > MaxKeyLen:
		return fmt.Errorf("%w: %s of %d bytes, more than %d", ErrInvalid, what, len(s), MaxKeyLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not UTF-8", ErrInvalid, what, s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s %q has a NUL byte", ErrInvalid, what, s)
	}
	return nil
}

// Send sends value to execution id under topic (DESIGN §18): a request in
// the execution's inbox (DESIGN §8½) that its owner appends as
// message.received at its next append point, or that Send appends itself,
// under a fresh claim, when no live owner exists. A parked execution wakes
// when the message is received; a sdk.Recv of the topic returns it.
//
// An empty topic, a value that does not encode as JSON, a bad MessageID
// are ErrInvalid; an unknown execution is eventlog.ErrNotFound; an ended
// one ErrEnded; a MessageID received before with another value
// eventlog.ErrConflict. Nothing is written in any of these cases.
//
// Delivery is promised to a running, pending or waiting execution only: a
// message still in the inbox when the execution ends is dropped, and Info
// counts it (DESIGN §21½.16); Send then returns an error wrapping ErrEnded.
func (k *Kernel) Send(ctx context.Context, id eventlog.ID, topic string, value any, opts ...SendOption) error {
	var o sendOptions
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return err
		}
	}
	if err := checkName("topic", topic); err != nil {
		return err
	}
	b, err := encodeValue(value)
	if err != nil {
		return fmt.Errorf("%w: send to %s on %q: the value does not encode: %w", ErrInvalid, id, topic, err)
	}
	if o.id == "" {
		o.id = randomID()
	}
	var inbox eventlog.Inbox
	if !eventlog.As(k.log, &inbox) {
		return fmt.Errorf("%w: the log keeps no inbox (eventlog.Inbox): send needs one", ErrInvalid)
	}
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return fmt.Errorf("sdk: send to %s: %w", id, err)
	}
	if info.Status.Terminal() {
		return fmt.Errorf("sdk: send to %s: %w (%s)", id, ErrEnded, info.Status)
	}
	msg := &eventlog.MessageReceived{MessageID: o.id, Topic: topic, Value: b, From: k.owner}
	if sent, err := k.send(ctx, inbox, info, msg); err != nil || !sent {
		return err
	}
	k.poke(id)
	if err := k.settle(ctx, id); err != nil {
		return err
	}
	k.notify()
	// A message that raced the execution's end stays in the inbox,
	// dropped: say so rather than lose it silently.
	if info, err := k.log.Info(ctx, id); err == nil && info.Status.Terminal() {
		if pending, err := pendingMessage(ctx, inbox, id, o.id); err == nil && pending != nil {
			return fmt.Errorf("sdk: send to %s: message %q dropped: %w (%s)", id, o.id, ErrEnded, info.Status)
		}
	}
	return nil
}

// randomID returns a random message ID.
func randomID() string {
	var r [16]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand)
	return hex.EncodeToString(r[:])
}

// send writes msg into the inbox of the execution info describes unless
// its MessageID was sent there already, and reports whether it wrote it:
// false with a nil error for the same topic and value (the same message),
// an error wrapping eventlog.ErrConflict for another.
//
// A store that keeps MessageIDs (eventlog.MessageInbox) checks and records
// the ID in the request's own atomic write, so of two racing Sends of one
// ID one is stored; a root's messages all came through it, so a Send to a
// root reads no lineage. A fork's lineage also holds messages its store
// never saw sent to it — its prefix's, and those WithMessages injected, all
// received at or before fork.created and never changing — which are
// checked first by folding the lineage (or from its dispatch's fold when
// it runs here). A store without the capability is checked in two steps,
// pending then received, before its Request.
func (k *Kernel) send(ctx context.Context, inbox eventlog.Inbox, info eventlog.Info, msg *eventlog.MessageReceived) (bool, error) {
	id := info.ID
	var mi eventlog.MessageInbox
	if !eventlog.As(k.log, &mi) {
		if dup, err := k.sent(ctx, inbox, id, msg); err != nil || dup {
			return false, err
		}
		if _, err := inbox.Request(ctx, id, msg, k.now()); err != nil {
			return false, fmt.Errorf("sdk: send to %s: %w", id, err)
		}
		return true, nil
	}
	if !info.Parent.IsZero() {
		m, ok, err := k.received(ctx, id, msg.MessageID)
		if err != nil {
			return false, fmt.Errorf("sdk: send to %s: %w", id, err)
		}
		if ok {
			dup, err := sameMessage(id, msg, m.Topic, m.Value, fmt.Sprintf("received at seq %d", m.ReceivedAt))
			return !dup && err == nil, err
		}
	}
	n, err := mi.SendMessage(ctx, id, msg, k.now())
	if err != nil {
		return false, fmt.Errorf("sdk: send to %s: %w", id, err)
	}
	return n != 0, nil
}

// sameMessage says whether a message of msg's MessageID, with topic and
// value, found where, is msg again: true, or an error wrapping
// eventlog.ErrConflict.
func sameMessage(id eventlog.ID, msg *eventlog.MessageReceived, topic string, value []byte, where string) (bool, error) {
	if topic == msg.Topic && bytes.Equal(value, msg.Value) {
		return true, nil
	}
	return false, fmt.Errorf("sdk: send to %s: message id %q was %s with another topic or value: %w",
		id, msg.MessageID, where, eventlog.ErrConflict)
}

// sent reports whether msg's MessageID was sent to id already, received
// or pending, for a store that keeps no MessageIDs: true with a nil error
// when with the same topic and value (nothing is to be written), an error
// wrapping eventlog.ErrConflict when not.
func (k *Kernel) sent(ctx context.Context, inbox eventlog.Inbox, id eventlog.ID, msg *eventlog.MessageReceived) (bool, error) {
	same := func(topic string, value []byte, where string) (bool, error) {
		return sameMessage(id, msg, topic, value, where)
	}
	pending, err := pendingMessage(ctx, inbox, id, msg.MessageID)
	if err != nil {
		return false, fmt.Errorf("sdk: send to %s: %w", id, err)
	}
	if pending != nil {
		return same(pending.Topic, pending.Value, "sent before")
	}
	m, ok, err := k.received(ctx, id, msg.MessageID)
	if err != nil {
		return false, fmt.Errorf("sdk: send to %s: %w", id, err)
	}
	if ok {
		return same(m.Topic, m.Value, fmt.Sprintf("received at seq %d", m.ReceivedAt))
	}
	return false, nil
}

// pendingMessage returns the message with MessageID mid in id's inbox, nil
// if none is pending.
func pendingMessage(ctx context.Context, inbox eventlog.Inbox, id eventlog.ID, mid string) (*eventlog.MessageReceived, error) {
	reqs, err := inbox.Requests(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if m, ok := r.Data.(*eventlog.MessageReceived); ok && m.MessageID == mid {
			return m, nil
		}
	}
	return nil, nil
}

// pokes holds the dispatches whose handlers run in this kernel, by
// execution, so that a Send in the same process makes the dispatch look in
// its inbox at once (watchRequests) — a waiting Recv gets the message
// without the inbox poll's delay — and checks a MessageID against the
// dispatch's fold rather than reading the lineage.
type pokes struct {
	m sync.Map // eventlog.ID → *dispatch
}

// running returns id's dispatch running in this kernel, if any.
func (k *Kernel) running(id eventlog.ID) (*dispatch, bool) {
	d, ok := k.pokes.m.Load(id)
	if !ok {
		return nil, false
	}
	return d.(*dispatch), true
}

// poke wakes id's dispatch in this kernel, if one runs.
func (k *Kernel) poke(id eventlog.ID) {
	d, ok := k.running(id)
	if !ok {
		return
	}
	d.mu.Lock()
	ch := d.poke
	d.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// received returns the message with MessageID mid that id's lineage
// received: from the fold of its dispatch when one runs in this kernel
// (the owner: its fold is the lineage), else by folding the lineage.
func (k *Kernel) received(ctx context.Context, id eventlog.ID, mid string) (replay.Message, bool, error) {
	if d, ok := k.running(id); ok {
		d.mu.Lock()
		m, found := d.state.Message(mid)
		dead := d.dead != nil || d.ended
		d.mu.Unlock()
		if !dead {
			return m, found, nil
		}
	}
	st, err := replay.Fold(k.log.Events(ctx, id, 1))
	if err != nil {
		return replay.Message{}, false, err
	}
	m, found := st.Message(mid)
	return m, found, nil
}

// takeMessageLocked says whether the inbox's message p is to be moved into
// the lineage: not when a message of its MessageID was received already
// or is among taken, the earlier requests of this take (two Sends of one
// ID that raced each other's check); it is then removed without an event.
// d.mu is held.
func (d *dispatch) takeMessageLocked(p *eventlog.MessageReceived, taken []string) bool {
	if _, ok := d.state.Message(p.MessageID); ok {
		return false
	}
	for _, t := range taken {
		if t == p.MessageID {
			return false
		}
	}
	return true
}

// messageArrivedLocked returns a channel closed when the next message is
// folded. d.mu is held.
func (d *dispatch) messageArrivedLocked() <-chan struct{} {
	if d.arrived == nil {
		d.arrived = make(chan struct{})
	}
	return d.arrived
}

// foldedMessageLocked wakes the Recv calls waiting for a message.
func (d *dispatch) foldedMessageLocked() {
	if d.arrived != nil {
		close(d.arrived)
		d.arrived = nil
	}
}

// wakeReceivedLocked makes a parking dispatch wake at once when a Recv
// parked waiting on a topic that has a message now (taken after the call
// gave up): its dispatch.parked would otherwise follow the message, and
// only the recv's timeout would wake it.
func (d *dispatch) wakeReceivedLocked() {
	for _, topic := range d.recvTopics {
		if _, ok := d.state.NextMessage(topic); ok {
			d.parkUntilLocked(eventlog.ParkMessage, d.k.now())
			return
		}
	}
}

// recvWaiter is a recv step waiting live for a message of its topic.
type recvWaiter struct{ stepID, topic string }

// answerRecvLocked returns payloads, a take's events, with the
// step.succeeded of each waiting recv step (oldest first) that one of
// their message.received answers, in its topic's arrival order, after the
// messages: the message's arrival and the recv's result are one synced
// write, and the waiting Recv finds its step ended (DESIGN §18: the recv
// consumes the oldest received message of its topic, as the fold of this
// write says). The waiters answered leave recvWaiting. d.mu is held.
func (d *dispatch) answerRecvLocked(payloads []eventlog.Payload) []eventlog.Payload {
	if len(d.recvWaiting) == 0 {
		return payloads
	}
	used := make([]bool, len(payloads))
	var answers []eventlog.Payload
	waiting := d.recvWaiting[:0:0]
	for _, w := range d.recvWaiting {
		answered := false
		if _, ok := d.state.NextMessage(w.topic); !ok {
			for i, p := range payloads {
				if m, ok := p.(*eventlog.MessageReceived); ok && !used[i] && m.Topic == w.topic {
					used[i], answered = true, true
					answers = append(answers, &eventlog.StepSucceeded{StepID: w.stepID, Result: bytes.Clone(m.Value)})
					break
				}
			}
		}
		if !answered {
			waiting = append(waiting, w)
		}
	}
	d.recvWaiting = waiting
	return append(slices.Clip(payloads), answers...)
}

// Recv returns the oldest received, not yet consumed message of topic,
// decoded into T (DESIGN §18, §21½.1). It is a step of StepKind recv
// (target: topic; args: timeout; identity as DESIGN §4), recorded with the
// message's value as its result, so that replay returns the recorded
// message and two Recv of one topic consume two messages, in arrival
// order. Its step.started records WakeAt = start + timeout.
//
// When no message has arrived it waits: for the rest of timeout, up to
// ParkAfter, after which the dispatch parks (reason message; Recv returns
// an error wrapping ErrWaiting: return it from the handler). Serve runs the
// execution again when a message arrives or at WakeAt, and a resumed Recv
// waits only what is left. When timeout has passed it records step.failed
// and returns an error wrapping ErrTimeout, which replays so. A recv has
// no body: it advances no resource, is never counted and never gated.
//
// An empty topic or a negative timeout is ErrInvalid; Recv inside a step's
// body is ErrNestedStep; outside a handler ErrNotInExecution. When ctx
// ends first, Recv returns ctx's error and the step stays started.
func Recv[T any](ctx context.Context, topic string, timeout time.Duration) (T, error) {
	var zero T
	if err := checkName("topic", topic); err != nil {
		return zero, fmt.Errorf("recv: %w", err)
	}
	if timeout < 0 {
		return zero, fmt.Errorf("%w: Recv %q with timeout %v; it must not be negative", ErrInvalid, topic, timeout)
	}
	d, err := dispatchFrom(ctx)
	if err != nil {
		return zero, fmt.Errorf("recv %q: %w", topic, err)
	}
	b, err := d.recv(ctx, topic, timeout)
	if err != nil {
		return zero, err
	}
	o := new(T)
	if err := decodeValue(b, o); err != nil {
		return zero, fmt.Errorf("sdk: recv %q: message %.200s does not decode into %T: %w", topic, b, *o, err)
	}
	return *o, nil
}

// recvError is the error of a recv step that timed out, live or replayed.
func recvError(stepID, topic, msg string) error {
	return fmt.Errorf("sdk: recv %q (step %s): %s: %w", topic, stepID, msg, ErrTimeout)
}

func (d *dispatch) recv(ctx context.Context, topic string, timeout time.Duration) ([]byte, error) {
	if si, ok := ctx.Value(stepKey{}).(*stepInfo); ok {
		return nil, fmt.Errorf("%w: Recv(%q) called inside the body of %q", ErrNestedStep, topic, si.target)
	}
	c := call{kind: eventlog.StepRecv, target: topic, args: []byte(strconv.FormatInt(int64(timeout), 10)), idem: eventlog.SafeToRetry}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enterCallLocked(string(c.kind), c.target); err != nil {
		return nil, err
	}
	defer d.calls.Done()
	if err := d.usableLocked(); err != nil {
		return nil, err
	}
	stepID := callIdentity(d.occ, c.kind, c.target, c.args)
	rec, index, seen := d.state.Lookup(stepID)
	if seen {
		d.consumeLocked(index)
	}
	if err := d.positionLocked(c, stepID, seen); err != nil {
		return nil, err
	}
	if err := d.replayOnlyLocked(c, rec, seen); err != nil {
		return nil, err
	}
	if seen {
		switch rec.Status {
		case replay.StepSucceeded:
			d.k.tel.replayed(c.kind)
			return rec.Result, nil
		case replay.StepFailed:
			d.k.tel.replayed(c.kind)
			return nil, recvError(stepID, topic, rec.Error)
		}
	}
	d.wentLive = true
	wake := rec.WakeAt
	if !seen || rec.Status != replay.StepStarted {
		// Absent, or ended without an outcome (abandoned by a completed
		// dispatch of the prefix): a new wait.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("sdk: recv %q not started: %w", topic, err)
		}
		wake = eventlog.WakeAfter(d.k.clock.Now(), timeout)
		err := d.appendLocked(false, &eventlog.StepStarted{
			StepID: stepID, StepKind: c.kind, Target: topic, Args: c.args,
			Idempotency: c.idem, Attempt: rec.Attempts + 1, WakeAt: wake,
		})
		if err != nil {
			return nil, err
		}
	}
	park := d.k.clock.After(d.k.parkAfter)
	for {
		if m, ok := d.state.NextMessage(topic); ok {
			v := bytes.Clone(m.Value)
			if err := d.appendLocked(false, &eventlog.StepSucceeded{StepID: stepID, Result: v}); err != nil {
				return nil, err
			}
			return v, nil
		}
		left := wake.Sub(d.k.clock.Now())
		if left <= 0 {
			msg := fmt.Sprintf("no message on topic %q within %s", topic, timeout)
			if err := d.appendLocked(false, &eventlog.StepFailed{StepID: stepID, Error: msg}); err != nil {
				return nil, err
			}
			return nil, recvError(stepID, topic, msg)
		}
		if err := d.usableLocked(); err != nil {
			return nil, err
		}
		arrived := d.messageArrivedLocked()
		d.recvWaiting = append(d.recvWaiting, recvWaiter{stepID: stepID, topic: topic})
		d.mu.Unlock()
		var parked bool
		var cerr error
		select {
		case <-arrived:
		case <-d.k.clock.After(left):
		case <-park:
			parked = true
		case <-ctx.Done():
			cerr = context.Cause(ctx)
		}
		d.mu.Lock()
		d.recvWaiting = slices.DeleteFunc(d.recvWaiting, func(w recvWaiter) bool { return w.stepID == stepID })
		if r, _, _ := d.state.Lookup(stepID); r.Status == replay.StepSucceeded {
			// A take appended the message with this step's result.
			return bytes.Clone(r.Result), nil
		}
		switch {
		case cerr != nil:
			return nil, fmt.Errorf("sdk: recv %q: wait cancelled: %w", topic, cerr)
		case parked:
			if _, ok := d.state.NextMessage(topic); ok {
				continue
			}
			d.parkUntilLocked(eventlog.ParkMessage, wake)
			d.recvTopics = append(d.recvTopics, topic)
			return nil, fmt.Errorf("sdk: recv %q: %w until a message or %s", topic, ErrWaiting, wake.Format(time.RFC3339Nano))
		}
	}
}

// SetEvent publishes value under key (DESIGN §18, §21½.6): it appends
// event.set{Key, Value}, synced, which GetEvent, Info and the live page
// read. On replay it is matched by (key, occurrence) — the n-th SetEvent
// of key in a dispatch matches the lineage's n-th event.set of key, as
// Patched matches its marker — and appends nothing; a recorded value
// different from value is ErrNonDeterministic under Strict (the execution
// fails), and is kept otherwise.
//
// An empty key or a value that does not encode is ErrInvalid; outside a
// handler ErrNotInExecution; inside a step's body ErrNestedStep.
func SetEvent(ctx context.Context, key string, value any) error {
	if err := checkName("event key", key); err != nil {
		return fmt.Errorf("set event: %w", err)
	}
	b, err := encodeValue(value)
	if err != nil {
		return fmt.Errorf("%w: set event %q: the value does not encode: %w", ErrInvalid, key, err)
	}
	d, err := dispatchFrom(ctx)
	if err != nil {
		return fmt.Errorf("set event %q: %w", key, err)
	}
	if si, ok := ctx.Value(stepKey{}).(*stepInfo); ok {
		return fmt.Errorf("%w: SetEvent(%q) called inside the body of %q", ErrNestedStep, key, si.target)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enterCallLocked("event", key); err != nil {
		return err
	}
	defer d.calls.Done()
	n := d.pos.events[key]
	d.pos.events[key]++
	if rec, ok := d.state.EventAt(key, n); ok {
		if d.pos.strict && !sameJSON(rec.Value, b) {
			err := &NonDeterministicError{
				ID:       d.id,
				Expected: []RecordedCall{{Kind: "event", Target: key, Args: shortArgs(rec.Value), Position: n, Seq: rec.Seq}},
				Got:      &RecordedCall{Kind: "event", Target: key, Args: shortArgs(b), Position: n},
			}
			d.failLocked(eventlog.FailNondeterministic, err)
			return err
		}
		return nil
	}
	if err := d.usableLocked(); err != nil {
		return err
	}
	return d.appendLocked(false, &eventlog.EventSet{Key: key, Value: b})
}

// sameJSON reports whether two encoded values are the same JSON value.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ca, err1 := canonicalJSON(a)
	cb, err2 := canonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// GetEvent returns the newest value execution id published under key with
// SetEvent (DESIGN §18), JSON as SetEvent encoded it. When none has been
// published it waits for the first, for at most timeout (0: only looks),
// reading appends as Watch does: at once for this kernel's, as the store
// announces another process's (Postgres announces terminal appends, or
// every append with pgstore.NotifyEveryAppend), else within about a
// second. Past timeout its error wraps ErrTimeout. An
// execution that ended without publishing key is ErrEnded; an unknown one
// eventlog.ErrNotFound; an empty key or a negative timeout ErrInvalid.
func (k *Kernel) GetEvent(ctx context.Context, id eventlog.ID, key string, timeout time.Duration) ([]byte, error) {
	if err := checkName("event key", key); err != nil {
		return nil, fmt.Errorf("get event: %w", err)
	}
	if timeout < 0 {
		return nil, fmt.Errorf("%w: GetEvent %q with timeout %v; it must not be negative", ErrInvalid, key, timeout)
	}
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sdk: get event %q of %s: %w", key, id, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		wctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
	}
	defer cancel()
	var newest []byte
	for ev, err := range k.Watch(wctx, id) {
		if err != nil {
			if newest == nil && errors.Is(context.Cause(wctx), ErrTimeout) && ctx.Err() == nil {
				return nil, fmt.Errorf("sdk: get event %q of %s: none published within %s: %w", key, id, timeout, ErrTimeout)
			}
			return nil, fmt.Errorf("sdk: get event %q of %s: %w", key, id, err)
		}
		if p, ok := ev.Data.(*eventlog.EventSet); ok && p.Key == key {
			newest = p.Value
		}
		if newest != nil && ev.Seq >= info.Head {
			return newest, nil
		}
		if ev.Seq >= info.Head && timeout == 0 {
			return nil, fmt.Errorf("sdk: get event %q of %s: none published: %w", key, id, ErrTimeout)
		}
	}
	if newest != nil {
		return newest, nil
	}
	return nil, fmt.Errorf("sdk: get event %q of %s: %w without publishing it", key, id, ErrEnded)
}

// ExecutionDetails is what Kernel.Info says of an execution: the store's
// Info, and what it received and published (DESIGN §18). (sdk.Info, the
// function, describes the execution a handler or step runs in.)
type ExecutionDetails struct {
	eventlog.Info
	// Messages lists the messages the lineage received, in arrival order,
	// each with the seq of the recv step that consumed it (0 while none).
	Messages []replay.Message
	// Pending lists the messages sent and not yet received: in the
	// inbox, for the owner to take.
	Pending []eventlog.Message
	// Dropped counts the Pending messages of an ended execution: none
	// will be received (DESIGN §21½.16).
	Dropped int
	// EventKeys lists, sorted, the keys the lineage published values
	// under (SetEvent), and Events the values in order.
	EventKeys []string
	Events    []replay.EventValue
	// Budget is the lineage's budget (sdk.Budget; a fork's own, else its
	// parent's) and Spend what the lineage spent against it, a fork's
	// prefix included (DESIGN §17, §21½.9). Info's Tokens, by contrast,
	// counts the own run only.
	Budget Limits
	Spend  Spend
}

// Info returns execution id's store Info with its messages, pending and
// dropped ones, published events, and budget and spend. It folds the lineage. An unknown id
// is eventlog.ErrNotFound.
func (k *Kernel) Info(ctx context.Context, id eventlog.ID) (*ExecutionDetails, error) {
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sdk: info %s: %w", id, err)
	}
	st, err := replay.Fold(k.log.Events(ctx, id, 1))
	if err != nil {
		return nil, fmt.Errorf("sdk: info %s: %w", id, err)
	}
	out := &ExecutionDetails{Info: info, Messages: st.Messages(), EventKeys: st.EventKeys(), Events: st.Events(),
		Budget: budgetOf(st.Budget), Spend: Spend{Tokens: st.Tokens, LLMCalls: st.LLMCalls, ToolCalls: st.ToolCalls}}
	var inbox eventlog.Inbox
	if eventlog.As(k.log, &inbox) {
		reqs, err := inbox.Requests(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("sdk: info %s: %w", id, err)
		}
		for _, r := range reqs {
			if m, ok := r.Data.(*eventlog.MessageReceived); ok {
				out.Pending = append(out.Pending, eventlog.Message{MessageID: m.MessageID, Topic: m.Topic, Value: m.Value, From: m.From})
			}
		}
	}
	if info.Status.Terminal() {
		out.Dropped = len(out.Pending)
	}
	return out, nil
}
