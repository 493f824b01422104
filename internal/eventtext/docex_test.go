package eventtext

import (
	"os"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// The example lines of the package documentation parse into valid events,
// one per kind.
func TestDocExampleParses(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "//\t"); ok {
			lines = append(lines, rest)
		}
	}
	evs, err := Parse(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := make(map[string]bool)
	for _, ev := range evs {
		if err := ev.Validate(); err != nil {
			t.Error(err)
		}
		kinds[ev.Kind().String()] = true
	}
	if want := len(eventlog.Kinds()); len(kinds) != want {
		t.Errorf("the example shows %d event kinds, want all %d", len(kinds), want)
	}
}
