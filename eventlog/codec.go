package eventlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// FormatVersion is the version byte that starts every encoded event record
// this build writes. A change to any kind code or field tag is a new format
// version. Version 2 added the kinds and fields of DESIGN §8½, version 3
// those of Part III (§21½.7); a version 1 or 2 record still decodes, and
// holds none of what later versions added.
const FormatVersion byte = 3

// MinFormatVersion is the oldest record format version DecodeRecord reads.
const MinFormatVersion byte = 1

// recordHeaderLen is the fixed part of a record:
//
//	[0]     format version
//	[1]     kind code
//	[2:6]   CRC-32C (Castagnoli), see recordChecksum
//	[6:14]  time, Unix nanoseconds, big-endian (0 = zero time)
//	[14:]   msgpack map of the payload, keys = field tags
const recordHeaderLen = 14

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// placeVersion is the first format version whose checksum binds the
// record's place: a record of an older version keeps its old check.
const placeVersion byte = 3

// The places a record can hold, the first byte of the place its checksum
// binds: an event at a seq of an execution's log, or a request at a number
// of its inbox. A request record copied into the log (or an event into the
// inbox) at the same number fails its checksum.
const (
	placeEvent   byte = 'e'
	placeRequest byte = 'r'
)

// placeLen is the length of a place as the checksum reads it: the kind of
// place, the execution ID and the seq (or request number), big-endian.
const placeLen = 1 + 16 + 8

// recordChecksum is the CRC-32C of a record's version and kind bytes, of
// its place (format version 3 on: where, the execution ID and the seq or
// request number) and of everything after its checksum. A flipped kind
// byte must not turn one valid event into another (step.succeeded and
// step.cancelled differ by one bit), and a record moved to another seq or
// another execution must not read as good data there.
func recordChecksum(rec []byte, where byte, id ID, n uint64) uint32 {
	sum := crc32.Checksum(rec[0:2], castagnoli)
	if rec[0] >= placeVersion {
		var place [placeLen]byte
		place[0] = where
		copy(place[1:17], id[:])
		binary.BigEndian.PutUint64(place[17:], n)
		sum = crc32.Update(sum, castagnoli, place[:])
	}
	return crc32.Update(sum, castagnoli, rec[6:])
}

// minRecordTime and maxRecordTime bound the times a record can hold: Unix
// nanoseconds in an int64.
var (
	minRecordTime = time.Unix(0, math.MinInt64)
	maxRecordTime = time.Unix(0, math.MaxInt64)
)

// AppendRecord appends to dst the encoded record of ev as the event at
// seq ev.Seq of execution id's log (its time and payload, not its seq,
// which the store keeps in the key). Its checksum binds id and ev.Seq: the
// record decodes only with DecodeRecord(id, ev.Seq, ...), so a record
// moved to another seq or another execution reads as corrupt.
func AppendRecord(dst []byte, id ID, ev Event) ([]byte, error) {
	return appendRecord(dst, placeEvent, id, ev.Seq, ev)
}

// AppendRequest appends to dst the encoded record of ev (its time and
// payload; ev.Seq is not used) as request number n of execution id's
// inbox. Its checksum binds id and n, and that it is a request: it decodes
// only with DecodeRequest(id, n, ...).
func AppendRequest(dst []byte, id ID, n uint64, ev Event) ([]byte, error) {
	return appendRecord(dst, placeRequest, id, n, ev)
}

// appendRecord appends the record of ev at the place (where, id, n).
func appendRecord(dst []byte, where byte, id ID, n uint64, ev Event) ([]byte, error) {
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
	binary.BigEndian.PutUint32(dst[start+2:start+6], recordChecksum(dst[start:], where, id, n))
	return dst, nil
}

// DecodeRecord decodes the record b, made by AppendRecord, of the event at
// seq of execution id's log into an event with that seq. A wrong version,
// an unknown kind, a checksum mismatch (for a record of format version 3
// on, also a record made for another seq or another execution, or made by
// AppendRequest; a version 1 or 2 record binds neither and keeps its old
// check), a payload that does not decode completely or breaks its
// invariants is an error that wraps ErrCorrupt (not a *CorruptionError:
// the caller names the execution and seq). The returned event shares no
// memory with b.
func DecodeRecord(id ID, seq uint64, b []byte) (Event, error) {
	return decodeRecord(placeEvent, id, seq, b)
}

// DecodeRequest decodes the record b, made by AppendRequest, of request
// number n of execution id's inbox, as DecodeRecord decodes an event's
// (the returned event's Seq is n). A record made for another number,
// another execution or by AppendRecord fails its checksum.
func DecodeRequest(id ID, n uint64, b []byte) (Event, error) {
	return decodeRecord(placeRequest, id, n, b)
}

// CheckRecord checks the record b of the event at seq of execution id's
// log as DecodeRecord does up to its checksum — length, version, kind and
// checksum — without decoding the payload: the cheap check of a record's
// integrity and place (Fork runs it over the prefix it shares). An error
// wraps ErrCorrupt.
func CheckRecord(id ID, seq uint64, b []byte) error {
	_, err := checkHeader(placeEvent, id, seq, b)
	return err
}

// checkHeader checks b's length, version, kind and checksum for the place
// (where, id, n) and returns its kind.
func checkHeader(where byte, id ID, n uint64, b []byte) (Kind, error) {
	if len(b) < recordHeaderLen {
		return 0, fmt.Errorf("%w: record of %d bytes is shorter than its header", ErrCorrupt, len(b))
	}
	version := b[0]
	if version < MinFormatVersion || version > FormatVersion {
		return 0, fmt.Errorf("%w: format version %d, this build reads %d to %d", ErrCorrupt, version, MinFormatVersion, FormatVersion)
	}
	kind := Kind(b[1])
	if !kind.Valid() {
		return 0, fmt.Errorf("%w: unknown event kind code %d", ErrCorrupt, b[1])
	}
	if kind.Since() > version {
		return 0, fmt.Errorf("%w: %s in a format version %d record (it is a version %d kind)", ErrCorrupt, kind, version, kind.Since())
	}
	if got, want := recordChecksum(b, where, id, n), binary.BigEndian.Uint32(b[2:6]); got != want {
		what := "damaged, or moved from another seq or execution"
		if where == placeRequest {
			what = "damaged, or moved from another request or execution"
		}
		return 0, fmt.Errorf("%w: %s: checksum %08x, stored %08x (%s)", ErrCorrupt, kind, got, want, what)
	}
	return kind, nil
}

// decodeRecord is DecodeRecord and DecodeRequest.
func decodeRecord(where byte, id ID, n uint64, b []byte) (Event, error) {
	kind, err := checkHeader(where, id, n, b)
	if err != nil {
		return Event{}, err
	}
	version := b[0]
	ev := Event{Seq: n, Data: newPayload(kind)}
	if nanos := int64(binary.BigEndian.Uint64(b[6:14])); nanos != 0 {
		ev.Time = time.Unix(0, nanos).UTC()
	}
	if err := checkSizes(b[recordHeaderLen:]); err != nil {
		return Event{}, fmt.Errorf("%w: %s payload: %v", ErrCorrupt, kind, err)
	}
	pd := payloadDecoders.Get().(*payloadDecoder)
	pd.r.Reset(b[recordHeaderLen:])
	pd.dec.Reset(&pd.r)
	pd.dec.DisallowUnknownFields(true)
	err = pd.dec.Decode(ev.Data)
	trailing := pd.r.Len()
	pd.r.Reset(nil)
	payloadDecoders.Put(pd)
	if err != nil {
		return Event{}, fmt.Errorf("%w: %s payload: %v", ErrCorrupt, kind, err)
	}
	if trailing != 0 {
		return Event{}, fmt.Errorf("%w: %s payload: %d trailing bytes", ErrCorrupt, kind, trailing)
	}
	if version < 2 {
		if f := v2Field(ev.Data); f != "" {
			return Event{}, fmt.Errorf("%w: %s payload: %s in a format version %d record (it is a version 2 field)", ErrCorrupt, kind, f, version)
		}
	}
	if version < 3 {
		if f := v3Field(ev.Data); f != "" {
			return Event{}, fmt.Errorf("%w: %s payload: %s in a format version %d record (it is a version 3 field)", ErrCorrupt, kind, f, version)
		}
	}
	utcTimes(ev.Data)
	if err := ev.Data.validate(); err != nil {
		return Event{}, fmt.Errorf("%w: %s payload: %v", ErrCorrupt, kind, err)
	}
	return ev, nil
}

// V2Fields lists, per kind of format version 1, the field tags that format
// version 2 added (the kinds that version 2 added are all version 2). A
// version 1 record that sets one of them, holds step kind child or a
// capture reason park or shutdown, does not decode.
var V2Fields = map[Kind][]string{
	KindExecutionCreated: {"deadline", "key"},
	KindDispatchStarted:  {"owner", "epoch"},
	KindStepFailed:       {"retry_at"},
	KindForkCreated:      {"input", "overrides", "deadline"},
}

// v2Field returns the tag of a field (or value) of p that format version 2
// added and p sets, or "".
func v2Field(p Payload) string {
	switch p := p.(type) {
	case *ExecutionCreated:
		switch {
		case !p.Deadline.IsZero():
			return "deadline"
		case p.Key != "":
			return "key"
		}
	case *DispatchStarted:
		switch {
		case p.Owner != "":
			return "owner"
		case p.Epoch != 0:
			return "epoch"
		}
	case *StepStarted:
		if p.StepKind == StepChild {
			return "step_kind child"
		}
	case *StepDenied:
		if p.StepKind == StepChild {
			return "step_kind child"
		}
	case *StepFailed:
		if !p.RetryAt.IsZero() {
			return "retry_at"
		}
	case *ResourceCaptured:
		return v2CaptureReason(p.Reason)
	case *ResourceCaptureFailed:
		return v2CaptureReason(p.Reason)
	case *ForkCreated:
		switch {
		case len(p.Input) > 0:
			return "input"
		case len(p.Overrides) > 0:
			return "overrides"
		case !p.Deadline.IsZero():
			return "deadline"
		}
	}
	return ""
}

// v2CaptureReason returns "reason park" or "reason shutdown" for the
// capture reasons format version 2 added, or "".
func v2CaptureReason(r CaptureReason) string {
	if r == CapturePark || r == CaptureShutdown {
		return "reason " + string(r)
	}
	return ""
}

// V3Fields lists, per kind of format version 1 or 2, the field tags that
// format version 3 added (the kinds that version 3 added are all version
// 3). A version 1 or 2 record that sets one of them, or holds step kind
// recv or park reason rate_limit or message, does not decode.
var V3Fields = map[Kind][]string{
	KindExecutionCreated:  {"version", "queue", "priority", "budget", "traceparent"},
	KindStepStarted:       {"wake_at"},
	KindStepSucceeded:     {"tokens", "truncated"},
	KindStepFailed:        {"tokens"},
	KindStepDenied:        {"rule_id", "code"},
	KindResourceBound:     {"portable"},
	KindForkCreated:       {"version", "budget", "messages", "traceparent"},
	KindApprovalRequested: {"rule_id", "expires_at", "approvers", "message"},
}

// v3Field returns the tag of a field (or value) of p that format version 3
// added and p sets, or "".
func v3Field(p Payload) string {
	switch p := p.(type) {
	case *ExecutionCreated:
		switch {
		case p.Version != "":
			return "version"
		case p.Queue != "":
			return "queue"
		case p.Priority != 0:
			return "priority"
		case p.Budget != Limits{}:
			return "budget"
		case p.TraceParent != "":
			return "traceparent"
		}
	case *StepStarted:
		switch {
		case !p.WakeAt.IsZero():
			return "wake_at"
		case p.StepKind == StepRecv:
			return "step_kind recv"
		}
	case *StepSucceeded:
		switch {
		case p.Tokens != Tokens{}:
			return "tokens"
		case p.Truncated:
			return "truncated"
		}
	case *StepFailed:
		if p.Tokens != (Tokens{}) {
			return "tokens"
		}
	case *StepDenied:
		switch {
		case p.StepKind == StepRecv:
			return "step_kind recv"
		case p.RuleID != "":
			return "rule_id"
		case p.Code != "":
			return "code"
		}
	case *ResourceBound:
		if p.Portable {
			return "portable"
		}
	case *ForkCreated:
		switch {
		case p.Version != "":
			return "version"
		case p.Budget != Limits{}:
			return "budget"
		case len(p.Messages) > 0:
			return "messages"
		case p.TraceParent != "":
			return "traceparent"
		}
	case *ApprovalRequested:
		switch {
		case p.StepKind == StepRecv:
			return "step_kind recv"
		case p.RuleID != "":
			return "rule_id"
		case !p.ExpiresAt.IsZero():
			return "expires_at"
		case len(p.Approvers) > 0:
			return "approvers"
		case p.Message != "":
			return "message"
		}
	case *DispatchParked:
		if p.Reason == ParkRateLimit || p.Reason == ParkMessage {
			return "reason " + string(p.Reason)
		}
	}
	return ""
}

// utcTimes sets the location of p's non-zero times to UTC: msgpack decodes
// a time in the local zone, and a decoded event must not depend on the
// machine that reads it (the record header's time is UTC too).
func utcTimes(p Payload) {
	utc := func(t *time.Time) {
		if !t.IsZero() {
			*t = t.UTC()
		}
	}
	switch p := p.(type) {
	case *ExecutionCreated:
		utc(&p.Deadline)
	case *StepStarted:
		utc(&p.WakeAt)
	case *ApprovalRequested:
		utc(&p.ExpiresAt)
	case *StepFailed:
		utc(&p.RetryAt)
	case *ForkCreated:
		utc(&p.Deadline)
	case *DispatchParked:
		utc(&p.WakeAt)
	case *TimerStarted:
		utc(&p.WakeAt)
	}
}

// checkSizes walks the msgpack values in p and fails if a declared length
// runs past the end of p. msgpack v5.4.1 allocates what a length declares
// before reading: a []byte field at its full length, a slice of structs at
// its full count (its alloc-limit test is inverted), so a 30-byte record
// claiming a 4 GiB string or 2^32 fork selections would exhaust memory.
// After this check every allocation is bounded by a multiple of len(p).
// The walk keeps a count of values still to read, not a stack, so deep
// nesting cannot exhaust the goroutine stack either.
func checkSizes(p []byte) error {
	pos, pending := 0, 1
	need := func(n uint64) error {
		if n > uint64(len(p)-pos) {
			return fmt.Errorf("msgpack length %d at byte %d runs past the end (%d bytes left)", n, pos, len(p)-pos)
		}
		return nil
	}
	length := func(width int) (uint64, error) {
		if err := need(uint64(width)); err != nil {
			return 0, err
		}
		var n uint64
		for _, c := range p[pos : pos+width] {
			n = n<<8 | uint64(c)
		}
		pos += width
		return n, nil
	}
	for ; pending > 0; pending-- {
		if err := need(1); err != nil {
			return err
		}
		c := p[pos]
		pos++
		var skip, items uint64 // bytes to skip; values that follow
		var err error
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			items = 2 * uint64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			items = uint64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			skip = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			skip, err = length(1)
		case c == 0xc5 || c == 0xda: // bin16, str16
			skip, err = length(2)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			skip, err = length(4)
		case c == 0xc7: // ext8: length, type, data
			skip, err = length(1)
			skip++
		case c == 0xc8: // ext16
			skip, err = length(2)
			skip++
		case c == 0xc9: // ext32
			skip, err = length(4)
			skip++
		case c == 0xca || c == 0xce || c == 0xd2: // float32, uint32, int32
			skip = 4
		case c == 0xcb || c == 0xcf || c == 0xd3: // float64, uint64, int64
			skip = 8
		case c == 0xcc || c == 0xd0: // uint8, int8
			skip = 1
		case c == 0xcd || c == 0xd1: // uint16, int16
			skip = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16: type and data
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc: // array16
			items, err = length(2)
		case c == 0xdd: // array32
			items, err = length(4)
		case c == 0xde: // map16
			items, err = length(2)
			items *= 2
		case c == 0xdf: // map32
			items, err = length(4)
			items *= 2
		default: // 0xc1 is never used
			return fmt.Errorf("msgpack code %#02x at byte %d is not used", c, pos-1)
		}
		if err != nil {
			return err
		}
		if err := need(skip); err != nil {
			return err
		}
		pos += int(skip)
		// Every value takes at least one byte.
		if err := need(items + uint64(pending-1)); err != nil {
			return err
		}
		pending += int(items)
	}
	return nil
}

// payloadDecoder is a msgpack decoder with the reader it reads from, kept
// together so that decoding a record allocates neither.
type payloadDecoder struct {
	dec *msgpack.Decoder
	r   bytes.Reader
}

// payloadDecoders pools payloadDecoders across DecodeRecord calls.
var payloadDecoders = sync.Pool{New: func() any { return &payloadDecoder{dec: msgpack.NewDecoder(nil)} }}
