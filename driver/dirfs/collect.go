package dirfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/internal/storefs"
)

var (
	_ driver.Collector[Binding] = (*Driver)(nil)
	_ driver.Sizer[*Workspace]  = (*Driver)(nil)
)

// Live implements driver.Collector (DESIGN §14): it removes every
// checkpoint whose ref is not in refs and every workspace that no binding
// in bindings names, then, like GC, every blob no remaining checkpoint
// references. A checkpoint or workspace whose modification time is less
// than grace ago is kept whatever the lists say: it may belong to a
// capture or a binding that its log has not recorded yet. A capture that
// yields a ref the store already holds renews that ref's time, for the
// same reason.
//
// The lists must name everything every log that uses this store can still
// select or open (sdk.Kernel.Collect computes them for one log): a store
// shared by two logs must not be collected from one of them.
//
// Live holds the store's lock exclusively, as GC does. A negative grace is
// an error and removes nothing.
func (d *Driver) Live(ctx context.Context, refs []string, bindings []Binding, grace time.Duration) (driver.Collected, error) {
	var st driver.Collected
	if grace < 0 {
		return st, &Error{Op: "gc", Err: fmt.Errorf("%w: negative grace period %v", driver.ErrInvalidCollect, grace)}
	}
	keepRef := make(map[string]bool, len(refs))
	for _, r := range refs {
		keepRef[r] = true
	}
	keepWS := make(map[string]bool, len(bindings))
	for _, b := range bindings {
		keepWS[b.Workspace] = true
	}
	if err := d.ready(); err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	unlock, err := storefs.Lock(d.store.lock(), true)
	if err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	defer unlock()
	young := func(p string) (bool, error) {
		fi, err := os.Lstat(p)
		if err != nil {
			return false, err
		}
		return time.Since(fi.ModTime()) < grace, nil
	}
	all, err := d.Checkpoints()
	if err != nil {
		return st, err
	}
	removed := false
	for _, ref := range all {
		if err := ctx.Err(); err != nil {
			return st, &Error{Op: "gc", Err: err}
		}
		if keepRef[ref] {
			continue
		}
		p := d.store.manifest(ref)
		if y, err := young(p); err != nil || y {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return st, &Error{Op: "gc", Ref: ref, Err: err}
			}
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return st, &Error{Op: "gc", Ref: ref, Err: err}
		}
		st.Checkpoints++
		removed = true
	}
	if removed {
		if err := d.syncDir(d.store.manifests()); err != nil {
			return st, &Error{Op: "gc", Err: err}
		}
	}
	wss, err := os.ReadDir(d.store.workspaces())
	if err != nil {
		return st, &Error{Op: "gc", Err: err}
	}
	for _, ws := range wss {
		name := ws.Name()
		if keepWS[name] || strings.HasPrefix(name, restorePrefix) || !storefs.ValidID(name) {
			continue // live, half-made (GC's business below), or not ours
		}
		p := filepath.Join(d.store.workspaces(), name)
		if y, err := young(p); err != nil || y {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return st, &Error{Op: "gc", Path: name, Err: err}
			}
			continue
		}
		if err := removeTree(p); err != nil {
			return st, &Error{Op: "gc", Path: name, Err: err}
		}
		st.Resources++
	}
	gc, err := d.gcLocked(ctx)
	st.Bytes = gc.BytesFreed
	return st, err
}
