//go:build unix

package pebblestore

import (
	"errors"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// sharedLock takes a shared lock on the lock file name, which conflicts with
// the exclusive lock of a writer (Pebble's) and not with other readers. A
// missing lock file (on a read-only copy of a log) is no lock.
func sharedLock(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, err
	}
	spec := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &spec); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
