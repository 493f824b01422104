package dirfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/blob"
	"github.com/forkline/forkline/driver/internal/storefs"
)

// ID is the DriverID of this implementation and of its on-disk format.
const ID = "forkline.dirfs.v1"

// DefaultRacyWindow is how close to a capture a file's modification or
// change time may lie for the file to be read again by the next capture even
// though its size and times did not change. It covers coarse file-system
// timestamps (two seconds on FAT, one clock tick on ext4): a file rewritten
// with the same size in the same tick as the capture that recorded it would
// otherwise look unchanged. Git calls such entries racily clean.
const DefaultRacyWindow = 2 * time.Second

// Config says where a Driver keeps its checkpoints and workspaces and what a
// new workspace starts from. The zero value is not usable: Store is required.
type Config struct {
	// Store is the directory holding the checkpoint store (blobs/,
	// manifests/, tmp/) and the workspaces (workspaces/<id>). It is created
	// if missing. Required. Workspaces live inside the store so that a
	// restore and the blobs it copies share one file system, which lets a
	// restore use reflinks where the file system has them.
	Store string `json:"store"`
	// Template is a directory copied into every workspace created from the
	// initial environment: files, directories, symbolic links (as links) and
	// permission bits. Default "": the initial environment is an empty
	// directory.
	Template string `json:"template,omitempty"`
	// CoverageReuse declares that every change to a workspace goes through
	// tools and steps that declare it with Affects; a capture then keeps
	// covering the workspace across live steps that do not. Default false:
	// coverage ends at the next live step. It is not part of the recorded
	// Configuration: the kernel records it with the binding.
	CoverageReuse bool `json:"-"`
	// NoSync skips every fsync, syncfs and directory sync. Captures stay
	// atomic against a crash of the process (a ref still appears only after
	// its blobs and manifest are complete), but not against a crash of the
	// machine, after which a ref may not restore. For tests and throwaway
	// stores. Default false. Not part of the recorded Configuration.
	NoSync bool `json:"-"`
	// Blobs, when set, is a shared store of checkpoint contents (DESIGN
	// §11, shared checkpoints), such as a pgblob.Store that every host of a
	// Postgres log reaches: each capture also puts its blobs and manifest
	// there, and a restore gets from there what the local store lacks, so
	// a checkpoint captured on one host restores on another. Default nil:
	// the local store alone, which is the directory implementation
	// blob.NewDir(Store) reads. Not part of the recorded Configuration.
	Blobs blob.Store `json:"-"`
}

// Validate reports whether c is usable. Its error wraps [ErrConfig].
func (c Config) Validate() error {
	if c.Store == "" {
		return fmt.Errorf("%w: empty Store", ErrConfig)
	}
	return nil
}

// Binding names a workspace of a store; the kernel records it as JSON.
type Binding struct {
	// Workspace is the workspace's identifier: 32 lower-case hex digits,
	// the name of its directory under <Store>/workspaces.
	Workspace string `json:"workspace"`
}

// Driver is the workspace-directory [driver.Driver]. Its methods are safe
// for concurrent use. Several Driver values, in one process or several, may
// share a Store.
type Driver struct {
	cfg        Config
	cfgErr     error
	store      layout
	racyWindow time.Duration
	// granularity, when set, truncates the times in file-index keys; tests
	// use it to act out a file system with coarse timestamps.
	granularity time.Duration
	noReflink   atomic.Bool // set once a reflink failed: copy from then on
	shared      sync.Map    // blob.Hash → true: known to be in Config.Blobs

	mu struct {
		sync.Mutex
		ready bool // the store's directories exist
	}
}

var (
	_ driver.Driver[*Workspace, Binding] = (*Driver)(nil)
	_ driver.CoverageReuser              = (*Driver)(nil)
	_ driver.ConfigurationReader         = (*Driver)(nil)
)

// New returns a Driver for cfg. It does no IO and never fails: an invalid
// configuration is reported, wrapping [ErrConfig], by the first method that
// needs the store. Relative paths in cfg are made absolute against the
// current directory.
func New(cfg Config) *Driver {
	d := &Driver{cfg: cfg, racyWindow: DefaultRacyWindow}
	d.cfgErr = cfg.Validate()
	if d.cfgErr == nil {
		d.cfg.Store = absPath(cfg.Store)
		if cfg.Template != "" {
			d.cfg.Template = absPath(cfg.Template)
		}
	}
	d.store = layout{root: d.cfg.Store}
	return d
}

// absPath returns the absolute, clean form of p, or p cleaned if the current
// directory is unknown.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// DriverID returns [ID].
func (d *Driver) DriverID() string { return ID }

// Configuration returns nil: no setting of a Driver changes what a
// workspace or a checkpoint is. [ID] names the on-disk and manifest format;
// Store and Blobs say only where contents live, so that a moved data
// folder, a restored backup or another host (DESIGN §11) opens the same
// bindings; Template shapes only workspaces created from the initial
// environment, which are captured at once.
//
// Versions before relocatable configuration recorded
// {"store": …, "template": …} as absolute paths; [Driver.ReadConfiguration]
// reads that form as nil, so their bindings keep matching.
func (d *Driver) Configuration() any { return nil }

// ReadConfiguration implements [driver.ConfigurationReader]: it drops the
// "store" and "template" keys that older versions recorded, so that a
// binding recorded as {"store":"/old/path"} matches this driver wherever
// its store lives now. Any other key makes the recording another driver's
// and is kept, so the binding mismatches.
func (d *Driver) ReadConfiguration(recorded []byte) ([]byte, error) {
	return driver.DropKeys(recorded, "store", "template")
}

// CoverageReuse returns Config.CoverageReuse.
func (d *Driver) CoverageReuse() bool { return d.cfg.CoverageReuse }

// Create makes a new workspace under <Store>/workspaces. With from == "" it
// starts as a copy of Config.Template (or empty); otherwise it is
// materialized from the checkpoint from, and every file's content is checked
// against its hash while it is written. A ref that is malformed, missing,
// deleted or corrupt yields an error wrapping
// [driver.ErrCheckpointUnavailable] (and [ErrInvalidRef] or [ErrCorrupt]
// where that applies). The workspace appears under its final name only when
// it is complete; its contents are not fsynced (like any write a tool makes
// to it).
func (d *Driver) Create(ctx context.Context, from string) (*Workspace, Binding, error) {
	if err := d.ready(); err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	if from != "" && !storefs.ValidRef(from) {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: unavailable(ErrInvalidRef)}
	}
	if err := ctx.Err(); err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	id := storefs.NewID()
	var err error
	if from == "" {
		err = d.createInitial(ctx, id)
	} else {
		err = d.restore(ctx, from, id)
	}
	if err != nil {
		return nil, Binding{}, err
	}
	w, err := openWorkspace(id, d.store.workspace(id))
	if err != nil {
		return nil, Binding{}, &Error{Op: "create", Ref: from, Err: err}
	}
	return w, Binding{Workspace: id}, nil
}

// Open returns a handle for the workspace that b names. A malformed
// identifier, or a workspace that does not exist, yields an error wrapping
// [ErrWorkspaceNotFound]. A handle from Open starts without the previous
// capture's file index, so its first Checkpoint reads every file once.
func (d *Driver) Open(ctx context.Context, b Binding) (*Workspace, error) {
	if err := d.ready(); err != nil {
		return nil, &Error{Op: "open", Err: err}
	}
	if !storefs.ValidID(b.Workspace) {
		return nil, &Error{Op: "open", Err: fmt.Errorf("%w: malformed workspace id %s", ErrWorkspaceNotFound, strconv.Quote(b.Workspace))}
	}
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: "open", Err: err}
	}
	dir := d.store.workspace(b.Workspace)
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		if err == nil || errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%w: %s", ErrWorkspaceNotFound, b.Workspace)
		}
		return nil, &Error{Op: "open", Err: err}
	}
	w, err := openWorkspace(b.Workspace, dir)
	if err != nil {
		return nil, &Error{Op: "open", Err: err}
	}
	return w, nil
}

// Checkpoint captures w and returns its ref: the hex SHA-256 of the
// checkpoint's manifest. Equal trees give equal refs. See the package
// documentation for what is captured and how a capture stays atomic and
// incremental. w stays usable.
func (d *Driver) Checkpoint(ctx context.Context, w *Workspace) (string, error) {
	if w == nil || w.root == nil {
		return "", &Error{Op: "checkpoint", Err: errNoHandle}
	}
	if err := d.ready(); err != nil {
		return "", &Error{Op: "checkpoint", Err: err}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return d.captureLocked(ctx, w)
}

// CheckpointSize is Checkpoint that also says how many bytes it stored
// (driver.Sizer): the new blobs the capture wrote (contents the store did
// not hold), and the manifest when it is new; 0 for a tree captured
// before. The total size of the tree is not it: unchanged files cost
// nothing.
func (d *Driver) CheckpointSize(ctx context.Context, w *Workspace) (string, int64, error) {
	if w == nil || w.root == nil {
		return "", 0, &Error{Op: "checkpoint", Err: errNoHandle}
	}
	if err := d.ready(); err != nil {
		return "", 0, &Error{Op: "checkpoint", Err: err}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ref, err := d.captureLocked(ctx, w)
	if err != nil {
		return "", 0, err
	}
	return ref, w.mu.last.stored, nil
}

// RemoveWorkspace deletes the workspace that b names, with everything in it.
// Handles to it stop working. Checkpoints taken from it are not affected.
func (d *Driver) RemoveWorkspace(b Binding) error {
	if err := d.ready(); err != nil {
		return &Error{Op: "remove workspace", Err: err}
	}
	if !storefs.ValidID(b.Workspace) {
		return &Error{Op: "remove workspace", Err: fmt.Errorf("%w: malformed workspace id %s", ErrWorkspaceNotFound, strconv.Quote(b.Workspace))}
	}
	if err := removeTree(d.store.workspace(b.Workspace)); err != nil {
		return &Error{Op: "remove workspace", Path: b.Workspace, Err: err}
	}
	return nil
}

// ready checks the configuration and creates the store's directories once.
func (d *Driver) ready() error {
	if d.cfgErr != nil {
		return d.cfgErr
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.ready {
		return nil
	}
	if err := d.store.create(); err != nil {
		return err
	}
	d.mu.ready = true
	return nil
}

// syncDir fsyncs dir unless the driver is configured with NoSync.
func (d *Driver) syncDir(dir string) error {
	if d.cfg.NoSync {
		return nil
	}
	return storefs.SyncDir(dir)
}

// errNoHandle is the error for a nil or zero Workspace.
var errNoHandle = errors.New("workspace handle not made by Create or Open")

// unavailable marks err as a checkpoint that cannot be restored.
func unavailable(err error) error {
	return fmt.Errorf("%w (%w)", err, driver.ErrCheckpointUnavailable)
}
