package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/replay"
	"github.com/forkline/forkline/sdk"
)

// cmdSend sends the JSON value to execution prefix under topic (DESIGN
// §18): its owner receives it, or this command appends it when nobody runs
// the execution. messageID makes it idempotent ("" for a random one).
func cmdSend(e *env, prefix, topic, value, messageID string) error {
	if !json.Valid([]byte(value)) {
		return inputErrorf("send: the value %q is not JSON (a string is written \"\\\"text\\\"\")", value)
	}
	var opts []sdk.SendOption
	if messageID != "" {
		opts = append(opts, sdk.MessageID(messageID))
	}
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, prefix)
		if err != nil {
			return err
		}
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		err = k.Send(e.ctx, info.ID, topic, json.RawMessage(value), opts...)
		if errors.Is(err, sdk.ErrInvalid) || errors.Is(err, sdk.ErrEnded) || errors.Is(err, eventlog.ErrConflict) {
			return &inputError{err}
		}
		if err != nil {
			return err
		}
		after, err := s.Info(e.ctx, info.ID)
		if err != nil {
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"execution": info.ID.String(), "topic": topic, "status": after.Status.String()})
		}
		fmt.Fprintf(e.stdout, "%s: sent on %q (%s)\n", info.ID, topic, after.Status)
		return nil
	})
}

// kindMatches reports whether kind k is selected by the --kind filter f:
// the kind's name ("message.received") or its family before the dot
// ("message", "step"); "" selects every kind.
func kindMatches(f string, k eventlog.Kind) bool {
	name := k.String()
	return f == "" || name == f || strings.HasPrefix(name, f+".")
}

// checkKindFilter refuses a --kind that selects no kind at all.
func checkKindFilter(f string) error {
	if f == "" {
		return nil
	}
	for k := eventlog.Kind(1); k.Valid(); k++ {
		if kindMatches(f, k) {
			return nil
		}
	}
	return inputErrorf("events: --kind %q names no event kind (say message, step, event.set)", f)
}

// talk is what an execution received and published, for events and show.
type talk struct {
	messages []replay.Message
	pending  []eventlog.Message
	dropped  int
	events   []replay.EventValue
}

func (t *talk) empty() bool {
	return len(t.messages) == 0 && len(t.pending) == 0 && len(t.events) == 0
}

// readTalk folds what id received and published.
func readTalk(e *env, s eventlog.IndexedLog, id eventlog.ID) (*talk, error) {
	k, err := sdk.New(s)
	if err != nil {
		return nil, err
	}
	info, err := k.Info(e.ctx, id)
	if err != nil {
		return nil, err
	}
	return &talk{messages: info.Messages, pending: info.Pending, dropped: info.Dropped, events: info.Events}, nil
}

// messageJSON is one message in events --json.
type messageJSON struct {
	MessageID  string          `json:"message_id"`
	Topic      string          `json:"topic"`
	Value      json.RawMessage `json:"value"`
	From       string          `json:"from"`
	ReceivedAt uint64          `json:"received_at,omitempty"` // 0: pending in the inbox
	ConsumedAt uint64          `json:"consumed_at,omitempty"`
	ConsumedBy string          `json:"consumed_by,omitempty"`
}

// publishedJSON is the newest value of one published key in events --json.
type publishedJSON struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	Seq   uint64          `json:"seq"`
}

// jsonValue is a recorded value as JSON, or as a JSON string when it is
// not JSON.
func jsonValue(b []byte) json.RawMessage {
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}

func (t *talk) json() map[string]any {
	msgs := make([]messageJSON, 0, len(t.messages)+len(t.pending))
	for _, m := range t.messages {
		msgs = append(msgs, messageJSON{MessageID: m.MessageID, Topic: m.Topic, Value: jsonValue(m.Value), From: m.From,
			ReceivedAt: m.ReceivedAt, ConsumedAt: m.ConsumedAt, ConsumedBy: m.ConsumedBy})
	}
	for _, m := range t.pending {
		msgs = append(msgs, messageJSON{MessageID: m.MessageID, Topic: m.Topic, Value: jsonValue(m.Value), From: m.From})
	}
	return map[string]any{"messages": msgs, "dropped": t.dropped, "published": t.newest()}
}

// newest returns the newest value of each published key, in key order.
func (t *talk) newest() []publishedJSON {
	byKey := map[string]publishedJSON{}
	var keys []string
	for _, ev := range t.events {
		if _, ok := byKey[ev.Key]; !ok {
			keys = append(keys, ev.Key)
		}
		byKey[ev.Key] = publishedJSON{Key: ev.Key, Value: jsonValue(ev.Value), Seq: ev.Seq}
	}
	out := make([]publishedJSON, 0, len(keys))
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// write prints the messages (received, consumed or waiting; pending in the
// inbox; dropped) and the newest value of each published key.
func (t *talk) write(w io.Writer) error {
	if len(t.messages)+len(t.pending) > 0 {
		fmt.Fprintln(w, "\nmessages:")
		tw := newTable(w)
		fmt.Fprintln(tw, "RECEIVED\tTOPIC\tID\tVALUE\tCONSUMED")
		for _, m := range t.messages {
			consumed := "waiting"
			if m.Consumed() {
				consumed = fmt.Sprintf("seq %d by %s", m.ConsumedAt, shortStep(m.ConsumedBy))
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", m.ReceivedAt, m.Topic, m.MessageID, clip(string(m.Value), 60), consumed)
		}
		state := "pending (in the inbox)"
		if t.dropped > 0 {
			state = "dropped (the execution ended)"
		}
		for _, m := range t.pending {
			fmt.Fprintf(tw, "-\t%s\t%s\t%s\t%s\n", m.Topic, m.MessageID, clip(string(m.Value), 60), state)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(t.events) > 0 {
		fmt.Fprintln(w, "\npublished events (newest value):")
		tw := newTable(w)
		fmt.Fprintln(tw, "KEY\tSEQ\tVALUE")
		for _, p := range t.newest() {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", p.Key, p.Seq, clip(string(p.Value), 60))
		}
		return tw.Flush()
	}
	return nil
}

// shortStep is how tables show a StepID.
func shortStep(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
