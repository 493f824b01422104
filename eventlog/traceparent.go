package eventlog

import (
	"encoding/hex"
	"fmt"
)

// TraceParent is a W3C trace context (https://www.w3.org/TR/trace-context/)
// as execution.created and fork.created record it: the caller's trace and
// span IDs and its trace flags.
type TraceParent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// String returns tp as traceparent text of version 00.
func (tp TraceParent) String() string {
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tp.TraceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], tp.SpanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{tp.Flags})
	return string(b[:])
}

// ParseTraceParent parses traceparent text of version 00, the only one
// forkline writes: "00-" 32 lowercase hex digits of a trace ID that is not
// all zero, "-" 16 of a span ID that is not all zero, "-" 2 of the flags.
// Anything else is an error wrapping ErrInvalid; it never panics.
func ParseTraceParent(s string) (TraceParent, error) {
	var tp TraceParent
	if len(s) != 55 || s[0:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return tp, fmt.Errorf("%w: traceparent %q: not of the form 00-<32 hex>-<16 hex>-<2 hex>", ErrInvalid, clip(s, 64))
	}
	var flags [1]byte
	for _, f := range []struct {
		dst  []byte
		text string
	}{{tp.TraceID[:], s[3:35]}, {tp.SpanID[:], s[36:52]}, {flags[:], s[53:55]}} {
		for i := 0; i < len(f.text); i++ {
			if c := f.text[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return TraceParent{}, fmt.Errorf("%w: traceparent %q: %q is not a lowercase hex digit", ErrInvalid, s, c)
			}
		}
		if _, err := hex.Decode(f.dst, []byte(f.text)); err != nil {
			return TraceParent{}, fmt.Errorf("%w: traceparent %q: %v", ErrInvalid, s, err)
		}
	}
	tp.Flags = flags[0]
	if tp.TraceID == ([16]byte{}) {
		return TraceParent{}, fmt.Errorf("%w: traceparent %q: zero trace id", ErrInvalid, s)
	}
	if tp.SpanID == ([8]byte{}) {
		return TraceParent{}, fmt.Errorf("%w: traceparent %q: zero span id", ErrInvalid, s)
	}
	return tp, nil
}

// checkTraceParent validates a recorded TraceParent ("" for none).
func checkTraceParent(s string) error {
	if s == "" {
		return nil
	}
	_, err := ParseTraceParent(s)
	return err
}
