//go:build unix

package pebblestore

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// sharedLocks holds one open file per lock file this process holds a shared
// lock on: an fcntl lock belongs to the process and closing any descriptor
// of the file drops it, so read-only stores of one folder share one.
var sharedLocks struct {
	sync.Mutex
	m map[string]*sharedLockFile
}

type sharedLockFile struct {
	f    *os.File
	refs int
}

// sharedLock takes a shared lock on the lock file name, which conflicts with
// the exclusive lock of a writer (Pebble's) and not with other readers. A
// missing lock file (on a read-only copy of a log) is no lock.
func sharedLock(name string) (io.Closer, error) {
	sharedLocks.Lock()
	defer sharedLocks.Unlock()
	if l, ok := sharedLocks.m[name]; ok {
		l.refs++
		return &sharedUnlocker{name: name}, nil
	}
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
	if sharedLocks.m == nil {
		sharedLocks.m = make(map[string]*sharedLockFile)
	}
	sharedLocks.m[name] = &sharedLockFile{f: f, refs: 1}
	return &sharedUnlocker{name: name}, nil
}

// sharedUnlocker drops one reference to a shared lock.
type sharedUnlocker struct {
	name string
	once sync.Once
}

func (u *sharedUnlocker) Close() error {
	var err error
	u.once.Do(func() {
		sharedLocks.Lock()
		defer sharedLocks.Unlock()
		l := sharedLocks.m[u.name]
		if l.refs--; l.refs == 0 {
			delete(sharedLocks.m, u.name)
			err = l.f.Close()
		}
	})
	return err
}
