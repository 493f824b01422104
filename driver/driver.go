package driver

import (
	"context"
	"errors"
	"reflect"
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

// Differ is implemented by a driver that can compare two of its
// checkpoints (DESIGN §12). proptest.CheckAgent uses it to compare a fork's
// state with its parent's.
type Differ interface {
	// Diff describes, for people, how the state refB holds differs from
	// the state refA holds; "" when they hold the same state.
	Diff(ctx context.Context, refA, refB string) (string, error)
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
