package dirfs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/blob/pgblob"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// sharedStores are the shared blob stores the host tests run on: a
// directory, and Postgres when a server answers.
func sharedStores(t *testing.T) map[string]func(t *testing.T) blob.Store {
	return map[string]func(t *testing.T) blob.Store{
		"dir": func(t *testing.T) blob.Store {
			d, err := blob.NewDir(t.TempDir())
			must(t, err)
			return d.WithoutSync()
		},
		"postgres": func(t *testing.T) blob.Store {
			url, schema := pgtest.Schema(t)
			s, err := pgblob.Open(t.Context(), url, pgblob.Options{Schema: schema, Namespace: "log1"})
			must(t, err)
			t.Cleanup(s.Close)
			return s
		},
	}
}

// TestSharedCheckpointOtherHost: DESIGN §11, shared checkpoints. A
// checkpoint captured by host A (its own data folder) restores on host B
// (another data folder) through the shared blob store; B never reads A's
// store. A deleted checkpoint no longer restores anywhere, and a damaged
// shared blob fails the restore with ErrCorrupt rather than wrong content.
func TestSharedCheckpointOtherHost(t *testing.T) {
	for name, open := range sharedStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			shared := open(t)
			hostA, hostB := t.TempDir(), t.TempDir()
			a := dirfs.New(dirfs.Config{Store: hostA, Blobs: shared, NoSync: true})
			b := dirfs.New(dirfs.Config{Store: hostB, Blobs: shared, NoSync: true})

			w, _, err := a.Create(ctx, "")
			must(t, err)
			must(t, w.WriteFile("src/main.go", []byte("package main\n")))
			must(t, w.WriteFile("big.bin", []byte(strings.Repeat("0123456789abcdef", 1<<17)))) // 2 MiB: several pgblob chunks
			must(t, w.Symlink("src/main.go", "link"))
			ref, err := a.Checkpoint(ctx, w)
			must(t, err)
			want := listTree(t, w.Dir())

			// The default local store is the directory implementation.
			local, err := blob.NewDir(hostA)
			must(t, err)
			for _, data := range []string{"package main\n"} {
				if ok, err := local.Has(ctx, blob.Sum([]byte(data))); err != nil || !ok {
					t.Fatalf("blob.NewDir(Store).Has(a captured file) = %v, %v", ok, err)
				}
			}
			// Nothing of A's store is reachable from B but the shared store.
			must(t, os.Chmod(hostA, 0))
			t.Cleanup(func() { _ = os.Chmod(hostA, 0o755) })

			rw, _, err := b.Create(ctx, ref)
			if err != nil {
				t.Fatalf("host B: Create(%s): %v", ref, err)
			}
			if diff := cmp.Diff(want, listTree(t, rw.Dir())); diff != "" {
				t.Fatalf("host B restored (-host A +host B):\n%s", diff)
			}
			if !strings.HasPrefix(rw.Dir(), hostB) {
				t.Fatalf("host B's workspace %s is not in its data folder %s", rw.Dir(), hostB)
			}
			// A second host B restore reads its local copy; B's capture of
			// the same tree yields the same ref.
			again, err := b.Checkpoint(ctx, rw)
			must(t, err)
			if again != ref {
				t.Fatalf("host B captured the same tree as %s, host A as %s", again, ref)
			}
			must(t, os.Chmod(hostA, 0o755))

			// A damaged shared blob: a third host gets ErrCorrupt.
			c := dirfs.New(dirfs.Config{Store: t.TempDir(), Blobs: shared, NoSync: true})
			h := blob.Sum([]byte("package main\n"))
			corruptShared(t, shared, h)
			if _, _, err := c.Create(ctx, ref); !errors.Is(err, driver.ErrCheckpointUnavailable) || !errors.Is(err, dirfs.ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
				t.Fatalf("restore with a damaged shared blob = %v; want ErrCheckpointUnavailable and ErrCorrupt naming %s", err, h)
			}
			if des, _ := os.ReadDir(filepath.Join(dirfs.StoreDir(c), "workspaces")); len(des) != 0 {
				t.Fatalf("a failed restore left %d entries in workspaces/", len(des))
			}

			// Deleted on A: gone for every host that lacks a local copy.
			must(t, a.Delete(ref))
			d := dirfs.New(dirfs.Config{Store: t.TempDir(), Blobs: shared, NoSync: true})
			if _, _, err := d.Create(ctx, ref); !errors.Is(err, driver.ErrCheckpointUnavailable) {
				t.Fatalf("restore of a deleted checkpoint = %v; want ErrCheckpointUnavailable", err)
			}
		})
	}
}

// corruptShared replaces the shared blob h with other content of the same
// size, behind the store's back.
func corruptShared(t *testing.T, s blob.Store, h blob.Hash) {
	t.Helper()
	ctx := context.Background()
	data, err := blob.ReadAll(ctx, s, h)
	must(t, err)
	data[0] ^= 1
	switch s := s.(type) {
	case *blob.Dir:
		must(t, os.Chmod(s.Path(h), 0o644))
		must(t, os.WriteFile(s.Path(h), data, 0o444))
	case *pgblob.Store:
		conn, err := pgx.Connect(ctx, pgtest.URL(t))
		must(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `UPDATE `+pgx.Identifier{s.Schema()}.Sanitize()+`.blob_chunks SET data = $1 WHERE namespace = $2 AND hash = $3`,
			data, s.Namespace(), h[:])
		must(t, err)
	default:
		t.Fatalf("cannot damage a %T", s)
	}
}
