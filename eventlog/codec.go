package eventlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// FormatVersion is the version byte that starts every encoded event record.
// A change to any kind code or field tag is a new format version.
const FormatVersion byte = 1

// recordHeaderLen is the fixed part of a record:
//
//	[0]     format version
//	[1]     kind code
//	[2:6]   CRC-32C (Castagnoli) of bytes [0:2] and [6:], in that order
//	[6:14]  time, Unix nanoseconds, big-endian (0 = zero time)
//	[14:]   msgpack map of the payload, keys = field tags
const recordHeaderLen = 14

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordChecksum is the CRC-32C of a record's version and kind bytes and of
// everything after its checksum: a flipped kind byte must not turn one valid
// event into another (step.succeeded and step.cancelled differ by one bit).
func recordChecksum(rec []byte) uint32 {
	return crc32.Update(crc32.Checksum(rec[0:2], castagnoli), castagnoli, rec[6:])
}

// minRecordTime and maxRecordTime bound the times a record can hold: Unix
// nanoseconds in an int64.
var (
	minRecordTime = time.Unix(0, math.MinInt64)
	maxRecordTime = time.Unix(0, math.MaxInt64)
)

// AppendRecord appends the encoded record of ev (its time and payload, not
// its seq, which the store keeps in the key) to dst.
func AppendRecord(dst []byte, ev Event) ([]byte, error) {
	if err := ev.Validate(); err != nil {
		return dst, err
	}
	var nanos int64
	if !ev.Time.IsZero() {
		// Outside int64 nanoseconds UnixNano is undefined, and 0 means "zero
		// time": such a time would be stored as another one.
		if ev.Time.Before(minRecordTime) || ev.Time.After(maxRecordTime) || ev.Time.UnixNano() == 0 {
			return dst, fmt.Errorf("%w: %s event %d: time %v cannot be stored (Unix nanoseconds must fit an int64 and not be 0)",
				ErrInvalid, ev.Kind(), ev.Seq, ev.Time)
		}
		nanos = ev.Time.UnixNano()
	}
	start := len(dst)
	dst = append(dst, FormatVersion, byte(ev.Kind()), 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(nanos))
	buf := bytes.NewBuffer(dst)
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	enc.SetSortMapKeys(true)
	err := enc.Encode(ev.Data)
	msgpack.PutEncoder(enc)
	if err != nil {
		return dst[:start], fmt.Errorf("eventlog: encode %s: %w", ev.Kind(), err)
	}
	dst = buf.Bytes()
	binary.BigEndian.PutUint32(dst[start+2:start+6], recordChecksum(dst[start:]))
	return dst, nil
}

// DecodeRecord decodes a record made by AppendRecord into an event with the
// given seq. A wrong version, an unknown kind, a checksum mismatch, a payload
// that does not decode completely or breaks its invariants is an error that
// wraps ErrCorrupt (not a *CorruptionError: the caller knows the execution).
// The returned event shares no memory with b.
func DecodeRecord(seq uint64, b []byte) (Event, error) {
	if len(b) < recordHeaderLen {
		return Event{}, fmt.Errorf("%w: record of %d bytes is shorter than its header", ErrCorrupt, len(b))
	}
	if b[0] != FormatVersion {
		return Event{}, fmt.Errorf("%w: format version %d, this build reads %d", ErrCorrupt, b[0], FormatVersion)
	}
	kind := Kind(b[1])
	if !kind.Valid() {
		return Event{}, fmt.Errorf("%w: unknown event kind code %d", ErrCorrupt, b[1])
	}
	if got, want := recordChecksum(b), binary.BigEndian.Uint32(b[2:6]); got != want {
		return Event{}, fmt.Errorf("%w: %s: checksum %08x, stored %08x", ErrCorrupt, kind, got, want)
	}
	ev := Event{Seq: seq, Data: newPayload(kind)}
	if nanos := int64(binary.BigEndian.Uint64(b[6:14])); nanos != 0 {
		ev.Time = time.Unix(0, nanos).UTC()
	}
	r := bytes.NewReader(b[recordHeaderLen:])
	dec := msgpack.GetDecoder()
	dec.Reset(r)
	dec.DisallowUnknownFields(true)
	var err error
	if fc, ok := ev.Data.(*ForkCreated); ok {
		err = decodeForkCreated(dec, fc)
	} else {
		err = dec.Decode(ev.Data)
	}
	msgpack.PutDecoder(dec)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %s payload: %v", ErrCorrupt, kind, err)
	}
	if r.Len() != 0 {
		return Event{}, fmt.Errorf("%w: %s payload: %d trailing bytes", ErrCorrupt, kind, r.Len())
	}
	if err := ev.Data.validate(); err != nil {
		return Event{}, fmt.Errorf("%w: %s payload: %v", ErrCorrupt, kind, err)
	}
	return ev, nil
}

// forkCreatedWire is ForkCreated as it is decoded: msgpack v5.4.1 allocates
// a slice of structs at the length a record declares, before reading any
// element (its alloc limit test is inverted), so a 17-byte record claiming
// four billion selections would exhaust memory. selectionsWire grows with
// what is actually read.
type forkCreatedWire struct {
	Parent     ID             `msgpack:"parent"`
	At         uint64         `msgpack:"at"`
	Selections selectionsWire `msgpack:"selections,omitempty"`
}

type selectionsWire []ForkSelection

// DecodeMsgpack implements msgpack.CustomDecoder.
func (s *selectionsWire) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		*s = nil
		return err
	}
	out := make([]ForkSelection, 0, min(n, 16))
	for range n {
		var sel ForkSelection
		if err := dec.Decode(&sel); err != nil {
			return err
		}
		out = append(out, sel)
	}
	*s = out
	return nil
}

func decodeForkCreated(dec *msgpack.Decoder, fc *ForkCreated) error {
	var w forkCreatedWire
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*fc = ForkCreated{Parent: w.Parent, At: w.At, Selections: w.Selections}
	return nil
}
