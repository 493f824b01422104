package eventlog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

func TestParseTraceParent(t *testing.T) {
	tp, err := eventlog.ParseTraceParent(sampleTraceParent)
	if err != nil {
		t.Fatal(err)
	}
	if tp.TraceID[0] != 0x4b || tp.TraceID[15] != 0x36 || tp.SpanID[0] != 0xb7 || tp.SpanID[7] != 0x31 || tp.Flags != 1 {
		t.Errorf("ParseTraceParent = %x %x %x", tp.TraceID, tp.SpanID, tp.Flags)
	}
	if got := tp.String(); got != sampleTraceParent {
		t.Errorf("String() = %q, want %q", got, sampleTraceParent)
	}
	for _, bad := range []string{
		"",
		"00",
		strings.Replace(sampleTraceParent, "00-", "01-", 1), // a version forkline does not write
		strings.Replace(sampleTraceParent, "-01", "-1", 1),
		sampleTraceParent + "-extra",
		strings.Replace(sampleTraceParent, "4b", "4B", 1),
		strings.Replace(sampleTraceParent, "4b", "4g", 1),
		strings.Replace(sampleTraceParent, "-b7", "_b7", 1),
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-\xff\xff",
	} {
		if _, err := eventlog.ParseTraceParent(bad); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("ParseTraceParent(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
