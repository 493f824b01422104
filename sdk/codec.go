package sdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/forkline/forkline/eventlog"
)

// Values — inputs, outputs, args and results — are stored as JSON: stable,
// readable in the CLI, and decodable into the caller's types. Args are
// canonicalized (map keys sorted, numbers kept as written) so that step
// identity is the same in every process.

// MaxValueSize bounds one encoded value — an execution's input or output, a
// call's args or result, an LLM request or response body. Each is one event
// of the log, and the log is for records, not bulk data: keep large content
// in a resource and pass its name.
const MaxValueSize = 16 << 20

// encodeValue encodes v as JSON, refusing a value over MaxValueSize.
func encodeValue(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if err := checkSize(len(b)); err != nil {
		return nil, err
	}
	return b, nil
}

// errTooLarge classifies a value over MaxValueSize.
var errTooLarge = errors.New("value too large")

func checkSize(n int) error {
	if n > MaxValueSize {
		return fmt.Errorf("%w: %d bytes, more than the %d-byte limit of a recorded value (MaxValueSize)", errTooLarge, n, MaxValueSize)
	}
	return nil
}

// canonicalJSON returns the canonical form of a JSON document: objects with
// sorted keys, no insignificant space, numbers as written.
func canonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalArgs encodes a call's args canonically; the canonical form is
// what is recorded, so it is what must fit MaxValueSize (it can be larger
// than the plain encoding: invalid UTF-8 becomes U+FFFD).
func canonicalArgs(v any) ([]byte, error) {
	b, err := encodeValue(v)
	if err != nil {
		return nil, err
	}
	c, err := canonicalJSON(b)
	if err != nil {
		return nil, err
	}
	if err := checkSize(len(c)); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeValue decodes recorded JSON into out; fields the recorded value has
// but out's type lacks are an error, so that a changed type is noticed.
func decodeValue(b []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}

// StepID returns the identity of the occurrence-th (0-based) call of a
// dispatch with this kind, target and canonical args (DESIGN §4). It does not
// depend on the execution, so a fork computes its parent's IDs.
func StepID(kind eventlog.StepKind, target string, args []byte, occurrence uint64) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(kind), []byte(target), args} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	binary.BigEndian.PutUint64(n[:], occurrence)
	h.Write(n[:])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// idempotencyKey derives a step body's idempotency key from its StepID and
// the execution running it live: retries of the step in this execution share
// it, while a fork that runs the same step live gets its own.
func idempotencyKey(id eventlog.ID, stepID string) string {
	h := sha256.Sum256(append(id[:], stepID...))
	return "fl-" + hex.EncodeToString(h[:16])
}
