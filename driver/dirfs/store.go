package dirfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/forkline/forkline/driver/internal/storefs"
)

// layout names the paths of a store:
//
//	<root>/blobs/<2 hex>/<64 hex>   file contents by SHA-256, mode 0444; shards made on first use
//	<root>/manifests/<ref>          one manifest per checkpoint, ref = its SHA-256
//	<root>/workspaces/<id>/         live workspaces
//	<root>/workspaces/.restore-<id> a workspace being created (removed by GC if left over)
//	<root>/tmp/                     temporary files of writes in progress
//	<root>/epoch                    changed by every GC, invalidating file indexes
//	<root>/lock                     flock: shared by captures and restores, exclusive for GC
type layout struct{ root string }

func (l layout) blobs() string      { return filepath.Join(l.root, "blobs") }
func (l layout) manifests() string  { return filepath.Join(l.root, "manifests") }
func (l layout) workspaces() string { return filepath.Join(l.root, "workspaces") }
func (l layout) tmp() string        { return filepath.Join(l.root, "tmp") }
func (l layout) lock() string       { return filepath.Join(l.root, "lock") }
func (l layout) epoch() string      { return filepath.Join(l.root, "epoch") }

func (l layout) blob(h [sha256.Size]byte) string {
	x := hex.EncodeToString(h[:])
	return filepath.Join(l.root, "blobs", x[:2], x)
}

func (l layout) manifest(ref string) string { return filepath.Join(l.root, "manifests", ref) }
func (l layout) workspace(id string) string { return filepath.Join(l.root, "workspaces", id) }

// restorePrefix starts the name of a workspace directory being created.
const restorePrefix = ".restore-"

func (l layout) restoring(id string) string {
	return filepath.Join(l.root, "workspaces", restorePrefix+id)
}

// create makes the store's directories. Blob shard directories are made on
// first use.
func (l layout) create() error {
	for _, dir := range []string{l.blobs(), l.manifests(), l.workspaces(), l.tmp()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return storefs.SyncDir(l.root)
}

// readEpoch returns the store's GC epoch ("" before the first GC).
func (l layout) readEpoch() (string, error) {
	b, err := os.ReadFile(l.epoch())
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// readManifest reads, authenticates and parses the manifest of ref. A missing
// manifest yields an error wrapping fs.ErrNotExist; one whose bytes do not
// hash to ref, or that does not parse, wraps ErrCorrupt.
func (l layout) readManifest(ref string) (manifest, error) {
	data, err := os.ReadFile(l.manifest(ref))
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref {
		return nil, fmt.Errorf("%w: manifest does not match its ref", ErrCorrupt)
	}
	return parseManifest(data)
}

// openManifest reads the manifest of ref for op, classifying a missing one
// as driver.ErrCheckpointUnavailable.
func (d *Driver) openManifest(op, ref string) (manifest, error) {
	m, err := d.store.readManifest(ref)
	switch {
	case err == nil:
		return m, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, &Error{Op: op, Ref: ref, Err: unavailable(fmt.Errorf("no such checkpoint: %w", err))}
	case errors.Is(err, ErrCorrupt):
		return nil, &Error{Op: op, Ref: ref, Err: unavailable(err)}
	default:
		return nil, &Error{Op: op, Ref: ref, Err: err}
	}
}

// Checkpoints returns the refs of every checkpoint in the store, sorted.
func (d *Driver) Checkpoints() ([]string, error) {
	if err := d.ready(); err != nil {
		return nil, &Error{Op: "list", Err: err}
	}
	des, err := os.ReadDir(d.store.manifests())
	if err != nil {
		return nil, &Error{Op: "list", Err: err}
	}
	var refs []string
	for _, de := range des {
		if storefs.ValidRef(de.Name()) {
			refs = append(refs, de.Name())
		}
	}
	slices.Sort(refs)
	return refs, nil
}

// Delete removes the checkpoint ref from the store; Create(ref) reports
// [driver.ErrCheckpointUnavailable] from then on. Its blobs stay until
// [Driver.GC]. Deleting a checkpoint that does not exist is an error wrapping
// [driver.ErrCheckpointUnavailable]. Because refs are content addresses, two
// captures of the same tree share a ref, and deleting it deletes both. With
// Config.Blobs set, the manifest is deleted from the shared store too (its
// blobs stay), so that no host restores the ref any more.
func (d *Driver) Delete(ref string) error {
	if err := d.ready(); err != nil {
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	if !storefs.ValidRef(ref) {
		return &Error{Op: "delete", Ref: ref, Err: ErrInvalidRef}
	}
	unlock, err := storefs.Lock(d.store.lock(), true)
	if err != nil {
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	defer unlock()
	inShared, err := d.deleteShared(context.Background(), ref)
	if err != nil {
		return &Error{Op: "delete", Ref: ref, Err: fmt.Errorf("shared blob store: %w", err)}
	}
	if err := os.Remove(d.store.manifest(ref)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if inShared {
				return nil
			}
			err = unavailable(fmt.Errorf("no such checkpoint: %w", err))
		}
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	if err := d.syncDir(d.store.manifests()); err != nil {
		return &Error{Op: "delete", Ref: ref, Err: err}
	}
	return nil
}

// Verify re-reads the checkpoint ref and every blob it references and checks
// each against its hash. It returns nil for an intact checkpoint, and
// otherwise an error naming the ref and the first bad path, wrapping
// [ErrCorrupt] (a blob that is missing, of the wrong size or with the wrong
// content; a manifest that does not match its ref) or, for a checkpoint that
// does not exist, [driver.ErrCheckpointUnavailable].
func (d *Driver) Verify(ctx context.Context, ref string) error {
	if err := d.ready(); err != nil {
		return &Error{Op: "verify", Ref: ref, Err: err}
	}
	if !storefs.ValidRef(ref) {
		return &Error{Op: "verify", Ref: ref, Err: ErrInvalidRef}
	}
	unlock, err := storefs.Lock(d.store.lock(), false)
	if err != nil {
		return &Error{Op: "verify", Ref: ref, Err: err}
	}
	defer unlock()
	m, err := d.openManifest("verify", ref)
	if err != nil {
		return err
	}
	checked := make(map[[sha256.Size]byte]bool)
	buf := make([]byte, copyBufSize)
	for i := range m {
		e := &m[i]
		if e.kind != kindFile || checked[e.hash] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return &Error{Op: "verify", Ref: ref, Err: err}
		}
		if err := d.checkBlob(e, buf); err != nil {
			return &Error{Op: "verify", Ref: ref, Path: e.path, Err: err}
		}
		checked[e.hash] = true
	}
	return nil
}

// openBlob opens the blob of a file entry for reading. A blob that is
// missing or not a regular file (a directory, a symbolic link) is
// ErrCorrupt.
func (d *Driver) openBlob(e *entry) (*os.File, error) {
	p := d.store.blob(e.hash)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: blob %x is missing", ErrCorrupt, e.hash)
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: blob %x is not a regular file", ErrCorrupt, e.hash)
	}
	return os.Open(p)
}

// checkBlob rehashes the blob of a file entry.
func (d *Driver) checkBlob(e *entry, buf []byte) error {
	f, err := d.openBlob(e)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, buf)
	if err != nil {
		return err
	}
	return checkContent(e, n, h.Sum(nil))
}

// checkContent compares what was read for a file entry with the entry.
func checkContent(e *entry, n int64, sum []byte) error {
	if n != e.size {
		return fmt.Errorf("%w: blob %x holds %d bytes, want %d", ErrCorrupt, e.hash, n, e.size)
	}
	if !bytes.Equal(sum, e.hash[:]) {
		return fmt.Errorf("%w: blob %x content does not match its hash", ErrCorrupt, e.hash)
	}
	return nil
}

// GCStats reports what a garbage collection found and removed.
type GCStats struct {
	Manifests    int   // checkpoints kept
	BlobsKept    int   // blobs referenced by some checkpoint
	BlobsRemoved int   // blobs referenced by none, removed
	BytesFreed   int64 // size of the removed blobs
	TempsRemoved int   // temporary files and half-created workspaces of interrupted operations, removed
}

// GC removes every blob that no checkpoint references, the temporary files
// of interrupted captures, and workspaces whose creation was interrupted. It
// holds the store's lock exclusively, so captures and restores through any
// Driver on the store, in any process, wait for it. A manifest that cannot be
// read or parsed stops the collection with an error naming its ref, before
// anything is removed: GC never removes a blob that a checkpoint might need.
func (d *Driver) GC(ctx context.Context) (GCStats, error) {
	var st GCStats
	if err := d.ready(); err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	unlock, err := storefs.Lock(d.store.lock(), true)
	if err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	defer unlock()
	return d.gcLocked(ctx)
}

// gcLocked is GC under the store's exclusive lock.
func (d *Driver) gcLocked(ctx context.Context) (GCStats, error) {
	var st GCStats
	refs, err := d.Checkpoints()
	if err != nil {
		return st, err
	}
	live := make(map[string]bool)
	for _, ref := range refs {
		if err := ctx.Err(); err != nil {
			return st, &Error{Op: "gc", Err: err}
		}
		m, err := d.store.readManifest(ref)
		if err != nil {
			return st, &Error{Op: "gc", Ref: ref, Err: err}
		}
		for i := range m {
			if m[i].kind == kindFile {
				live[hex.EncodeToString(m[i].hash[:])] = true
			}
		}
	}
	st.Manifests = len(refs)
	// A new epoch first, durably: a file index that remembers a blob this
	// collection may remove must not be trusted again, even if GC dies
	// half-way.
	if err := storefs.WriteAtomic(d.store.tmp(), d.store.epoch(), []byte(storefs.NewID()), 0o644, !d.cfg.NoSync); err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	shards, err := os.ReadDir(d.store.blobs())
	if err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	for _, shard := range shards {
		if !shard.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return st, &Error{Op: "gc", Err: err}
		}
		dir := filepath.Join(d.store.blobs(), shard.Name())
		blobs, err := os.ReadDir(dir)
		if err != nil {
			return st, &Error{Op: "gc", Path: dir, Err: err}
		}
		removed := false
		for _, b := range blobs {
			if live[b.Name()] {
				st.BlobsKept++
				continue
			}
			if !storefs.ValidRef(b.Name()) {
				continue // not ours
			}
			var size int64
			if fi, err := b.Info(); err == nil {
				size = fi.Size()
			}
			if err := os.Remove(filepath.Join(dir, b.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return st, &Error{Op: "gc", Path: b.Name(), Err: err}
			}
			st.BlobsRemoved++
			st.BytesFreed += size
			removed = true
		}
		if removed {
			if err := d.syncDir(dir); err != nil {
				return st, &Error{Op: "gc", Path: dir, Err: err}
			}
		}
	}
	temps, err := os.ReadDir(d.store.tmp())
	if err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	for _, t := range temps {
		if err := os.Remove(filepath.Join(d.store.tmp(), t.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return st, &Error{Op: "gc", Path: t.Name(), Err: err}
		}
		st.TempsRemoved++
	}
	wss, err := os.ReadDir(d.store.workspaces())
	if err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	for _, ws := range wss {
		if strings.HasPrefix(ws.Name(), restorePrefix) {
			if err := removeTree(filepath.Join(d.store.workspaces(), ws.Name())); err != nil {
				return st, &Error{Op: "gc", Path: ws.Name(), Err: err}
			}
			st.TempsRemoved++
		}
	}
	return st, nil
}

// removeTree removes dir and everything below it, first making directories
// writable so that read-only directories restored from a checkpoint do not
// stop the removal of their contents. A missing dir is not an error.
func removeTree(dir string) error {
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if de == nil || !de.IsDir() {
				return nil // RemoveAll reports it
			}
		}
		if de.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}
