package driver

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"time"
)

// Driver creates, reopens and checkpoints one kind of resource. H is the
// handle user code works with; B is the binding the kernel stores (as JSON)
// to reach the same resource again.
//
// Implementations must be safe to use from one goroutine at a time per
// handle; the kernel never checkpoints a handle while a step that may change
// it is running.
type Driver[H, B any] interface {
	// DriverID is a stable identifier of the implementation, such as
	// "forkline.dirfs.v1". It never changes for the lifetime of a stored
	// checkpoint format.
	DriverID() string
	// Configuration returns the driver's settings as a JSON-encodable value,
	// without credentials, or nil for none. It must be the same for every
	// driver value that can read the same checkpoints.
	Configuration() any
	// Create makes a new, isolated resource. from == "" asks for the initial
	// environment; otherwise from is a ref returned by Checkpoint, and the
	// new resource's state is exactly the captured one. A ref that is
	// missing, deleted, expired or malformed yields an error wrapping
	// ErrCheckpointUnavailable.
	Create(ctx context.Context, from string) (H, B, error)
	// Open returns a handle for the existing resource that binding names.
	// Changes made through either handle are visible through the other.
	Open(ctx context.Context, binding B) (H, error)
	// Checkpoint captures the resource's current state and returns an
	// immutable ref. h stays usable, and later changes through h never change
	// what the ref restores.
	Checkpoint(ctx context.Context, h H) (string, error)
}

// CoverageReuser is implemented by a driver whose state changes only through
// tools and steps that declare the resource with Affects. When CoverageReuse
// reports true, a capture keeps covering the resource across live steps that
// do not affect it, instead of ending at the next live step.
type CoverageReuser interface {
	// CoverageReuse reports whether every change to the resource goes
	// through declared tools and steps.
	CoverageReuse() bool
}

// ConfigurationReader is implemented by a driver whose recorded
// Configuration once had another form (DESIGN §11, relocatable
// configuration): say, an older version that recorded where its store
// lived. Before comparing a recorded Configuration with the driver's, the
// kernel passes it through ReadConfiguration, so that a binding recorded
// in the old form still matches a driver that records the new one.
type ConfigurationReader interface {
	// ReadConfiguration returns the recorded Configuration (JSON, as the
	// kernel recorded it) in the form Configuration has today, or an error
	// for a recording the driver cannot read.
	ReadConfiguration(recorded []byte) ([]byte, error)
}

// Portable is implemented by a driver whose bindings open from any host
// (DESIGN §11, where a resource may be opened): a remote sandbox, a
// database reached over the network. A binding of a driver that does not
// report Portable true names something local to the process that made it
// (a directory, a file): only the owner that created it opens it, and only
// while no other owner held the execution since. Any other owner binds
// anew from the checkpoint covering the execution's head.
type Portable interface {
	// Portable reports whether the driver's bindings open from any host.
	Portable() bool
}

// IsPortable reports whether d implements [Portable] and says true. Any
// other value, nil and nil pointers included, reports false.
func IsPortable(d any) bool {
	p, ok := d.(Portable)
	if !ok || isNil(d) {
		return false
	}
	return p.Portable()
}

// Differ is implemented by a driver that can compare two of its
// checkpoints (DESIGN §12): `forkline diff` uses it to show how two
// executions' resources differ, and proptest.CheckAgent to compare a fork's
// state with its parent's.
type Differ interface {
	// Diff returns how the state refB holds differs from the state refA
	// holds; an empty Difference when they hold the same state. A ref the
	// driver cannot read yields an error wrapping ErrCheckpointUnavailable.
	Diff(ctx context.Context, refA, refB string) (Difference, error)
}

// Difference is how one checkpoint's state differs from another's: the
// things added, removed or changed, sorted by Name. Its zero value means
// "the same state".
type Difference struct {
	Changes []Change `json:"changes"`
}

// Empty reports whether the two states are the same.
func (d Difference) Empty() bool { return len(d.Changes) == 0 }

// String formats the difference for people: one line per change, "+",
// "-" or "~", the kind and the name, each followed by its Detail indented
// by four spaces; "" when the states are the same.
func (d Difference) String() string {
	var b strings.Builder
	for _, c := range d.Changes {
		b.WriteString(c.Op.sign())
		b.WriteByte(' ')
		b.WriteString(c.Kind)
		b.WriteByte(' ')
		b.WriteString(c.Name)
		b.WriteByte('\n')
		if c.Detail != "" {
			for line := range strings.Lines(c.Detail) {
				b.WriteString("    ")
				b.WriteString(strings.TrimSuffix(line, "\n"))
				b.WriteByte('\n')
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Op says what happened to a thing between two checkpoints.
type Op string

// The ops of a [Change].
const (
	Added   Op = "added"   // only the second state holds it
	Removed Op = "removed" // only the first state holds it
	Changed Op = "changed" // both hold it, differently
)

func (o Op) sign() string {
	switch o {
	case Added:
		return "+"
	case Removed:
		return "-"
	}
	return "~"
}

// Change is one thing that differs between two checkpoints.
type Change struct {
	Op Op `json:"op"`
	// Kind says what the thing is, in the driver's terms: "file",
	// "directory", "symlink" (a directory workspace); "table", "row" (a
	// database).
	Kind string `json:"kind"`
	// Name identifies it: a slash-separated path; a table; a row as
	// table[key].
	Name string `json:"name"`
	// Detail says how it differs, for people: a unified diff of a text
	// file, the sizes of a binary one, a row's columns; "" when Op says it
	// all.
	Detail string `json:"detail,omitempty"`
}

// Sizer is implemented by a driver that can say how many bytes a capture
// stored (DESIGN §13: the histogram forkline.capture.size). When a driver
// has it, the kernel checkpoints through CheckpointSize instead of
// Checkpoint.
type Sizer[H any] interface {
	// CheckpointSize is Checkpoint that also returns the bytes the capture
	// added to the driver's store: contents the store did not hold yet, so
	// a capture of a state already stored adds 0, and one that changed one
	// file of many adds about that file. On error stored is 0.
	CheckpointSize(ctx context.Context, h H) (ref string, stored int64, err error)
}

// ErrCheckpointUnavailable is wrapped by the error Create returns when the
// requested checkpoint does not exist (never did, was deleted, expired) or
// cannot be read back intact. A fork that needs it fails with code
// checkpoint_unavailable.
var ErrCheckpointUnavailable = errors.New("driver: checkpoint unavailable")

// CoverageReuse reports whether d implements [CoverageReuser] and says true.
// Any other value, nil and nil pointers included, reports false.
func CoverageReuse(d any) bool {
	r, ok := d.(CoverageReuser)
	if !ok || isNil(d) {
		return false
	}
	return r.CoverageReuse()
}

// isNil reports whether v is nil or a nil pointer, map, slice, channel,
// function or interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Collector is implemented by a driver that can drop what no execution can
// select or open any more (DESIGN §14): every checkpoint not in refs and
// every resource no binding in bindings names, except those younger than
// grace (a capture or a binding its log has not recorded yet). The kernel
// computes the lists from the log (sdk.Collect); a driver whose store
// several logs share must be given the union of their lists.
type Collector[B any] interface {
	Live(ctx context.Context, refs []string, bindings []B, grace time.Duration) (Collected, error)
}

// Collected is what a Collector removed.
type Collected struct {
	Checkpoints int   // checkpoints removed
	Resources   int   // resources (workspaces, databases) removed
	Bytes       int64 // bytes of stored contents freed, as far as the driver knows
}

// ErrInvalidCollect is wrapped by a Collector's error for a bad request,
// such as a negative grace period; nothing is removed.
var ErrInvalidCollect = errors.New("driver: invalid collection")
