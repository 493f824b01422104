package dirfs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/forkline/forkline/driver/internal/storefs"
)

// restore materializes the checkpoint ref as the workspace id: into a
// directory under a temporary name, renamed to its final name once complete.
func (d *Driver) restore(ctx context.Context, ref, id string) error {
	unlock, err := storefs.Lock(d.store.lock(), false)
	if err != nil {
		return &Error{Op: "create", Ref: ref, Err: err}
	}
	defer unlock()
	if err := d.fetchManifest(ctx, ref); err != nil {
		return err
	}
	m, err := d.openManifest("create", ref)
	if err != nil {
		return err
	}
	if err := d.fetchBlobs(ctx, ref, m); err != nil {
		return err
	}
	tmp := d.store.restoring(id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return &Error{Op: "create", Ref: ref, Err: err}
	}
	if err := d.materialize(ctx, m, tmp); err != nil {
		_ = removeTree(tmp)
		var e *Error
		if errors.As(err, &e) {
			e.Ref = ref
			return e
		}
		return &Error{Op: "create", Ref: ref, Err: err}
	}
	return d.publish(tmp, id, ref)
}

// publish renames a completed workspace to its final name and makes the
// name durable.
func (d *Driver) publish(tmp, id, ref string) error {
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = removeTree(tmp)
		return &Error{Op: "create", Ref: ref, Err: err}
	}
	if err := os.Rename(tmp, d.store.workspace(id)); err != nil {
		_ = removeTree(tmp)
		return &Error{Op: "create", Ref: ref, Err: err}
	}
	if err := d.syncDir(d.store.workspaces()); err != nil {
		return &Error{Op: "create", Ref: ref, Err: err}
	}
	return nil
}

// restoreWorkers is how many files a restore writes at once: restoring is
// bound by system calls (open, create, read, write, chmod, close per file),
// which overlap well even on two cores.
var restoreWorkers = min(8, 2*runtime.GOMAXPROCS(0))

// materialize writes the entries of m below dir: directories and symbolic
// links in manifest order, then the files, several at a time. Every file's
// content is hashed as it is written and compared with its entry, so a
// corrupt or missing blob fails the restore instead of yielding wrong
// content. Directories are created writable and given their modes last,
// deepest first, so that read-only directories can be filled.
func (d *Driver) materialize(ctx context.Context, m manifest, dir string) error {
	var dirs, files []*entry
	for i := range m {
		e := &m[i]
		p := filepath.Join(dir, filepath.FromSlash(e.path))
		var err error
		switch e.kind {
		case kindDir:
			err = os.Mkdir(p, 0o700)
			dirs = append(dirs, e)
		case kindSymlink:
			err = os.Symlink(e.target, p)
		case kindFile:
			files = append(files, e)
		}
		if err != nil {
			return &Error{Op: "create", Path: e.path, Err: err}
		}
	}
	if err := d.restoreFiles(ctx, files, dir); err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		e := dirs[i]
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(e.path)), e.mode); err != nil {
			return &Error{Op: "create", Path: e.path, Err: err}
		}
	}
	return nil
}

// restoreFiles writes the given file entries below dir with restoreWorkers
// goroutines. It returns the first error; the other workers stop at their
// next file.
func (d *Driver) restoreFiles(ctx context.Context, files []*entry, dir string) error {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(restoreWorkers)
	for range min(restoreWorkers, len(files)) {
		g.Go(func() error {
			buf := make([]byte, copyBufSize) // one per worker, not per file
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return nil
				}
				select {
				case <-gctx.Done():
					// Another worker failed (its error is the one
					// returned) or ctx ended.
					return &Error{Op: "create", Err: gctx.Err()}
				default:
				}
				e := files[i]
				if err := d.restoreFile(e, filepath.Join(dir, filepath.FromSlash(e.path)), buf); err != nil {
					return &Error{Op: "create", Path: e.path, Err: err}
				}
			}
		})
	}
	return g.Wait()
}

// restoreFile writes the blob of a file entry to the new file p. It clones
// the blob where the file system supports reflinks (the clone shares extents
// copy-on-write, so writes to p never reach the blob) and copies it
// otherwise; either way the content is hashed and checked.
func (d *Driver) restoreFile(e *entry, p string, buf []byte) error {
	src, err := d.openBlob(e)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return unavailable(err)
		}
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = d.fillFile(dst, src, e, buf)
	if err == nil {
		err = dst.Chmod(e.mode)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// fillFile writes src into the empty file dst and checks it against e.
func (d *Driver) fillFile(dst, src *os.File, e *entry, buf []byte) error {
	h := sha256.New()
	if e.size > 0 && !d.noReflink.Load() {
		if reflink(dst, src) {
			n, err := io.CopyBuffer(h, dst, buf)
			if err != nil {
				return err
			}
			if err := checkContent(e, n, h.Sum(nil)); err != nil {
				return unavailable(err)
			}
			return nil
		}
		d.noReflink.Store(true)
	}
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if err := checkContent(e, n, h.Sum(nil)); err != nil {
		return unavailable(err)
	}
	return nil
}

// createInitial makes the workspace id from the initial environment: a copy
// of the template, or an empty directory.
func (d *Driver) createInitial(ctx context.Context, id string) error {
	unlock, err := storefs.Lock(d.store.lock(), false) // GC removes half-made workspaces
	if err != nil {
		return &Error{Op: "create", Err: err}
	}
	defer unlock()
	tmp := d.store.restoring(id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return &Error{Op: "create", Err: err}
	}
	if d.cfg.Template != "" {
		if err := copyTree(ctx, d.cfg.Template, tmp); err != nil {
			_ = removeTree(tmp)
			return err
		}
	}
	return d.publish(tmp, id, "")
}

// copyTree copies the tree below src into the existing directory dst:
// directories and permission bits, regular files, and symbolic links as
// links (never followed). Anything else is ErrUnsupportedFile.
func copyTree(ctx context.Context, src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return &Error{Op: "create", Path: src, Err: fmt.Errorf("%w: template: %w", ErrConfig, err)}
	}
	if !fi.IsDir() {
		return &Error{Op: "create", Path: src, Err: fmt.Errorf("%w: template is not a directory", ErrConfig)}
	}
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	n := 0
	err = filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == src {
			return nil
		}
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		info, err := de.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		case mode.IsDir():
			dirs = append(dirs, dirMode{out, mode.Perm()})
			return os.Mkdir(out, 0o700)
		case mode.IsRegular():
			return copyFile(out, p, mode.Perm())
		default:
			return &Error{Op: "create", Path: p, Err: fmt.Errorf("%w: template holds %v", ErrUnsupportedFile, mode.Type())}
		}
	})
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return err
		}
		return &Error{Op: "create", Path: src, Err: fmt.Errorf("copy template: %w", err)}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return &Error{Op: "create", Path: dirs[i].path, Err: err}
		}
	}
	return nil
}

// copyFile copies the regular file src to the new file dst with mode perm,
// cloning it where the file system supports reflinks.
func copyFile(dst, src string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if !reflink(out, in) {
		_, err = io.Copy(out, in)
	}
	if err == nil {
		err = out.Chmod(perm)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
