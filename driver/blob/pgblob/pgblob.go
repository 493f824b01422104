package pgblob

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"iter"
	"regexp"

	"github.com/forkline/forkline/driver/blob"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema Open uses unless Options.Schema names another:
// the schema eventlog/pgstore uses by default.
const DefaultSchema = "forkline"

// DefaultNamespace is the namespace Open uses unless Options.Namespace names
// another.
const DefaultNamespace = "default"

// ChunkSize is the size of the chunks a blob is stored in.
const ChunkSize = 1 << 20

// SchemaVersion is the version of the tables this build writes.
const SchemaVersion = 1

// ErrSchemaTooNew is returned by Open for tables a newer build migrated
// past SchemaVersion.
var ErrSchemaTooNew = errors.New("pgblob: schema is newer than this build")

// Options configures Open. The zero value is usable.
type Options struct {
	// Schema is the Postgres schema of the tables, created if missing.
	// Default DefaultSchema. A lower-case SQL identifier.
	Schema string
	// Namespace separates the blobs of different logs sharing the tables:
	// use one per log (the log's schema name, say). Default
	// DefaultNamespace.
	Namespace string
}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Store is a blob.Store in Postgres; see the package documentation.
type Store struct {
	pool   *pgxpool.Pool
	own    bool
	ns     string
	schema string
	sc     string // quoted schema
}

var _ blob.Store = (*Store)(nil)

// Open connects to the database at url (as pgx accepts it), creates and
// migrates the tables, and returns the store of namespace opts.Namespace.
// Close it when done.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: pgblob: database URL: %w", blob.ErrInvalid, err)
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgblob: connect: %w", err)
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New is Open on a pool the caller keeps (and closes).
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, ns: opts.Namespace, schema: opts.Schema, sc: pgx.Identifier{opts.Schema}.Sanitize()}
	if err := s.migrate(ctx, opts.Schema); err != nil {
		return nil, err
	}
	return s, nil
}

func (o *Options) fill() error {
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if !identifier.MatchString(o.Schema) {
		return fmt.Errorf("%w: pgblob: schema name %q: want lower-case letters, digits and underscores, not starting with a digit, at most 63 bytes", blob.ErrInvalid, o.Schema)
	}
	return nil
}

// Namespace returns the store's namespace.
func (s *Store) Namespace() string { return s.ns }

// Schema returns the Postgres schema of the store's tables.
func (s *Store) Schema() string { return s.schema }

// Close closes the connections if Open made them.
func (s *Store) Close() {
	if s.own {
		s.pool.Close()
	}
}

var migrations = []func(sc string) []string{
	func(sc string) []string {
		return []string{
			`CREATE TABLE ` + sc + `.blobs (
				namespace text NOT NULL,
				hash      bytea NOT NULL,
				size      bigint NOT NULL,
				created   timestamptz NOT NULL DEFAULT now(),
				PRIMARY KEY (namespace, hash)
			)`,
			`CREATE TABLE ` + sc + `.blob_chunks (
				namespace text NOT NULL,
				hash      bytea NOT NULL,
				n         integer NOT NULL,
				data      bytea NOT NULL,
				PRIMARY KEY (namespace, hash, n)
			)`,
		}
	},
}

func (s *Store) migrate(ctx context.Context, schema string) error {
	sc := s.sc
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "forkline blob schema "+schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+sc); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+sc+`.blob_schema_version (version integer NOT NULL)`); err != nil {
			return err
		}
		var version int
		err := tx.QueryRow(ctx, `SELECT version FROM `+sc+`.blob_schema_version`).Scan(&version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO `+sc+`.blob_schema_version (version) VALUES (0)`); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if version > SchemaVersion {
			return fmt.Errorf("%w: schema %s is at version %d, this build knows %d", ErrSchemaTooNew, schema, version, SchemaVersion)
		}
		for v := version; v < SchemaVersion; v++ {
			for _, stmt := range migrations[v](sc) {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("migration to version %d: %w", v+1, err)
				}
			}
		}
		_, err = tx.Exec(ctx, `UPDATE `+sc+`.blob_schema_version SET version = $1`, SchemaVersion)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrSchemaTooNew) {
			return err
		}
		return fmt.Errorf("pgblob: create or migrate schema %s: %w", schema, err)
	}
	return nil
}

// Put implements blob.Store.
func (s *Store) Put(ctx context.Context, h blob.Hash, r io.Reader) error {
	if ok, err := s.Has(ctx, h); err != nil || ok {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		sum := sha256.New()
		buf := make([]byte, ChunkSize)
		var size int64
		for n := 0; ; n++ {
			k, err := io.ReadFull(r, buf)
			if k > 0 || n == 0 {
				sum.Write(buf[:k])
				size += int64(k)
				if _, err := tx.Exec(ctx, `INSERT INTO `+s.sc+`.blob_chunks (namespace, hash, n, data) VALUES ($1, $2, $3, $4)
					ON CONFLICT DO NOTHING`, s.ns, h[:], n, buf[:k]); err != nil {
					return err
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return err
			}
		}
		var got blob.Hash
		copy(got[:], sum.Sum(nil))
		if err := blob.CheckPut(h, got); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+s.sc+`.blobs (namespace, hash, size) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, s.ns, h[:], size)
		return err
	})
	if err != nil && !errors.Is(err, blob.ErrCorrupt) {
		return fmt.Errorf("pgblob: put %s: %w", h, err)
	}
	return err
}

// Get implements blob.Store.
func (s *Store) Get(ctx context.Context, h blob.Hash) (io.ReadCloser, error) {
	var size int64
	err := s.pool.QueryRow(ctx, `SELECT size FROM `+s.sc+`.blobs WHERE namespace = $1 AND hash = $2`, s.ns, h[:]).Scan(&size)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: blob %s", blob.ErrNotFound, h)
	}
	if err != nil {
		return nil, fmt.Errorf("pgblob: get %s: %w", h, err)
	}
	cr := &chunkReader{ctx: ctx, s: s, h: h}
	return io.NopCloser(blob.Verifier(h, size, cr)), nil
}

// chunkReader reads a blob's chunks in order, one query each.
type chunkReader struct {
	ctx  context.Context
	s    *Store
	h    blob.Hash
	n    int
	buf  []byte
	done bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.done {
			return 0, io.EOF
		}
		err := c.s.pool.QueryRow(c.ctx, `SELECT data FROM `+c.s.sc+`.blob_chunks WHERE namespace = $1 AND hash = $2 AND n = $3`,
			c.s.ns, c.h[:], c.n).Scan(&c.buf)
		if errors.Is(err, pgx.ErrNoRows) {
			// Past the last chunk (or a chunk lost): the verifier decides
			// by size and hash.
			c.done = true
			return 0, io.EOF
		}
		if err != nil {
			return 0, fmt.Errorf("pgblob: get %s: chunk %d: %w", c.h, c.n, err)
		}
		c.n++
		if len(c.buf) < ChunkSize {
			c.done = true
		}
	}
	k := copy(p, c.buf)
	c.buf = c.buf[k:]
	return k, nil
}

// Has implements blob.Store.
func (s *Store) Has(ctx context.Context, h blob.Hash) (bool, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM `+s.sc+`.blobs WHERE namespace = $1 AND hash = $2`, s.ns, h[:]).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pgblob: has %s: %w", h, err)
	}
	return true, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, h blob.Hash) error {
	var found bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM `+s.sc+`.blobs WHERE namespace = $1 AND hash = $2`, s.ns, h[:])
		if err != nil {
			return err
		}
		found = tag.RowsAffected() == 1
		_, err = tx.Exec(ctx, `DELETE FROM `+s.sc+`.blob_chunks WHERE namespace = $1 AND hash = $2`, s.ns, h[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("pgblob: delete %s: %w", h, err)
	}
	if !found {
		return fmt.Errorf("%w: blob %s", blob.ErrNotFound, h)
	}
	return nil
}

// listPage is how many hashes one query of List reads.
const listPage = 1000

// List implements blob.Store. It reads a page of hashes per query, so no
// connection is held while the caller's loop runs.
func (s *Store) List(ctx context.Context) iter.Seq2[blob.Hash, error] {
	return func(yield func(blob.Hash, error) bool) {
		after := []byte{}
		for {
			rows, err := s.pool.Query(ctx, `SELECT hash FROM `+s.sc+`.blobs WHERE namespace = $1 AND hash > $2 ORDER BY hash LIMIT $3`,
				s.ns, after, listPage)
			if err != nil {
				yield(blob.Hash{}, fmt.Errorf("pgblob: list: %w", err))
				return
			}
			page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (blob.Hash, error) {
				var b []byte
				var h blob.Hash
				if err := r.Scan(&b); err != nil {
					return h, err
				}
				if len(b) != len(h) {
					return h, fmt.Errorf("%w: a hash of %d bytes in the blobs table", blob.ErrCorrupt, len(b))
				}
				copy(h[:], b)
				return h, nil
			})
			if err != nil {
				yield(blob.Hash{}, fmt.Errorf("pgblob: list: %w", err))
				return
			}
			for _, h := range page {
				if !yield(h, nil) {
					return
				}
			}
			if len(page) < listPage {
				return
			}
			after = page[len(page)-1][:]
		}
	}
}
