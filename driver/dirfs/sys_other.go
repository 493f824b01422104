//go:build !linux

package dirfs

import (
	"io/fs"
	"os"
)

// keyOf returns the file-index key of a file's lstat result. Without a
// change time, a file whose mtime was set back by a tool is only caught by
// its size; the racy window still catches same-tick rewrites.
func keyOf(fi fs.FileInfo) statKey {
	k := statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	k.ctime = k.mtime
	return k
}

// syncFS reports false: the caller fsyncs file by file.
func syncFS(dir string) (bool, error) { return false, nil }

// reflink reports false: the caller copies.
func reflink(dst, src *os.File) bool { return false }
