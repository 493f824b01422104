package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
)

// ErrMismatch is returned when a driver's DriverID or Configuration differ
// from those recorded for the resource key in the lineage: a checkpoint made
// by one driver is not restored, nor a binding opened, by another.
var ErrMismatch = errors.New("resource: driver does not match the recorded binding")

// ErrBadBinding is returned when a driver's Create returns a binding that
// does not encode as JSON, or a recorded binding does not decode into the
// driver's binding type.
var ErrBadBinding = errors.New("resource: binding is not JSON of the driver's binding type")

// ErrDriverPanic is wrapped by the error of a Create or Open whose driver
// panicked: the panic is recovered and returned as an error to the caller.
var ErrDriverPanic = errors.New("resource: driver panicked")

// Driver is a driver.Driver with its handle and binding types erased, so that
// one execution can hold resources of different drivers. Make one with Erase.
type Driver interface {
	// DriverID returns the wrapped driver's DriverID.
	DriverID() string
	// Configuration returns the driver's configuration as JSON (nil for
	// none); configuration that carries credentials is an error wrapping
	// driver.ErrCredentials.
	Configuration() (json.RawMessage, error)
	// CoverageReuse reports whether the driver declares CoverageReuse.
	CoverageReuse() bool
	// Create creates a resource from ref (or the initial environment) and
	// returns its handle and JSON binding.
	Create(ctx context.Context, from string) (any, json.RawMessage, error)
	// Open opens the resource of a JSON binding.
	Open(ctx context.Context, binding json.RawMessage) (any, error)
	// Checkpoint captures the handle's state and returns a non-empty ref.
	Checkpoint(ctx context.Context, handle any) (string, error)
	// Unwrap returns the wrapped driver.Driver value.
	Unwrap() any
}

// Erase wraps d. It returns an error for a nil driver.
func Erase[H, B any](d driver.Driver[H, B]) (Driver, error) {
	if isNil(d) {
		return nil, fmt.Errorf("%w: nil driver", eventlog.ErrInvalid)
	}
	return erased[H, B]{d}, nil
}

type erased[H, B any] struct{ d driver.Driver[H, B] }

func (e erased[H, B]) DriverID() string { return e.d.DriverID() }
func (e erased[H, B]) Unwrap() any      { return e.d }

func (e erased[H, B]) Configuration() (json.RawMessage, error) {
	return driver.EncodeConfiguration(e.d.Configuration())
}

func (e erased[H, B]) CoverageReuse() bool { return driver.CoverageReuse(e.d) }

func (e erased[H, B]) Create(ctx context.Context, from string) (_ any, _ json.RawMessage, err error) {
	defer recoverDriver(e.d.DriverID(), "Create", &err)
	h, b, err := e.d.Create(ctx, from)
	if err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadBinding, e.d.DriverID(), err)
	}
	return h, raw, nil
}

func (e erased[H, B]) Open(ctx context.Context, binding json.RawMessage) (_ any, err error) {
	defer recoverDriver(e.d.DriverID(), "Open", &err)
	var b B
	dec := json.NewDecoder(bytes.NewReader(binding))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadBinding, e.d.DriverID(), err)
	}
	return e.d.Open(ctx, b)
}

func (e erased[H, B]) Checkpoint(ctx context.Context, handle any) (string, error) {
	h, ok := handle.(H)
	if !ok {
		return "", fmt.Errorf("resource: %s: handle of type %T, driver takes %T", e.d.DriverID(), handle, *new(H))
	}
	return e.d.Checkpoint(ctx, h)
}

// Match checks that d is the driver recorded in rec: same DriverID, and
// Configuration equal as JSON values. A driver that implements
// driver.ConfigurationReader reads the recorded Configuration first, so
// that an older recorded form (one that named a store path) still matches.
// The error wraps ErrMismatch.
func Match(d Driver, rec *eventlog.ResourceBound) error {
	if d.DriverID() != rec.DriverID {
		return fmt.Errorf("%w: resource %q was bound by driver %q, this driver is %q",
			ErrMismatch, rec.Key, rec.DriverID, d.DriverID())
	}
	cfg, err := d.Configuration()
	if err != nil {
		return err
	}
	recorded := rec.Configuration
	if r, ok := d.Unwrap().(driver.ConfigurationReader); ok && len(recorded) > 0 {
		now, err := r.ReadConfiguration(recorded)
		if err != nil {
			return fmt.Errorf("%w: resource %q was bound with configuration %s, which driver %q cannot read: %v",
				ErrMismatch, rec.Key, orNull(rec.Configuration), d.DriverID(), err)
		}
		recorded = now
	}
	if !sameJSON(cfg, recorded) {
		return fmt.Errorf("%w: resource %q was bound with configuration %s, this driver has %s",
			ErrMismatch, rec.Key, orNull(rec.Configuration), orNull(cfg))
	}
	return nil
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(orNull(a)) == len(orNull(b)) && string(orNull(a)) == string(orNull(b))
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("null")
	}
	return b
}

// Bind creates the resource for key from ref from ("" = the initial
// environment) with policy pol, and returns its handle and the
// resource.bound event to record. Nothing is recorded by Bind itself.
func Bind(ctx context.Context, d Driver, key, from string, pol policy.Checkpoints, reuse bool) (any, *eventlog.ResourceBound, error) {
	if key == "" {
		return nil, nil, fmt.Errorf("%w: empty resource key", eventlog.ErrInvalid)
	}
	if err := pol.Validate(); err != nil {
		return nil, nil, err
	}
	cfg, err := d.Configuration()
	if err != nil {
		return nil, nil, fmt.Errorf("resource %q: %w", key, err)
	}
	h, binding, err := d.Create(ctx, from)
	if err != nil {
		if from != "" {
			return nil, nil, fmt.Errorf("resource %q: create from checkpoint %q: %w", key, from, err)
		}
		return nil, nil, fmt.Errorf("resource %q: create from the initial environment: %w", key, err)
	}
	if !json.Valid(binding) {
		return nil, nil, fmt.Errorf("%w: resource %q", ErrBadBinding, key)
	}
	return h, &eventlog.ResourceBound{
		Key:           key,
		DriverID:      d.DriverID(),
		Configuration: cfg,
		Binding:       binding,
		From:          from,
		EverySteps:    pol.EverySteps,
		OnCompletion:  pol.OnCompletion,
		CoverageReuse: reuse,
		// Recorded so that a fold knows, before a dispatch starts, which
		// bindings open only for their owner (DESIGN §15½.4).
		Portable: driver.IsPortable(d.Unwrap()),
	}, nil
}

// Open opens the execution's own recorded binding after checking the driver
// matches it.
func Open(ctx context.Context, d Driver, rec *eventlog.ResourceBound) (any, error) {
	if err := Match(d, rec); err != nil {
		return nil, err
	}
	h, err := d.Open(ctx, rec.Binding)
	if err != nil {
		return nil, fmt.Errorf("resource %q: open binding %s: %w", rec.Key, rec.Binding, err)
	}
	return h, nil
}

// Capture checkpoints handle and returns the event to record: a
// resource.captured of generation gen, or a resource.capture_failed when
// the driver fails or returns an empty ref (a panicking driver is a failure
// too). It never returns nil.
func Capture(ctx context.Context, d Driver, handle any, key string, gen uint64, reason eventlog.CaptureReason) (ev eventlog.Payload) {
	defer func() {
		if r := recover(); r != nil {
			ev = &eventlog.ResourceCaptureFailed{Key: key, Reason: reason, Error: fmt.Sprintf("checkpoint panicked: %v", r)}
		}
	}()
	ref, err := d.Checkpoint(ctx, handle)
	if err == nil && ref == "" {
		err = fmt.Errorf("driver %s returned an empty checkpoint ref", d.DriverID())
	}
	if err != nil {
		return &eventlog.ResourceCaptureFailed{Key: key, Reason: reason, Error: err.Error()}
	}
	return &eventlog.ResourceCaptured{Key: key, Ref: ref, Generation: gen, Reason: reason}
}

// recoverDriver turns a driver's panic into an error wrapping ErrDriverPanic.
func recoverDriver(id, op string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s.%s: %v", ErrDriverPanic, id, op, r)
	}
}

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
