// Package sqlitedb is a forkline driver for an SQLite database file, using
// the pure-Go modernc.org/sqlite (no cgo). The handle is a [DB], which embeds
// the open [database/sql.DB]; a checkpoint is a standalone copy of the
// database made with VACUUM INTO, and a fork gets a fresh file copied from
// one.
//
//	db, err := sdk.Resource(ctx, "db", sqlitedb.New(sqlitedb.Config{Store: dir, Schema: schema}))
//	…
//	_, err = db.ExecContext(ctx, "INSERT INTO notes(body) VALUES (?)", body)
//
// # The store
//
//	databases/<id>.db       live databases (with their -wal and -shm files); Binding{Database: id}
//	snapshots/<ref>.db      checkpoints; ref = SHA-256 of the snapshot file, read-only
//	tmp/                    files being written
//	lock                    flock: shared by captures and creations, exclusive for Delete and GC
//
// # Checkpoint and restore
//
// [Driver.Checkpoint] runs VACUUM INTO a temporary file in tmp/, which
// captures the committed state of the database as one consistent,
// compacted file (uncommitted transactions of other connections are not
// included). The file is hashed, fsynced, renamed to snapshots/<ref>.db and
// the directory is fsynced: a crash leaves no ref or a complete one. Equal
// snapshot bytes give equal refs.
//
// [Driver.Create] with a ref copies the snapshot to a new file under a
// temporary name, hashing it as it goes: a snapshot whose bytes do not match
// its ref fails with [ErrCorrupt] and [driver.ErrCheckpointUnavailable]
// instead of yielding a wrong database. The copy is fsynced and renamed into
// place. Without a ref, the initial database is a copy of [Config.Template]
// (or empty) on which [Config.Schema] has run.
//
// Databases are opened in WAL mode with a busy timeout, so several handles
// (Open of the same binding) can use one database at once.
//
// # Shared checkpoints and moved stores
//
// With [Config.Blobs] set to a shared blob.Store, each checkpoint also puts
// its snapshot there (a snapshot is one blob, named by its ref), and
// Create fetches a snapshot the local store lacks from there, checking its
// hash: a checkpoint captured on one host restores on another (DESIGN
// §11). The recorded Configuration holds only the schema, never a path;
// bindings recorded by older versions, which held "store" and "template"
// paths too, are read without them ([Driver.ReadConfiguration]).
//
// # Refs
//
// A ref is the 64-digit lower-case hex SHA-256 of the snapshot file;
// anything else is refused with [ErrInvalidRef] (and, from Create,
// [driver.ErrCheckpointUnavailable]) before it touches the file system.
//
// # Comparing checkpoints
//
// [Driver.Diff] ([driver.Differ]) opens two snapshots read-only, after
// checking their hashes, and lists the tables added, removed or reshaped
// and the rows added, removed or changed, matched by primary key, at most
// [MaxRowChanges] per table.
package sqlitedb
