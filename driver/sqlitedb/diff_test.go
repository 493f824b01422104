package sqlitedb_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/sqlitedb"
	"github.com/google/go-cmp/cmp"
)

// TestDiff compares two snapshots: a table added and one removed, rows
// added, removed and changed by primary key, rows of a table without a
// key, a table whose schema changed. DESIGN §12.
func TestDiff(t *testing.T) {
	ctx := context.Background()
	store := t.TempDir()
	d := sqlitedb.New(sqlitedb.Config{Store: store, Schema: schema + `;
		CREATE TABLE log (line TEXT);
		CREATE TABLE gone (x INTEGER);
		CREATE TABLE shape (a INTEGER)`, NoSync: true})
	db, _, err := d.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO kv VALUES ('a', '1'), ('b', '2'), ('c', '3')`)
	exec(`INSERT INTO log VALUES ('started'), ('started')`)
	exec(`INSERT INTO gone VALUES (1)`)
	refA, err := d.Checkpoint(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE kv SET v = 'two' WHERE k = 'b'`)
	exec(`DELETE FROM kv WHERE k = 'c'`)
	exec(`INSERT INTO kv VALUES ('d', '4')`)
	exec(`DELETE FROM log WHERE rowid = 1`)
	exec(`INSERT INTO log VALUES ('done')`)
	exec(`DROP TABLE gone`)
	exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, body BLOB)`)
	exec(`INSERT INTO notes VALUES (1, x'00ff')`)
	exec(`ALTER TABLE shape ADD COLUMN b TEXT`)
	refB, err := d.Checkpoint(ctx, db)
	if err != nil {
		t.Fatal(err)
	}

	got, err := d.Diff(ctx, refA, refB)
	if err != nil {
		t.Fatal(err)
	}
	want := `- table gone
    1 row
~ row kv[k="b"]
    v: "2" → "two"
- row kv[k="c"]
    k="c"
    v="3"
+ row kv[k="d"]
    k="d"
    v="4"
+ row log[line="done"]
    line="done"
- row log[line="started"]
    line="started"
+ table notes
    1 row
~ table shape
    schema: CREATE TABLE shape (a INTEGER)
       now: CREATE TABLE shape (a INTEGER, b TEXT)
    rows: 0 rows → 0 rows`
	if d := cmp.Diff(want, got.String()); d != "" {
		t.Errorf("Diff (-want +got):\n%s", d)
	}
	if same, err := d.Diff(ctx, refA, refA); err != nil || !same.Empty() {
		t.Errorf("Diff of a ref with itself = %q, %v; want empty", same.String(), err)
	}

	missing := strings.Repeat("0", 64)
	for _, ref := range []string{"../x", missing} {
		if _, err := d.Diff(ctx, refA, ref); !errors.Is(err, driver.ErrCheckpointUnavailable) {
			t.Errorf("Diff with ref %q = %v, want ErrCheckpointUnavailable", ref, err)
		}
	}
	snap := filepath.Join(store, "snapshots", refB+".db")
	_ = os.Chmod(snap, 0o644)
	if err := os.WriteFile(snap, []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Diff(ctx, refA, refB); !errors.Is(err, sqlitedb.ErrCorrupt) || !errors.Is(err, driver.ErrCheckpointUnavailable) {
		t.Errorf("Diff with a damaged snapshot = %v, want ErrCorrupt and ErrCheckpointUnavailable", err)
	}
}
