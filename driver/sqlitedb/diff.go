package sqlitedb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/internal/storefs"
)

// MaxRowChanges is how many row changes Diff lists per table; the rest of
// a table's changes are counted in one more change of the table.
const MaxRowChanges = 100

var _ driver.Differ = (*Driver)(nil)

// Diff implements [driver.Differ]: the tables snapshot refB adds or
// removes relative to refA (with their row counts), tables whose schema
// changed, and the rows added, removed or changed in tables both hold.
// Rows are matched by the table's declared primary key (rowids are not
// stable across VACUUM INTO); in a table without one a row is its whole
// content, so rows are only added or removed. A changed row's Detail lists
// the columns that differ; an added or removed row's, its columns. At most
// [MaxRowChanges] rows are listed per table. Both snapshots are hashed
// first: a ref that is malformed, missing or corrupt yields an error
// wrapping [driver.ErrCheckpointUnavailable]. Each table of refA is held in
// memory while its rows are compared.
func (d *Driver) Diff(ctx context.Context, refA, refB string) (driver.Difference, error) {
	if err := d.ready(); err != nil {
		return driver.Difference{}, &Error{Op: "diff", Err: err}
	}
	unlock, err := storefs.Lock(d.lockPath(), false) // Delete and GC wait
	if err != nil {
		return driver.Difference{}, &Error{Op: "diff", Err: err}
	}
	defer unlock()
	var dbs [2]*sql.DB
	for i, ref := range []string{refA, refB} {
		if !storefs.ValidRef(ref) {
			return driver.Difference{}, &Error{Op: "diff", Ref: ref, Err: unavailable(ErrInvalidRef)}
		}
		if err := d.Verify(ctx, ref); err != nil {
			if errors.Is(err, ErrCorrupt) {
				err = unavailable(err)
			}
			return driver.Difference{}, &Error{Op: "diff", Ref: ref, Err: err}
		}
		u := url.URL{Scheme: "file", Path: d.snapshot(ref), RawQuery: "mode=ro&immutable=1"}
		db, err := sql.Open("sqlite", u.String())
		if err != nil {
			return driver.Difference{}, &Error{Op: "diff", Ref: ref, Err: err}
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		dbs[i] = db
	}
	out, err := diffDBs(ctx, dbs[0], dbs[1])
	if err != nil {
		return driver.Difference{}, &Error{Op: "diff", Err: fmt.Errorf("%s → %s: %w", refA, refB, err)}
	}
	return out, nil
}

// table is what Diff needs of a table: its schema and key columns.
type table struct {
	name    string
	sql     string
	columns []string
	key     []string // primary key columns in key order; nil: the whole row
}

// tables lists the user tables of db by name.
func tables(ctx context.Context, db *sql.DB) (map[string]*table, error) {
	rs, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	out := map[string]*table{}
	for rs.Next() {
		t := &table{}
		var def sql.NullString
		if err := rs.Scan(&t.name, &def); err != nil {
			rs.Close()
			return nil, err
		}
		t.sql = def.String
		out[t.name] = t
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, err
	}
	for _, t := range out {
		if err := t.describe(ctx, db); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.name, err)
		}
	}
	return out, nil
}

// describe reads t's columns and primary key.
func (t *table) describe(ctx context.Context, db *sql.DB) error {
	rs, err := db.QueryContext(ctx, `SELECT name, pk FROM pragma_table_info(?) ORDER BY cid`, t.name)
	if err != nil {
		return err
	}
	defer rs.Close()
	pk := map[int]string{}
	for rs.Next() {
		var name string
		var n int
		if err := rs.Scan(&name, &n); err != nil {
			return err
		}
		t.columns = append(t.columns, name)
		if n > 0 {
			pk[n] = name
		}
	}
	for i := 1; i <= len(pk); i++ {
		t.key = append(t.key, pk[i])
	}
	return rs.Err()
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// diffDBs compares every table of a and b.
func diffDBs(ctx context.Context, a, b *sql.DB) (driver.Difference, error) {
	ta, err := tables(ctx, a)
	if err != nil {
		return driver.Difference{}, err
	}
	tb, err := tables(ctx, b)
	if err != nil {
		return driver.Difference{}, err
	}
	names := make([]string, 0, len(ta)+len(tb))
	for n := range ta {
		names = append(names, n)
	}
	for n := range tb {
		if _, ok := ta[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out driver.Difference
	for _, n := range names {
		x, y := ta[n], tb[n]
		switch {
		case y == nil:
			c, err := count(ctx, a, x)
			if err != nil {
				return driver.Difference{}, err
			}
			out.Changes = append(out.Changes, driver.Change{Op: driver.Removed, Kind: "table", Name: n, Detail: c})
		case x == nil:
			c, err := count(ctx, b, y)
			if err != nil {
				return driver.Difference{}, err
			}
			out.Changes = append(out.Changes, driver.Change{Op: driver.Added, Kind: "table", Name: n, Detail: c})
		case !slices.Equal(x.columns, y.columns) || !slices.Equal(x.key, y.key):
			ca, err := count(ctx, a, x)
			if err != nil {
				return driver.Difference{}, err
			}
			cb, err := count(ctx, b, y)
			if err != nil {
				return driver.Difference{}, err
			}
			out.Changes = append(out.Changes, driver.Change{Op: driver.Changed, Kind: "table", Name: n,
				Detail: fmt.Sprintf("schema: %s\n   now: %s\nrows: %s → %s", x.sql, y.sql, ca, cb)})
		default:
			changes, err := diffRows(ctx, a, b, x)
			if err != nil {
				return driver.Difference{}, fmt.Errorf("table %s: %w", n, err)
			}
			out.Changes = append(out.Changes, changes...)
		}
	}
	return out, nil
}

// count is the Detail of a whole table: its number of rows.
func count(ctx context.Context, db *sql.DB, t *table) (string, error) {
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(t.name)).Scan(&n); err != nil {
		return "", fmt.Errorf("table %s: %w", t.name, err)
	}
	if n == 1 {
		return "1 row", nil
	}
	return strconv.FormatInt(n, 10) + " rows", nil
}

// row is one row as text: its key and each column's value.
type row struct {
	key    string
	values []string
}

// scanRows calls fn with every row of t in db.
func scanRows(ctx context.Context, db *sql.DB, t *table, fn func(row) error) error {
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = quoteIdent(c)
	}
	rs, err := db.QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+quoteIdent(t.name))
	if err != nil {
		return err
	}
	defer rs.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	keyAt := make([]int, len(t.key))
	for i, k := range t.key {
		keyAt[i] = slices.Index(t.columns, k)
	}
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			return err
		}
		r := row{values: make([]string, len(vals))}
		for i, v := range vals {
			r.values[i] = valueText(v)
		}
		parts := make([]string, 0, len(t.columns))
		if len(keyAt) == 0 {
			for i, c := range t.columns {
				parts = append(parts, c+"="+r.values[i])
			}
		} else {
			for _, i := range keyAt {
				parts = append(parts, t.columns[i]+"="+r.values[i])
			}
		}
		r.key = strings.Join(parts, ", ")
		if err := fn(r); err != nil {
			return err
		}
	}
	return rs.Err()
}

// valueText writes an SQLite value as SQL-like text.
func valueText(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		if len(v) > 32 {
			return fmt.Sprintf("x'%s…' (%d bytes)", hex.EncodeToString(v[:32]), len(v))
		}
		return "x'" + hex.EncodeToString(v) + "'"
	case string:
		return strconv.Quote(v)
	default:
		return fmt.Sprint(v)
	}
}

// diffRows compares the rows of t in a and b, by key.
func diffRows(ctx context.Context, a, b *sql.DB, t *table) ([]driver.Change, error) {
	old := map[string][]row{} // by key; several rows only for a table without key
	if err := scanRows(ctx, a, t, func(r row) error {
		old[r.key] = append(old[r.key], r)
		return nil
	}); err != nil {
		return nil, err
	}
	var changes []driver.Change
	var added, removed, changed int
	record := func(c driver.Change) {
		switch c.Op {
		case driver.Added:
			added++
		case driver.Removed:
			removed++
		default:
			changed++
		}
		if added+removed+changed <= MaxRowChanges {
			changes = append(changes, c)
		}
	}
	name := func(key string) string { return t.name + "[" + key + "]" }
	if err := scanRows(ctx, b, t, func(r row) error {
		olds := old[r.key]
		if len(olds) == 0 {
			record(driver.Change{Op: driver.Added, Kind: "row", Name: name(r.key), Detail: columnsText(t, r, nil)})
			return nil
		}
		o := olds[0]
		if len(olds) == 1 {
			delete(old, r.key)
		} else {
			old[r.key] = olds[1:]
		}
		if !slices.Equal(o.values, r.values) {
			record(driver.Change{Op: driver.Changed, Kind: "row", Name: name(r.key), Detail: columnsText(t, r, &o)})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(old))
	for k := range old {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, o := range old[k] {
			record(driver.Change{Op: driver.Removed, Kind: "row", Name: name(k), Detail: columnsText(t, o, nil)})
		}
	}
	slices.SortStableFunc(changes, func(x, y driver.Change) int { return strings.Compare(x.Name, y.Name) })
	if n := added + removed + changed; n > MaxRowChanges {
		changes = append(changes, driver.Change{Op: driver.Changed, Kind: "table", Name: t.name,
			Detail: fmt.Sprintf("%d rows added, %d removed, %d changed; the first %d are listed", added, removed, changed, MaxRowChanges)})
	}
	return changes, nil
}

// columnsText is a row's Detail: every column of an added or removed row,
// or the columns of a changed row that differ from old's.
func columnsText(t *table, r row, old *row) string {
	var b bytes.Buffer
	for i, c := range t.columns {
		switch {
		case old == nil:
			fmt.Fprintf(&b, "%s=%s\n", c, r.values[i])
		case old.values[i] != r.values[i]:
			fmt.Fprintf(&b, "%s: %s → %s\n", c, old.values[i], r.values[i])
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
