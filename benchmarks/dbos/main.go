package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/dustin/go-humanize"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/sdk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultURL is the server used unless -postgres names another (the
// tests' server).
const defaultURL = "postgres://postgres@127.0.0.1:5432/test"

// dbosVersion is the DBOS Transact Go version this module pins (go.mod).
const dbosVersion = "v1.9.0"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dbos:", err)
		os.Exit(1)
	}
}

// config is one run's settings.
type config struct {
	url      string
	short    bool
	duration time.Duration
	rounds   int
	progress io.Writer
	rows     []string // the rows to run (8d, 8e, 8f); all when empty
	// noGroup opens forkline's store with WithGroupCommit(false), to see
	// what group commit brings.
	noGroup bool
}

// concurrent is how many workflows at a time 8f runs.
const concurrent = 16

// sizes are the workloads of one run.
type sizes struct {
	steps   int // 8d: steps of the workflow
	history int // 8e: steps of the forked workflow
	forkAt  int // 8e: the step the fork starts from
}

func sizesFor(short bool) sizes {
	if short {
		return sizes{steps: 10, history: 1000, forkAt: 100}
	}
	return sizes{steps: 50, history: 10000, forkAt: 1000}
}

func run(args []string, out, progress io.Writer) error {
	fs := flag.NewFlagSet("dbos", flag.ContinueOnError)
	cfg := config{progress: progress}
	var cpuProfile string
	var quiet bool
	fs.StringVar(&cfg.url, "postgres", defaultURL, "URL of the PostgreSQL server both systems run on")
	fs.BoolVar(&cfg.short, "short", false, "small sizes and one short round")
	fs.DurationVar(&cfg.duration, "duration", 0, "measurement time per contestant per round (default 2s; short 100ms)")
	fs.IntVar(&cfg.rounds, "rounds", 0, "interleaved rounds, medians reported (default 5; short 1)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (labels: contestant=<name>)")
	fs.BoolVar(&quiet, "quiet", false, "no progress lines")
	var rowList string
	fs.StringVar(&rowList, "rows", "", "comma-separated rows to run (8d,8e,8f; default all)")
	groupCommit := fs.Bool("groupcommit", true, "forkline's store groups concurrent appends' commits (pgstore.WithGroupCommit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.noGroup = !*groupCommit
	if rowList != "" {
		cfg.rows = strings.Split(rowList, ",")
		for _, r := range cfg.rows {
			if r != "8d" && r != "8e" && r != "8f" {
				return fmt.Errorf("-rows: unknown row %q (want 8d, 8e or 8f)", r)
			}
		}
	}
	if cfg.duration <= 0 {
		cfg.duration = 2 * time.Second
		if cfg.short {
			cfg.duration = 100 * time.Millisecond
		}
	}
	if cfg.rounds <= 0 {
		cfg.rounds = 5
		if cfg.short {
			cfg.rounds = 1
		}
	}
	if quiet {
		cfg.progress = io.Discard
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rows, err := measureAll(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(out, markdown(rows))
	return nil
}

// errCheck reports a contestant that did not do the work it is measured
// for; such a run prints no figure.
var errCheck = errors.New("dbos: check failed")

// bench is one run's two schemas on the server, dropped by Close.
type bench struct {
	url      string
	admin    *pgxpool.Pool
	forkline string // forkline's schema
	dbos     string // DBOS's schema
	cfg      config
	sizes    sizes
}

// benchPoolConns is the pool size both contestants get unless the URL
// sets pool_max_conns: enough for 8f's 16 workflows at a time, which
// pgxpool's default (max(4, cores) connections) starves — DBOS far more
// than forkline (8f measured 13.7 with 4 connections, 2.19 with 20).
const benchPoolConns = 20

// withPool returns url with pool_max_conns=benchPoolConns unless it sets
// pool_max_conns itself.
func withPool(url string) string {
	switch {
	case strings.Contains(url, "pool_max_conns"):
		return url
	case !strings.Contains(url, "://"):
		return fmt.Sprintf("%s pool_max_conns=%d", url, benchPoolConns) // key=value form
	case strings.Contains(url, "?"):
		return fmt.Sprintf("%s&pool_max_conns=%d", url, benchPoolConns)
	}
	return fmt.Sprintf("%s?pool_max_conns=%d", url, benchPoolConns)
}

func openBench(ctx context.Context, cfg config) (*bench, error) {
	var r [6]byte
	_, _ = rand.Read(r[:])
	suffix := hex.EncodeToString(r[:])
	b := &bench{url: withPool(cfg.url), forkline: "forkline_vs_dbos_" + suffix, dbos: "dbos_vs_forkline_" + suffix, cfg: cfg, sizes: sizesFor(cfg.short)}
	var err error
	if b.admin, err = pgxpool.New(ctx, b.url); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := b.admin.Ping(ctx); err != nil {
		b.admin.Close()
		return nil, fmt.Errorf("postgres at %s: %w", cfg.url, err)
	}
	return b, nil
}

// Close drops both schemas.
func (b *bench) Close() error {
	var errs []error
	for _, s := range []string{b.forkline, b.dbos} {
		if _, err := b.admin.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{s}.Sanitize()+` CASCADE`); err != nil {
			errs = append(errs, err)
		}
	}
	b.admin.Close()
	return errors.Join(errs...)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.cfg.progress, format+"\n", args...)
}

// measureAll runs 8d, 8e and 8f (those of cfg.rows) and returns their
// rows.
func measureAll(ctx context.Context, cfg config) ([]row, error) {
	b, err := openBench(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	want := func(id string) bool { return len(cfg.rows) == 0 || slices.Contains(cfg.rows, id) }
	var out []row
	if want("8d") {
		b.logf("== 8d. workflow of %d steps on Postgres: forkline vs DBOS Transact %s", b.sizes.steps, dbosVersion)
		d, err := b.workflows(ctx, 1)
		if err != nil {
			return nil, fmt.Errorf("8d: %w", err)
		}
		out = append(out, d)
	}
	if want("8e") {
		b.logf("== 8e. fork at step %s of a %s-step workflow: forkline vs DBOS ForkWorkflow",
			humanize.Comma(int64(b.sizes.forkAt)), humanize.Comma(int64(b.sizes.history)))
		e, err := b.forks(ctx)
		if err != nil {
			return nil, fmt.Errorf("8e: %w", err)
		}
		out = append(out, e)
	}
	if want("8f") {
		b.logf("== 8f. workflow of %d steps on Postgres, %d at a time: forkline vs DBOS Transact %s", b.sizes.steps, concurrent, dbosVersion)
		f, err := b.workflows(ctx, concurrent)
		if err != nil {
			return nil, fmt.Errorf("8f: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// addOne is the step both systems run: its argument plus one.
func addOne(_ context.Context, v int) (int, error) { return v + 1, nil }

// agent is the forkline agent: a handler that calls the step n times in
// sequence, each a durable tool call.
const agent = "steps"

// openKernel opens a kernel with the agent on pgstore in the forkline
// schema.
func (b *bench) openKernel(ctx context.Context, opts ...pgstore.Option) (*pgstore.Store, *sdk.Kernel, error) {
	if b.cfg.noGroup {
		opts = append(opts, pgstore.WithGroupCommit(false))
	}
	st, err := pgstore.Open(ctx, b.url, append([]pgstore.Option{pgstore.WithSchema(b.forkline)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	k, err := sdk.New(st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	step := sdk.DefineTool("step", addOne)
	_, err = sdk.Register(k, agent, func(ctx context.Context, n int) (int, error) {
		v := 0
		for range n {
			r, err := step.Call(ctx, v)
			if err != nil {
				return 0, err
			}
			v = r
		}
		return v, nil
	})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, k, nil
}

// runKernel runs one forkline workflow of n steps and checks its output.
func runKernel(ctx context.Context, k *sdk.Kernel, n int) (eventlog.ID, error) {
	id, err := k.Start(ctx, agent, n)
	if err != nil {
		return id, err
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		return id, err
	}
	var v int
	if err := res.Decode(&v); err != nil {
		return id, err
	}
	if v != n {
		return id, fmt.Errorf("%w: forkline workflow returned %d, want %d", errCheck, v, n)
	}
	return id, nil
}

// dbosWorkflow is the DBOS workflow: n RunAsStep calls of the step in
// sequence.
func dbosWorkflow(ctx dbos.Context, n int) (int, error) {
	v := 0
	for range n {
		r, err := dbos.RunAsStep(ctx, func(c context.Context) (int, error) { return addOne(c, v) }, dbos.WithStepName("step"))
		if err != nil {
			return 0, err
		}
		v = r
	}
	return v, nil
}

// openDBOS makes and launches a DBOS executor on the DBOS schema, through
// pool when it is not nil.
func (b *bench) openDBOS(ctx context.Context, pool *pgxpool.Pool) (dbos.Context, error) {
	cfg := dbos.Config{AppName: "forkline-bench", DatabaseSchema: b.dbos, Logger: slog.New(slog.DiscardHandler)}
	if pool != nil {
		cfg.SystemDBPool = pool
	} else {
		cfg.DatabaseURL = b.url
	}
	dctx, err := dbos.NewContext(ctx, cfg)
	if err != nil {
		return nil, err
	}
	dbos.RegisterWorkflow(dctx, dbosWorkflow)
	if err := dbos.Launch(dctx); err != nil {
		_ = dbos.Shutdown(dctx, 10*time.Second)
		return nil, err
	}
	return dctx, nil
}

// runDBOS runs one DBOS workflow of n steps, waits for its result and
// checks it.
func runDBOS(dctx dbos.Context, n int) (string, error) {
	h, err := dbos.RunWorkflow(dctx, dbosWorkflow, n)
	if err != nil {
		return "", err
	}
	v, err := h.GetResult()
	if err != nil {
		return "", err
	}
	if v != n {
		return "", fmt.Errorf("%w: DBOS workflow returned %d, want %d", errCheck, v, n)
	}
	return h.GetWorkflowID(), nil
}

// atOnce returns f run by c goroutines at once, its units summed; the
// first error is returned.
func atOnce(c int, f func() (float64, error)) func() (float64, error) {
	if c == 1 {
		return f
	}
	return func() (float64, error) {
		units := make([]float64, c)
		errs := make([]error, c)
		var wg sync.WaitGroup
		for i := range c {
			wg.Go(func() { units[i], errs[i] = f() })
		}
		wg.Wait()
		var sum float64
		for _, u := range units {
			sum += u
		}
		return sum, errors.Join(errs...)
	}
}

// workflows measures 8d (c = 1) and 8f (c workflows at a time).
func (b *bench) workflows(ctx context.Context, c int) (row, error) {
	st, k, err := b.openKernel(ctx)
	if err != nil {
		return row{}, err
	}
	defer st.Close()
	dctx, err := b.openDBOS(ctx, nil)
	if err != nil {
		return row{}, fmt.Errorf("DBOS: %w", err)
	}
	defer dbos.Shutdown(dctx, 10*time.Second)
	n := b.sizes.steps
	fl := contestant{fmt.Sprintf("forkline %d-step workflow ×%d", n, c), timed(atOnce(c, func() (float64, error) {
		_, err := runKernel(ctx, k, n)
		return float64(n), err
	}))}
	db := contestant{fmt.Sprintf("DBOS %d-step workflow ×%d", n, c), timed(atOnce(c, func() (float64, error) {
		_, err := runDBOS(dctx, n)
		return float64(n), err
	}))}
	rates, load, err := b.interleave(ctx, fl, db)
	if err != nil {
		return row{}, err
	}
	if c > 1 {
		r := newRow("8f", fmt.Sprintf("workflow of %d durable steps on Postgres, %d at a time, vs DBOS Transact", n, c),
			figure{"forkline on Postgres", rates[0], "steps/s"},
			figure{"DBOS Transact Go " + dbosVersion + ", same server", rates[1], "steps/s"},
			false, "forkline/DBOS", 3, load)
		group := "with group commit (the synced appends of concurrent workflows share one transaction per flush)"
		if b.cfg.noGroup {
			group = "with group commit off (-groupcommit=false)"
		}
		r.note = fmt.Sprintf("As 8d, but %d workflows started at once, each by its own goroutine, the op ending when all %d have their results. "+
			"forkline: %d goroutines each Start + Run on one kernel over pgstore (synced), %s. DBOS: %d goroutines each RunWorkflow + GetResult on one executor. "+
			"Both on pools of %d connections (pool_max_conns) to the same server, in schemas of their own.", c, c, c, group, c, benchPoolConns)
		return r, nil
	}
	r := newRow("8d", fmt.Sprintf("workflow of %d durable steps on Postgres, 1 at a time, vs DBOS Transact", n),
		figure{"forkline on Postgres", rates[0], "steps/s"},
		figure{"DBOS Transact Go " + dbosVersion + ", same server", rates[1], "steps/s"},
		false, "forkline/DBOS", 1.5, load)
	r.note = fmt.Sprintf("A workflow of %d steps, each returning its argument plus one, started and awaited one at a time. "+
		"forkline: Start + Run on a kernel over pgstore (synced commits; per step one commit: the step.started written with its step.succeeded, DESIGN §21), "+
		"with the store's leases (a claim and a release per Run). DBOS: RunWorkflow of a workflow of %d RunAsStep calls and GetResult on its handle "+
		"(per step one synced insert of the step's output; the workflow's status row written at start and end). Both on pools of %d connections (pool_max_conns) to the same server, in schemas of their own.", n, n, benchPoolConns)
	return r, nil
}

// forks measures 8e.
func (b *bench) forks(ctx context.Context) (row, error) {
	hist, at := b.sizes.history, b.sizes.forkAt

	// forkline: the history is built through a store without sync (not
	// measured), then forked through a synced one.
	b.logf("   building a %s-step workflow on forkline (not measured)", humanize.Comma(int64(hist)))
	bst, bk, err := b.openKernel(ctx, pgstore.WithoutSync())
	if err != nil {
		return row{}, err
	}
	id, err := runKernel(ctx, bk, hist)
	bst.Close()
	if err != nil {
		return row{}, err
	}
	st, k, err := b.openKernel(ctx)
	if err != nil {
		return row{}, err
	}
	defer st.Close()
	seq, err := terminalOf(ctx, st, id, at)
	if err != nil {
		return row{}, err
	}

	// DBOS: the history is built by an executor whose pool commits without
	// sync (not measured); it shuts down, and a client forks.
	b.logf("   building a %s-step workflow on DBOS (not measured)", humanize.Comma(int64(hist)))
	pcfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		return row{}, err
	}
	pcfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return row{}, err
	}
	defer pool.Close()
	dctx, err := b.openDBOS(ctx, pool)
	if err != nil {
		return row{}, fmt.Errorf("DBOS: %w", err)
	}
	wf, err := runDBOS(dctx, hist)
	if err := errors.Join(err, dbos.Shutdown(dctx, 10*time.Second)); err != nil {
		return row{}, fmt.Errorf("DBOS: %w", err)
	}
	client, err := dbos.NewClient(ctx, dbos.ClientConfig{AppName: "forkline-bench", DatabaseURL: b.url, DatabaseSchema: b.dbos,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return row{}, fmt.Errorf("DBOS client: %w", err)
	}
	defer dbos.Shutdown(client, 10*time.Second)

	// Check once that each fork is what it claims: forkline's fork replays
	// exactly the first at steps; DBOS's holds their outputs.
	fid, err := k.Fork(ctx, id, seq)
	if err != nil {
		return row{}, err
	}
	if n, err := countSucceeded(ctx, st, fid); err != nil {
		return row{}, err
	} else if n != at {
		return row{}, fmt.Errorf("%w: forkline fork at seq %d holds %d recorded steps, want %d", errCheck, seq, n, at)
	}
	h, err := dbos.ForkWorkflow[int](client, dbos.ForkWorkflowInput{OriginalWorkflowID: wf, StartStep: uint(at)})
	if err != nil {
		return row{}, err
	}
	steps, err := dbos.GetWorkflowSteps(client, h.GetWorkflowID())
	if err != nil {
		return row{}, err
	}
	if len(steps) != at {
		return row{}, fmt.Errorf("%w: DBOS fork at step %d holds %d steps, want %d", errCheck, at, len(steps), at)
	}

	fl := contestant{fmt.Sprintf("forkline Fork at step %d", at), timed(func() (float64, error) {
		_, err := k.Fork(ctx, id, seq)
		return 1, err
	})}
	db := contestant{fmt.Sprintf("DBOS ForkWorkflow at step %d", at), timed(func() (float64, error) {
		_, err := dbos.ForkWorkflow[int](client, dbos.ForkWorkflowInput{OriginalWorkflowID: wf, StartStep: uint(at)})
		return 1, err
	})}
	rates, load, err := b.interleave(ctx, fl, db)
	if err != nil {
		return row{}, err
	}
	us := func(rs []float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = 1e6 / r
		}
		return out
	}
	r := newRow("8e", fmt.Sprintf("fork at step %s of a %s-step workflow on Postgres vs DBOS ForkWorkflow (copies)",
		humanize.Comma(int64(at)), humanize.Comma(int64(hist))),
		figure{"forkline on Postgres", us(rates[0]), "µs"},
		figure{"DBOS ForkWorkflow, StartStep " + strconv.Itoa(at), us(rates[1]), "µs"},
		true, "DBOS time/forkline time", 10, load)
	r.note = fmt.Sprintf("Latency of one fork. forkline: Kernel.Fork at seq %d, the terminal event of step %d (a fork row and a fork.created with the "+
		"checkpoint plan; nothing copied), synced. DBOS: ForkWorkflow through a Client with StartStep %d, which inserts the new workflow's status row "+
		"and copies the outputs of steps 0..%d into it (its forks are enqueued and never run: the executor that ran the original has shut down). "+
		"Both histories were built without sync, not measured.", seq, at, at, at-1)
	return r, nil
}

// terminalOf returns the seq of the terminal event of the nth step of id.
func terminalOf(ctx context.Context, st eventlog.Log, id eventlog.ID, n int) (uint64, error) {
	seen := 0
	for ev, err := range st.Events(ctx, id, 1) {
		if err != nil {
			return 0, err
		}
		if _, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			if seen++; seen == n {
				return ev.Seq, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: execution %s has %d steps, fewer than %d", errCheck, id, seen, n)
}

// countSucceeded counts the step.succeeded events of id's lineage.
func countSucceeded(ctx context.Context, st eventlog.Log, id eventlog.ID) (int, error) {
	n := 0
	for ev, err := range st.Events(ctx, id, 1) {
		if err != nil {
			return 0, err
		}
		if _, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			n++
		}
	}
	return n, nil
}

// An op does one unit of a contestant's work and returns how many units it
// did and how long the measured part took.
type op func() (units float64, took time.Duration, err error)

// contestant is one side of a comparison.
type contestant struct {
	name string
	op   op
}

// timed returns an op that times all of f.
func timed(f func() (float64, error)) op {
	return func() (float64, time.Duration, error) {
		start := time.Now()
		u, err := f()
		return u, time.Since(start), err
	}
}

// measure runs o until d of wall time has passed (at least once) and
// returns the units per second of measured time.
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

// interleave warms every contestant up with one call, then measures each
// cfg.rounds times, in forward order in even rounds and reverse order in
// odd ones (as benchmarks.Run does), and returns each one's rates by round
// and the 1-minute load average at the start.
func (b *bench) interleave(ctx context.Context, cs ...contestant) ([][]float64, float64, error) {
	load := loadAverage()
	for _, c := range cs {
		if _, _, err := c.op(); err != nil {
			return nil, 0, fmt.Errorf("%s: warm-up: %w", c.name, err)
		}
	}
	rates := make([][]float64, len(cs))
	for round := range b.cfg.rounds {
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
			pprof.Do(ctx, pprof.Labels("contestant", cs[i].name), func(ctx context.Context) {
				r, err = measure(ctx, b.cfg.duration, cs[i].op)
			})
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", cs[i].name, err)
			}
			if r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
				return nil, 0, fmt.Errorf("%s: rate %v is not a positive number", cs[i].name, r)
			}
			b.logf("   round %d  %-40s %s/s", round+1, cs[i].name, humanNumber(r))
			rates[i] = append(rates[i], r)
		}
	}
	return rates, load, nil
}

// loadAverage returns the 1-minute load average (0 where unknown).
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	x, _ := strconv.ParseFloat(f[0], 64)
	return x
}

// figure is one side's measurements, by round.
type figure struct {
	what   string
	rounds []float64
	unit   string
}

func (f figure) value() float64 { return median(f.rounds) }

// row is one line of RESULTS.md's table and its note.
type row struct {
	id, scenario string
	fl, base     figure
	ratios       []float64 // by round
	ratioOf      string
	target       float64 // ratio ≥ target
	load         float64
	note         string
}

// newRow pairs the two figures by round: the ratio is fl/base, or base/fl
// for times (inverse).
func newRow(id, scenario string, fl, base figure, inverse bool, ratioOf string, target, load float64) row {
	r := row{id: id, scenario: scenario, fl: fl, base: base, ratioOf: ratioOf, target: target, load: load}
	for i := range fl.rounds {
		x := fl.rounds[i] / base.rounds[i]
		if inverse {
			x = base.rounds[i] / fl.rounds[i]
		}
		r.ratios = append(r.ratios, x)
	}
	return r
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

// humanNumber prints x with thousands separators, or in millions.
func humanNumber(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 100:
		return humanize.Comma(int64(math.Round(x)))
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func roundsText(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = humanNumber(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// markdown prints rows as RESULTS.md's table rows, then their notes.
func markdown(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Written by `cd benchmarks/dbos && go run .` on %s, %d cores (GOMAXPROCS %d).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	b.WriteString("| # | scenario | forkline | baseline | ratio | target | machine |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		ratio := median(r.ratios)
		verdict := "✅"
		if ratio < r.target {
			verdict = "❌ missed"
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s %s (%s) | %s (%s) | ≥ %g %s | %d cores, load %.1f |\n",
			r.id, r.scenario, humanNumber(r.fl.value()), r.fl.unit, humanNumber(r.base.value()), r.base.unit, r.base.what,
			humanNumber(ratio), r.ratioOf, r.target, verdict, runtime.NumCPU(), r.load)
	}
	b.WriteString("\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "- **%s** (`cd benchmarks/dbos && go run .`): forkline rounds %s, baseline rounds %s, ratio by round %s. %s\n",
			r.id, roundsText(r.fl.rounds), roundsText(r.base.rounds), roundsText(r.ratios), r.note)
	}
	return b.String()
}
