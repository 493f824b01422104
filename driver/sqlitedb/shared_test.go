package sqlitedb_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/blob/pgblob"
	"github.com/forkline/forkline/driver/sqlitedb"
	"github.com/forkline/forkline/internal/pgtest"
)

// TestSharedCheckpointOtherHost: DESIGN §11, shared checkpoints. A snapshot
// captured by host A restores on host B, which has another store, through
// the shared blob store; a damaged shared snapshot fails with ErrCorrupt
// and ErrCheckpointUnavailable; a deleted one restores nowhere.
func TestSharedCheckpointOtherHost(t *testing.T) {
	stores := map[string]func(t *testing.T) blob.Store{
		"dir": func(t *testing.T) blob.Store {
			d, err := blob.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return d.WithoutSync()
		},
		"postgres": func(t *testing.T) blob.Store {
			url, sc := pgtest.Schema(t)
			s, err := pgblob.Open(t.Context(), url, pgblob.Options{Schema: sc, Namespace: "log1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			shared := open(t)
			hostA, hostB := t.TempDir(), t.TempDir()
			a := sqlitedb.New(sqlitedb.Config{Store: hostA, Schema: schema, Blobs: shared, NoSync: true})
			b := sqlitedb.New(sqlitedb.Config{Store: hostB, Schema: schema, Blobs: shared, NoSync: true})
			db, _ := create(t, a, "")
			if _, err := db.ExecContext(ctx, `INSERT INTO kv VALUES ('host', 'a')`); err != nil {
				t.Fatal(err)
			}
			ref, err := a.Checkpoint(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(hostA, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(hostA, 0o755) })
			rdb, _ := create(t, b, ref)
			var v string
			if err := rdb.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'host'`).Scan(&v); err != nil || v != "a" {
				t.Fatalf("host B restored kv.host = %q, %v; want a", v, err)
			}
			if !strings.HasPrefix(rdb.Path(), hostB) {
				t.Fatalf("host B's database %s is not in its store %s", rdb.Path(), hostB)
			}
			if err := os.Chmod(hostA, 0o755); err != nil {
				t.Fatal(err)
			}

			h, _ := blob.ParseHash(ref)
			data, err := blob.ReadAll(ctx, shared, h)
			if err != nil {
				t.Fatal(err)
			}
			if err := shared.Delete(ctx, h); err != nil {
				t.Fatal(err)
			}
			// Put refuses damaged content, so damage it under another
			// name's checks: a Dir file edited in place.
			if d, ok := shared.(*blob.Dir); ok {
				data[len(data)/2] ^= 1
				if err := os.WriteFile(d.Path(h), data, 0o444); err != nil {
					t.Fatal(err)
				}
				c := sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: schema, Blobs: shared, NoSync: true})
				if _, _, err := c.Create(ctx, ref); !errors.Is(err, sqlitedb.ErrCorrupt) || !errors.Is(err, driver.ErrCheckpointUnavailable) || !strings.Contains(err.Error(), ref) {
					t.Fatalf("restore of a damaged shared snapshot = %v; want ErrCorrupt, ErrCheckpointUnavailable, naming %s", err, ref)
				}
				if err := os.Remove(d.Path(h)); err != nil {
					t.Fatal(err)
				}
			}
			// Gone from the shared store: a host without a local copy
			// cannot restore it.
			c := sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: schema, Blobs: shared, NoSync: true})
			if _, _, err := c.Create(ctx, ref); !errors.Is(err, driver.ErrCheckpointUnavailable) {
				t.Fatalf("restore of a checkpoint the shared store lacks = %v; want ErrCheckpointUnavailable", err)
			}
		})
	}
}
