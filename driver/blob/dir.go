package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"

	"github.com/forkline/forkline/driver/internal/storefs"
)

// Dir is the directory implementation of [Store], the default:
//
//	<root>/blobs/<2 hex>/<64 hex>   one read-only file per blob
//	<root>/tmp/                     temporary files of puts in progress
//
// Put writes to tmp/, fsyncs, and renames into place (then fsyncs the
// shard directory), so a blob appears only complete and durable. This is
// the layout driver/dirfs keeps inside its store, so NewDir(store) is the
// store of a dirfs store's blobs.
type Dir struct {
	root   string
	noSync bool
}

var _ Store = (*Dir)(nil)

// NewDir returns the Dir at root, creating its directories when they do
// not exist. root is made absolute.
func NewDir(root string) (*Dir, error) {
	if root == "" {
		return nil, fmt.Errorf("%w: empty directory", ErrInvalid)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("blob: directory %s: %w", root, err)
	}
	d := &Dir{root: abs}
	for _, p := range []string{d.blobs(), d.tmp()} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("blob: %w", err)
		}
	}
	return d, nil
}

// WithoutSync returns a Dir on the same directory that skips every fsync:
// puts stay atomic against a crash of the process, not of the machine.
// For tests and throwaway stores.
func (d *Dir) WithoutSync() *Dir { return &Dir{root: d.root, noSync: true} }

// Root returns the directory.
func (d *Dir) Root() string { return d.root }

func (d *Dir) blobs() string { return filepath.Join(d.root, "blobs") }
func (d *Dir) tmp() string   { return filepath.Join(d.root, "tmp") }

// Path returns the file of the blob h, whether or not it exists. A caller
// that reads it directly (to clone it with a reflink, say) must check its
// content itself.
func (d *Dir) Path(h Hash) string {
	x := h.String()
	return filepath.Join(d.root, "blobs", x[:2], x)
}

// Put implements [Store].
func (d *Dir) Put(ctx context.Context, h Hash, r io.Reader) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dst := d.Path(h)
	if ok, err := d.Has(ctx, h); err != nil || ok {
		return err
	}
	f, err := storefs.CreateTemp(d.tmp())
	if err != nil {
		return fmt.Errorf("blob: put %s: %w", h, err)
	}
	hr := newHashingReader(r)
	_, err = io.Copy(f, hr)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if err == nil {
		err = CheckPut(h, hr.sum())
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(dst), 0o755)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		if errors.Is(err, ErrCorrupt) {
			return err
		}
		return fmt.Errorf("blob: put %s: %w", h, err)
	}
	if err := storefs.Commit(f, dst, !d.noSync); err != nil {
		return fmt.Errorf("blob: put %s: %w", h, err)
	}
	if !d.noSync {
		if err := storefs.SyncDir(filepath.Dir(dst)); err != nil {
			return fmt.Errorf("blob: put %s: %w", h, err)
		}
	}
	return nil
}

// Get implements [Store].
func (d *Dir) Get(ctx context.Context, h Hash) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(d.Path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: blob %s", ErrNotFound, h)
	}
	if err != nil {
		return nil, fmt.Errorf("blob: get %s: %w", h, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = corruptError(h, "is not a regular file")
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return readCloser{Verifier(h, -1, f), f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Has implements [Store].
func (d *Dir) Has(ctx context.Context, h Hash) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	fi, err := os.Lstat(d.Path(h))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("blob: has %s: %w", h, err)
	case !fi.Mode().IsRegular():
		return false, corruptError(h, "is not a regular file")
	}
	return true, nil
}

// Delete implements [Store].
func (d *Dir) Delete(ctx context.Context, h Hash) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := os.Remove(d.Path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: blob %s", ErrNotFound, h)
	}
	if err != nil {
		return fmt.Errorf("blob: delete %s: %w", h, err)
	}
	if !d.noSync {
		if err := storefs.SyncDir(filepath.Dir(d.Path(h))); err != nil {
			return fmt.Errorf("blob: delete %s: %w", h, err)
		}
	}
	return nil
}

// List implements [Store]. Names in blobs/ that are not blobs are skipped.
func (d *Dir) List(ctx context.Context) iter.Seq2[Hash, error] {
	return func(yield func(Hash, error) bool) {
		shards, err := os.ReadDir(d.blobs())
		if err != nil {
			yield(Hash{}, fmt.Errorf("blob: list: %w", err))
			return
		}
		for _, shard := range shards { // ReadDir sorts by name
			if !shard.IsDir() || len(shard.Name()) != 2 {
				continue
			}
			if err := ctx.Err(); err != nil {
				yield(Hash{}, err)
				return
			}
			des, err := os.ReadDir(filepath.Join(d.blobs(), shard.Name()))
			if err != nil {
				yield(Hash{}, fmt.Errorf("blob: list: %w", err))
				return
			}
			var hs []Hash
			for _, de := range des {
				h, err := ParseHash(de.Name())
				if err != nil || de.Name()[:2] != shard.Name() {
					continue
				}
				hs = append(hs, h)
			}
			slices.SortFunc(hs, func(a, b Hash) int { return slices.Compare(a[:], b[:]) })
			for _, h := range hs {
				if !yield(h, nil) {
					return
				}
			}
		}
	}
}
