package sdk

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// The canonical form of args (DESIGN §4) was defined by decoding JSON into
// map[string]any (numbers as json.Number) and encoding it again without
// HTML escaping: canonicalJSON does exactly that. appendCanonical produces
// the same bytes in one pass over the JSON text, without building the
// value: it copies numbers and literals as written, re-escapes a string
// only when it holds an escape or a character the encoder would escape,
// and sorts an object's members only when they are out of order (the last
// of duplicate keys winning, as in a map). Whatever it does not expect —
// invalid JSON, nesting deeper than encoding/json allows — makes it give
// up, and canonicalJSON's answer (its error included) is used instead, so
// the canonical form of every input is the one it always was.

// maxCanonicalDepth is encoding/json's nesting limit: deeper input is
// left to canonicalJSON, which refuses it.
const maxCanonicalDepth = 10000

// canonicalize returns the canonical form of the JSON document b.
func canonicalize(b []byte) ([]byte, error) {
	c := canonicalizer{in: b}
	out, ok := c.document(make([]byte, 0, len(b)))
	if !ok {
		return canonicalJSON(b)
	}
	return out, nil
}

// canonicalizer is one pass of appendCanonical over in.
type canonicalizer struct {
	in      []byte
	pos     int
	depth   int
	scratch []byte // reordering an object's members
}

// document appends the canonical form of the whole input; ok is false
// when the input is not what the fast path handles.
func (c *canonicalizer) document(dst []byte) ([]byte, bool) {
	c.space()
	dst, ok := c.value(dst)
	if !ok {
		return nil, false
	}
	c.space()
	return dst, c.pos == len(c.in)
}

func (c *canonicalizer) space() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at c.pos.
func (c *canonicalizer) value(dst []byte) ([]byte, bool) {
	if c.pos >= len(c.in) {
		return nil, false
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(dst)
	case b == '[':
		return c.array(dst)
	case b == '"':
		dst, _, ok := c.str(dst)
		return dst, ok
	case b == 't':
		return c.literal(dst, "true")
	case b == 'f':
		return c.literal(dst, "false")
	case b == 'n':
		return c.literal(dst, "null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number(dst)
	}
	return nil, false
}

func (c *canonicalizer) literal(dst []byte, lit string) ([]byte, bool) {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
		return nil, false
	}
	c.pos += len(lit)
	return append(dst, lit...), true
}

// number copies a number as written, after checking JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *canonicalizer) number(dst []byte) ([]byte, bool) {
	in, i := c.in, c.pos
	digits := func() bool {
		start := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case !digits():
		return nil, false
	}
	if i < len(in) && in[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	dst = append(dst, in[c.pos:i]...)
	c.pos = i
	return dst, true
}

// str appends the canonical form of the string at c.pos and returns its
// decoded value (sharing the input's memory when it needs no decoding).
func (c *canonicalizer) str(dst []byte) ([]byte, []byte, bool) {
	in := c.in
	start := c.pos
	i := start + 1
	plain := true
	for {
		if i >= len(in) {
			return nil, nil, false
		}
		b := in[i]
		if b == '"' {
			break
		}
		switch {
		case b == '\\':
			plain = false
			i += 2
			continue
		case b < 0x20:
			return nil, nil, false
		case b >= utf8.RuneSelf:
			plain = false
		}
		i++
	}
	tok := in[start : i+1]
	c.pos = i + 1
	if plain {
		// ASCII without escapes: the encoder writes it as it is.
		return append(dst, tok...), tok[1 : len(tok)-1], true
	}
	raw := tok[1 : len(tok)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) && !bytes.Contains(raw, []byte("\u2028")) && !bytes.Contains(raw, []byte("\u2029")) {
		// Valid UTF-8 without escapes or separators: written as it is.
		return append(dst, tok...), raw, true
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return nil, nil, false
	}
	return appendJSONString(dst, s), []byte(s), true
}

// member is one member of an object being canonicalized: its decoded key
// and where its `"key":value` was written in dst.
type member struct {
	key        []byte
	start, end int
}

func (c *canonicalizer) object(dst []byte) ([]byte, bool) {
	if c.depth++; c.depth > maxCanonicalDepth {
		return nil, false
	}
	defer func() { c.depth-- }()
	c.pos++ // {
	dst = append(dst, '{')
	open := len(dst)
	var stack [8]member
	members := stack[:0]
	sorted := true
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		return append(dst, '}'), true
	}
	for {
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return nil, false
		}
		if len(members) > 0 {
			dst = append(dst, ',')
		}
		start := len(dst)
		var key []byte
		var ok bool
		if dst, key, ok = c.str(dst); !ok {
			return nil, false
		}
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return nil, false
		}
		c.pos++
		dst = append(dst, ':')
		c.space()
		if dst, ok = c.value(dst); !ok {
			return nil, false
		}
		if n := len(members); n > 0 && bytes.Compare(members[n-1].key, key) >= 0 {
			sorted = false
		}
		members = append(members, member{key: key, start: start, end: len(dst)})
		c.space()
		if c.pos >= len(c.in) {
			return nil, false
		}
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] != ',' {
			return nil, false
		}
		c.pos++
	}
	if !sorted {
		dst = c.reorder(dst, open, members)
	}
	return append(dst, '}'), true
}

// reorder rewrites the members written at dst[open:] in key order, keeping
// only the last of duplicate keys (as decoding into a map does).
func (c *canonicalizer) reorder(dst []byte, open int, members []member) []byte {
	// Stable, so that among equal keys the last written stays last.
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.scratch = append(c.scratch[:0], dst[open:]...)
	dst = dst[:open]
	for i, m := range members {
		if i+1 < len(members) && bytes.Equal(members[i+1].key, m.key) {
			continue // a later duplicate wins
		}
		if len(dst) > open {
			dst = append(dst, ',')
		}
		dst = append(dst, c.scratch[m.start-open:m.end-open]...)
	}
	return dst
}

func (c *canonicalizer) array(dst []byte) ([]byte, bool) {
	if c.depth++; c.depth > maxCanonicalDepth {
		return nil, false
	}
	defer func() { c.depth-- }()
	c.pos++ // [
	dst = append(dst, '[')
	c.space()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		return append(dst, ']'), true
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		c.space()
		var ok bool
		if dst, ok = c.value(dst); !ok {
			return nil, false
		}
		c.space()
		if c.pos >= len(c.in) {
			return nil, false
		}
		if c.in[c.pos] == ']' {
			c.pos++
			return append(dst, ']'), true
		}
		if c.in[c.pos] != ',' {
			return nil, false
		}
		c.pos++
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string without
// HTML escaping (its appendString with escapeHTML false).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
