package dirfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/internal/storefs"
)

// Shared checkpoints (DESIGN §11). With Config.Blobs set, the local store
// is a cache of a shared blob.Store: a capture writes its blobs and its
// manifest locally as always and then puts whatever the shared store lacks
// (the manifest as a blob whose hash is the ref); a restore whose manifest
// or blobs are missing locally gets them from the shared store, checking
// each against its hash, and then materializes from the local store as
// always (reflinks included).

// publishShared puts the blobs of m and its manifest data (hash ref) into
// the shared store, skipping what it is known to hold. The caller holds
// the store's shared lock, so GC does not remove a local blob meanwhile.
func (d *Driver) publishShared(ctx context.Context, ref string, m manifest, data []byte) error {
	if d.cfg.Blobs == nil {
		return nil
	}
	for i := range m {
		e := &m[i]
		if e.kind != kindFile {
			continue
		}
		if err := d.putShared(ctx, blob.Hash(e.hash), func() (io.ReadCloser, error) { return os.Open(d.store.blob(e.hash)) }); err != nil {
			return &Error{Op: "checkpoint", Ref: ref, Path: e.path, Err: fmt.Errorf("shared blob store: %w", err)}
		}
	}
	h, _ := blob.ParseHash(ref)
	if err := d.putShared(ctx, h, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }); err != nil {
		return &Error{Op: "checkpoint", Ref: ref, Err: fmt.Errorf("shared blob store: manifest: %w", err)}
	}
	return nil
}

// putShared puts the blob h, read from open, unless the shared store is
// known to hold it.
func (d *Driver) putShared(ctx context.Context, h blob.Hash, open func() (io.ReadCloser, error)) error {
	if _, ok := d.shared.Load(h); ok {
		return nil
	}
	has, err := d.cfg.Blobs.Has(ctx, h)
	if err != nil {
		return err
	}
	if !has {
		r, err := open()
		if err != nil {
			return err
		}
		err = d.cfg.Blobs.Put(ctx, h, r)
		_ = r.Close()
		if err != nil {
			return err
		}
	}
	d.shared.Store(h, true)
	return nil
}

// fetchManifest copies the manifest ref from the shared store into the
// local one, if the local one lacks it and a shared store is configured.
// A ref the shared store lacks too is left for openManifest to report.
func (d *Driver) fetchManifest(ctx context.Context, ref string) error {
	if d.cfg.Blobs == nil {
		return nil
	}
	if _, err := os.Lstat(d.store.manifest(ref)); !errors.Is(err, fs.ErrNotExist) {
		return nil // present, or an error openManifest reports
	}
	h, err := blob.ParseHash(ref)
	if err != nil {
		return &Error{Op: "create", Ref: ref, Err: unavailable(ErrInvalidRef)}
	}
	data, err := blob.ReadAll(ctx, d.cfg.Blobs, h)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil
	case errors.Is(err, blob.ErrCorrupt):
		return &Error{Op: "create", Ref: ref, Err: unavailable(fmt.Errorf("%w: shared blob store: %w", ErrCorrupt, err))}
	case err != nil:
		return &Error{Op: "create", Ref: ref, Err: fmt.Errorf("shared blob store: %w", err)}
	}
	if _, err := parseManifest(data); err != nil {
		return &Error{Op: "create", Ref: ref, Err: unavailable(fmt.Errorf("shared blob store: %w", err))}
	}
	if err := storefs.WriteAtomic(d.store.tmp(), d.store.manifest(ref), data, 0o444, !d.cfg.NoSync); err != nil {
		return &Error{Op: "create", Ref: ref, Err: err}
	}
	d.shared.Store(h, true)
	return nil
}

// fetchBlobs copies every blob of m that the local store lacks from the
// shared store, checking each against its hash. A blob missing from both,
// or corrupt in the shared store, is ErrCorrupt and
// driver.ErrCheckpointUnavailable.
func (d *Driver) fetchBlobs(ctx context.Context, ref string, m manifest) error {
	if d.cfg.Blobs == nil {
		return nil
	}
	done := make(map[blob.Hash]bool)
	for i := range m {
		e := &m[i]
		h := blob.Hash(e.hash)
		if e.kind != kindFile || done[h] {
			continue
		}
		done[h] = true
		dst := d.store.blob(e.hash)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := d.fetchBlob(ctx, h, dst); err != nil {
			if errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrCorrupt) {
				err = unavailable(fmt.Errorf("%w: shared blob store: %w", ErrCorrupt, err))
			}
			return &Error{Op: "create", Ref: ref, Path: e.path, Err: err}
		}
	}
	return nil
}

// fetchBlob writes the shared blob h to the local path dst, through a
// temporary file renamed into place only once the whole content checked.
func (d *Driver) fetchBlob(ctx context.Context, h blob.Hash, dst string) error {
	r, err := d.cfg.Blobs.Get(ctx, h)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := storefs.CreateTemp(d.store.tmp())
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	return storefs.Commit(f, dst, !d.cfg.NoSync)
}

// deleteShared removes the manifest ref from the shared store, so that
// Create(ref) does not fetch it back after Delete. Its blobs stay: other
// checkpoints may share them.
func (d *Driver) deleteShared(ctx context.Context, ref string) (bool, error) {
	if d.cfg.Blobs == nil {
		return false, nil
	}
	h, _ := blob.ParseHash(ref)
	d.shared.Delete(h)
	err := d.cfg.Blobs.Delete(ctx, h)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
