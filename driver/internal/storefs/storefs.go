package storefs

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
)

// RefLen is the length of a ref: the hex encoding of a SHA-256 digest.
const RefLen = 64

// ValidRef reports whether ref is a well-formed ref: exactly 64 lower-case
// hex digits. Such a ref can never name a path outside the store: it has no
// separator, no "..", and is not absolute.
func ValidRef(ref string) bool {
	return isLowerHex(ref, RefLen)
}

// IDLen is the length of an identifier made by NewID.
const IDLen = 32

// ValidID reports whether id is a well-formed identifier made by NewID.
func ValidID(id string) bool {
	return isLowerHex(id, IDLen)
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewID returns a random 128-bit identifier as 32 lower-case hex digits.
func NewID() string {
	var b [IDLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b[:])
}

// TempSuffix ends the name of every temporary file made by CreateTemp.
const TempSuffix = ".tmp"

// CreateTemp creates a new temporary file in dir, named with a random
// identifier and TempSuffix, open for writing with mode 0600.
func CreateTemp(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, NewID()+TempSuffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// SyncDir fsyncs the directory dir, making renames and creations in it
// durable.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Commit syncs (when durable) and closes the temporary file f, then renames
// it to dst. It does not sync dst's directory; call SyncDir once after a
// batch of commits. On failure f is closed and removed.
func Commit(f *os.File, dst string, durable bool) error {
	var err error
	if durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// WriteAtomic writes data to dst atomically: through a temporary file in
// tmpDir (which must be on dst's file system) and a rename. When durable, the
// file is fsynced before the rename and dst's directory after it. The file's
// mode is perm.
func WriteAtomic(tmpDir, dst string, data []byte, perm os.FileMode, durable bool) error {
	f, err := CreateTemp(tmpDir)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	if err := Commit(f, dst, durable); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return SyncDir(filepath.Dir(dst))
}
