package dirfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/forkline/forkline/driver/internal/storefs"
)

// statKey is what the file index compares to decide that a file is unchanged
// since the previous capture without reading it.
type statKey struct {
	size  int64
	mtime int64 // nanoseconds since the epoch
	ctime int64 // nanoseconds since the epoch; equal to mtime where unknown
	ino   uint64
	dev   uint64
	mode  fs.FileMode
}

// indexEntry remembers a file as the previous capture saw it.
type indexEntry struct {
	key  statKey
	hash [sha256.Size]byte
	// trusted is false for a racily clean entry: its mtime or ctime lay
	// within the racy window before the capture that recorded it, so a
	// same-size rewrite in the same timestamp tick would leave key unchanged.
	// Such an entry is read again by the next capture.
	trusted bool
}

// fileIndex is the per-workspace cache of the previous capture.
//
// Invariant: for every entry with trusted set, the blob of hash existed in
// the store when the capture that recorded it finished, and the store's GC
// epoch was epoch. A GC changes the epoch, so a stale index is never used to
// skip a file whose blob may have been removed.
type fileIndex struct {
	epoch string
	files map[string]indexEntry
}

// captureStats counts what one capture did; tests read it.
type captureStats struct {
	files        int   // regular files in the tree
	hashed       int   // files read and hashed
	reused       int   // files taken from the index without reading
	blobsWritten int   // new blobs stored
	stored       int64 // bytes of the new blobs, and of the manifest if new
}

// trusted reports whether an entry recorded with key by a capture that began
// at scanStart can be trusted by the next capture when the key is unchanged.
func trusted(key statKey, scanStart time.Time, window time.Duration) bool {
	limit := scanStart.Add(-window).UnixNano()
	return key.mtime < limit && key.ctime < limit
}

// captureLocked walks w's directory, stores new blobs, and commits a
// manifest. w.mu must be held.
//
// Order of durability: every blob a manifest references is durable under its
// final name before the manifest is written, and the manifest appears under
// its ref (temp file, fsync, rename, directory fsync) only once complete. A
// crash at any point leaves no ref, or a ref that restores completely; what
// it may leave behind (temp files, unreferenced blobs) GC removes.
func (d *Driver) captureLocked(ctx context.Context, w *Workspace) (string, error) {
	unlock, err := storefs.Lock(d.store.lock(), false)
	if err != nil {
		return "", &Error{Op: "checkpoint", Err: err}
	}
	defer unlock()
	epoch, err := d.store.readEpoch()
	if err != nil {
		return "", &Error{Op: "checkpoint", Err: err}
	}
	prev := w.mu.index
	if prev != nil && prev.epoch != epoch {
		prev = nil
	}
	sizeHint := 0
	if prev != nil {
		sizeHint = len(prev.files)
	}
	next := &fileIndex{epoch: epoch, files: make(map[string]indexEntry, sizeHint)}
	var st captureStats
	bw := &blobWriter{d: d, pending: make(map[[sha256.Size]byte]bool)}
	defer bw.abort()
	scanStart := time.Now()
	m := make(manifest, 0, w.mu.entries)
	n := 0
	root := w.dir
	err = filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			if !de.IsDir() {
				return fmt.Errorf("workspace is not a directory")
			}
			return nil
		}
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rel := filepath.ToSlash(p[len(root)+1:])
		info, err := de.Info()
		if err != nil {
			return &Error{Op: "checkpoint", Path: rel, Err: err}
		}
		switch mode := info.Mode(); {
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return &Error{Op: "checkpoint", Path: rel, Err: err}
			}
			m = append(m, entry{kind: kindSymlink, path: rel, target: target})
		case mode.IsDir():
			m = append(m, entry{kind: kindDir, path: rel, mode: mode.Perm()})
		case mode.IsRegular():
			st.files++
			key := keyOf(info)
			if g := int64(d.granularity); g > 0 {
				key.mtime -= key.mtime % g
				key.ctime -= key.ctime % g
			}
			e := entry{kind: kindFile, path: rel, mode: mode.Perm(), size: key.size}
			if old, ok := prev.lookup(rel); ok && old.trusted && old.key == key {
				e.hash = old.hash
				st.reused++
			} else {
				h, size, err := bw.storeFile(w.root, rel)
				if err != nil {
					return &Error{Op: "checkpoint", Path: rel, Err: err}
				}
				e.hash, e.size = h, size
				st.hashed++
				if size != key.size {
					// Changed while being read: do not index it.
					m = append(m, e)
					return nil
				}
			}
			next.files[rel] = indexEntry{key: key, hash: e.hash, trusted: trusted(key, scanStart, d.racyWindow)}
			m = append(m, e)
		default:
			return &Error{Op: "checkpoint", Path: rel, Err: fmt.Errorf("%w: %v", ErrUnsupportedFile, mode.Type())}
		}
		return nil
	})
	if err != nil {
		var de *Error
		if errors.As(err, &de) {
			return "", err
		}
		return "", &Error{Op: "checkpoint", Err: err}
	}
	if err := bw.finish(); err != nil {
		return "", &Error{Op: "checkpoint", Err: err}
	}
	st.blobsWritten, st.stored = bw.written, bw.bytes
	data := m.encode()
	sum := sha256.Sum256(data)
	ref := hex.EncodeToString(sum[:])
	dst := d.store.manifest(ref)
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := storefs.WriteAtomic(d.store.tmp(), dst, data, 0o444, !d.cfg.NoSync); err != nil {
			return "", &Error{Op: "checkpoint", Ref: ref, Err: err}
		}
		st.stored += int64(len(data))
	} else if err != nil {
		return "", &Error{Op: "checkpoint", Ref: ref, Err: err}
	} else {
		// The same tree again: a young modification time keeps Live's
		// grace period from sweeping the ref before the log records it.
		now := time.Now()
		if err := os.Chtimes(dst, now, now); err != nil {
			return "", &Error{Op: "checkpoint", Ref: ref, Err: err}
		}
	}
	if err := d.publishShared(ctx, ref, m, data); err != nil {
		return "", err
	}
	w.mu.index = next
	w.mu.last = st
	w.mu.entries = len(m)
	return ref, nil
}

// lookup returns the entry for rel, if the index exists and has one.
func (x *fileIndex) lookup(rel string) (indexEntry, bool) {
	if x == nil {
		return indexEntry{}, false
	}
	e, ok := x.files[rel]
	return e, ok
}

// Sizes that shape how blobs are written.
const (
	// smallFile is the size up to which a file is read into memory whole,
	// hashed, and written only if its blob is missing. Larger files stream
	// into a temporary file while they are hashed.
	smallFile = 1 << 20
	// copyBufSize is the buffer size for streaming copies.
	copyBufSize = 256 << 10
	// individualSyncs is how many new blobs of one capture are fsynced one
	// by one. Past it, the rest are synced with one syncfs(2) before they
	// are renamed into place, and another after: two calls instead of one
	// fsync per blob when a capture stores thousands of files.
	individualSyncs = 32
)

// blobWriter stores the new blobs of one capture.
//
// Invariant: a blob appears under its final name only with its content
// durable, so that a later capture that finds the blob present may rely on
// it.
type blobWriter struct {
	d       *Driver
	buf     []byte
	pending map[[sha256.Size]byte]bool // blobs stored or staged by this capture
	staged  []stagedBlob               // written, not yet synced nor renamed
	dirty   map[string]bool            // directories with new names, to sync
	shards  map[string]bool            // shard directories known to exist
	written int
	bytes   int64 // of the blobs written
}

// stagedBlob is a temporary file waiting for a batched sync and its rename.
type stagedBlob struct{ tmp, dst string }

// storeFile reads the file rel of root, hashes it, and stores its blob if
// the store lacks it. It returns the hash and the number of bytes read.
func (bw *blobWriter) storeFile(root *os.Root, rel string) ([sha256.Size]byte, int64, error) {
	var h [sha256.Size]byte
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return h, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return h, 0, err
	}
	if !fi.Mode().IsRegular() {
		return h, 0, fmt.Errorf("%w: changed to %v during the capture", ErrUnsupportedFile, fi.Mode().Type())
	}
	if fi.Size() <= smallFile {
		data, err := bw.readSmall(f, fi.Size())
		if err != nil {
			return h, 0, err
		}
		h = sha256.Sum256(data)
		if present, err := bw.present(h); err != nil || present {
			return h, int64(len(data)), err
		}
		tmp, err := bw.createTemp()
		if err != nil {
			return h, 0, err
		}
		if _, err := tmp.Write(data); err != nil {
			bw.discard(tmp)
			return h, 0, err
		}
		return h, int64(len(data)), bw.add(tmp, h, int64(len(data)))
	}
	tmp, err := bw.createTemp()
	if err != nil {
		return h, 0, err
	}
	hasher := sha256.New()
	if cap(bw.buf) < copyBufSize {
		bw.buf = make([]byte, 0, copyBufSize)
	}
	n, err := io.CopyBuffer(io.MultiWriter(tmp, hasher), f, bw.buf[:copyBufSize])
	if err != nil {
		bw.discard(tmp)
		return h, 0, err
	}
	copy(h[:], hasher.Sum(nil))
	if present, err := bw.present(h); err != nil || present {
		bw.discard(tmp)
		return h, n, err
	}
	return h, n, bw.add(tmp, h, n)
}

// readSmall reads all of f, expected to hold about size bytes, into the
// writer's reusable buffer.
func (bw *blobWriter) readSmall(f *os.File, size int64) ([]byte, error) {
	if int64(cap(bw.buf)) < size+1 {
		bw.buf = make([]byte, 0, max(size+1, 64<<10))
	}
	buf := bw.buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			bw.buf = buf[:0]
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// present reports whether the blob h is in the store or staged by this
// capture.
func (bw *blobWriter) present(h [sha256.Size]byte) (bool, error) {
	if bw.pending[h] {
		return true, nil
	}
	fi, err := os.Lstat(bw.d.store.blob(h))
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return false, fmt.Errorf("%w: blob %x is not a regular file", ErrCorrupt, h)
	case err == nil:
		bw.pending[h] = true
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// createTemp creates a temporary blob file, read-only once closed.
func (bw *blobWriter) createTemp() (*os.File, error) {
	f, err := storefs.CreateTemp(bw.d.store.tmp())
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o444); err != nil {
		bw.discard(f)
		return nil, err
	}
	return f, nil
}

// discard closes and removes a temporary file.
func (bw *blobWriter) discard(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// add makes the temporary file tmp the blob h: synced and renamed now while
// the capture has written few blobs, staged for a batched sync after that.
func (bw *blobWriter) add(tmp *os.File, h [sha256.Size]byte, size int64) error {
	dst := bw.d.store.blob(h)
	bw.pending[h] = true
	bw.written++
	bw.bytes += size
	if bw.written <= individualSyncs {
		if err := bw.ensureShard(dst); err != nil {
			bw.discard(tmp)
			return err
		}
		if err := storefs.Commit(tmp, dst, !bw.d.cfg.NoSync); err != nil {
			return err
		}
		bw.markDirty(dst)
		return nil
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	bw.staged = append(bw.staged, stagedBlob{tmp: tmp.Name(), dst: dst})
	return nil
}

// ensureShard makes the shard directory of the blob path dst if it is
// missing; the new directory entry is synced with the other dirty
// directories before the manifest is written.
func (bw *blobWriter) ensureShard(dst string) error {
	shard := filepath.Dir(dst)
	if bw.shards[shard] {
		return nil
	}
	err := os.Mkdir(shard, 0o755)
	switch {
	case err == nil:
		bw.markDirty(dst)
		bw.markDirty(shard)
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	if bw.shards == nil {
		bw.shards = make(map[string]bool)
	}
	bw.shards[shard] = true
	return nil
}

func (bw *blobWriter) markDirty(dst string) {
	if bw.dirty == nil {
		bw.dirty = make(map[string]bool)
	}
	bw.dirty[filepath.Dir(dst)] = true
}

// finish makes every blob of the capture durable under its final name.
func (bw *blobWriter) finish() error {
	if len(bw.staged) > 0 {
		if !bw.d.cfg.NoSync {
			if err := syncStaged(bw.d.store.root, bw.staged); err != nil {
				return err
			}
		}
		for len(bw.staged) > 0 {
			s := bw.staged[0]
			if err := bw.ensureShard(s.dst); err != nil {
				return err
			}
			if err := os.Rename(s.tmp, s.dst); err != nil {
				return err
			}
			bw.staged = bw.staged[1:]
			bw.markDirty(s.dst)
		}
	}
	for dir := range bw.dirty {
		if err := bw.d.syncDir(dir); err != nil {
			return err
		}
		delete(bw.dirty, dir)
	}
	return nil
}

// abort removes the temporary files of staged blobs after a failed capture.
// Blobs already renamed stay; GC removes them if no checkpoint refers to
// them.
func (bw *blobWriter) abort() {
	for _, s := range bw.staged {
		_ = os.Remove(s.tmp)
	}
	bw.staged = nil
}

// syncStaged makes the contents of staged temporary files durable: one
// syncfs(2) of the store's file system where the system has it, or an fsync
// of each file.
func syncStaged(root string, staged []stagedBlob) error {
	if ok, err := syncFS(root); ok || err != nil {
		return err
	}
	for _, s := range staged {
		f, err := os.Open(s.tmp)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
