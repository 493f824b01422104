package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/forkline/forkline/internal/pgtest"
)

// TestShort runs the scenarios at the short sizes against the test
// server (skipped without one): rows 8d, 8e and 8f are printed, each with
// its figures, so that the comparison cannot rot.
func TestShort(t *testing.T) {
	url := pgtest.URL(t)
	var out bytes.Buffer
	if err := run([]string{"-short", "-duration", "50ms", "-postgres", url}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"| 8d |", "| 8e |", "| 8f |", "- **8d**", "- **8e**", "- **8f**"} {
		if !strings.Contains(out.String(), id) {
			t.Errorf("output lacks %q:\n%s", id, out.String())
		}
	}
}

// TestBadFlags: an argument the command does not take is refused.
func TestBadFlags(t *testing.T) {
	if err := run([]string{"extra"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Fatalf("run(extra) = %v, want an unexpected-arguments error", err)
	}
}
