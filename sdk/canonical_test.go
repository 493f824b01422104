package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// canonicalSeeds are JSON documents whose canonical form the one-pass
// canonicalizer must agree on with the decode–encode definition.
var canonicalSeeds = []string{
	`null`, `true`, `false`, `0`, `-0`, `1.50`, `1E3`, `-12.5e-7`, `123456789012345678901234567890`,
	`""`, `"plain"`, `"<a&b>"`, `"\u003ca\u0026b\u003e"`, `"\u0041\/\u00e9"`, `"x\ud83d\ude00"`, `"\ud800"`,
	`"tab\t\"q\" \\ \b\f\r\n\u0001\u001f\u007f"`, "\"raw \u2028 \u2029 sep\"", `"\u2028"`, "\"é ✓ 日本\"",
	`[]`, `{}`, `[ 1 , [ ] , { } ]`, `{"b":1,"a":2}`, `{"a":1,"b":2}`, `{"dup":1,"dup":2}`, `{"dup":2,"a":0,"dup":1}`,
	`{"b":{"d":[1,{"z":null,"y":true}],"c":"x"},"a":[]}`, ` { "k" : "v" } `, `{"\u0062":1,"a":2}`, `{"é":1,"e":2,"z":3}`,
	`{"a":1}x`, `{"a":}`, `[1,]`, `{"a" 1}`, `01`, `1.`, `-`, `"unterminated`, `tru`, `{"a":1,,"b":2}`, ``, `  `,
	`"bad \x escape"`, "\"ctl \x01\"", "\"\xff\"", "\"\x80\"", "\"a\x80\"", `1 2`, `{"a":[1,2}`,
	// Cut short where a scanner that read one byte too far would panic.
	`1e`, `1e+`, `-1.`, `[1e`, `{`, `{ `, `{"a"`, `{"a":`, `{"a":1,`, `{"a":1`, `[`, `[1`, `[1,`, `"`, `"\`,
}

// TestCanonicalizeOracle: the one-pass canonicalizer gives exactly the
// bytes (or the error) of the decode–encode definition, canonicalJSON —
// on hand-picked documents and on generated ones (DESIGN §4: the
// canonical form of args, and so every StepID, must not change).
func TestCanonicalizeOracle(t *testing.T) {
	for _, in := range canonicalSeeds {
		checkCanonical(t, []byte(in))
	}
	checkCanonical(t, []byte(strings.Repeat("[", maxCanonicalDepth+1)+strings.Repeat("]", maxCanonicalDepth+1)))
	checkCanonical(t, []byte(strings.Repeat("[", maxCanonicalDepth)+strings.Repeat("]", maxCanonicalDepth)))
	rapid.Check(t, func(rt *rapid.T) {
		v := jsonValue(3).Draw(rt, "value")
		b, err := json.Marshal(v)
		if err != nil {
			rt.Fatal(err)
		}
		checkCanonical(rt, b)
		if _, ok := v.(string); ok {
			var got, want string
			if err := decodeValue(b, &got); err != nil || json.Unmarshal(b, &want) != nil || got != want {
				rt.Fatalf("decode %q: %q, %v; json.Unmarshal: %q", b, got, err, want)
			}
		}
		// The same value as written by a person: spaces and reordered keys.
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, " ", "  "); err != nil {
			rt.Fatal(err)
		}
		checkCanonical(rt, ind.Bytes())
	})
}

// TestCanonicalizeFastPath: the one-pass canonicalizer gives up exactly on
// what is not valid JSON (nesting deeper than encoding/json allows
// included) and handles every valid document itself. A fast path that gave
// up on more would still give canonicalJSON's bytes — TestCanonicalizeOracle
// cannot see it — but every such args would take the decode–encode path it
// exists to avoid.
func TestCanonicalizeFastPath(t *testing.T) {
	for _, in := range canonicalSeeds {
		checkFastPath(t, []byte(in))
	}
	checkFastPath(t, []byte(strings.Repeat("[", maxCanonicalDepth+1)+strings.Repeat("]", maxCanonicalDepth+1)))
	checkFastPath(t, []byte(strings.Repeat("{\"a\":", maxCanonicalDepth)+"1"+strings.Repeat("}", maxCanonicalDepth)))
	checkFastPath(t, []byte(strings.Repeat("{\"a\":", maxCanonicalDepth+1)+"1"+strings.Repeat("}", maxCanonicalDepth+1)))
	checkFastPath(t, []byte(strings.Repeat("[", maxCanonicalDepth)+strings.Repeat("]", maxCanonicalDepth)))
	// Many siblings at depth one: only a depth counted back down on the way
	// out stays under the limit.
	checkFastPath(t, []byte("["+strings.Repeat("{},", maxCanonicalDepth)+"{}]"))
	checkFastPath(t, []byte("["+strings.Repeat("[],", maxCanonicalDepth)+"[]]"))
	rapid.Check(t, func(rt *rapid.T) {
		b, err := json.Marshal(jsonValue(3).Draw(rt, "value"))
		if err != nil {
			rt.Fatal(err)
		}
		checkFastPath(rt, b)
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, "\t", " "); err != nil {
			rt.Fatal(err)
		}
		checkFastPath(rt, ind.Bytes())
	})
	// Short strings of JSON's punctuation, digits and letters: mostly
	// invalid, some valid, many one byte away from valid.
	rapid.Check(t, func(rt *rapid.T) {
		checkFastPath(rt, []byte(rapid.StringMatching(`[\[\]{}",:0-9eE.+\- tnrulfas\\]{0,10}`).Draw(rt, "text")))
	})
}

// TestAppendJSONString: appendJSONString writes any string as
// encoding/json's encoder does without HTML escaping — invalid UTF-8 (as
// \ufffd), control characters, quotes, backslashes and the line separators
// included. The canonicalizer passes it only decoded, valid strings; the
// function's contract is wider, and this holds it to all of it.
func TestAppendJSONString(t *testing.T) {
	check := func(t interface{ Errorf(string, ...any) }, s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Errorf("encode %q: %v", s, err)
			return
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := appendJSONString([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("appendJSONString(%q) = %q, want %q", s, got[1:], want)
		}
	}
	for _, s := range []string{"", "plain", "\x80", "a\x80b", "\xff\xfe", "\xe2\x80", "é\xc3", "\u2028\u2029", "<&>", "\"\\\b\f\n\r\t\x00\x1f\x7f", "日本😀"} {
		check(t, s)
	}
	rapid.Check(t, func(rt *rapid.T) {
		check(rt, string(rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(rt, "bytes")))
	})
}

func checkFastPath(t interface {
	Helper()
	Errorf(string, ...any)
}, in []byte) {
	t.Helper()
	c := canonicalizer{in: in}
	if _, ok := c.document(nil); ok != json.Valid(in) {
		t.Errorf("fast path on %q: ok %v, but json.Valid says %v", in, ok, json.Valid(in))
	}
}

func checkCanonical(t interface {
	Helper()
	Errorf(string, ...any)
}, in []byte) {
	t.Helper()
	want, werr := canonicalJSON(in)
	got, gerr := canonicalize(in)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() || !bytes.Equal(got, want) {
		t.Errorf("canonical form of %q:\n got %q, %v\nwant %q, %v", in, got, gerr, want, werr)
	}
}

// jsonValue generates values that encode as JSON: strings with escapes,
// HTML, separators and non-ASCII, numbers, maps with keys in any order.
func jsonValue(depth int) *rapid.Generator[any] {
	str := rapid.OneOf(
		rapid.StringMatching(`[a-z<>&"\\ \t\n\x01\x7f]{0,6}`),
		rapid.SampledFrom([]string{"é", "✓", "\u2028", "\u2029", "日本", "😀", "\uFFFD", "a\u2028b", "", "k", "K", "_"}),
		rapid.String(),
	)
	leaf := rapid.OneOf(
		rapid.Map(str, func(s string) any { return s }),
		rapid.Map(rapid.Int(), func(n int) any { return n }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
		rapid.Map(rapid.SampledFrom([]string{"1.50", "-0", "1E3", "123456789012345678901234567890", "0.000"}), func(s string) any { return json.Number(s) }),
	)
	if depth == 0 {
		return leaf
	}
	inner := jsonValue(depth - 1)
	return rapid.OneOf(
		leaf,
		rapid.Map(rapid.SliceOfN(inner, 0, 4), func(xs []any) any { return xs }),
		rapid.Map(rapid.MapOfN(str, inner, 0, 5), func(m map[string]any) any { return m }),
	)
}

// TestDecodeValueOracle: decodeValue's fast paths decode exactly what a
// json.Decoder with DisallowUnknownFields decodes, errors included.
func TestDecodeValueOracle(t *testing.T) {
	type withField struct{ A int }
	for _, in := range append(canonicalSeeds, `"a\"b"`, `"é"`, "\"\xff\"", `" x "`, `"x" `, `{"A":1}`, `{"A":1,"B":2}`, `[1,2]`, `[{"A":1,"C":1}]`,
		`"\u0041\u00e9\u2028\n\t\r\b\f\/\\\""`, `"\ud83d\ude00"`, `"\ud800"`, `"\u12"`, `"\u12G4"`, `"\x"`, `"a\"`, `"\u+123"`, `"\u-123"`) {
		for _, mk := range []func() any{
			func() any { return new(string) }, func() any { return new(any) }, func() any { return new(int) },
			func() any { return new([]int) }, func() any { return new(map[string]any) },
			func() any { return new(withField) }, func() any { return new([]withField) },
		} {
			got, want := mk(), mk()
			gerr := decodeValue([]byte(in), got)
			dec := json.NewDecoder(bytes.NewReader([]byte(in)))
			dec.DisallowUnknownFields()
			werr := dec.Decode(want)
			if werr == nil && dec.More() {
				werr = errors.New("trailing data after JSON value")
			}
			if (gerr == nil) != (werr == nil) || werr != nil && gerr.Error() != werr.Error() {
				t.Errorf("decode %q into %T: error %v, want %v", in, got, gerr, werr)
				continue
			}
			if werr == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("decode %q into %T: %#v, want %#v", in, got, got, want)
			}
		}
	}
}
