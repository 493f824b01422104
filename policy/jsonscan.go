package policy

import (
	"strconv"
	"unicode/utf8"
)

// A small JSON scanner for a bundle's args predicates: it finds the value
// at a dotted path in a call's args and compares it, reading the bytes in
// place, so that evaluating a predicate allocates nothing. Malformed JSON
// finds nothing: a predicate on it does not match.

// maxScanDepth bounds the nesting the scanner walks through.
const maxScanDepth = 10000

// skipWS returns the index of the first non-space byte of b at or after i.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at
// b[i] == '"', and whether it has an escape.
func stringEnd(b []byte, i int) (end int, escaped, ok bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, true
		}
	}
	return 0, false, false
}

// valueEnd returns the index just past the JSON value that starts at b[i]
// (no leading space). It checks strings and the nesting of brackets, not
// the rest of JSON's grammar: what it accepts is compared as JSON later.
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		end, _, ok := stringEnd(b, i)
		return end, ok
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				if depth++; depth > maxScanDepth {
					return 0, false
				}
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, j > i
		}
		j++
	}
	return j, j > i
}

// lookup returns the value at path in the JSON object doc: each segment
// names an object member, or, in an array, an element by its decimal
// index. It reports false when doc is not an object or the path is not
// there.
func lookup(doc []byte, path []string) ([]byte, bool) {
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false
	}
	end, ok := valueEnd(doc, i)
	if !ok {
		return nil, false
	}
	v := doc[i:end]
	for _, seg := range path {
		switch v[0] {
		case '{':
			v, ok = member(v, seg)
		case '[':
			v, ok = element(v, seg)
		default:
			return nil, false
		}
		if !ok {
			return nil, false
		}
	}
	return v, true
}

// member returns the value of obj's first member named name.
func member(obj []byte, name string) ([]byte, bool) {
	i := skipWS(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		kend, esc, ok := stringEnd(obj, i)
		if !ok {
			return nil, false
		}
		key := obj[i:kend]
		i = skipWS(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return nil, false
		}
		i = skipWS(obj, i+1)
		vend, ok := valueEnd(obj, i)
		if !ok {
			return nil, false
		}
		if stringEquals(key, esc, name) {
			return obj[i:vend], true
		}
		i = skipWS(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = skipWS(obj, i+1)
		}
	}
	return nil, false
}

// element returns arr's element at the decimal index seg.
func element(arr []byte, seg string) ([]byte, bool) {
	n, err := strconv.Atoi(seg)
	if err != nil || n < 0 || seg[0] == '+' {
		return nil, false
	}
	i := skipWS(arr, 1)
	for k := 0; i < len(arr) && arr[i] != ']'; k++ {
		end, ok := valueEnd(arr, i)
		if !ok {
			return nil, false
		}
		if k == n {
			return arr[i:end], true
		}
		i = skipWS(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipWS(arr, i+1)
		}
	}
	return nil, false
}

// elements calls f with each element of the JSON array arr until f
// returns true, and reports whether it did.
func elements(arr []byte, f func([]byte) bool) bool {
	i := skipWS(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		end, ok := valueEnd(arr, i)
		if !ok {
			return false
		}
		if f(arr[i:end]) {
			return true
		}
		i = skipWS(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipWS(arr, i+1)
		}
	}
	return false
}

// stringEquals reports whether the JSON string raw (quotes included; esc
// says it has an escape) decodes to s.
func stringEquals(raw []byte, esc bool, s string) bool {
	if !esc {
		return string(raw[1:len(raw)-1]) == s
	}
	var buf [128]byte
	d, ok := unquote(buf[:0], raw)
	return ok && string(d) == s
}

// unquote appends the decoded JSON string raw (quotes included) to dst.
func unquote(dst, raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return dst, false
	}
	s := raw[1 : len(raw)-1]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i++; i >= len(s) {
			return dst, false
		}
		switch s[i] {
		case '"', '\\', '/':
			dst = append(dst, s[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s, i+1)
			if !ok {
				return dst, false
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo, ok := hex4(s, i+3); ok && lo >= 0xDC00 && lo < 0xE000 {
					r = (r-0xD800)<<10 + (lo - 0xDC00) + 0x10000
					i += 6
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
	}
	return dst, true
}

// hex4 reads four hex digits of s at i.
func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
