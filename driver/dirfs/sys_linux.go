package dirfs

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// keyOf returns the file-index key of a file's lstat result.
func keyOf(fi fs.FileInfo) statKey {
	k := statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	k.ctime = k.mtime
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ctime = st.Ctim.Nano()
		k.ino = st.Ino
		k.dev = st.Dev
	}
	return k
}

// syncFS flushes the whole file system that holds dir with syncfs(2).
func syncFS(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return false, &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return true, nil
}

// reflink makes dst share src's extents (FICLONE) where the file system
// supports it (Btrfs, XFS, bcachefs); it reports false when it does not.
func reflink(dst, src *os.File) bool {
	return unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil
}
