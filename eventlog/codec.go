package eventlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
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
//	[2:6]   CRC-32C (Castagnoli) of bytes [6:]
//	[6:14]  time, Unix nanoseconds, big-endian (0 = zero time)
//	[14:]   msgpack map of the payload, keys = field tags
const recordHeaderLen = 14

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendRecord appends the encoded record of ev (its time and payload, not
// its seq, which the store keeps in the key) to dst.
func AppendRecord(dst []byte, ev Event) ([]byte, error) {
	if err := ev.Validate(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, FormatVersion, byte(ev.Kind()), 0, 0, 0, 0)
	var nanos int64
	if !ev.Time.IsZero() {
		nanos = ev.Time.UnixNano()
	}
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
	sum := crc32.Checksum(dst[start+6:], castagnoli)
	binary.BigEndian.PutUint32(dst[start+2:start+6], sum)
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
	if got, want := crc32.Checksum(b[6:], castagnoli), binary.BigEndian.Uint32(b[2:6]); got != want {
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
	err := dec.Decode(ev.Data)
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

