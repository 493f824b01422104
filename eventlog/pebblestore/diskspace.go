package pebblestore

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/forkline/forkline/eventlog"
)

// DefaultDiskReserve is the free space below which a store refuses writes
// unless opened WithDiskReserve: room for Pebble to rotate its write-ahead
// log, flush a memtable and rewrite its MANIFEST without meeting a full disk.
const DefaultDiskReserve = 64 << 20

// DefaultBallast is the size of the ballast file unless opened
// WithDiskReserve.
const DefaultBallast = 8 << 20

// ballastName is the file a store on disk keeps as ballast: a full disk
// that the reserve did not prevent (another program filled it) is given
// this much room back, at Open and at Close, for Pebble's own writes.
const ballastName = "FORKLINE-BALLAST"

// WithDiskReserve sets the free space (bytes) below which Create, Append and
// Fork are refused with an error wrapping eventlog.ErrDiskFull (default
// DefaultDiskReserve; 0 turns the check off), and the size of the ballast
// file kept in the log folder (default DefaultBallast; 0 keeps none).
func WithDiskReserve(reserve, ballast int64) Option {
	return func(o *options) {
		o.reserve, o.ballast = max(reserve, 0), max(ballast, 0)
	}
}

// diskSpace checks the free space of the filesystem holding a log.
type diskSpace struct {
	fs      vfs.FS
	dir     string // "" for a store that checks nothing
	reserve uint64
	ballast uint64
}

// check refuses a write of n bytes that would bring the free space under the
// reserve. Pebble writes a batch to the write-ahead log and later to a
// table, so twice its size is counted.
func (d *diskSpace) check(n uint64) error {
	if d.dir == "" || d.reserve == 0 {
		return nil
	}
	u, err := d.fs.GetDiskUsage(d.dir)
	if err != nil {
		return nil // unknown free space: Pebble's own write reports a real failure
	}
	if u.AvailBytes < d.reserve+2*n {
		return fmt.Errorf("%w: %s: %d bytes free, this log keeps %d in reserve (write of %d bytes refused; free space and retry)",
			eventlog.ErrDiskFull, d.dir, u.AvailBytes, d.reserve, n)
	}
	return nil
}

// ensureBallast creates the ballast file if it is missing and the disk has
// room for it above the reserve. A failure leaves no partial ballast.
func (d *diskSpace) ensureBallast() {
	if d.dir == "" || d.ballast == 0 {
		return
	}
	path := filepath.Join(d.dir, ballastName)
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(d.ballast) {
		return
	}
	u, err := d.fs.GetDiskUsage(d.dir)
	if err != nil || u.AvailBytes < d.reserve+2*d.ballast {
		return
	}
	if err := writeBallast(path, int64(d.ballast)); err != nil {
		_ = os.Remove(path)
	}
}

// releaseBallast deletes the ballast file when the free space is under the
// reserve, so that Pebble has room to open or close cleanly. It reports
// whether it freed anything.
func (d *diskSpace) releaseBallast() bool {
	if d.dir == "" {
		return false
	}
	u, err := d.fs.GetDiskUsage(d.dir)
	if err != nil || u.AvailBytes >= d.reserve {
		return false
	}
	err = os.Remove(filepath.Join(d.dir, ballastName))
	return err == nil
}

// dropBallast deletes the ballast file, whatever the free space: Pebble's
// flush or compaction met a full disk (another program filled it past the
// reserve) and retries; the room lets it finish instead of stalling writes.
func (d *diskSpace) dropBallast() {
	if d.dir != "" {
		_ = os.Remove(filepath.Join(d.dir, ballastName))
	}
}

// writeBallast writes size bytes of zeros to path (zeros, not a sparse file:
// the ballast must hold real blocks) and syncs it.
func writeBallast(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			_ = f.Close()
			return err
		}
		left -= n
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
