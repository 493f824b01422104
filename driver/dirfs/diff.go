package dirfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/internal/storefs"
)

// MaxTextDiff is the largest file, in bytes, whose two versions Diff
// compares line by line; a larger changed file is described by its sizes.
const MaxTextDiff = 1 << 20

var _ driver.Differ = (*Driver)(nil)

// Diff implements [driver.Differ]: the entries (files, directories,
// symbolic links) that checkpoint refB adds, removes or changes relative
// to refA, sorted by path. A changed text file (valid UTF-8 without NUL
// bytes, at most [MaxTextDiff] bytes on both sides) gets a unified diff as
// its Detail; a changed binary or larger one its two sizes; a mode change
// or a symlink's new target says so. Both manifests and every blob read
// are checked against their hashes: a ref that is malformed, missing or
// corrupt yields an error wrapping [driver.ErrCheckpointUnavailable].
func (d *Driver) Diff(ctx context.Context, refA, refB string) (driver.Difference, error) {
	if err := d.ready(); err != nil {
		return driver.Difference{}, &Error{Op: "diff", Err: err}
	}
	for _, ref := range []string{refA, refB} {
		if !storefs.ValidRef(ref) {
			return driver.Difference{}, &Error{Op: "diff", Ref: ref, Err: unavailable(ErrInvalidRef)}
		}
	}
	unlock, err := storefs.Lock(d.store.lock(), false)
	if err != nil {
		return driver.Difference{}, &Error{Op: "diff", Err: err}
	}
	defer unlock()
	ma, err := d.openManifest("diff", refA)
	if err != nil {
		return driver.Difference{}, err
	}
	mb, err := d.openManifest("diff", refB)
	if err != nil {
		return driver.Difference{}, err
	}
	byPath := make(map[string]*entry, len(ma))
	for i := range ma {
		byPath[ma[i].path] = &ma[i]
	}
	var out driver.Difference
	seen := make(map[string]bool, len(mb))
	for i := range mb {
		if err := ctx.Err(); err != nil {
			return driver.Difference{}, &Error{Op: "diff", Err: err}
		}
		b := &mb[i]
		seen[b.path] = true
		a, ok := byPath[b.path]
		if !ok {
			out.Changes = append(out.Changes, driver.Change{Op: driver.Added, Kind: kindName(b.kind), Name: b.path, Detail: sizeOf(b)})
			continue
		}
		c, err := d.compare(a, b, refA, refB)
		if err != nil {
			return driver.Difference{}, err
		}
		if c != nil {
			out.Changes = append(out.Changes, *c)
		}
	}
	for i := range ma {
		if a := &ma[i]; !seen[a.path] {
			out.Changes = append(out.Changes, driver.Change{Op: driver.Removed, Kind: kindName(a.kind), Name: a.path, Detail: sizeOf(a)})
		}
	}
	slices.SortFunc(out.Changes, func(x, y driver.Change) int {
		if x.Name < y.Name {
			return -1
		}
		if x.Name > y.Name {
			return 1
		}
		return 0
	})
	return out, nil
}

// compare describes how entry b differs from entry a at the same path;
// nil when it does not.
func (d *Driver) compare(a, b *entry, refA, refB string) (*driver.Change, error) {
	c := &driver.Change{Op: driver.Changed, Kind: kindName(b.kind), Name: b.path}
	switch {
	case a.kind != b.kind:
		c.Detail = kindName(a.kind) + " → " + kindName(b.kind)
		return c, nil
	case a.kind == kindSymlink:
		if a.target == b.target {
			return nil, nil
		}
		c.Detail = "→ " + strconv.Quote(a.target) + " became → " + strconv.Quote(b.target)
		return c, nil
	case a.kind == kindDir:
		if a.mode == b.mode {
			return nil, nil
		}
		c.Detail = fmt.Sprintf("mode %o → %o", a.mode, b.mode)
		return c, nil
	}
	var mode string
	if a.mode != b.mode {
		mode = fmt.Sprintf("mode %o → %o", a.mode, b.mode)
	}
	if a.hash == b.hash {
		if mode == "" {
			return nil, nil
		}
		c.Detail = mode
		return c, nil
	}
	c.Detail = fmt.Sprintf("binary: %s → %s", bytesText(a.size), bytesText(b.size))
	if a.size <= MaxTextDiff && b.size <= MaxTextDiff {
		old, err := d.readBlob(a, refA)
		if err != nil {
			return nil, err
		}
		new, err := d.readBlob(b, refB)
		if err != nil {
			return nil, err
		}
		if isText(old) && isText(new) {
			c.Detail = udiff.Unified("a/"+a.path, "b/"+b.path, string(old), string(new))
		}
	}
	if mode != "" {
		c.Detail = mode + "\n" + c.Detail
	}
	return c, nil
}

// readBlob reads the content of a file entry of checkpoint ref, checked
// against its hash.
func (d *Driver) readBlob(e *entry, ref string) ([]byte, error) {
	f, err := d.openBlob(e)
	if err != nil {
		return nil, &Error{Op: "diff", Ref: ref, Path: e.path, Err: unavailable(err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, e.size+1))
	if err != nil {
		return nil, &Error{Op: "diff", Ref: ref, Path: e.path, Err: err}
	}
	h := sha256.Sum256(data)
	if err := checkContent(e, int64(len(data)), h[:]); err != nil {
		return nil, &Error{Op: "diff", Ref: ref, Path: e.path, Err: unavailable(err)}
	}
	return data, nil
}

// isText reports whether b reads as text: valid UTF-8 without NUL bytes.
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

// kindName is the [driver.Change] Kind of a manifest entry kind.
func kindName(k byte) string {
	switch k {
	case kindDir:
		return "directory"
	case kindSymlink:
		return "symlink"
	}
	return "file"
}

// sizeOf is the Detail of an added or removed entry: a file's size, a
// symlink's target.
func sizeOf(e *entry) string {
	switch e.kind {
	case kindFile:
		return bytesText(e.size)
	case kindSymlink:
		return "→ " + strconv.Quote(e.target)
	}
	return ""
}

// bytesText is a size for people.
func bytesText(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
