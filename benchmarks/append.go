package benchmarks

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Scenario 1, durable append: one event per synced append, as a kernel
// writes a tool call's outcome, with one writer and with many writers on as
// many executions; against the same bytes written to Pebble directly (the
// ceiling: fdatasync of Pebble's WAL) and inserted into SQLite in WAL mode
// with synchronous=FULL (what an embedded user would pick instead).

// appendPayload is the event every append writes: a step.succeeded with a
// result of 128 bytes.
func appendPayload() *eventlog.StepSucceeded {
	return &eventlog.StepSucceeded{
		StepID: "5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f",
		Result: []byte(`"` + strings.Repeat("0123456789abcdef", 8)[:126] + `"`),
	}
}

// appendRecord is the record the store writes for appendPayload (of the
// zero ID: the bytes, their length and their checksum work are the same
// for any ID).
func appendRecord() ([]byte, error) {
	return eventlog.AppendRecord(nil, eventlog.ID{}, eventlog.Event{Seq: 1, Time: buildTime, Data: appendPayload()})
}

// forklineAppender appends one event per synced Append to its own execution
// of st, one per worker.
type forklineAppender struct {
	st    *pebblestore.Store
	ids   []eventlog.ID
	heads []uint64
}

func newForklineAppender(ctx context.Context, st *pebblestore.Store, writers int) (*forklineAppender, error) {
	a := &forklineAppender{st: st}
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

// append appends one event as worker w.
func (a *forklineAppender) append(ctx context.Context, w int) error {
	h, err := a.st.Append(ctx, a.ids[w], a.heads[w], eventlog.Event{Time: buildTime, Data: appendPayload()})
	if err != nil {
		return err
	}
	a.heads[w] = h
	return nil
}

// rawAppender writes rec under the next key of its worker with one synced
// Pebble Set.
type rawAppender struct {
	db   *pebble.DB
	rec  []byte
	ids  []eventlog.ID
	seqs []uint64
}

func newRawAppender(db *pebble.DB, rec []byte, writers int) *rawAppender {
	a := &rawAppender{db: db, rec: rec}
	for range writers {
		var id eventlog.ID
		_, _ = rand.Read(id[:])
		a.ids = append(a.ids, id)
		a.seqs = append(a.seqs, 1)
	}
	return a
}

func (a *rawAppender) append(w int) error {
	a.seqs[w]++
	return a.db.Set(rawKey(a.ids[w], a.seqs[w]), a.rec, pebble.Sync)
}

// sqliteLog is a SQLite database in WAL mode with synchronous=FULL holding
// the same rows: execution, seq, record.
type sqliteLog struct {
	db  *sql.DB
	ins *sql.Stmt
}

// openSQLite opens the baseline database. SQLite has one writer at a time;
// its Go users (go-workflows among them) give database/sql a single
// connection so that writers queue in Go instead of spinning on
// SQLITE_BUSY, which is also the faster setting here.
func openSQLite(path string) (*sqliteLog, error) {
	u := url.URL{Scheme: "file", Path: path,
		RawQuery: "_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	var mode string
	var syncLevel int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := db.QueryRow("PRAGMA synchronous").Scan(&syncLevel); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if mode != "wal" || syncLevel != 2 {
		db.Close()
		return nil, fmt.Errorf("%w: sqlite journal_mode %s, synchronous %d; want wal, 2 (FULL)", errCheck, mode, syncLevel)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS events (
		execution BLOB NOT NULL, seq INTEGER NOT NULL, record BLOB NOT NULL,
		PRIMARY KEY (execution, seq)) WITHOUT ROWID`); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	ins, err := db.Prepare(`INSERT INTO events (execution, seq, record) VALUES (?, ?, ?)`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return &sqliteLog{db: db, ins: ins}, nil
}

func (s *sqliteLog) Close() error {
	s.ins.Close()
	return s.db.Close()
}

// sqliteAppender inserts one row per transaction (autocommit), one
// execution per worker.
type sqliteAppender struct {
	s    *sqliteLog
	rec  []byte
	ids  []eventlog.ID
	seqs []int64
}

func newSQLiteAppender(s *sqliteLog, rec []byte, writers int) *sqliteAppender {
	a := &sqliteAppender{s: s, rec: rec}
	for range writers {
		var id eventlog.ID
		_, _ = rand.Read(id[:])
		a.ids = append(a.ids, id)
		a.seqs = append(a.seqs, 1)
	}
	return a
}

func (a *sqliteAppender) append(ctx context.Context, w int) error {
	a.seqs[w]++
	_, err := a.s.ins.ExecContext(ctx, a.ids[w][:], a.seqs[w], a.rec)
	return err
}

// appendStores are the three stores of scenario 1, on disk.
type appendStores struct {
	fl  *pebblestore.Store
	raw *rawStore
	sq  *sqliteLog
	rec []byte
}

func openAppendStores(dir string) (*appendStores, error) {
	rec, err := appendRecord()
	if err != nil {
		return nil, err
	}
	s := &appendStores{rec: rec}
	if s.fl, err = pebblestore.Open(filepath.Join(dir, "forkline")); err != nil {
		return nil, err
	}
	if s.raw, err = openRaw(filepath.Join(dir, "raw")); err != nil {
		s.Close()
		return nil, err
	}
	if s.sq, err = openSQLite(filepath.Join(dir, "sqlite.db")); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *appendStores) Close() {
	if s.fl != nil {
		s.fl.Close()
	}
	if s.raw != nil {
		s.raw.Close()
	}
	if s.sq != nil {
		s.sq.Close()
	}
}

func runAppend(e *env) ([]Row, error) {
	dir, err := e.mkdir("append")
	if err != nil {
		return nil, err
	}
	s, err := openAppendStores(dir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var rows []Row
	for i, w := range []int{1, e.sizes.AppendWriters} {
		fl, err := newForklineAppender(e.ctx, s.fl, w)
		if err != nil {
			return nil, err
		}
		raw := newRawAppender(s.raw.db, s.rec, w)
		sq := newSQLiteAppender(s.sq, s.rec, w)
		d := e.cfg.Duration
		rates, load, err := e.interleave(
			contestant{fmt.Sprintf("forkline Append, %d writers", w), parallel(w, d, func(k int) (float64, error) { return 1, fl.append(e.ctx, k) })},
			contestant{fmt.Sprintf("raw Pebble synced Set, %d writers", w), parallel(w, d, func(k int) (float64, error) { return 1, raw.append(k) })},
			contestant{fmt.Sprintf("SQLite WAL FULL insert, %d writers", w), parallel(w, d, func(k int) (float64, error) { return 1, sq.append(e.ctx, k) })},
		)
		if err != nil {
			return nil, err
		}
		f := Figure{What: "forkline", Value: median(rates[0]), Unit: "events/s", Rounds: rates[0]}
		p := Figure{What: "raw Pebble, synced Set", Value: median(rates[1]), Unit: "events/s", Rounds: rates[1]}
		q := Figure{What: "SQLite WAL, synchronous=FULL", Value: median(rates[2]), Unit: "events/s", Rounds: rates[2]}
		label := "1 writer"
		if w > 1 {
			label = fmt.Sprintf("%d writers on %d executions", w, w)
		}
		ids := [][2]string{{"1a", "1b"}, {"1c", "1d"}}[i]
		bench := fmt.Sprintf("DurableAppend/system=forkline/writers=%d", w)
		rows = append(rows, rowOf(ids[0], "durable append, "+label+", vs raw Pebble", bench, f, p, div,
			"forkline/Pebble", "≥ 0.8", atLeast(0.8), load))
		var target string
		var check func(float64) bool
		if w > 1 {
			target, check = "≥ 10", atLeast(10)
		}
		row := rowOf(ids[1], "durable append, "+label+", vs SQLite", bench, f, q, div, "forkline/SQLite", target, check, load)
		row.Note = fmt.Sprintf("One event (a %d-byte record) per synced append; SQLite gets one database/sql connection, writers queue for it.", len(s.rec))
		rows = append(rows, row)
	}
	return rows, nil
}
