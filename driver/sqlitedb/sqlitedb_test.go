package sqlitedb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/drivertest"
	"github.com/forkline/forkline/driver/sqlitedb"
)

const schema = `CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)`

type (
	dbDriver  = driver.Driver[*sqlitedb.DB, sqlitedb.Binding]
	dbHarness = drivertest.Harness[*sqlitedb.DB, sqlitedb.Binding]
)

// row is one row of the kv table.
type row struct{ K, V string }

func rows(t testing.TB, db *sql.DB) []row {
	t.Helper()
	rs, err := db.Query(`SELECT k, v FROM kv ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.K, &r.V); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func harness() dbHarness {
	return dbHarness{
		Mutate: func(t testing.TB, db *sqlitedb.DB, step int) {
			t.Helper()
			if _, err := db.Exec(`INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?), ('last', ?)`,
				fmt.Sprintf("k%d", step%3), fmt.Sprintf("step %d", step), fmt.Sprint(step)); err != nil {
				t.Fatal(err)
			}
			if step%2 == 0 {
				if _, err := db.Exec(`DELETE FROM kv WHERE k = 'k1'`); err != nil {
					t.Fatal(err)
				}
			}
		},
		Snapshot: func(t testing.TB, db *sqlitedb.DB) any {
			t.Helper()
			return rows(t, db.DB)
		},
		DeleteCheckpoint: func(t testing.TB, d dbDriver, ref string) {
			t.Helper()
			if err := d.(*sqlitedb.Driver).Delete(ref); err != nil {
				t.Fatal(err)
			}
		},
		Close: func(db *sqlitedb.DB) { _ = db.Close() },
	}
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t testing.TB) dbDriver {
		return sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: schema, NoSync: true})
	}, harness())
}

func TestConformanceSynced(t *testing.T) {
	if testing.Short() {
		t.Skip("fsyncs")
	}
	drivertest.Run(t, func(t testing.TB) dbDriver {
		return sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: schema})
	}, harness())
}

func TestConformanceWithTemplate(t *testing.T) {
	tmpl := filepath.Join(t.TempDir(), "template.db")
	db, err := sql.Open("sqlite", tmpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schema, `INSERT INTO kv VALUES ('seed', 'from the template')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	drivertest.Run(t, func(t testing.TB) dbDriver {
		return sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Template: tmpl, NoSync: true})
	}, harness())
}

func newDriver(t testing.TB) *sqlitedb.Driver {
	return sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: schema, NoSync: true})
}

func create(t testing.TB, d *sqlitedb.Driver, from string) (*sqlitedb.DB, sqlitedb.Binding) {
	t.Helper()
	db, b, err := d.Create(context.Background(), from)
	if err != nil {
		t.Fatalf("Create(%q): %v", from, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, b
}

func TestBadRefs(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	for _, ref := range []string{"..", "../x", "/etc/passwd", "a/b", strings.Repeat("a", 63), strings.Repeat("A", 64), strings.Repeat("a", 62) + "..", "x\x00"} {
		if _, _, err := d.Create(ctx, ref); !errors.Is(err, sqlitedb.ErrInvalidRef) || !errors.Is(err, driver.ErrCheckpointUnavailable) {
			t.Errorf("Create(%q) = %v", ref, err)
		}
		if err := d.Delete(ref); !errors.Is(err, sqlitedb.ErrInvalidRef) {
			t.Errorf("Delete(%q) = %v", ref, err)
		}
		if err := d.Verify(ctx, ref); !errors.Is(err, sqlitedb.ErrInvalidRef) {
			t.Errorf("Verify(%q) = %v", ref, err)
		}
	}
	if err := d.Delete(""); !errors.Is(err, sqlitedb.ErrInvalidRef) {
		t.Errorf(`Delete("") = %v`, err)
	}
	missing := strings.Repeat("0", 64)
	if _, _, err := d.Create(ctx, missing); !errors.Is(err, driver.ErrCheckpointUnavailable) {
		t.Errorf("Create(missing) = %v", err)
	}
	if err := d.Delete(missing); !errors.Is(err, driver.ErrCheckpointUnavailable) {
		t.Errorf("Delete(missing) = %v", err)
	}
	if err := d.Verify(ctx, missing); !errors.Is(err, driver.ErrCheckpointUnavailable) {
		t.Errorf("Verify(missing) = %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	ctx := context.Background()
	d := sqlitedb.New(sqlitedb.Config{})
	if _, _, err := d.Create(ctx, ""); !errors.Is(err, sqlitedb.ErrConfig) {
		t.Errorf("Create with an empty store = %v", err)
	}
	if _, err := d.Open(ctx, sqlitedb.Binding{Database: strings.Repeat("0", 32)}); !errors.Is(err, sqlitedb.ErrConfig) {
		t.Errorf("Open with an empty store = %v", err)
	}
	d = sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Template: filepath.Join(t.TempDir(), "missing.db")})
	if _, _, err := d.Create(ctx, ""); !errors.Is(err, sqlitedb.ErrConfig) {
		t.Errorf("Create with a missing template = %v", err)
	}
	d = sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: "THIS IS NOT SQL"})
	if _, _, err := d.Create(ctx, ""); err == nil {
		t.Error("Create with a bad schema succeeded")
	}
}

func TestOpenBadBinding(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	for _, id := range []string{"", "..", "/etc", strings.Repeat("0", 32), strings.Repeat("0", 31) + "/"} {
		if _, err := d.Open(ctx, sqlitedb.Binding{Database: id}); !errors.Is(err, sqlitedb.ErrDatabaseNotFound) {
			t.Errorf("Open(%q) = %v", id, err)
		}
	}
	db, b := create(t, d, "")
	_ = db.Close()
	if err := d.RemoveDatabase(b); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(ctx, b); !errors.Is(err, sqlitedb.ErrDatabaseNotFound) {
		t.Errorf("Open(removed) = %v", err)
	}
}

func TestCorruptSnapshot(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	db, _ := create(t, d, "")
	if _, err := db.Exec(`INSERT INTO kv VALUES ('a', 'b')`); err != nil {
		t.Fatal(err)
	}
	ref, err := d.Checkpoint(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(ctx, ref); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(sqlitedb.StoreDir(d), "snapshots", ref+".db")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-100] ^= 0xff
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(ctx, ref); !errors.Is(err, sqlitedb.ErrCorrupt) || !strings.Contains(err.Error(), ref) {
		t.Errorf("Verify(corrupt) = %v", err)
	}
	if _, _, err := d.Create(ctx, ref); !errors.Is(err, sqlitedb.ErrCorrupt) || !errors.Is(err, driver.ErrCheckpointUnavailable) {
		t.Errorf("Create(corrupt) = %v", err)
	}
	des, err := os.ReadDir(filepath.Join(sqlitedb.StoreDir(d), "databases"))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".create-") {
			t.Errorf("a failed restore left %s", de.Name())
		}
	}
}

func TestCheckpointList(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	db, _ := create(t, d, "")
	ref1, err := d.Checkpoint(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO kv VALUES ('a', 'b')`); err != nil {
		t.Fatal(err)
	}
	ref2, err := d.Checkpoint(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := d.Checkpoints()
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || !(refs[0] == ref1 && refs[1] == ref2 || refs[0] == ref2 && refs[1] == ref1) {
		t.Errorf("Checkpoints = %v, want %s and %s", refs, ref1, ref2)
	}
	if des, _ := os.ReadDir(filepath.Join(sqlitedb.StoreDir(d), "tmp")); len(des) != 0 {
		t.Errorf("checkpoints left %d temporary files", len(des))
	}
	if _, err := d.Checkpoint(ctx, nil); err == nil {
		t.Error("Checkpoint(nil) succeeded")
	}
	_ = db.Close()
	if _, err := d.Checkpoint(ctx, db); err == nil {
		t.Error("Checkpoint of a closed database succeeded")
	}
}

// TestUncommittedNotCaptured: a checkpoint captures committed state only.
func TestUncommittedNotCaptured(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	db, _ := create(t, d, "")
	if _, err := db.Exec(`INSERT INTO kv VALUES ('committed', '1')`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO kv VALUES ('pending', '1')`); err != nil {
		t.Fatal(err)
	}
	ref, err := d.Checkpoint(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := create(t, d, ref)
	if got := rows(t, r.DB); len(got) != 1 || got[0].K != "committed" {
		t.Errorf("restored rows = %v, want only the committed one", got)
	}
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t)
	db, _ := create(t, d, "")
	if _, err := db.Exec(`INSERT INTO kv VALUES ('a', 'b')`); err != nil {
		t.Fatal(err)
	}
	ref, err := d.Checkpoint(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	store := sqlitedb.StoreDir(d)
	// What a crash in the middle of a checkpoint and of a creation leaves.
	if err := os.WriteFile(filepath.Join(store, "tmp", "x.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "databases", ".create-"+strings.Repeat("1", 32)+".db"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := d.GC(ctx)
	if err != nil || n != 2 {
		t.Fatalf("GC = %d, %v; want 2 files removed", n, err)
	}
	if err := d.Verify(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, db.DB); len(got) != 1 {
		t.Errorf("GC changed the live database: %v", got)
	}
}
