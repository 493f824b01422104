package sqlitedb_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/forkline/forkline/driver/sqlitedb"
)

// CheckpointSize (driver.Sizer, DESIGN §13 forkline.capture.size) is the
// size of the new snapshot file, and 0 when the same bytes were stored
// before.
func TestCheckpointSize(t *testing.T) {
	ctx := context.Background()
	store := t.TempDir()
	d := sqlitedb.New(sqlitedb.Config{Store: store, Schema: schema, NoSync: true})
	db, _, err := d.Create(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO kv (k, v) VALUES ('a', 'alpha')`); err != nil {
		t.Fatal(err)
	}
	ref, n, err := d.CheckpointSize(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(store, "snapshots", ref+".db"))
	if err != nil {
		t.Fatal(err)
	}
	if n != fi.Size() || n == 0 {
		t.Fatalf("capture stored %d bytes, the snapshot has %d", n, fi.Size())
	}
	ref2, n2, err := d.CheckpointSize(ctx, db)
	if err != nil || ref2 != ref || n2 != 0 {
		t.Fatalf("capture of the same state: %s, %d, %v; want %s and 0 bytes", ref2, n2, err, ref)
	}
}
