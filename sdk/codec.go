package sdk

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

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

// errInvalidUTF8 classifies args that hold a string that is not valid UTF-8.
var errInvalidUTF8 = errors.New("a string is not valid UTF-8")

// canonicalArgs encodes a call's args canonically; the canonical form is
// what is recorded, so it is what must fit MaxValueSize (it can be larger
// than the plain encoding).
//
// Args holding a string that is not valid UTF-8 are refused: JSON has no
// way to say such bytes, encoding/json writes each invalid byte as U+FFFD,
// and two different strings would get one StepID — the second call would
// replay the first one's result.
func canonicalArgs(v any) ([]byte, error) {
	b, err := encodeValue(v)
	if err != nil {
		return nil, err
	}
	if err := checkUTF8(b, v); err != nil {
		return nil, err
	}
	c, err := canonicalize(b)
	if err != nil {
		return nil, err
	}
	if err := checkSize(len(c)); err != nil {
		return nil, err
	}
	return c, nil
}

// checkUTF8 refuses the encoding b of v when v held invalid UTF-8: raw
// invalid bytes (from a MarshalJSON or a json.RawMessage), or a string that
// encoding/json wrote with \ufffd escapes. That escape is looked for first,
// since encoding/json writes it for nothing else of its own; only when it is
// there is v walked, because JSON that v carries as written (a RawMessage)
// may hold the escape legitimately.
func checkUTF8(b []byte, v any) error {
	if !utf8.Valid(b) {
		return fmt.Errorf("%w (raw bytes)", errInvalidUTF8)
	}
	if !bytes.Contains(b, []byte(`\ufffd`)) {
		return nil
	}
	if path, bad := invalidUTF8(reflect.ValueOf(v), "args"); bad {
		return fmt.Errorf("%w: %s", errInvalidUTF8, path)
	}
	return nil
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// invalidUTF8 reports where v holds a string that is not valid UTF-8, as
// encoding/json would encode it. v encoded without error, so it has no
// cycle (encoding/json refuses one) and the walk ends; it goes as deep as
// the encoding went, since a bad string deep down gives two different
// args one StepID as surely as one at the top.
func invalidUTF8(v reflect.Value, path string) (string, bool) {
	if !v.IsValid() {
		return "", false
	}
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return "", false
	}
	t := v.Type()
	// A value read through an unexported embedded field cannot be handed
	// to its methods (reflect panics), and encoding/json does not call
	// them either: it encodes the embedded struct's exported fields, which
	// the walk below visits.
	marshals := v.CanInterface()
	if marshals && t.Implements(jsonMarshalerType) {
		return "", false // its output was checked as raw bytes
	}
	if marshals && t.Implements(textMarshalerType) {
		text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		return path, err == nil && !utf8.Valid(text)
	}
	switch v.Kind() {
	case reflect.String:
		return path, !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return invalidUTF8(v.Elem(), path)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() || f.Anonymous {
				if p, bad := invalidUTF8(v.Field(i), path+"."+f.Name); bad {
					return p, true
				}
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if p, bad := invalidUTF8(k, path+" key"); bad {
				return p, true
			}
			if p, bad := invalidUTF8(it.Value(), fmt.Sprintf("%s[%q]", path, k.Interface())); bad {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "", false // bytes encode as base64
		}
		for i := range v.Len() {
			if p, bad := invalidUTF8(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); bad {
				return p, true
			}
		}
	}
	return "", false
}

// decodeValue decodes recorded JSON into out; fields the recorded value has
// but out's type lacks are an error, so that a changed type is noticed.
//
// A type that holds no struct has no fields to be unknown: it is decoded
// with json.Unmarshal, which needs no Decoder and its buffer per value. A
// syntax error there is left to the Decoder, so that errors read as ever.
func decodeValue(b []byte, out any) error {
	if p, ok := out.(*string); ok {
		if s, ok := simpleJSONString(b); ok {
			*p = s
			return nil
		}
	}
	if !holdsStruct(reflect.TypeOf(out)) {
		err := json.Unmarshal(b, out)
		if _, syntax := err.(*json.SyntaxError); !syntax {
			return err
		}
	}
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
	sum := stepSum(kind, target, args, occurrence)
	return hex.EncodeToString(sum[:])
}

// stepSum is StepID in binary: the first 16 bytes of the SHA-256 of the
// length-prefixed kind, target and args and the occurrence.
func stepSum(kind eventlog.StepKind, target string, args []byte, occurrence uint64) [16]byte {
	var stack [256]byte
	b := stack[:0]
	b = binary.BigEndian.AppendUint64(b, uint64(len(kind)))
	b = append(b, kind...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(target)))
	b = append(b, target...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(args)))
	b = append(b, args...)
	b = binary.BigEndian.AppendUint64(b, occurrence)
	sum := sha256.Sum256(b)
	return [16]byte(sum[:16])
}

// callIdentity returns the StepID of the occurrence-th call of this kind,
// target and args in the dispatch, counting the occurrence in occ. The
// occurrences of a call are keyed by its StepID at occurrence 0, which
// names (kind, target, args) as surely as a StepID names a step; so the
// first call of an identity — nearly every call — hashes once.
func callIdentity(occ map[[16]byte]uint64, kind eventlog.StepKind, target string, args []byte) string {
	first := stepSum(kind, target, args, 0)
	occurrence := occ[first]
	occ[first]++
	if occurrence == 0 {
		return hex.EncodeToString(first[:])
	}
	return StepID(kind, target, args, occurrence)
}

// idempotencyKey derives a step body's idempotency key from its StepID and
// the execution running it live: retries of the step in this execution share
// it, while a fork that runs the same step live gets its own.
func idempotencyKey(id eventlog.ID, stepID string) string {
	h := sha256.Sum256(append(id[:], stepID...))
	return "fl-" + hex.EncodeToString(h[:16])
}

// structTypes caches holdsStruct by type.
var structTypes sync.Map // reflect.Type → bool

// holdsStruct reports whether decoding into t can meet a struct (whose
// unknown fields DisallowUnknownFields refuses): t is, or holds through
// pointers, slices, arrays or map values, a struct. A nil t (out is nil)
// holds none.
func holdsStruct(t reflect.Type) bool {
	if t == nil {
		return false
	}
	if v, ok := structTypes.Load(t); ok {
		return v.(bool)
	}
	h := holdsStructSeen(t, map[reflect.Type]bool{})
	structTypes.Store(t, h)
	return h
}

func holdsStructSeen(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsStructSeen(t.Elem(), seen)
	case reflect.Map:
		return holdsStructSeen(t.Key(), seen) || holdsStructSeen(t.Elem(), seen)
	}
	return false
}

// simpleJSONString decodes b when it is one JSON string of valid UTF-8
// whose escapes are the one-character ones or \u of a character outside
// the surrogates — what encoding/json writes for a string — into exactly
// what json.Unmarshal would; ok is false for anything else.
func simpleJSONString(b []byte) (s string, ok bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	esc, ascii := false, true
	for _, c := range in {
		switch {
		case c == '"' && !esc:
			return "", false
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		esc = c == '\\' && !esc
	}
	if esc || !ascii && !utf8.Valid(in) {
		return "", false
	}
	if bytes.IndexByte(in, '\\') < 0 {
		return string(in), true
	}
	// A Builder hands its bytes over as the string: one allocation, not two.
	var out strings.Builder
	out.Grow(len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			out.WriteByte(c)
			continue
		}
		i++
		switch in[i] {
		case '"', '\\', '/':
			out.WriteByte(in[i])
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			if i+4 >= len(in) {
				return "", false
			}
			r, err := strconv.ParseUint(string(in[i+1:i+5]), 16, 32)
			if err != nil || r >= 0xD800 && r < 0xE000 {
				return "", false
			}
			out.WriteRune(rune(r))
			i += 4
		default:
			return "", false
		}
	}
	return out.String(), true
}
