package dirfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Workspace is the handle of one workspace directory. Its file helpers take
// slash- or OS-separated paths relative to the workspace and refuse, with an
// error wrapping [ErrOutsideWorkspace], any path that is absolute, climbs
// out with "..", or resolves through a symbolic link to a place outside the
// workspace (they are built on [os.Root]). Code that needs more may work in
// [Workspace.Dir] directly; a checkpoint captures whatever is there.
//
// A Workspace is safe for concurrent use, but a checkpoint taken while files
// change captures some mixture of old and new contents; the kernel never
// checkpoints while a step that may change the workspace runs.
type Workspace struct {
	id   string
	dir  string
	root *os.Root

	mu struct {
		sync.Mutex
		index   *fileIndex   // the previous capture's file index; nil before the first
		last    captureStats // what the previous capture did
		entries int          // manifest entries of the previous capture, to size the next
	}
}

// openWorkspace returns a handle for the workspace directory dir.
func openWorkspace(id, dir string) (*Workspace, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Workspace{id: id, dir: dir, root: root}, nil
}

// ID returns the workspace's identifier, as in its [Binding].
func (w *Workspace) ID() string { return w.id }

// Dir returns the absolute path of the workspace directory.
func (w *Workspace) Dir() string { return w.dir }

// Root returns the [os.Root] of the workspace, for operations the helpers
// do not offer. It is closed by [Workspace.Close].
func (w *Workspace) Root() *os.Root { return w.root }

// FS returns the workspace as a read-only [fs.FS].
func (w *Workspace) FS() fs.FS { return w.root.FS() }

// Close releases the handle's open directory. The workspace itself stays
// (reach it again with [Driver.Open]); the handle's file helpers and a
// Checkpoint of it fail afterwards. Checkpoints already taken are not
// affected.
func (w *Workspace) Close() error {
	if w == nil || w.root == nil {
		return nil
	}
	return w.root.Close()
}

// ReadFile returns the contents of the file name.
func (w *Workspace) ReadFile(name string) ([]byte, error) {
	name, err := w.local("read", name)
	if err != nil {
		return nil, err
	}
	b, err := w.root.ReadFile(name)
	return b, w.wrap("read", name, err)
}

// WriteFile writes data to the file name, creating it with mode 0644 (and any
// missing parent directories with mode 0755) or truncating it, keeping its
// mode. A tool that writes files rarely wants to create parents first.
func (w *Workspace) WriteFile(name string, data []byte) error {
	name, err := w.local("write", name)
	if err != nil {
		return err
	}
	if dir := filepath.Dir(filepath.Clean(name)); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return w.wrap("write", name, err)
		}
	}
	return w.wrap("write", name, w.root.WriteFile(name, data, 0o644))
}

// MkdirAll creates the directory name and any missing parents with mode
// perm (before umask).
func (w *Workspace) MkdirAll(name string, perm fs.FileMode) error {
	name, err := w.local("mkdir", name)
	if err != nil {
		return err
	}
	return w.wrap("mkdir", name, w.root.MkdirAll(name, perm))
}

// Remove removes the file, symbolic link or empty directory name.
func (w *Workspace) Remove(name string) error {
	name, err := w.local("remove", name)
	if err != nil {
		return err
	}
	return w.wrap("remove", name, w.root.Remove(name))
}

// RemoveAll removes name and everything below it. A missing name is not an
// error.
func (w *Workspace) RemoveAll(name string) error {
	name, err := w.local("remove", name)
	if err != nil {
		return err
	}
	if filepath.Clean(name) == "." {
		return &Error{Op: "remove", Path: name, Err: errors.New("refusing to remove the workspace root")}
	}
	return w.wrap("remove", name, w.root.RemoveAll(name))
}

// Rename renames (moves) oldname to newname, both inside the workspace.
func (w *Workspace) Rename(oldname, newname string) error {
	oldname, err := w.local("rename", oldname)
	if err != nil {
		return err
	}
	newname, err = w.local("rename", newname)
	if err != nil {
		return err
	}
	return w.wrap("rename", oldname, w.root.Rename(oldname, newname))
}

// Chmod sets the permission bits of name (following a symbolic link that
// stays inside the workspace).
func (w *Workspace) Chmod(name string, mode fs.FileMode) error {
	name, err := w.local("chmod", name)
	if err != nil {
		return err
	}
	return w.wrap("chmod", name, w.root.Chmod(name, mode))
}

// Symlink creates name as a symbolic link to target. The target is stored
// as given and may point anywhere: a checkpoint captures it as a link, and
// the helpers refuse to follow it out of the workspace.
func (w *Workspace) Symlink(target, name string) error {
	name, err := w.local("symlink", name)
	if err != nil {
		return err
	}
	return w.wrap("symlink", name, w.root.Symlink(target, name))
}

// Readlink returns the target of the symbolic link name.
func (w *Workspace) Readlink(name string) (string, error) {
	name, err := w.local("readlink", name)
	if err != nil {
		return "", err
	}
	t, err := w.root.Readlink(name)
	return t, w.wrap("readlink", name, err)
}

// Stat returns the file info of name, following symbolic links inside the
// workspace.
func (w *Workspace) Stat(name string) (fs.FileInfo, error) {
	name, err := w.local("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := w.root.Stat(name)
	return fi, w.wrap("stat", name, err)
}

// Lstat returns the file info of name without following a final symbolic
// link.
func (w *Workspace) Lstat(name string) (fs.FileInfo, error) {
	name, err := w.local("lstat", name)
	if err != nil {
		return nil, err
	}
	fi, err := w.root.Lstat(name)
	return fi, w.wrap("lstat", name, err)
}

// ReadDir returns the entries of the directory name, sorted by name.
func (w *Workspace) ReadDir(name string) ([]fs.DirEntry, error) {
	name, err := w.local("readdir", name)
	if err != nil {
		return nil, err
	}
	des, err := fs.ReadDir(w.root.FS(), filepath.ToSlash(name))
	return des, w.wrap("readdir", name, err)
}

// local checks that name stays inside the workspace lexically and returns
// it in OS form.
func (w *Workspace) local(op, name string) (string, error) {
	if w == nil || w.root == nil {
		return "", &Error{Op: op, Path: name, Err: errNoHandle}
	}
	if name == "" {
		return "", &Error{Op: op, Err: fmt.Errorf("%w: empty path", fs.ErrInvalid)}
	}
	p := filepath.FromSlash(name)
	if !filepath.IsLocal(p) && filepath.Clean(p) != "." {
		return "", &Error{Op: op, Path: name, Err: ErrOutsideWorkspace}
	}
	// Not cleaned: os.Root resolves ".." after symbolic links, as the
	// kernel does, and refuses a path that leaves the root that way.
	return p, nil
}

// wrap turns an error of os.Root into an *Error, classifying a path that
// escapes through a symbolic link as ErrOutsideWorkspace.
func (w *Workspace) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if escapes(err) {
		err = fmt.Errorf("%w: %w", ErrOutsideWorkspace, err)
	}
	return &Error{Op: op, Path: name, Err: err}
}

// escapes reports whether err is os.Root's refusal of a path that leaves the
// root. os exports no sentinel for it, so the innermost message is matched.
func escapes(err error) bool {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	return strings.Contains(err.Error(), "path escapes from parent")
}
