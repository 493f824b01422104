package resource

import (
	"context"
	"fmt"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
)

// checkpointSizer is a Driver that may know what a capture stored: the
// erased driver.Sizer.
type checkpointSizer interface {
	checkpointSize(ctx context.Context, handle any) (ref string, stored int64, sized bool, err error)
}

func (e erased[H, B]) checkpointSize(ctx context.Context, handle any) (string, int64, bool, error) {
	s, ok := e.d.(driver.Sizer[H])
	if !ok {
		ref, err := e.Checkpoint(ctx, handle)
		return ref, 0, false, err
	}
	h, ok := handle.(H)
	if !ok {
		return "", 0, false, fmt.Errorf("resource: %s: handle of type %T, driver takes %T", e.d.DriverID(), handle, *new(H))
	}
	ref, stored, err := s.CheckpointSize(ctx, h)
	return ref, stored, err == nil, err
}

// CaptureSize is Capture that also returns the bytes the capture stored,
// when the driver says (driver.Sizer): sized is false when it does not,
// or when the capture failed.
func CaptureSize(ctx context.Context, d Driver, handle any, key string, gen uint64, reason eventlog.CaptureReason) (ev eventlog.Payload, stored int64, sized bool) {
	cs, ok := d.(checkpointSizer)
	if !ok {
		return Capture(ctx, d, handle, key, gen, reason), 0, false
	}
	defer func() {
		if r := recover(); r != nil {
			ev, stored, sized = &eventlog.ResourceCaptureFailed{Key: key, Reason: reason, Error: fmt.Sprintf("checkpoint panicked: %v", r)}, 0, false
		}
	}()
	ref, stored, sized, err := cs.checkpointSize(ctx, handle)
	if err == nil && ref == "" {
		err = fmt.Errorf("driver %s returned an empty checkpoint ref", d.DriverID())
	}
	if err != nil {
		return &eventlog.ResourceCaptureFailed{Key: key, Reason: reason, Error: err.Error()}, 0, false
	}
	return &eventlog.ResourceCaptured{Key: key, Ref: ref, Generation: gen, Reason: reason}, stored, sized
}
