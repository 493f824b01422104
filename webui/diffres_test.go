package webui_test

import (
	"context"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/webui"
	"github.com/google/go-cmp/cmp"
)

// TestDiffResources: each resource of a comparison is compared with its
// driver's Differ, or gets a note saying why not; a Differ's error is a
// note, not a failure of the others.
func TestDiffResources(t *testing.T) {
	ctx := context.Background()
	d := testdriver.New()
	h, _, err := d.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile("a.txt", []byte("one")); err != nil {
		t.Fatal(err)
	}
	r1, err := d.Checkpoint(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile("a.txt", []byte("two")); err != nil {
		t.Fatal(err)
	}
	r2, err := d.Checkpoint(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	id := d.DriverID()
	head := func(ref string, covered bool) *fork.ResourceHead {
		return &fork.ResourceHead{DriverID: id, Ref: ref, CapturedAt: 9, Covered: covered}
	}
	c := &fork.Comparison{Resources: []fork.ResourceDiff{
		{Key: "changed", A: head(r1, true), B: head(r2, false)},
		{Key: "gone", A: head(r1, true), B: head("ck-missing", true)},
		{Key: "initial", A: head("", false), B: head(r2, true)},
		{Key: "other", A: head(r1, true), B: &fork.ResourceHead{DriverID: "x.v1", Ref: "r", Covered: true}},
		{Key: "same", A: head(r2, true), B: head(r2, true)},
		{Key: "solo", A: head(r1, true)},
		{Key: "unknown", A: &fork.ResourceHead{DriverID: "y.v1", Ref: "p", Covered: true}, B: &fork.ResourceHead{DriverID: "y.v1", Ref: "q", Covered: true}},
	}}
	got, err := webui.DiffResources(ctx, c, map[string]driver.Differ{id: d})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Key      string
		Compared bool
		Diff     string
		Notes    string
	}
	var rows []row
	for _, r := range got {
		rows = append(rows, row{r.Key, r.Compared, r.Difference.String(), strings.Join(r.Notes, "; ")})
	}
	want := []row{
		{"changed", true, "~ file a.txt\n    \"one\" -> \"two\"", "B's head is not covered: comparing its newest checkpoint (seq 9), not its live state"},
		{"gone", false, "", "not compared: testdriver: diff " + r1 + " ck-missing: driver: checkpoint unavailable"},
		{"initial", false, "", "A has no checkpoint of it (the initial environment as far as the log knows)"},
		{"other", false, "", "bound with different drivers (test.mem.v1, x.v1): not compared"},
		{"same", true, "", ""},
		{"solo", false, "", "only A binds it"},
		{"unknown", false, "", "no differ for driver y.v1: not compared"},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("DiffResources (-want +got):\n%s", d)
	}
}
