// Package dirfs is a forkline driver for a workspace directory: the files an
// agent's tools read and write. Checkpoints are content-addressed, incremental
// snapshots kept in a local store; a fork gets a fresh directory materialized
// from one.
//
//	ws, err := sdk.Resource(ctx, "workspace", dirfs.New(dirfs.Config{Store: dir}), sdk.EverySteps(5))
//	…
//	err = ws.WriteFile("src/main.go", code)
//
// # The store
//
// [Config.Store] holds everything, so that blobs and workspaces share one
// file system:
//
//	blobs/<2 hex>/<sha256 hex>   file contents, stored once per content, read-only
//	manifests/<ref>              one manifest per checkpoint; ref = SHA-256 of the manifest
//	workspaces/<id>/             live workspaces; Binding{Workspace: id}
//	tmp/                         temporary files of writes in progress
//	epoch, lock                  GC bookkeeping
//
// # What a checkpoint captures
//
// A manifest lists, in walk order, every directory (with its permission
// bits, so empty directories survive), every regular file (permission bits,
// size, SHA-256 of its content) and every symbolic link (its target text, as
// it is: a link is never followed, and restoring creates the same link, even
// one pointing outside the workspace). Modification times, ownership,
// extended attributes and the setuid, setgid and sticky bits are not
// captured; restored files get new times, and hard links within the
// workspace are restored as separate files with equal contents. Anything else in the workspace (a
// socket, a named pipe, a device) fails the checkpoint with
// [ErrUnsupportedFile]. Equal trees give equal refs.
//
// # Incremental capture
//
// A checkpoint reads only files that changed. Each handle keeps the file
// index of its previous capture: path → (size, mtime, ctime, inode, device,
// mode, hash). A file whose lstat matches its entry is not read again, and a
// blob already in the store is not written again. Two cases make an entry
// untrustworthy, and the file is then read again:
//
//   - it is racily clean: its mtime or ctime lay within [DefaultRacyWindow]
//     (2 s) before the capture that recorded it, so a same-size rewrite in the
//     same timestamp tick could leave every stat field unchanged (git's
//     racy-git problem);
//   - the store was garbage-collected since ([Driver.GC] changes the store's
//     epoch), so the blob the entry names may be gone.
//
// The change time is part of the key, so a tool that sets a file's mtime
// back (touch -r, tar, rsync -t) does not hide a change. A handle from
// [Driver.Open] or a restore starts with no index: its first capture reads
// every file once.
//
// # Atomicity and durability
//
// A capture writes each new blob to tmp/, fsyncs it and renames it into
// blobs/ (after the first 32 blobs of a capture, the rest are synced with one
// syncfs(2) before being renamed and another after); then it writes the
// manifest to tmp/, fsyncs it, renames it to manifests/<ref> and fsyncs the
// directory. A blob appears under its name only with durable contents, and a
// ref appears only when every blob it names is durable, so a crash at any
// moment leaves no ref or a ref that restores completely. Leftovers
// (temporary files, unreferenced blobs, half-created workspaces) are removed
// by [Driver.GC].
//
// # Restore
//
// [Driver.Create] with a ref materializes the manifest into a new directory
// under a temporary name and renames it into place when complete:
// directories and links in manifest order, then the files, several at a
// time (restoring is bound by system calls, which overlap). Files are
// cloned from their blobs with FICLONE where the file system supports
// reflinks (copy-on-write: a write in the workspace never reaches the blob)
// and copied otherwise; never hard-linked. Every file's content is hashed
// while it is written and checked against the manifest, so a corrupt or
// missing blob fails the restore with [ErrCorrupt] and
// [driver.ErrCheckpointUnavailable] rather than yielding wrong content. The
// workspace itself is live state and, like any write a tool makes to it, is
// not fsynced. [Driver.Verify] rehashes a checkpoint's blobs without
// restoring it.
//
// # Refs and paths
//
// A ref is the 64-digit lower-case hex SHA-256 of a manifest; anything else
// (empty, absolute, with "/" or "..") is refused with [ErrInvalidRef] before
// it touches the file system. Manifests are checked on read: their bytes
// must hash to the ref and every path must be local and lie below a
// directory listed before it, so a manifest can never make a restore write
// outside its workspace. The [Workspace] file helpers are built on
// [os.Root] and refuse paths that leave the workspace, through ".." or
// through a symbolic link, with [ErrOutsideWorkspace].
//
// # Concurrency
//
// Captures and restores hold a shared flock(2) on the store; GC and Delete
// hold it exclusively, so any number of Driver values, in one process or
// several, may share a store. The kernel never checkpoints a workspace while
// a step that may change it runs; a capture of a directory that changes
// under it captures some mixture of old and new files.
//
// # Shared checkpoints and moved stores
//
// With [Config.Blobs] set to a shared blob.Store (driver/blob; pgblob for
// hosts sharing a Postgres log), the local store is a cache of it: a
// capture also puts the blobs the shared store lacks and then the manifest,
// as a blob named by the ref; a restore whose manifest or blobs are missing
// locally gets them from the shared store, checking each against its hash,
// and materializes locally as above. So a checkpoint captured on host A
// restores on host B (DESIGN §11). [Driver.Delete] deletes the manifest
// from the shared store too; [Driver.GC] and [Driver.Live] collect the
// local store only. Without Blobs, the local blobs/ and tmp/ are exactly
// the directory implementation blob.NewDir(Store).
//
// A binding is a workspace of the local store: it is not portable (it does
// not implement driver.Portable), so the kernel opens it only in the
// process that created it and binds anew from a checkpoint elsewhere.
//
// The recorded Configuration is nil ([Driver.Configuration]): nothing in it
// names where the store lives, so a data folder copied or moved to another
// path opens its bindings and restores its checkpoints. Bindings recorded
// by older versions hold {"store": "/abs/path", "template": …};
// [Driver.ReadConfiguration] drops those two keys before the kernel
// compares, so those logs keep working wherever the store is now.
//
// # Coverage reuse
//
// [Config.CoverageReuse] declares that every change to the workspace goes
// through tools and steps that declare it (with sdk.Affects). Set it only
// when nothing else — no LLM-driven shell, no background process — writes
// to the directory.
//
// # Comparing checkpoints
//
// [Driver.Diff] ([driver.Differ]) lists the entries two checkpoints add,
// remove or change, by path, reading only manifests and the blobs of
// changed files (each checked against its hash): a unified diff for a text
// file up to [MaxTextDiff] bytes, the sizes of any other.
package dirfs
