package sqlitedb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/internal/storefs"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// ID is the DriverID of this implementation and of its on-disk format.
const ID = "forkline.sqlitedb.v1"

// ErrConfig is wrapped by every error caused by an invalid [Config]. New
// never fails; the error surfaces from the first call that needs the store.
var ErrConfig = errors.New("sqlitedb: invalid configuration")

// ErrInvalidRef is wrapped by the error for a ref that is not 64 lower-case
// hex digits. Create wraps [driver.ErrCheckpointUnavailable] as well.
var ErrInvalidRef = errors.New("sqlitedb: invalid checkpoint ref")

// ErrCorrupt is wrapped by the error for a snapshot whose bytes do not hash
// to its ref. Create wraps [driver.ErrCheckpointUnavailable] as well.
var ErrCorrupt = errors.New("sqlitedb: corrupt checkpoint")

// ErrDatabaseNotFound is wrapped by the error Open returns for a binding
// whose database does not exist.
var ErrDatabaseNotFound = errors.New("sqlitedb: database not found")

// Error describes a failed operation on the store, a checkpoint or a
// database.
type Error struct {
	Op  string // "create", "open", "checkpoint", "verify", "delete", …
	Ref string // the checkpoint ref involved, if any
	Err error  // the cause: a sentinel of this package, a context error, an IO or SQL error
}

// Error formats as "sqlitedb: create checkpoint "3fa…": corrupt checkpoint".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("sqlitedb: ")
	b.WriteString(e.Op)
	if e.Ref != "" {
		b.WriteString(" checkpoint ")
		b.WriteString(strconv.Quote(e.Ref))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "sqlitedb: "))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Config says where a Driver keeps databases and snapshots and what a new
// database starts as. Store is required.
type Config struct {
	// Store is the directory holding databases/, snapshots/ and tmp/. It is
	// created if missing. Required.
	Store string `json:"store"`
	// Template is an SQLite database file copied as the initial database.
	// It must not be written while it is copied. Default "": an empty
	// database.
	Template string `json:"template,omitempty"`
	// Schema is SQL run on every initial database, after Template is
	// copied. Default "": none.
	Schema string `json:"schema,omitempty"`
	// CoverageReuse declares that every change to the database goes
	// through tools and steps that declare it. Default false. Not part of
	// the recorded Configuration.
	CoverageReuse bool `json:"-"`
	// NoSync skips fsync of snapshots, restored copies and directories:
	// for tests and throwaway stores. It does not change SQLite's own
	// synchronous setting. Default false.
	NoSync bool `json:"-"`
	// Blobs, when set, is a shared store of snapshots (DESIGN §11, shared
	// checkpoints), such as a pgblob.Store every host of a Postgres log
	// reaches: each checkpoint also puts its snapshot there (a snapshot is
	// one blob; its ref is its hash), and a restore gets from there a
	// snapshot the local store lacks, so a checkpoint captured on one host
	// restores on another. Default nil: the local snapshots/ directory
	// alone. Not part of the recorded Configuration.
	Blobs blob.Store `json:"-"`
}

// Validate reports whether c is usable. Its error wraps [ErrConfig].
func (c Config) Validate() error {
	if c.Store == "" {
		return fmt.Errorf("%w: empty Store", ErrConfig)
	}
	return nil
}

// Binding names a database of a store; the kernel records it as JSON.
type Binding struct {
	// Database is the database's identifier: 32 lower-case hex digits, the
	// base name of its file under <Store>/databases.
	Database string `json:"database"`
}

// DB is the handle of one database: the open [sql.DB], plus where it lives.
// Close it (the embedded sql.DB's Close) when done.
type DB struct {
	*sql.DB
	id   string
	path string
}

// ID returns the database's identifier, as in its [Binding].
func (db *DB) ID() string { return db.id }

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Driver is the SQLite [driver.Driver]. Its methods are safe for concurrent
// use.
type Driver struct {
	cfg    Config
	cfgErr error

	mu struct {
		sync.Mutex
		ready bool
	}
}

var (
	_ driver.Driver[*DB, Binding] = (*Driver)(nil)
	_ driver.CoverageReuser       = (*Driver)(nil)
	_ driver.ConfigurationReader  = (*Driver)(nil)
)

// New returns a Driver for cfg. It does no IO and never fails: an invalid
// configuration is reported, wrapping [ErrConfig], by the first method that
// needs the store.
func New(cfg Config) *Driver {
	d := &Driver{cfg: cfg, cfgErr: cfg.Validate()}
	if d.cfgErr == nil {
		d.cfg.Store = absPath(cfg.Store)
		if cfg.Template != "" {
			d.cfg.Template = absPath(cfg.Template)
		}
	}
	return d
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// DriverID returns [ID].
func (d *Driver) DriverID() string { return ID }

// Configuration returns the recorded settings: the schema, which decides
// what an initial database holds. Where the store or the template lives is
// not recorded (DESIGN §11, relocatable configuration), so that a moved
// data folder, a restored backup or another host opens the same bindings.
//
// Versions before relocatable configuration recorded "store" and
// "template" as absolute paths as well; [Driver.ReadConfiguration] reads
// that form without them.
func (d *Driver) Configuration() any {
	if d.cfg.Schema == "" {
		return nil
	}
	return struct {
		Schema string `json:"schema"`
	}{d.cfg.Schema}
}

// ReadConfiguration implements [driver.ConfigurationReader]: it drops the
// "store" and "template" keys older versions recorded, so that their
// bindings match this driver wherever its store lives now.
func (d *Driver) ReadConfiguration(recorded []byte) ([]byte, error) {
	return driver.DropKeys(recorded, "store", "template")
}

// CoverageReuse returns Config.CoverageReuse.
func (d *Driver) CoverageReuse() bool { return d.cfg.CoverageReuse }

func (d *Driver) dir(name string) string { return filepath.Join(d.cfg.Store, name) }
func (d *Driver) database(id string) string {
	return filepath.Join(d.cfg.Store, "databases", id+".db")
}
func (d *Driver) snapshot(ref string) string {
	return filepath.Join(d.cfg.Store, "snapshots", ref+".db")
}
func (d *Driver) lockPath() string { return filepath.Join(d.cfg.Store, "lock") }

// ready checks the configuration and creates the store's directories once.
func (d *Driver) ready() error {
	if d.cfgErr != nil {
		return d.cfgErr
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.ready {
		return nil
	}
	for _, name := range []string{"databases", "snapshots", "tmp"} {
		if err := os.MkdirAll(d.dir(name), 0o755); err != nil {
			return err
		}
	}
	if err := d.syncDir(d.cfg.Store); err != nil {
		return err
	}
	d.mu.ready = true
	return nil
}

func (d *Driver) syncDir(dir string) error {
	if d.cfg.NoSync {
		return nil
	}
	return storefs.SyncDir(dir)
}

// unavailable marks err as a checkpoint that cannot be restored.
func unavailable(err error) error {
	return fmt.Errorf("%w (%w)", err, driver.ErrCheckpointUnavailable)
}

// Create makes a new database: from the initial environment when from is
// "", otherwise as a verified copy of the snapshot from. A ref that is
// malformed, missing, deleted or corrupt yields an error wrapping
// [driver.ErrCheckpointUnavailable].
func (d *Driver) Create(ctx context.Context, from string) (*DB, Binding, error) {
	if err := d.ready(); err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	if from != "" && !storefs.ValidRef(from) {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: unavailable(ErrInvalidRef)}
	}
	if err := ctx.Err(); err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	unlock, err := storefs.Lock(d.lockPath(), false) // GC removes half-made databases
	if err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	defer unlock()
	id := storefs.NewID()
	tmp := filepath.Join(d.dir("databases"), createPrefix+id+".db")
	if from == "" {
		err = d.createInitial(ctx, tmp)
	} else {
		err = d.restore(ctx, from, tmp)
	}
	if err != nil {
		removeDB(tmp)
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	dst := d.database(id)
	if err := os.Rename(tmp, dst); err != nil {
		removeDB(tmp)
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	if err := d.syncDir(d.dir("databases")); err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	db, err := openDB(ctx, dst)
	if err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	return &DB{DB: db, id: id, path: dst}, Binding{Database: id}, nil
}

// createInitial builds the initial database at path: a copy of the
// template, then the schema.
func (d *Driver) createInitial(ctx context.Context, path string) error {
	if d.cfg.Template != "" {
		if _, err := d.copyFile(path, d.cfg.Template); err != nil {
			return fmt.Errorf("%w: template: %w", ErrConfig, err)
		}
	}
	db, err := openDB(ctx, path)
	if err != nil {
		return err
	}
	if d.cfg.Schema != "" {
		if _, err := db.ExecContext(ctx, d.cfg.Schema); err != nil {
			_ = db.Close()
			return fmt.Errorf("schema: %w", err)
		}
	}
	// Closing the last connection checkpoints the WAL into the file, so the
	// rename below moves one complete file.
	return db.Close()
}

// restore copies the snapshot ref to path, checking its hash; a snapshot
// the local store lacks is first fetched from Config.Blobs, if set.
func (d *Driver) restore(ctx context.Context, ref, path string) error {
	if err := d.fetchShared(ctx, ref); err != nil {
		return err
	}
	sum, err := d.copyFile(path, d.snapshot(ref))
	if errors.Is(err, fs.ErrNotExist) {
		return unavailable(fmt.Errorf("no such checkpoint: %w", err))
	}
	if err != nil {
		return err
	}
	if hex.EncodeToString(sum) != ref {
		return unavailable(fmt.Errorf("%w: snapshot content does not match its ref", ErrCorrupt))
	}
	return nil
}

// copyFile copies src to the new file dst, fsyncing it unless NoSync, and
// returns the SHA-256 of what it copied.
func (d *Driver) copyFile(dst, src string) ([]byte, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	_, err = io.Copy(out, io.TeeReader(in, h))
	if err == nil && !d.cfg.NoSync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// Open returns a handle for the database b names. A malformed identifier or
// a database that does not exist yields an error wrapping
// [ErrDatabaseNotFound].
func (d *Driver) Open(ctx context.Context, b Binding) (*DB, error) {
	if err := d.ready(); err != nil {
		return nil, &Error{Op: "open", Err: err}
	}
	if !storefs.ValidID(b.Database) {
		return nil, &Error{Op: "open", Err: fmt.Errorf("%w: malformed database id %s", ErrDatabaseNotFound, strconv.Quote(b.Database))}
	}
	path := d.database(b.Database)
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %s", ErrDatabaseNotFound, b.Database)
		}
		return nil, &Error{Op: "open", Err: err}
	}
	db, err := openDB(ctx, path)
	if err != nil {
		return nil, &Error{Op: "open", Err: err}
	}
	return &DB{DB: db, id: b.Database, path: path}, nil
}

// openDB opens the database file at path in WAL mode with a busy timeout and
// checks that it is reachable.
func openDB(ctx context.Context, path string) (*sql.DB, error) {
	u := url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// Checkpoint captures the committed state of db with VACUUM INTO and returns
// its ref, the hex SHA-256 of the snapshot file. db stays usable.
func (d *Driver) Checkpoint(ctx context.Context, db *DB) (string, error) {
	ref, _, err := d.CheckpointSize(ctx, db)
	return ref, err
}

// CheckpointSize is Checkpoint that also says how many bytes it stored
// (driver.Sizer): the size of the new snapshot file, or 0 when a snapshot
// of the same bytes was stored before.
func (d *Driver) CheckpointSize(ctx context.Context, db *DB) (string, int64, error) {
	if db == nil || db.DB == nil {
		return "", 0, &Error{Op: "checkpoint", Err: errors.New("nil database")}
	}
	if err := d.ready(); err != nil {
		return "", 0, &Error{Op: "checkpoint", Err: err}
	}
	unlock, err := storefs.Lock(d.lockPath(), false)
	if err != nil {
		return "", 0, &Error{Op: "checkpoint", Err: err}
	}
	defer unlock()
	tmp := filepath.Join(d.dir("tmp"), storefs.NewID()+storefs.TempSuffix)
	defer os.Remove(tmp) // no-op once renamed
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		return "", 0, &Error{Op: "checkpoint", Err: fmt.Errorf("vacuum into: %w", err)}
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return "", 0, &Error{Op: "checkpoint", Err: err}
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if err == nil && !d.cfg.NoSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, &Error{Op: "checkpoint", Err: err}
	}
	ref := hex.EncodeToString(h.Sum(nil))
	dst := d.snapshot(ref)
	if _, err := os.Lstat(dst); err == nil {
		// The same bytes were captured before. A young modification time
		// keeps Live's grace period from sweeping the ref before the log
		// records it.
		now := time.Now()
		if err := os.Chtimes(dst, now, now); err != nil {
			return "", 0, &Error{Op: "checkpoint", Ref: ref, Err: err}
		}
		return ref, 0, d.putShared(ctx, ref)
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return "", 0, &Error{Op: "checkpoint", Ref: ref, Err: err}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", 0, &Error{Op: "checkpoint", Ref: ref, Err: err}
	}
	if err := d.syncDir(d.dir("snapshots")); err != nil {
		return "", 0, &Error{Op: "checkpoint", Ref: ref, Err: err}
	}
	return ref, fi.Size(), d.putShared(ctx, ref)
}

// putShared puts the local snapshot ref into Config.Blobs, if set, unless
// it holds it already.
func (d *Driver) putShared(ctx context.Context, ref string) error {
	if d.cfg.Blobs == nil {
		return nil
	}
	h, err := blob.ParseHash(ref)
	if err == nil {
		var has bool
		if has, err = d.cfg.Blobs.Has(ctx, h); err == nil && !has {
			var f *os.File
			if f, err = os.Open(d.snapshot(ref)); err == nil {
				err = d.cfg.Blobs.Put(ctx, h, f)
				_ = f.Close()
			}
		}
	}
	if err != nil {
		return &Error{Op: "checkpoint", Ref: ref, Err: fmt.Errorf("shared blob store: %w", err)}
	}
	return nil
}

// fetchShared copies the snapshot ref from Config.Blobs into the local
// snapshots/, if the local store lacks it and a shared store is set. A
// snapshot the shared store lacks too is left for the copy to report; one
// whose content does not match is ErrCorrupt.
func (d *Driver) fetchShared(ctx context.Context, ref string) error {
	if d.cfg.Blobs == nil {
		return nil
	}
	dst := d.snapshot(ref)
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	h, err := blob.ParseHash(ref)
	if err != nil {
		return unavailable(ErrInvalidRef)
	}
	r, err := d.cfg.Blobs.Get(ctx, h)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shared blob store: %w", err)
	}
	defer r.Close()
	tmp := filepath.Join(d.dir("tmp"), storefs.NewID()+storefs.TempSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		if errors.Is(err, blob.ErrCorrupt) {
			return unavailable(fmt.Errorf("%w: shared blob store: %w", ErrCorrupt, err))
		}
		return fmt.Errorf("shared blob store: %w", err)
	}
	if err := storefs.Commit(f, dst, !d.cfg.NoSync); err != nil {
		return err
	}
	return d.syncDir(d.dir("snapshots"))
}

// Checkpoints returns the refs of every snapshot in the store, sorted.
func (d *Driver) Checkpoints() ([]string, error) {
	if err := d.ready(); err != nil {
		return nil, &Error{Op: "list", Err: err}
	}
	des, err := os.ReadDir(d.dir("snapshots"))
	if err != nil {
		return nil, &Error{Op: "list", Err: err}
	}
	var refs []string
	for _, de := range des {
		if ref, ok := strings.CutSuffix(de.Name(), ".db"); ok && storefs.ValidRef(ref) {
			refs = append(refs, ref)
		}
	}
	slices.Sort(refs)
	return refs, nil
}

// Delete removes the snapshot ref, from Config.Blobs too when set;
// Create(ref) reports [driver.ErrCheckpointUnavailable] from then on, and
// so does Delete of a ref that does not exist.
func (d *Driver) Delete(ref string) error {
	if err := d.ready(); err != nil {
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	if !storefs.ValidRef(ref) {
		return &Error{Op: "delete", Ref: ref, Err: ErrInvalidRef}
	}
	unlock, err := storefs.Lock(d.lockPath(), true)
	if err != nil {
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	defer unlock()
	inShared := false
	if d.cfg.Blobs != nil {
		h, _ := blob.ParseHash(ref)
		err := d.cfg.Blobs.Delete(context.Background(), h)
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			return &Error{Op: "delete", Ref: ref, Err: fmt.Errorf("shared blob store: %w", err)}
		}
		inShared = err == nil
	}
	if err := os.Remove(d.snapshot(ref)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if inShared {
				return nil
			}
			err = unavailable(fmt.Errorf("no such checkpoint: %w", err))
		}
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	if err := d.syncDir(d.dir("snapshots")); err != nil {
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	return nil
}

// Verify rehashes the snapshot ref. It returns nil for an intact snapshot,
// an error wrapping [ErrCorrupt] for one whose bytes do not match, and one
// wrapping [driver.ErrCheckpointUnavailable] for one that does not exist.
func (d *Driver) Verify(ctx context.Context, ref string) error {
	if err := d.ready(); err != nil {
		return &Error{Op: "verify", Ref: ref, Err: err}
	}
	if !storefs.ValidRef(ref) {
		return &Error{Op: "verify", Ref: ref, Err: ErrInvalidRef}
	}
	f, err := os.Open(d.snapshot(ref))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = unavailable(fmt.Errorf("no such checkpoint: %w", err))
		}
		return &Error{Op: "verify", Ref: ref, Err: err}
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return &Error{Op: "verify", Ref: ref, Err: err}
	}
	if want, _ := hex.DecodeString(ref); !bytes.Equal(h.Sum(nil), want) {
		return &Error{Op: "verify", Ref: ref, Err: fmt.Errorf("%w: snapshot content does not match its ref", ErrCorrupt)}
	}
	return ctx.Err()
}

// RemoveDatabase deletes the database b names, with its WAL files. Handles
// to it must be closed first.
func (d *Driver) RemoveDatabase(b Binding) error {
	if err := d.ready(); err != nil {
		return &Error{Op: "remove database", Err: err}
	}
	if !storefs.ValidID(b.Database) {
		return &Error{Op: "remove database", Err: fmt.Errorf("%w: malformed database id %s", ErrDatabaseNotFound, strconv.Quote(b.Database))}
	}
	removeDB(d.database(b.Database))
	if _, err := os.Stat(d.database(b.Database)); !errors.Is(err, fs.ErrNotExist) {
		return &Error{Op: "remove database", Err: fmt.Errorf("%s still exists: %v", b.Database, err)}
	}
	return nil
}

// createPrefix starts the name of a database file being created.
const createPrefix = ".create-"

// GC removes what interrupted operations left behind: temporary snapshot
// files in tmp/ and half-created databases. It holds the store's lock
// exclusively, so checkpoints and creations through any Driver on the store
// wait for it. It returns how many files it removed.
func (d *Driver) GC(ctx context.Context) (int, error) {
	if err := d.ready(); err != nil {
		return 0, &Error{Op: "gc", Err: err}
	}
	unlock, err := storefs.Lock(d.lockPath(), true)
	if err != nil {
		return 0, &Error{Op: "gc", Err: err}
	}
	defer unlock()
	removed := 0
	temps, err := os.ReadDir(d.dir("tmp"))
	if err != nil {
		return 0, &Error{Op: "gc", Err: err}
	}
	for _, de := range temps {
		if err := os.Remove(filepath.Join(d.dir("tmp"), de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, &Error{Op: "gc", Err: err}
		}
		removed++
	}
	dbs, err := os.ReadDir(d.dir("databases"))
	if err != nil {
		return removed, &Error{Op: "gc", Err: err}
	}
	for _, de := range dbs {
		if strings.HasPrefix(de.Name(), createPrefix) {
			if err := os.Remove(filepath.Join(d.dir("databases"), de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, &Error{Op: "gc", Err: err}
			}
			removed++
		}
	}
	return removed, ctx.Err()
}

// removeDB removes a database file and its WAL and shared-memory files.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(path + suffix)
	}
}
