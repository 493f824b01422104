package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime/pprof"
	"slices"
	"time"
)

// Config says how large and how long a harness run is. The zero value is a
// full run with the defaults below.
type Config struct {
	// Short selects the small sizes CI runs (at most 10,000 events, 500
	// files) and, unless set, a Duration of 100ms and one Round.
	// Default false: the full sizes of the scenarios (1,000,000 events,
	// 10,000 files).
	Short bool
	// Duration is how long one contestant is measured in one round.
	// Default 2s (short: 100ms). An operation that takes longer (copying a
	// 1,000,000-event prefix) runs once.
	Duration time.Duration
	// Rounds is how many times every contestant of a scenario is measured,
	// forkline and baselines alternating (the order reverses every round),
	// so that machine noise hits both; the reported figure is the median.
	// Default 5 (short: 1). Scenario 2t measures ten times the rounds, each
	// a tenth of Duration.
	Rounds int
	// Run, when not nil, selects the scenarios whose ID or name it matches
	// (for example "^3" or "replay"). Default: every scenario.
	Run *regexp.Regexp
	// TempDir is the folder on-disk stores and workspaces are made in; it
	// must be on a real disk, since most figures are bounded by fsync.
	// Default "": os.TempDir().
	TempDir string
	// Postgres is the URL of the PostgreSQL server of scenario 8, which
	// works in a schema of its own and drops it. Default "": scenario 8 is
	// skipped.
	Postgres string
	// Progress receives one line per measurement. Default nil: silent.
	Progress io.Writer
	// HeapProfile, when set, receives the heap profile taken when the
	// handler of scenario 3m's large replay returns (after a collection):
	// what Run holds then, by allocation site. Default nil: none.
	HeapProfile io.Writer
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = 2 * time.Second
		if c.Short {
			c.Duration = 100 * time.Millisecond
		}
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
		if c.Short {
			c.Rounds = 1
		}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// Sizes are the workload sizes of a run.
type Sizes struct {
	ReplaySteps       int `json:"replay_steps"`       // scenario 3: recorded steps replayed by Run
	MemoryEvents      int `json:"memory_events"`      // scenario 3m: events of the large replay
	MemorySmall       int `json:"memory_small"`       // scenario 3m: events of the small replay it is compared with
	ResumeEvents      int `json:"resume_events"`      // scenario 3s: events of the execution resumed
	HistoryEvents     int `json:"history_events"`     // scenarios 4 and 5: events of the coder-agent history
	ForkNear          int `json:"fork_near"`          // scenario 4: the early fork point
	Files             int `json:"files"`              // scenario 6: files in the workspace
	PeerSteps         int `json:"peer_steps"`         // scenario 7: durable steps per workflow
	AppendWriters     int `json:"append_writers"`     // scenario 1: writers of the wide case
	PeerConcurrent    int `json:"peer_concurrency"`   // scenario 7: concurrent workflows of the wide case
	ConversationTurns int `json:"conversation_turns"` // scenario 9: LLM calls of one conversation
}

// sizesFor returns the sizes of the scenarios, or the small ones of
// a short run.
func sizesFor(short bool) Sizes {
	if short {
		return Sizes{ReplaySteps: 2_000, MemoryEvents: 10_000, MemorySmall: 2_000, ResumeEvents: 10_000, HistoryEvents: 10_000,
			ForkNear: 10, Files: 500, PeerSteps: 10, AppendWriters: 64, PeerConcurrent: 16, ConversationTurns: 30}
	}
	return Sizes{ReplaySteps: 100_000, MemoryEvents: 1_000_000, MemorySmall: 100_000, ResumeEvents: 1_000_000, HistoryEvents: 1_000_000,
		ForkNear: 10, Files: 10_000, PeerSteps: 50, AppendWriters: 64, PeerConcurrent: 16, ConversationTurns: 200}
}

// env is what a scenario runs with.
type env struct {
	ctx   context.Context
	cfg   Config
	sizes Sizes
	dir   string // this run's temporary folder, removed at the end

	hist    *historyFixture // built by the first scenario that needs it
	closers []func() error  // run at the end of the run, last first
}

// close runs the closers.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		_ = e.closers[i]()
	}
	e.closers = nil
}

// logf writes a progress line.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.cfg.Progress, format+"\n", args...)
}

// mkdir makes a fresh folder under the run's temporary folder.
func (e *env) mkdir(name string) (string, error) {
	return os.MkdirTemp(e.dir, name+"-")
}

// scenario is one numbered scenario of the issue: it sets up its stores,
// measures its contestants and returns its rows.
type scenario struct {
	id   string // "1", "3m", …
	name string // "durable append"
	run  func(e *env) ([]Row, error)
}

// scenarios lists every scenario in the order of the issue.
func scenarios() []scenario {
	return []scenario{
		{"1", "durable append", runAppend},
		{"2", "live tool call", runToolCall},
		{"2t", "tracing overhead", runTracing},
		{"3", "replay", runReplay},
		{"3m", "replay memory", runMemory},
		{"3r", "replay with retries", runReplayRetried},
		{"3s", "resume", runResume},
		{"4", "fork", runFork},
		{"5", "coverage", runCoverage},
		{"6", "dirfs", runDirfs},
		{"7", "peer engine", runPeer},
		{"8", "postgres", runPostgres},
		{"9", "conversation storage", runConversation},
		{"10", "messages", runMessages},
		{"11", "streaming", runStream},
		{"12", "queue claims", runQueue},
		{"15", "lighter durability", runDurability},
	}
}

// Run runs the selected scenarios with their baselines, in one process, and
// returns the report. A scenario that fails stops the run: a figure that
// could not be measured is not printed as a number.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	dir, err := os.MkdirTemp(cfg.TempDir, "forkline-bench-")
	if err != nil {
		return nil, fmt.Errorf("benchmarks: %w", err)
	}
	defer os.RemoveAll(dir)
	e := &env{ctx: ctx, cfg: cfg, sizes: sizesFor(cfg.Short), dir: dir}
	defer e.close()
	r := &Report{
		Started: time.Now().UTC().Truncate(time.Second),
		Machine: machineOf(dir),
		Short:   cfg.Short, Duration: cfg.Duration.String(), Rounds: cfg.Rounds, Sizes: e.sizes,
	}
	start := time.Now()
	for _, s := range scenarios() {
		if cfg.Run != nil && !cfg.Run.MatchString(s.id) && !cfg.Run.MatchString(s.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e.logf("== %s. %s", s.id, s.name)
		began := time.Now()
		rows, err := s.run(e)
		if err != nil {
			return nil, fmt.Errorf("benchmarks: scenario %s (%s): %w", s.id, s.name, err)
		}
		e.logf("   (%s)", time.Since(began).Round(100*time.Millisecond))
		r.Rows = append(r.Rows, rows...)
	}
	r.Seconds = math.Round(time.Since(start).Seconds()*10) / 10
	r.Machine.LoadAfter = loadAverage()
	return r, nil
}

// An op does one unit of a contestant's work (or a batch of them) and
// returns how many units it did and how long the measured part took; the
// rest of its time (cleanup, setup of the next unit) is not counted.
type op func() (units float64, took time.Duration, err error)

// contestant is one side of a comparison.
type contestant struct {
	name string
	op   op
}

// measure runs o again and again until d of wall time has passed (at least
// once) and returns the units per second of measured time.
func measure(ctx context.Context, d time.Duration, o op) (float64, error) {
	var units float64
	var took time.Duration
	for start := time.Now(); took == 0 || time.Since(start) < d; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		u, t, err := o()
		if err != nil {
			return 0, err
		}
		units += u
		took += max(t, time.Nanosecond)
	}
	return units / took.Seconds(), nil
}

// timed returns an op that times all of f.
func timed(f func() (float64, error)) op {
	return func() (float64, time.Duration, error) {
		start := time.Now()
		u, err := f()
		return u, time.Since(start), err
	}
}

// interleave warms every contestant up with one call of its op, then
// measures each cfg.Rounds times, in forward order in
// even rounds and reverse order in odd ones, and returns each one's rates
// (units per second) by round, plus the 1-minute load average seen at the
// start of the measurements.
func (e *env) interleave(cs ...contestant) ([][]float64, float64, error) {
	return e.interleaveRounds(e.cfg.Rounds, e.cfg.Duration, cs...)
}

// interleaveRounds is interleave with rounds rounds of d each instead of
// the configuration's.
func (e *env) interleaveRounds(rounds int, d time.Duration, cs ...contestant) ([][]float64, float64, error) {
	load := loadAverage()[0]
	// One untimed call of every contestant first: Pebble's WAL, SQLite's
	// connection, the page cache and the Go heap start warm for all.
	for _, c := range cs {
		if _, _, err := c.op(); err != nil {
			return nil, 0, fmt.Errorf("%s: warm-up: %w", c.name, err)
		}
	}
	rates := make([][]float64, len(cs))
	for round := range rounds {
		order := make([]int, len(cs))
		for i := range order {
			order[i] = i
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			var r float64
			var err error
			// The label lets a CPU profile of the run be cut by contestant:
			// go tool pprof -tagfocus 'contestant=forkline Run' ….
			pprof.Do(e.ctx, pprof.Labels("contestant", cs[i].name), func(ctx context.Context) {
				r, err = measure(ctx, d, cs[i].op)
			})
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", cs[i].name, err)
			}
			if r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
				return nil, 0, fmt.Errorf("%s: rate %v is not a positive number", cs[i].name, r)
			}
			e.logf("   round %d  %-44s %s/s", round+1, cs[i].name, humanNumber(r))
			rates[i] = append(rates[i], r)
		}
	}
	return rates, load, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// errCheck reports a scenario whose own correctness check failed: a replay
// that ran a step live, a fork that selected nothing. Such a run measures
// the wrong thing and is refused.
var errCheck = errors.New("benchmarks: scenario check failed")

// parallel returns an op that runs w workers for d: each calls step (with
// its index) until d has passed, and the op returns the units of all of
// them over the time until the last one stopped.
func parallel(w int, d time.Duration, step func(worker int) (float64, error)) op {
	return func() (float64, time.Duration, error) {
		units := make([]float64, w)
		errs := make([]error, w)
		done := make(chan int, w)
		start := time.Now()
		deadline := start.Add(d)
		for i := range w {
			go func() {
				defer func() { done <- i }()
				for time.Now().Before(deadline) {
					u, err := step(i)
					if err != nil {
						errs[i] = err
						return
					}
					units[i] += u
				}
			}()
		}
		for range w {
			<-done
		}
		took := time.Since(start)
		var total float64
		for i := range w {
			if errs[i] != nil {
				return 0, took, errs[i]
			}
			total += units[i]
		}
		return total, took, nil
	}
}
