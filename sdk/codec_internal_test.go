package sdk

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// TestSimpleJSONString: the fast decoder of a recorded string result takes
// exactly what encoding/json writes for a string — every such encoding,
// not only some, so that the fallback through json.Unmarshal is the rare
// path — and whatever it takes it decodes as json.Unmarshal would. Bytes
// it must not take (an unescaped quote or control character, invalid
// UTF-8, a cut escape, a surrogate) it leaves to the fallback.
func TestSimpleJSONString(t *testing.T) {
	t.Run("cases", func(t *testing.T) {
		for _, c := range []struct {
			in   string
			want string
			ok   bool
		}{
			{`""`, "", true},
			{`"abc"`, "abc", true},
			{`"a b~"`, "a b~", true},
			{`"é ✓ 日本 😀"`, "é ✓ 日本 😀", true},
			{"\"\xc3\x80\"", "\u00c0", true},
			{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t", true},
			{`"\u003c\u0026\u00e9\u2028\uFFFD"`, "<&é\u2028\ufffd", true},
			{`"a\\"`, `a\`, true},
			{`"\ud7ff\ue000\uffff"`, "\ud7ff\ue000\uffff", true},

			{``, "", false},
			{`"`, "", false},
			{`abc"`, "", false},
			{`"abc`, "", false},
			{`x"abc"`, "", false},
			{`"a"b"`, "", false},
			{`"a\"`, "", false},
			{"\"a\x1fb\"", "", false},
			{"\"a\x00\"", "", false},
			{"\"\x80\"", "", false},
			{"\"\xff\"", "", false},
			{"\"a\xc3\"", "", false},
			{`"\x"`, "", false},
			{`"\u12"`, "", false},
			{`"\u123"`, "", false},
			{`"ab\u123"`, "", false},
			{`"\u12g4"`, "", false},
			{`"\ud83d\ude00"`, "", false},
			{`"\ud800"`, "", false},
			{`"\udfff"`, "", false},
		} {
			// Capacity cut to the length: a read past the closing quote
			// panics instead of finding spare bytes.
			b := []byte(c.in)
			got, ok := simpleJSONString(b[:len(b):len(b)])
			if got != c.want || ok != c.ok {
				t.Errorf("simpleJSONString(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
			}
		}
	})
	t.Run("every string encoding/json writes", rapid.MakeCheck(func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := simpleJSONString(b); !ok || got != s {
			t.Fatalf("encoding/json's %s: got %q, %v; want %q, true", b, got, ok, s)
		}
	}))
	t.Run("as json.Unmarshal decodes", rapid.MakeCheck(func(t *rapid.T) {
		in := rapid.SliceOf(rapid.SampledFrom([]byte("ab\"\\/bfnrtu0123456789abcdefABCDEFd8\x00\x1f\x7f\x80\xc3\xe2\xff"))).Draw(t, "in")
		b := append(append([]byte{'"'}, in...), '"')
		got, ok := simpleJSONString(b[:len(b):len(b)])
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil || got != want {
			t.Fatalf("simpleJSONString(%q) = %q; json.Unmarshal gives %q, %v", b, got, want, err)
		}
	}))
}
