package sdk

import (
	"strings"
	"testing"
)

// TestShortArgs: args an error quotes are cut to maxShortArgs bytes, and
// back to a rune boundary, with an ellipsis; args that fit are whole, and
// none are "()".
func TestShortArgs(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct {
		in, want string
	}{
		{"", "()"},
		{`"x"`, `"x"`},
		{a(maxShortArgs), a(maxShortArgs)},
		{a(maxShortArgs + 1), a(maxShortArgs) + "…"},
		{a(maxShortArgs-1) + "é", a(maxShortArgs-1) + "…"},
		{a(maxShortArgs-2) + "日x", a(maxShortArgs-2) + "…"},
		{a(maxShortArgs) + "é", a(maxShortArgs) + "…"},
		{strings.Repeat("\x80", maxShortArgs+20), "…"}, // no rune start at all (not UTF-8)
	} {
		if got := shortArgs([]byte(c.in)); got != c.want {
			t.Errorf("shortArgs(%d bytes %q) = %q, want %q", len(c.in), c.in, got, c.want)
		}
	}
}
