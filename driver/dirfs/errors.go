package dirfs

import (
	"errors"
	"strconv"
	"strings"
)

// ErrConfig is wrapped by every error caused by an invalid [Config], such as
// an empty Store. New never fails; the error surfaces from the first call
// that needs the store.
var ErrConfig = errors.New("dirfs: invalid configuration")

// ErrInvalidRef is wrapped by the error for a checkpoint ref that is not 64
// lower-case hex digits (empty, absolute, containing "/" or ".."). Create
// wraps [driver.ErrCheckpointUnavailable] as well.
var ErrInvalidRef = errors.New("dirfs: invalid checkpoint ref")

// ErrCorrupt is wrapped by the error for a checkpoint whose manifest or blobs
// do not hash to what they claim, are missing, or do not parse. Create wraps
// [driver.ErrCheckpointUnavailable] as well, and never yields a workspace with
// wrong content.
var ErrCorrupt = errors.New("dirfs: corrupt checkpoint")

// ErrOutsideWorkspace is wrapped by the error a [Workspace] file helper
// returns for a path that is absolute, climbs out with "..", or resolves
// through a symbolic link to a place outside the workspace.
var ErrOutsideWorkspace = errors.New("dirfs: path outside workspace")

// ErrWorkspaceNotFound is wrapped by the error Open returns for a binding
// whose workspace does not exist (it was removed, or belongs to another
// store).
var ErrWorkspaceNotFound = errors.New("dirfs: workspace not found")

// ErrUnsupportedFile is wrapped by the error Checkpoint returns when the
// workspace holds something other than a directory, a regular file or a
// symbolic link (a socket, a named pipe, a device).
var ErrUnsupportedFile = errors.New("dirfs: unsupported file type")

// Error describes a failed operation on the store, a checkpoint or a
// workspace. Its Err wraps the classifying sentinel (ErrCorrupt, …) or the
// underlying IO error.
type Error struct {
	Op   string // "checkpoint", "create", "open", "verify", "delete", "gc", or a file helper's name
	Ref  string // the checkpoint ref involved, if any
	Path string // the path inside the workspace, template or store, if any
	Err  error  // the cause: a sentinel of this package, a context error, or an IO error
}

// Error formats as "dirfs: verify checkpoint 3fa…: "a/b.txt": corrupt
// checkpoint: …".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("dirfs: ")
	b.WriteString(e.Op)
	if e.Ref != "" {
		b.WriteString(" checkpoint ")
		b.WriteString(strconv.Quote(e.Ref))
	}
	if e.Path != "" {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.Path))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "dirfs: "))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }
