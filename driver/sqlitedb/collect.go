package sqlitedb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/internal/storefs"
)

var (
	_ driver.Collector[Binding] = (*Driver)(nil)
	_ driver.Sizer[*DB]         = (*Driver)(nil)
)

// Live implements driver.Collector (DESIGN §14): it removes every snapshot
// whose ref is not in refs and every database (with its WAL files) that no
// binding in bindings names, then what GC removes. A snapshot or database
// whose file was modified less than grace ago is kept whatever the lists
// say: it may belong to a capture or a binding its log has not recorded
// yet (a capture that yields an existing ref renews its time). The lists
// must cover every log that uses this store. Live holds the store's lock
// exclusively, as GC does. A negative grace is an error and removes
// nothing.
func (d *Driver) Live(ctx context.Context, refs []string, bindings []Binding, grace time.Duration) (driver.Collected, error) {
	var st driver.Collected
	if grace < 0 {
		return st, &Error{Op: "gc", Err: fmt.Errorf("%w: negative grace period %v", driver.ErrInvalidCollect, grace)}
	}
	keepRef := make(map[string]bool, len(refs))
	for _, r := range refs {
		keepRef[r] = true
	}
	keepDB := make(map[string]bool, len(bindings))
	for _, b := range bindings {
		keepDB[b.Database] = true
	}
	all, err := d.Checkpoints()
	if err != nil {
		return st, err
	}
	unlock, err := storefs.Lock(d.lockPath(), true)
	if err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	// old reports whether p was last modified at least grace ago, and its
	// size; a file gone meanwhile is neither.
	old := func(p string) (bool, int64, error) {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return false, 0, nil
		}
		if err != nil {
			return false, 0, err
		}
		return time.Since(fi.ModTime()) >= grace, fi.Size(), nil
	}
	removed := false
	for _, ref := range all {
		if err := ctx.Err(); err != nil {
			unlock()
			return st, &Error{Op: "gc", Err: err}
		}
		if keepRef[ref] {
			continue
		}
		p := d.snapshot(ref)
		o, size, err := old(p)
		if err != nil {
			unlock()
			return st, &Error{Op: "gc", Ref: ref, Err: err}
		}
		if !o {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			unlock()
			return st, &Error{Op: "gc", Ref: ref, Err: err}
		}
		st.Checkpoints++
		st.Bytes += size
		removed = true
	}
	if removed {
		if err := d.syncDir(d.dir("snapshots")); err != nil {
			unlock()
			return st, &Error{Op: "gc", Err: err}
		}
	}
	dbs, err := os.ReadDir(d.dir("databases"))
	if err != nil {
		unlock()
		return st, &Error{Op: "gc", Err: err}
	}
	for _, de := range dbs {
		id, ok := strings.CutSuffix(de.Name(), ".db")
		if !ok || !storefs.ValidID(id) || keepDB[id] {
			continue // a WAL file, a half-made database (GC's), not ours, or live
		}
		p := d.database(id)
		o, size, err := old(p)
		if err != nil {
			unlock()
			return st, &Error{Op: "gc", Err: fmt.Errorf("database %s: %w", id, err)}
		}
		if !o {
			continue
		}
		removeDB(p)
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			unlock()
			return st, &Error{Op: "gc", Err: fmt.Errorf("database %s still exists: %v", id, err)}
		}
		st.Resources++
		st.Bytes += size
	}
	unlock() // GC takes the lock itself
	_, err = d.GC(ctx)
	return st, err
}
