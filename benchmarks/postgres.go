package benchmarks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/dustin/go-humanize"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Scenario 8, the log on PostgreSQL (DESIGN §11): a synced append through
// pgstore (one transaction: lock the execution's row, check head and
// epoch, insert the event, update the head and status) with 1 and 64
// writers, against the limit — a raw single-row INSERT per commit into a
// table of the same shape, on a pool of the same size; and a fork at the
// last seq of a long history against one at seq 10. Every contestant runs
// on the same server in one schema made for the run and dropped after it.
// Row 8w (wake.go) times a wake across processes through LISTEN/NOTIFY.

// pgBench is the run's schema on the server.
type pgBench struct {
	url, schema string
	admin       *pgxpool.Pool // the raw baseline's pool; also drops the schema
}

func openPGBench(ctx context.Context, url string) (*pgBench, error) {
	var r [6]byte
	_, _ = rand.Read(r[:])
	b := &pgBench{url: url, schema: "forkline_bench_" + hex.EncodeToString(r[:])}
	var err error
	if b.admin, err = pgxpool.New(ctx, url); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := b.admin.Ping(ctx); err != nil {
		b.admin.Close()
		return nil, fmt.Errorf("postgres at %s: %w", url, err)
	}
	sc := pgx.Identifier{b.schema}.Sanitize()
	if _, err := b.admin.Exec(ctx, `CREATE SCHEMA `+sc+`; CREATE TABLE `+sc+`.raw_events (
		execution bytea NOT NULL, seq bigint NOT NULL, record bytea NOT NULL, PRIMARY KEY (execution, seq))`); err != nil {
		b.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return b, nil
}

// Close drops the run's schema.
func (b *pgBench) Close() error {
	_, err := b.admin.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{b.schema}.Sanitize()+` CASCADE`)
	b.admin.Close()
	return err
}

// store opens pgstore on the run's schema.
func (b *pgBench) store(ctx context.Context, opts ...pgstore.Option) (*pgstore.Store, error) {
	return pgstore.Open(ctx, b.url, append([]pgstore.Option{pgstore.WithSchema(b.schema)}, opts...)...)
}

// pgAppender appends one event per synced Append to its own execution, one
// per worker.
type pgAppender struct {
	st    *pgstore.Store
	ids   []eventlog.ID
	heads []uint64
}

func newPGAppender(ctx context.Context, st *pgstore.Store, writers int) (*pgAppender, error) {
	a := &pgAppender{st: st}
	for range writers {
		id, err := st.Create(ctx, &eventlog.ExecutionCreated{Agent: "append"}, buildTime)
		if err != nil {
			return nil, err
		}
		a.ids = append(a.ids, id)
		a.heads = append(a.heads, 1)
	}
	return a, nil
}

func (a *pgAppender) append(ctx context.Context, w int) error {
	h, err := a.st.Append(ctx, a.ids[w], a.heads[w], eventlog.Event{Time: buildTime, Data: appendPayload()})
	if err != nil {
		return err
	}
	a.heads[w] = h
	return nil
}

// rawPGAppender inserts rec as one row per autocommitted INSERT.
type rawPGAppender struct {
	pool *pgxpool.Pool
	sql  string
	rec  []byte
	ids  []eventlog.ID
	seqs []int64
}

func (b *pgBench) rawAppender(rec []byte, writers int) *rawPGAppender {
	a := &rawPGAppender{pool: b.admin, rec: rec,
		sql: `INSERT INTO ` + pgx.Identifier{b.schema}.Sanitize() + `.raw_events (execution, seq, record) VALUES ($1, $2, $3)`}
	for range writers {
		a.ids = append(a.ids, eventlog.NewID())
		a.seqs = append(a.seqs, 0)
	}
	return a
}

func (a *rawPGAppender) append(ctx context.Context, w int) error {
	a.seqs[w]++
	_, err := a.pool.Exec(ctx, a.sql, a.ids[w][:], a.seqs[w], a.rec)
	return err
}

func runPostgres(e *env) ([]Row, error) {
	if e.cfg.Postgres == "" {
		e.logf("   skipped: no Postgres URL (Config.Postgres, bench -postgres)")
		return nil, nil
	}
	b, err := openPGBench(e.ctx, e.cfg.Postgres)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	st, err := b.store(e.ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rec, err := appendRecord()
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, w := range []int{1, e.sizes.AppendWriters} {
		fl, err := newPGAppender(e.ctx, st, w)
		if err != nil {
			return nil, err
		}
		raw := b.rawAppender(rec, w)
		d := e.cfg.Duration
		rates, load, err := e.interleave(
			contestant{fmt.Sprintf("pgstore Append, %d writers", w), parallel(w, d, func(k int) (float64, error) { return 1, fl.append(e.ctx, k) })},
			contestant{fmt.Sprintf("raw Postgres INSERT, %d writers", w), parallel(w, d, func(k int) (float64, error) { return 1, raw.append(e.ctx, k) })},
		)
		if err != nil {
			return nil, err
		}
		f := Figure{What: "forkline on Postgres", Value: median(rates[0]), Unit: "events/s", Rounds: rates[0]}
		p := Figure{What: "raw INSERT per commit", Value: median(rates[1]), Unit: "events/s", Rounds: rates[1]}
		label := "1 writer"
		if w > 1 {
			label = fmt.Sprintf("%d writers on %d executions", w, w)
		}
		row := rowOf([]string{"8a", "8b"}[i], "Postgres durable append, "+label+", vs raw INSERT", fmt.Sprintf("PostgresAppend/system=forkline/writers=%d", w),
			f, p, div, "pgstore/INSERT", "", nil, load)
		row.Note = fmt.Sprintf("One event (a %d-byte record) per synced commit. pgstore's append is one statement and one round trip (the execution row's UPDATE of head and status, checking head and epoch in its WHERE, with the event's INSERT as a CTE on its RETURNING); the raw INSERT is one autocommitted statement. Both on pgxpool's default pool (max(4, cores) connections) to the same server.", len(rec))
		rows = append(rows, row)
	}

	// The fork: a history built without sync (not measured), then forked
	// by a synced store at its last seq and at seq 10.
	e.logf("   building a coder-agent history of %d events on Postgres", e.sizes.HistoryEvents)
	build, err := b.store(e.ctx, pgstore.WithoutSync())
	if err != nil {
		return nil, err
	}
	id, err := buildHistory(e.ctx, build, e.sizes.HistoryEvents)
	build.Close()
	if err != nil {
		return nil, err
	}
	h := &historyFixture{id: id, n: e.sizes.HistoryEvents}
	near, far := uint64(e.sizes.ForkNear), uint64(h.n)
	rates, load, err := e.interleave(
		contestant{fmt.Sprintf("pgstore Fork at seq %d", near), forkOn(e.ctx, st, id, near)},
		contestant{fmt.Sprintf("pgstore Fork at seq %d", far), forkOn(e.ctx, st, id, far)},
	)
	if err != nil {
		return nil, err
	}
	us := func(rs []float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = 1e6 / r
		}
		return out
	}
	atNear := Figure{What: fmt.Sprintf("forkline on Postgres at seq %d", near), Value: median(us(rates[0])), Unit: "µs", Rounds: us(rates[0])}
	atFar := Figure{What: "forkline on Postgres", Value: median(us(rates[1])), Unit: "µs", Rounds: us(rates[1])}
	row := rowOf("8c", fmt.Sprintf("Postgres Fork at seq %s vs at seq %d", humanize.Comma(int64(far)), near), fmt.Sprintf("PostgresFork/at=%d", far),
		atFar, atNear, div, "time far/near", "≤ 2", atMost(2), load)
	row.Note = "Latency of one fork (plan from the checkpoint index, a skip scan of the resource keys; one synced transaction writing the fork's row, fork.created and its index rows) of a coder-agent history with a workspace resource."
	rows = append(rows, row)
	e.logf("   wake across processes (LISTEN/NOTIFY)")
	wake, err := runPGWake(e, b)
	if err != nil {
		return nil, err
	}
	return append(rows, wake), nil
}

// forkOn is historyFixture.forkOp on another store.
func forkOn(ctx context.Context, st eventlog.IndexedLog, id eventlog.ID, at uint64) op {
	return (&historyFixture{id: id}).forkOpOn(ctx, st, at)
}
