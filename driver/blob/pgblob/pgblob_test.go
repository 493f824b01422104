package pgblob_test

import (
	"context"
	"errors"
	"testing"

	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/blob/blobtest"
	"github.com/forkline/forkline/driver/blob/pgblob"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func open(t testing.TB, schema, ns string) *pgblob.Store {
	t.Helper()
	s, err := pgblob.Open(t.Context(), pgtest.URL(t), pgblob.Options{Schema: schema, Namespace: ns})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestConformance(t *testing.T) {
	_, schema := pgtest.Schema(t)
	n := 0
	blobtest.Run(t, blobtest.Kit{
		New: func(t testing.TB) blob.Store {
			n++
			return open(t, schema, "ns"+string(rune('a'+n%26))+string(rune('a'+n/26)))
		},
		Reopen: func(t testing.TB, s blob.Store) blob.Store {
			return open(t, schema, s.(*pgblob.Store).Namespace())
		},
		Corrupt: func(t testing.TB, s blob.Store, h blob.Hash, content []byte) {
			ns := s.(*pgblob.Store).Namespace()
			conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			sc := pgx.Identifier{schema}.Sanitize()
			if _, err := conn.Exec(t.Context(), `DELETE FROM `+sc+`.blob_chunks WHERE namespace = $1 AND hash = $2`, ns, h[:]); err != nil {
				t.Fatal(err)
			}
			for i := 0; i == 0 || i*pgblob.ChunkSize < len(content); i++ {
				chunk := content[i*pgblob.ChunkSize : min(len(content), (i+1)*pgblob.ChunkSize)]
				if _, err := conn.Exec(t.Context(), `INSERT INTO `+sc+`.blob_chunks VALUES ($1, $2, $3, $4)`, ns, h[:], i, chunk); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

func TestSchemaTooNewAndBadOptions(t *testing.T) {
	url, schema := pgtest.Schema(t)
	open(t, schema, "")
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `UPDATE `+pgx.Identifier{schema}.Sanitize()+`.blob_schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgblob.Open(t.Context(), url, pgblob.Options{Schema: schema}); !errors.Is(err, pgblob.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if _, err := pgblob.Open(t.Context(), url, pgblob.Options{Schema: "Bad-Name"}); !errors.Is(err, blob.ErrInvalid) {
		t.Fatalf("Open with a bad schema name = %v, want ErrInvalid", err)
	}
}
