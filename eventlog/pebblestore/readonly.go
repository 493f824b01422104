package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrReadOnly is returned by Create, Append, AppendUnsynced and Fork of a
// store opened with ReadOnly. Nothing was written.
var ErrReadOnly = errors.New("pebblestore: log opened read-only")

// ReadOnly opens an existing log for reading only: Open fails (ErrNotALog)
// when dir holds no log, the store's writes fail with ErrReadOnly, and no
// file of the folder is created, changed or deleted — not even by Pebble,
// whose compactions, flushes and file deletions are off (its filesystem is
// wrapped to refuse every write). It works on a read-only mount. It holds a
// shared lock on the folder's LOCK file, so it fails with ErrLocked while a
// writer has the log open, and a writer fails the same way while it is open.
func ReadOnly() Option { return func(o *options) { o.readOnly = true } }

// errWriteRefused is the error of readOnlyFS for every write.
var errWriteRefused = errors.New("pebblestore: write refused: the log was opened read-only")

// readOnlyFS is the filesystem of a read-only store: reads pass through,
// every write is refused, and Lock takes a shared (read) lock without
// creating the lock file.
type readOnlyFS struct {
	vfs.FS
	wals *walRecorder // if not nil, records the write-ahead logs opened
}

func (fs readOnlyFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	fs.wals.add(name)
	return fs.FS.Open(name, opts...)
}

func (readOnlyFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("create %s: %w", name, errWriteRefused)
}

func (readOnlyFS) Link(oldname, newname string) error {
	return fmt.Errorf("link %s: %w", newname, errWriteRefused)
}

func (readOnlyFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, fmt.Errorf("open %s for writing: %w", name, errWriteRefused)
}

func (readOnlyFS) Remove(name string) error {
	return fmt.Errorf("remove %s: %w", name, errWriteRefused)
}

func (readOnlyFS) RemoveAll(name string) error {
	return fmt.Errorf("remove %s: %w", name, errWriteRefused)
}

func (readOnlyFS) Rename(oldname, newname string) error {
	return fmt.Errorf("rename %s: %w", oldname, errWriteRefused)
}

func (readOnlyFS) ReuseForWrite(oldname, newname string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fmt.Errorf("reuse %s: %w", oldname, errWriteRefused)
}

func (readOnlyFS) MkdirAll(dir string, _ os.FileMode) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	return fmt.Errorf("mkdir %s: %w", dir, errWriteRefused)
}

func (readOnlyFS) Lock(name string) (io.Closer, error) { return sharedLock(name) }

func (fs readOnlyFS) Unwrap() vfs.FS { return fs.FS }

// openDirs guards against a read-only and a read-write store of one folder
// in one process: file locks do not conflict within a process, and a
// writer's compactions would delete files under the reader.
var openDirs struct {
	sync.Mutex
	m map[string]int // > 0: read-only stores; -1: a read-write store
}

// claimDir registers a store of dir, or returns ErrLocked.
func claimDir(dir string, readOnly bool) (release func(), err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	openDirs.Lock()
	defer openDirs.Unlock()
	if openDirs.m == nil {
		openDirs.m = make(map[string]int)
	}
	n := openDirs.m[abs]
	claimed := true
	switch {
	case readOnly && n < 0:
		return nil, fmt.Errorf("%w: %s is open for writing in this process", ErrLocked, dir)
	case !readOnly && n > 0:
		return nil, fmt.Errorf("%w: %s is open read-only in this process", ErrLocked, dir)
	case readOnly:
		openDirs.m[abs] = n + 1
	case n == 0:
		openDirs.m[abs] = -1
	default: // a second writer: Pebble's own lock refuses it
		claimed = false
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if !claimed {
				return
			}
			openDirs.Lock()
			defer openDirs.Unlock()
			switch n := openDirs.m[abs]; {
			case n > 1:
				openDirs.m[abs] = n - 1
			case readOnly && n == 1, !readOnly && n == -1:
				delete(openDirs.m, abs)
			}
		})
	}, nil
}
