// Package testdriver is a driver for forkline's own tests: resources are
// in-memory file maps with real state, checkpoints are immutable copies, and
// every create, open and checkpoint is counted, so tests can assert what the
// kernel did to external state and what a fork restored.
package testdriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/driver"
)

// Binding names one resource of a Driver.
type Binding struct {
	ID string `json:"id"`
}

// Handle is one resource: a map of file names to contents.
type Handle struct {
	id     string
	mu     sync.Mutex
	fs     map[string]string
	closes atomic.Int64
}

// Close counts that the kernel released the handle; the resource stays
// readable, so tests can look at it afterwards.
func (h *Handle) Close() error {
	h.closes.Add(1)
	return nil
}

// Closes returns how many times Close was called.
func (h *Handle) Closes() int64 { return h.closes.Load() }

// ID returns the resource's ID.
func (h *Handle) ID() string { return h.id }

// WriteFile sets a file.
func (h *Handle) WriteFile(name string, data []byte) error {
	if name == "" {
		return errors.New("testdriver: empty file name")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fs[name] = string(data)
	return nil
}

// ReadFile returns a file; a missing one is an error wrapping os.ErrNotExist.
func (h *Handle) ReadFile(name string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.fs[name]
	if !ok {
		return nil, fmt.Errorf("testdriver: %s: %w", name, os.ErrNotExist)
	}
	return []byte(v), nil
}

// Files returns a copy of every file.
func (h *Handle) Files() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.fs)
}

// Driver makes Handles. The zero value is not usable: call New.
type Driver struct {
	id     string
	config any
	reuse  bool
	local  bool // not portable

	// FailCheckpoint, when set, is consulted before every checkpoint; a
	// non-nil error fails it.
	FailCheckpoint func() error

	*shared
}

// shared is the state drivers made by WithID and WithCoverageReuse share.
type shared struct {
	creates, opens, checkpoints atomic.Int64

	mu        sync.Mutex
	next      int
	nextRef   int // refs are never reused, even after Live forgot some
	resources map[string]*Handle
	refs      map[string]map[string]string
}

var (
	_ driver.Driver[*Handle, Binding] = (*Driver)(nil)
	_ driver.Differ                   = (*Driver)(nil)
	_ driver.Portable                 = (*Driver)(nil)
)

// New returns a driver with DriverID "test.mem.v1" and no configuration.
func New() *Driver {
	return &Driver{id: "test.mem.v1", shared: &shared{resources: map[string]*Handle{}, refs: map[string]map[string]string{}}}
}

// WithID returns a driver that shares d's resources and checkpoints but
// reports another DriverID and configuration (for mismatch tests).
func (d *Driver) WithID(id string, config any) *Driver {
	return &Driver{id: id, config: config, reuse: d.reuse, local: d.local, FailCheckpoint: d.FailCheckpoint, shared: d.shared}
}

// WithoutPortable returns d reporting that its bindings are not portable
// (sharing its state), as a directory workspace: only the owner that made
// a binding may open it (DESIGN §11).
func (d *Driver) WithoutPortable() *Driver {
	return &Driver{id: d.id, config: d.config, reuse: d.reuse, local: true, FailCheckpoint: d.FailCheckpoint, shared: d.shared}
}

// Portable implements driver.Portable: true unless made by
// WithoutPortable. The resources live in the driver value, which every
// kernel of a test shares, as every host reaches a remote sandbox.
func (d *Driver) Portable() bool { return !d.local }

// WithCoverageReuse returns d declaring CoverageReuse (sharing its state).
func (d *Driver) WithCoverageReuse() *Driver {
	return &Driver{id: d.id, config: d.config, reuse: true, local: d.local, FailCheckpoint: d.FailCheckpoint, shared: d.shared}
}

// DriverID implements driver.Driver.
func (d *Driver) DriverID() string { return d.id }

// Configuration implements driver.Driver.
func (d *Driver) Configuration() any { return d.config }

// CoverageReuse implements driver.CoverageReuser.
func (d *Driver) CoverageReuse() bool { return d.reuse }

// Create implements driver.Driver.
func (d *Driver) Create(ctx context.Context, from string) (*Handle, Binding, error) {
	d.creates.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	files := map[string]string{}
	if from != "" {
		snap, ok := d.refs[from]
		if !ok {
			return nil, Binding{}, fmt.Errorf("testdriver: ref %q: %w", from, driver.ErrCheckpointUnavailable)
		}
		files = maps.Clone(snap)
	}
	d.next++
	h := &Handle{id: fmt.Sprintf("%s-r%d", d.id, d.next), fs: files}
	d.resources[h.id] = h
	return h, Binding{ID: h.id}, nil
}

// Open implements driver.Driver.
func (d *Driver) Open(ctx context.Context, b Binding) (*Handle, error) {
	d.opens.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.resources[b.ID]
	if !ok {
		return nil, fmt.Errorf("testdriver: no resource %q", b.ID)
	}
	return h, nil
}

// Checkpoint implements driver.Driver.
func (d *Driver) Checkpoint(ctx context.Context, h *Handle) (string, error) {
	d.checkpoints.Add(1)
	if d.FailCheckpoint != nil {
		if err := d.FailCheckpoint(); err != nil {
			return "", err
		}
	}
	snap := h.Files()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nextRef++
	ref := fmt.Sprintf("ck%d", d.nextRef)
	d.refs[ref] = snap
	return ref, nil
}

// Restore returns what ref holds.
func (d *Driver) Restore(ref string) (map[string]string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	snap, ok := d.refs[ref]
	return maps.Clone(snap), ok
}

// Diff implements driver.Differ: one change per file added, removed or
// changed from refA to refB, sorted by name; a changed file's Detail is
// "old" -> "new".
func (d *Driver) Diff(ctx context.Context, refA, refB string) (driver.Difference, error) {
	a, okA := d.Restore(refA)
	b, okB := d.Restore(refB)
	if !okA || !okB {
		return driver.Difference{}, fmt.Errorf("testdriver: diff %s %s: %w", refA, refB, driver.ErrCheckpointUnavailable)
	}
	var out driver.Difference
	for name, va := range a {
		vb, ok := b[name]
		switch {
		case !ok:
			out.Changes = append(out.Changes, driver.Change{Op: driver.Removed, Kind: "file", Name: name})
		case va != vb:
			out.Changes = append(out.Changes, driver.Change{Op: driver.Changed, Kind: "file", Name: name,
				Detail: fmt.Sprintf("%q -> %q", va, vb)})
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			out.Changes = append(out.Changes, driver.Change{Op: driver.Added, Kind: "file", Name: name})
		}
	}
	sort.Slice(out.Changes, func(i, j int) bool { return out.Changes[i].Name < out.Changes[j].Name })
	return out, nil
}

// DeleteCheckpoint forgets ref, as an expired snapshot.
func (d *Driver) DeleteCheckpoint(ref string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.refs, ref)
}

// Resource returns the resource with id.
func (d *Driver) Resource(id string) (*Handle, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.resources[id]
	return h, ok
}

// Refs returns every checkpoint ref, sorted.
func (d *Driver) Refs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.refs))
	for r := range d.refs {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Counts returns how many creates, opens and checkpoints were made.
func (d *Driver) Counts() (creates, opens, checkpoints int64) {
	return d.creates.Load(), d.opens.Load(), d.checkpoints.Load()
}

var _ driver.Collector[Binding] = (*Driver)(nil)

// Live implements driver.Collector: it forgets every checkpoint not in
// refs and every resource no binding names. The driver keeps no times, so
// grace only has to be non-negative: a test collects when nothing is being
// captured.
func (d *Driver) Live(ctx context.Context, refs []string, bindings []Binding, grace time.Duration) (driver.Collected, error) {
	var st driver.Collected
	if grace < 0 {
		return st, fmt.Errorf("testdriver: %w: negative grace %v", driver.ErrInvalidCollect, grace)
	}
	keepRef := map[string]bool{}
	for _, r := range refs {
		keepRef[r] = true
	}
	keepRes := map[string]bool{}
	for _, b := range bindings {
		keepRes[b.ID] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for r := range d.refs {
		if !keepRef[r] {
			delete(d.refs, r)
			st.Checkpoints++
		}
	}
	for id := range d.resources {
		if !keepRes[id] {
			delete(d.resources, id)
			st.Resources++
		}
	}
	return st, nil
}
