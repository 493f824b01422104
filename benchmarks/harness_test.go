package benchmarks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHarnessShort runs the harness's short mode, as CI does, so that no
// scenario rots: every scenario must run, check itself and produce a row
// with positive figures, and the written files must hold them. The
// scenarios' own checks hold too: a replay runs no recorded effect (DESIGN
// §8.2), forks select the workspace's checkpoint (DESIGN §5), and a live
// tool call makes the synced appends DESIGN §4 ("What must be durable
// when") allows: one for safe_to_retry, two for at_most_once.
func TestHarnessShort(t *testing.T) {
	r, err := Run(context.Background(), Config{Short: true, Duration: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1a", "1b", "1c", "1d", "2a", "2b", "2t", "2u", "3", "3m", "3r", "3s", "3sf", "4a", "4b", "5a", "5b", "6a", "6b", "7a", "7b", "9a", "9b", "10a", "11a", "11b", "12a", "15a", "15b"}
	var got []string
	for _, row := range r.Rows {
		got = append(got, row.ID)
		if row.Forkline.Value <= 0 || len(row.Forkline.Rounds) == 0 {
			t.Errorf("row %s: forkline figure %+v", row.ID, row.Forkline)
		}
		if row.Baseline != nil && row.Baseline.Value <= 0 {
			t.Errorf("row %s: baseline figure %+v", row.ID, *row.Baseline)
		}
		if (row.Baseline == nil) != (row.Ratio == nil) {
			t.Errorf("row %s: a ratio needs a baseline and a baseline a ratio", row.ID)
		}
		if (row.Target == "") != (row.Met == nil) {
			t.Errorf("row %s: target %q with met %v", row.ID, row.Target, row.Met)
		}
		if !strings.HasPrefix(row.Bench, strings.SplitN(row.Bench, "/", 2)[0]+"/") || !strings.Contains(row.Bench, "=") {
			t.Errorf("row %s: benchmark name %q is not Name/key=value", row.ID, row.Bench)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for _, row := range r.Rows {
		// DESIGN §4: the appends per call are counted, not timed, so this
		// target holds on any machine.
		if row.ID == "2b" && !*row.Met {
			t.Errorf("row 2b: %s", row.Note)
		}
	}

	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| # | scenario | forkline | baseline | ratio | target | machine |") {
		t.Errorf("RESULTS.md has no results table:\n%s", md)
	}
	for _, id := range want {
		if !strings.Contains(string(md), "\n| "+id+" | ") {
			t.Errorf("RESULTS.md has no row %s", id)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != len(r.Rows) || back.Rows[0].Forkline.Value != r.Rows[0].Forkline.Value || !back.Short {
		t.Errorf("results.json does not hold the report: %d rows", len(back.Rows))
	}
}

// TestRunSelects checks that Config.Run selects scenarios by number or name.
func TestRunSelects(t *testing.T) {
	r, err := Run(context.Background(), Config{Short: true, Duration: 20 * time.Millisecond, Run: regexp.MustCompile("^(2|durable append)$")})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, row := range r.Rows {
		ids = append(ids, row.ID)
	}
	if got := strings.Join(ids, " "); got != "1a 1b 1c 1d 2a 2b" {
		t.Fatalf("rows %s, want 1a 1b 1c 1d 2a 2b", got)
	}
}

func TestMarkdownRow(t *testing.T) {
	ratio := 0.5
	met := false
	r := &Report{Machine: Machine{Cores: 2}, Rows: []Row{{
		ID: "9", Scenario: "s", Bench: "X/k=v",
		Forkline: Figure{What: "forkline", Value: 1500, Unit: "events/s", Rounds: []float64{1400, 1500, 1600}},
		Baseline: &Figure{What: "raw", Value: 3000, Unit: "events/s", Rounds: []float64{3000}},
		Ratio:    &ratio, RatioOf: "forkline/raw", Target: "≥ 0.8", Met: &met, Load: 1.25,
	}}}
	want := "| 9 | s | 1,500 events/s | 3,000 events/s (raw) | 0.50 (forkline/raw) | ≥ 0.8 ❌ missed | 2 cores, load 1.2 |"
	if md := r.Markdown(); !strings.Contains(md, want) {
		t.Errorf("markdown lacks\n%s\nin\n%s", want, md)
	}
	if md := r.Markdown(); !strings.Contains(md, "forkline rounds [1,400, 1,500, 1,600], baseline rounds [3,000].") {
		t.Errorf("markdown lacks the rounds:\n%s", md)
	}
}

func TestHumanNumber(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{
		{0, "0"}, {0.0042, "0.0042"}, {1.234, "1.23"}, {12.34, "12.3"}, {123.4, "123"},
		{2950.4, "2,950"}, {1_234_567, "1.23M"}, {12_345_678, "12.3M"}, {-2950, "-2,950"},
	} {
		if got := humanNumber(c.x); got != c.want {
			t.Errorf("humanNumber(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// TestRowOfPairsRounds checks that a row's ratio is the median of the
// rounds' ratios, not the ratio of the medians.
func TestRowOfPairsRounds(t *testing.T) {
	fl := Figure{Value: 20, Rounds: []float64{10, 20, 40}}
	base := Figure{Value: 20, Rounds: []float64{40, 20, 10}}
	row := rowOf("x", "s", "X/k=v", fl, base, div, "f/b", "≥ 0.8", atLeast(0.8), 0)
	if got := row.RatioRounds; len(got) != 3 || got[0] != 0.25 || got[1] != 1 || got[2] != 4 {
		t.Fatalf("ratio rounds %v, want [0.25 1 4]", got)
	}
	if *row.Ratio != 1 || !*row.Met {
		t.Fatalf("ratio %v met %v, want 1 and met", *row.Ratio, *row.Met)
	}
	row = rowOf("x", "s", "X/k=v", fl, base, inv, "b/f", "≤ 0.5", atMost(0.5), 0)
	if *row.Ratio != 1 || *row.Met {
		t.Fatalf("inverse ratio %v met %v, want 1 and missed", *row.Ratio, *row.Met)
	}
}
