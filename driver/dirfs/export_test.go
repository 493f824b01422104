package dirfs

import (
	"encoding/hex"
	"path/filepath"
	"time"
)

// SetRacyWindow sets d's racy window; tests use 0 to make every unchanged
// file trusted at once.
func SetRacyWindow(d *Driver, w time.Duration) { d.racyWindow = w }

// SetTimestampGranularity makes d see file times truncated to g, as on a
// file system with coarse timestamps (FAT: 2 s; ext3, HFS+: 1 s).
func SetTimestampGranularity(d *Driver, g time.Duration) { d.granularity = g }

// CaptureCounts is what the previous capture of a workspace did.
type CaptureCounts struct{ Files, Hashed, Reused, BlobsWritten int }

// LastCapture returns what w's previous capture did.
func LastCapture(w *Workspace) CaptureCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.mu.last
	return CaptureCounts{s.files, s.hashed, s.reused, s.blobsWritten}
}

// ManifestPath returns where the manifest of ref is stored.
func ManifestPath(d *Driver, ref string) string { return d.store.manifest(ref) }

// BlobPaths returns the blob paths of ref's files, by workspace path.
func BlobPaths(d *Driver, ref string) (map[string]string, error) {
	m, err := d.store.readManifest(ref)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range m {
		if e.kind == kindFile {
			out[e.path] = d.store.blob(e.hash)
		}
	}
	return out, nil
}

// StoreDir returns the store's root.
func StoreDir(d *Driver) string { return d.store.root }

// TempDir returns the store's temporary directory.
func TempDir(d *Driver) string { return filepath.Join(d.store.root, "tmp") }

// HashHex is the hex SHA-256 form blobs are named by.
func HashHex(sum [32]byte) string { return hex.EncodeToString(sum[:]) }
