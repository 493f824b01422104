package benchmarks

import (
	"github.com/dustin/go-humanize"

	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Report is the outcome of a harness run: one Row per figure, and the
// machine and settings it was measured with. It is written as RESULTS.md
// ([Report.Markdown]) and results.json ([Report.JSON]).
type Report struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"` // wall time of the run
	Machine  Machine   `json:"machine"`
	Short    bool      `json:"short"`
	Duration string    `json:"duration"` // per contestant per round
	Rounds   int       `json:"rounds"`
	Sizes    Sizes     `json:"sizes"`
	Rows     []Row     `json:"rows"`
}

// Row is one line of the results table: a forkline figure beside its
// baseline from the same run, their ratio and the target.
type Row struct {
	ID       string `json:"id"`       // "1a", "3m", …
	Scenario string `json:"scenario"` // what is measured
	// Bench names the Go benchmark that measures the same thing, for
	// benchstat: "DurableAppend/system=forkline/writers=1".
	Bench    string  `json:"bench"`
	Forkline Figure  `json:"forkline"`
	Baseline *Figure `json:"baseline,omitempty"` // nil when the target is absolute
	// Ratio compares forkline with the baseline as RatioOf says; nil when
	// there is no baseline.
	Ratio       *float64  `json:"ratio,omitempty"`
	RatioOf     string    `json:"ratio_of,omitempty"`
	RatioRounds []float64 `json:"ratio_rounds,omitempty"` // each round's ratio; Ratio is their median (rowOf) or the ratio of the medians (rowOfMedians)
	Target      string    `json:"target,omitempty"`       // "≥ 0.8", "" for none
	Met         *bool     `json:"met,omitempty"`          // nil when there is no target
	Load        float64   `json:"load"`                   // 1-minute load average when the row's measurement began
	Note        string    `json:"note,omitempty"`
}

// Figure is one measured quantity: the median over the rounds, and every
// round's value.
type Figure struct {
	What   string    `json:"what"` // "forkline", "raw Pebble, synced", …
	Value  float64   `json:"value"`
	Unit   string    `json:"unit"` // "events/s", "µs", "B/event", …
	Rounds []float64 `json:"rounds,omitempty"`
}

// text formats the figure for the table; long times are shown in larger
// units (1,300,000 µs as 1.30 s).
func (f Figure) text() string {
	v, unit := f.Value, f.Unit
	if unit == "µs" && v >= 10_000 {
		v, unit = v/1000, "ms"
	}
	if unit == "ms" && v >= 10_000 {
		v, unit = v/1000, "s"
	}
	if unit == "" {
		return humanNumber(v)
	}
	return humanNumber(v) + " " + unit
}

// Machine describes where the figures were measured.
type Machine struct {
	CPU        string     `json:"cpu"`
	Cores      int        `json:"cores"`
	GOMAXPROCS int        `json:"gomaxprocs"`
	MemoryGiB  float64    `json:"memory_gib"`
	OS         string     `json:"os"`
	Kernel     string     `json:"kernel"`
	Go         string     `json:"go"`
	Disk       string     `json:"disk"` // file system and device of the temporary folder
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
}

// machineOf describes this machine; dir is where the stores live.
func machineOf(dir string) Machine {
	m := Machine{
		CPU: "unknown", Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), LoadBefore: loadAverage(),
	}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPU = v
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		if kb, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64); err == nil {
			m.MemoryGiB = math.Round(kb/(1<<20)*10) / 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Disk = diskOf(dir)
	return m
}

// procField returns the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// diskOf returns "fstype on device" for the mount that holds dir.
func diskOf(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "unknown"
	}
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	best, out := -1, "unknown"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		mp := fields[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
			best, out = len(mp), fields[2]+" on "+fields[0]
		}
	}
	return out
}

// loadAverage returns the 1, 5 and 15-minute load averages (zeros where
// /proc/loadavg cannot be read).
func loadAverage() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}

// humanNumber formats x with three significant digits and a thousands
// separator: 2,950 — 1.13M — 0.0042.
func humanNumber(x float64) string {
	switch ax := math.Abs(x); {
	case ax >= 10e6:
		return strconv.FormatFloat(x/1e6, 'f', 1, 64) + "M"
	case ax >= 1e6:
		return strconv.FormatFloat(x/1e6, 'f', 2, 64) + "M"
	case ax >= 1000:
		return humanize.Comma(int64(math.Round(x)))
	case ax >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case ax >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case ax >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case ax == 0:
		return "0"
	default:
		return strconv.FormatFloat(x, 'g', 2, 64)
	}
}

// ratioText formats a ratio: 0.94, 12.3×-style magnitudes keep three digits.
func ratioText(r float64) string {
	switch {
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64)
	case r >= 10:
		return strconv.FormatFloat(r, 'f', 1, 64)
	case r >= 0.01:
		return strconv.FormatFloat(r, 'f', 2, 64)
	default:
		return strconv.FormatFloat(r, 'g', 2, 64)
	}
}

// Markdown renders the report as RESULTS.md: a table of every row, then the
// notes and the settings, so that a reader can reproduce it.
func (r *Report) Markdown() string {
	var b strings.Builder
	mode := "full run"
	if r.Short {
		mode = "short run (CI sizes: these figures are not the published ones)"
	}
	fmt.Fprintf(&b, "# forkline benchmark results\n\n")
	fmt.Fprintf(&b, "Written by `go run ./benchmarks/cmd/bench` (%s) on %s, in %.0f s.\n", mode, r.Started.Format("2006-01-02 15:04 UTC"), r.Seconds)
	fmt.Fprintf(&b, "Each contestant was measured for %s per round, %d round(s), forkline and its baselines alternating in one process (the order reverses every round). Figures are medians over the rounds; a ratio is the median of the rounds' ratios, each of two figures measured next to each other, except where a row's note says it is the ratio of the two medians (rows timed by CPU time).\n\n", r.Duration, r.Rounds)
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %s, %d cores (GOMAXPROCS %d), %.1f GiB, %s %s, %s, %s. Load average (1/5/15 min) %s at the start, %s at the end; the machine column gives the 1-minute load when each row's measurement began.\n\n",
		m.CPU, m.Cores, m.GOMAXPROCS, m.MemoryGiB, m.OS, m.Kernel, m.Disk, m.Go, loadText(m.LoadBefore), loadText(m.LoadAfter))
	b.WriteString("| # | scenario | forkline | baseline | ratio | target | machine |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		base, ratio := "—", "—"
		if row.Baseline != nil {
			base = row.Baseline.text() + " (" + row.Baseline.What + ")"
		}
		if row.Ratio != nil {
			ratio = ratioText(*row.Ratio)
			if row.RatioOf != "" {
				ratio += " (" + row.RatioOf + ")"
			}
		}
		target := "—"
		if row.Target != "" {
			target = row.Target
			if row.Met != nil {
				if *row.Met {
					target += " ✅"
				} else {
					target += " ❌ missed"
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d cores, load %.1f |\n",
			row.ID, row.Scenario, row.Forkline.text(), base, ratio, target, m.Cores, row.Load)
	}
	b.WriteString("\n## Notes\n\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "- **%s** (`Benchmark%s`): %s", row.ID, row.Bench, roundsText(row))
		if row.Note != "" {
			b.WriteString(" " + row.Note)
		}
		b.WriteString("\n")
	}
	s := r.Sizes
	fmt.Fprintf(&b, "\n## Settings\n\nSizes: %s recorded steps replayed (3); %s and %s events for the memory comparison (3m); a %s-event coder-agent history for forks and coverage (4, 5), forked at seq %d and at its last event; %s files in the dirfs workspace (6); workflows of %d durable steps, 1 and %d at a time (7); %d writers in the wide append (1).\n\n",
		humanize.Comma(int64(s.ReplaySteps)), humanize.Comma(int64(s.MemorySmall)), humanize.Comma(int64(s.MemoryEvents)), humanize.Comma(int64(s.HistoryEvents)),
		s.ForkNear, humanize.Comma(int64(s.Files)), s.PeerSteps, s.PeerConcurrent, s.AppendWriters)
	b.WriteString("Reproduce with `go run ./benchmarks/cmd/bench` (full, seven to ten minutes) or `go run ./benchmarks/cmd/bench -short` (CI sizes, seconds). The Go benchmarks named in the notes measure the same operations: `go test -run '^$' -bench . ./benchmarks/`. benchmarks/README.md explains the scenarios and every missed target.\n")
	return b.String()
}

func loadText(l [3]float64) string {
	return fmt.Sprintf("%.2f/%.2f/%.2f", l[0], l[1], l[2])
}

// roundsText lists every round's figures of a row.
func roundsText(row Row) string {
	list := func(f Figure) string {
		parts := make([]string, len(f.Rounds))
		for i, v := range f.Rounds {
			parts[i] = humanNumber(v)
		}
		return strings.Join(parts, ", ")
	}
	s := "forkline rounds [" + list(row.Forkline) + "]"
	if row.Baseline != nil && len(row.Baseline.Rounds) > 0 {
		s += ", baseline rounds [" + list(*row.Baseline) + "]"
	}
	if len(row.RatioRounds) > 0 {
		parts := make([]string, len(row.RatioRounds))
		for i, r := range row.RatioRounds {
			parts[i] = ratioText(r)
		}
		s += ", ratio by round [" + strings.Join(parts, ", ") + "]"
	}
	return s + "."
}

// JSON renders the report as indented JSON (results.json).
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("benchmarks: encode report: %w", err)
	}
	return append(b, '\n'), nil
}

// Write writes RESULTS.md and results.json into dir.
func (r *Report) Write(dir string) error {
	js, err := r.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return fmt.Errorf("benchmarks: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "RESULTS.md"), []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("benchmarks: %w", err)
	}
	return nil
}

// rowOf builds a row comparing forkline with a baseline. The ratio is
// ratio(forkline, baseline) of each round's two figures — measured next to
// each other, so their ratio cancels most of the drift in the machine's
// load — and the row's ratio is the median of those. check decides whether
// the target is met (nil: no target).
func rowOf(id, scenario, bench string, fl, base Figure, ratio func(f, b float64) float64, ratioOf, target string, check func(float64) bool, load float64) Row {
	row := Row{ID: id, Scenario: scenario, Bench: bench, Forkline: fl, Baseline: &base, RatioOf: ratioOf, Target: target, Load: load}
	n := min(len(fl.Rounds), len(base.Rounds))
	for i := range n {
		row.RatioRounds = append(row.RatioRounds, ratio(fl.Rounds[i], base.Rounds[i]))
	}
	r := ratio(fl.Value, base.Value)
	if n > 0 {
		r = median(row.RatioRounds)
	}
	row.Ratio = &r
	if check != nil {
		met := check(r)
		row.Met = &met
	}
	return row
}

// rowOfMedians is rowOf with Ratio taken of the two sides' medians instead
// of as the median of the rounds' ratios (RatioRounds still lists those).
// It suits figures that hardly depend on what else the machine does, such
// as CPU time per call, where a round's two sides share nothing a pairing
// would cancel and each side's median is the steadier estimate.
func rowOfMedians(id, scenario, bench string, fl, base Figure, ratio func(f, b float64) float64, ratioOf, target string, check func(float64) bool, load float64) Row {
	row := rowOf(id, scenario, bench, fl, base, ratio, ratioOf, target, check, load)
	r := ratio(fl.Value, base.Value)
	row.Ratio = &r
	if check != nil {
		met := check(r)
		row.Met = &met
	}
	return row
}

// pairedRatios returns f/b of each round.
func pairedRatios(f, b []float64) []float64 {
	out := make([]float64, min(len(f), len(b)))
	for i := range out {
		out[i] = f[i] / b[i]
	}
	return out
}

// div and inv are the usual ratios: forkline over baseline, and baseline
// over forkline.
func div(f, b float64) float64 { return f / b }
func inv(f, b float64) float64 { return b / f }

func atLeast(x float64) func(float64) bool { return func(r float64) bool { return r >= x } }
func atMost(x float64) func(float64) bool  { return func(r float64) bool { return r <= x } }
