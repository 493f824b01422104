package eventtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one word of a line: a positional value, or key=value.
type token struct {
	key    string // "" for a positional value
	val    string
	quoted bool // val was written as a quoted string
}

// lex splits one line into tokens. The line has no newline.
func lex(line string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(line) {
			r, n := utf8.DecodeRuneInString(line[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		if i == len(line) {
			return toks, nil
		}
		var t token
		if k := identEnd(line[i:]); k > 0 && k < len(line)-i && line[i+k] == '=' {
			t.key = line[i : i+k]
			i += k + 1
		}
		if i < len(line) && (line[i] == '"' || line[i] == '`') {
			q, err := strconv.QuotedPrefix(line[i:])
			if err != nil {
				return nil, fmt.Errorf("column %d: bad quoted string", i+1)
			}
			v, err := strconv.Unquote(q)
			if err != nil {
				return nil, fmt.Errorf("column %d: bad quoted string: %v", i+1, err)
			}
			t.val, t.quoted = v, true
			i += len(q)
			if i < len(line) {
				if r, _ := utf8.DecodeRuneInString(line[i:]); !unicode.IsSpace(r) {
					return nil, fmt.Errorf("column %d: want a space after a quoted string", i+1)
				}
			}
		} else {
			start := i
			for i < len(line) {
				r, n := utf8.DecodeRuneInString(line[i:])
				if unicode.IsSpace(r) {
					break
				}
				i += n
			}
			t.val = line[start:i]
		}
		toks = append(toks, t)
	}
}

// identEnd returns the length of the key ([a-z_]+) that starts s, or 0.
func identEnd(s string) int {
	n := 0
	for n < len(s) && (s[n] >= 'a' && s[n] <= 'z' || s[n] == '_') {
		n++
	}
	return n
}

// quote returns s as a bare word if it reads back as itself, otherwise as a
// quoted string: in backquotes when that is clearer (JSON), else Go-quoted.
func quote(s string) string {
	if bare(s) {
		return s
	}
	return quoted(s)
}

// quoted returns s as a quoted string: in backquotes when that is clearer
// (JSON), else Go-quoted.
func quoted(s string) string {
	if strings.ContainsRune(s, '"') && strconv.CanBackquote(s) {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// bare reports whether s can be written unquoted: it is not empty, it does
// not start like a seq prefix, a comment or a quoted string, and it has no
// space, quote, '=' or unprintable rune.
func bare(s string) bool {
	if s == "" || s[0] == '@' || s[0] == '#' || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' || r == '`' || r == '=' {
			return false
		}
	}
	return true
}
