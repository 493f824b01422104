//go:build unix

package storefs

import (
	"os"

	"golang.org/x/sys/unix"
)

// Lock takes an advisory lock on the file at path, creating it if needed:
// shared when exclusive is false. It blocks until the lock is granted and
// returns the function that releases it.
func Lock(path string, exclusive bool) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return func() { _ = f.Close() }, nil // closing the file releases the lock
}
