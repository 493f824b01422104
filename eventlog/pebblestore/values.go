package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/vmihailenco/msgpack/v5"
)

// valueVersion starts every header and index value; with the CRC-32C that
// follows it, a value is [version][crc of the rest][msgpack].
const valueVersion byte = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the immutable record of one execution.
type header struct {
	Agent   string      `msgpack:"agent"`
	Parent  eventlog.ID `msgpack:"parent"`
	At      uint64      `msgpack:"at,omitempty"`
	Created int64       `msgpack:"created"`          // Unix nanoseconds
	Caller  eventlog.ID `msgpack:"caller,omitempty"` // store format 2: the parent of a child
	Key     string      `msgpack:"key,omitempty"`    // the start key (execution.created Key); "" in older headers

	// CallerStep is the caller's StepID of the step that started this
	// child (eventlog.WithCallerStep): the StepID of the child.ended
	// request its end writes into Caller's inbox; "" in older headers.
	CallerStep string `msgpack:"caller_step,omitempty"`

	// Version is the execution's code version (eventlog.Info.Version):
	// its execution.created or fork.created Version; "" for none and in
	// older headers, which were all written before versions existed.
	Version string `msgpack:"version,omitempty"`

	// Queue and Priority are the execution.created's (eventlog.Info.Queue);
	// "" and 0 for none, for forks and in older headers.
	Queue    string `msgpack:"queue,omitempty"`
	Priority int    `msgpack:"priority,omitempty"`
}

// indexValue is an eventlog.ResourceState without the key and seq, which
// live in the index key.
type indexValue struct {
	Generation    uint64   `msgpack:"generation"`
	InFlight      []string `msgpack:"in_flight,omitempty"`
	CoverageReuse bool     `msgpack:"coverage_reuse,omitempty"`
	Bound         uint64   `msgpack:"bound"`
	Ref           string   `msgpack:"ref,omitempty"`
	RefAt         uint64   `msgpack:"ref_at,omitempty"`
	RefGeneration uint64   `msgpack:"ref_generation,omitempty"`
	Diverged      uint64   `msgpack:"diverged,omitempty"` // absent in values written before fork.diverged existed
}

// stateValue is the mutable state record of one execution (store format
// 2): the seq of its newest event, which a read checks against the event
// keys, and the eventlog.StatusState after that event. It is rewritten in
// the batch of every event of the execution's own, so Info and List read
// the status without folding the lineage. Requests is the number of the
// newest inbox request made before that batch: the inbox numbers from it
// on, so a number is never given twice even after Take removed the newest
// request's key.
type stateValue struct {
	Head       uint64    `msgpack:"head"`
	Status     uint8     `msgpack:"status"`
	Updated    time.Time `msgpack:"updated,omitempty"`
	WakeAt     time.Time `msgpack:"wake_at,omitempty"`
	Deadline   time.Time `msgpack:"deadline,omitempty"`
	Dispatched bool      `msgpack:"dispatched,omitempty"`
	Parked     bool      `msgpack:"parked,omitempty"`
	Approvals  []string  `msgpack:"approvals,omitempty"`
	Requests   uint64    `msgpack:"requests,omitempty"`
	// Epoch is the newest lease claim's epoch (DESIGN §15½.5): a claim
	// writes it before it returns, and every rewrite of the
	// record keeps it, so that epochs rise across reopens of the store.
	// Absent (0) in records written before epochs were kept.
	Epoch uint64 `msgpack:"epoch,omitempty"`
	// TokensIn and TokensOut are the StatusState's Tokens (DESIGN §16):
	// absent (0) in records written before the store kept them, which
	// then count only the events appended since.
	TokensIn  uint64 `msgpack:"tokens_in,omitempty"`
	TokensOut uint64 `msgpack:"tokens_out,omitempty"`
}

// encodeStateValue encodes an execution's state record: st, and requests,
// the number of its newest inbox request.
func encodeStateValue(st eventlog.StatusState, requests, epoch uint64) ([]byte, error) {
	return encodeValue(&stateValue{
		Head: st.Head, Status: uint8(st.Status), Updated: st.Updated, WakeAt: st.WakeAt, Deadline: st.Deadline,
		Dispatched: st.Dispatched, Parked: st.Parked, Approvals: st.Approvals, Requests: requests, Epoch: epoch,
		TokensIn: st.Tokens.Input, TokensOut: st.Tokens.Output,
	})
}

// decodeStateValue decodes a state record: the status, the newest inbox
// request's number and the newest claim's epoch.
func decodeStateValue(b []byte) (eventlog.StatusState, uint64, uint64, error) {
	var v stateValue
	if err := decodeValue(b, &v); err != nil {
		return eventlog.StatusState{}, 0, 0, err
	}
	st := eventlog.StatusState{
		Head: v.Head, Status: eventlog.Status(v.Status), Updated: utc(v.Updated), WakeAt: utc(v.WakeAt),
		Deadline: utc(v.Deadline), Dispatched: v.Dispatched, Parked: v.Parked, Approvals: v.Approvals,
		Tokens: eventlog.Tokens{Input: v.TokensIn, Output: v.TokensOut},
	}
	if st.Head == 0 || !st.Status.Valid() {
		return eventlog.StatusState{}, 0, 0, fmt.Errorf("state with head %d and status %d", v.Head, v.Status)
	}
	return st, v.Requests, v.Epoch, nil
}

// utc returns t in UTC (msgpack decodes times in the local zone); the zero
// time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func encodeValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write([]byte{valueVersion, 0, 0, 0, 0})
	enc := msgpack.GetEncoder()
	enc.Reset(&buf)
	err := enc.Encode(v)
	msgpack.PutEncoder(enc)
	if err != nil {
		return nil, err
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b[1:5], crc32.Checksum(b[5:], castagnoli))
	return b, nil
}

func decodeValue(b []byte, v any) error {
	if len(b) < 5 {
		return fmt.Errorf("value of %d bytes is shorter than its header", len(b))
	}
	if b[0] != valueVersion {
		return fmt.Errorf("value version %d, this build reads %d", b[0], valueVersion)
	}
	if got, want := crc32.Checksum(b[5:], castagnoli), binary.BigEndian.Uint32(b[1:5]); got != want {
		return fmt.Errorf("checksum %08x, stored %08x", got, want)
	}
	r := bytes.NewReader(b[5:])
	dec := msgpack.GetDecoder()
	dec.Reset(r)
	dec.DisallowUnknownFields(true)
	err := dec.Decode(v)
	msgpack.PutDecoder(dec)
	if err != nil {
		return err
	}
	if r.Len() != 0 {
		return errors.New("trailing bytes")
	}
	return nil
}

func encodeIndexValue(st eventlog.ResourceState) ([]byte, error) {
	return encodeValue(&indexValue{
		Generation:    st.Generation,
		InFlight:      st.InFlight,
		CoverageReuse: st.CoverageReuse,
		Bound:         st.Bound,
		Ref:           st.Latest.Ref,
		RefAt:         st.Latest.At,
		RefGeneration: st.Latest.Generation,
		Diverged:      st.Diverged,
	})
}

func decodeIndexValue(key string, seq uint64, b []byte) (eventlog.ResourceState, error) {
	var v indexValue
	if err := decodeValue(b, &v); err != nil {
		return eventlog.ResourceState{}, err
	}
	return eventlog.ResourceState{
		Key:           key,
		Seq:           seq,
		Generation:    v.Generation,
		InFlight:      v.InFlight,
		CoverageReuse: v.CoverageReuse,
		Bound:         v.Bound,
		Latest:        eventlog.Checkpoint{Ref: v.Ref, At: v.RefAt, Generation: v.RefGeneration},
		Diverged:      v.Diverged,
	}, nil
}

func timeFromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// nanos is t as the store keeps it: eventlog.StoredNanos (0 for the zero
// time, saturated at eventlog.MaxWakeTime).
func nanos(t time.Time) int64 { return eventlog.StoredNanos(t) }
