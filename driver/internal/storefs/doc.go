// Package storefs holds the file-system primitives shared by forkline's
// drivers that keep checkpoints in a local directory: ref and identifier
// validation, atomic writes (temp file, fsync, rename, directory fsync) and a
// store-wide lock.
//
// # Atomic writes
//
// [WriteAtomic] and [Commit] make a file appear under its final name only once
// its contents are durable: the bytes go to a temporary file in the store's
// temp directory, which is synced, renamed into place, and the destination
// directory is synced. A crash at any moment leaves either no file under the
// final name or the complete file, plus a temporary file that a garbage
// collector may remove.
//
// # Locking
//
// [Lock] takes a shared or exclusive advisory lock (flock(2)) on a file in the
// store. Checkpoints and restores hold it shared; garbage collection holds it
// exclusive, so that it never removes a blob a concurrent checkpoint has
// written but not yet referenced. The lock works across processes and across
// goroutines of one process. On systems without flock it is a no-op.
package storefs
