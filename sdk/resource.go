package sdk

import (
	"context"
	"fmt"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/resource"
)

// ResourceOption configures Resource.
type ResourceOption func(*policy.Checkpoints) error

// EverySteps captures the resource after every n-th live tool call or local
// step that affects it (default 1). n must be at least 1.
func EverySteps(n int) ResourceOption {
	return func(c *policy.Checkpoints) error {
		if n < 1 {
			return fmt.Errorf("%w: EverySteps(%d): n must be at least 1", ErrInvalid, n)
		}
		c.EverySteps = n
		return nil
	}
}

// OnCompletion says whether to capture the resource when the handler
// returns normally and it is uncovered (default true).
func OnCompletion(on bool) ResourceOption {
	return func(c *policy.Checkpoints) error {
		c.OnCompletion = on
		return nil
	}
}

// Resource returns the handle of the execution's resource key, made by d
// (DESIGN §5): the same handle for the same key within a dispatch; the
// execution's own binding opened on later dispatches; otherwise a new
// resource, created from the checkpoint a fork selected for key or from the
// initial environment (then captured at once as a baseline). The policy of
// opts applies when the lineage binds key for the first time; after that the
// recorded policy wins.
//
// Where a resource may be opened (DESIGN §11, §15½.4): a binding that is
// not portable (resource.bound records Portable, driver.IsPortable at bind
// time; bindings of format 1 and 2 read false — dirfs, sqlitedb) is opened
// only by the owner that made it, and only while no other owner held the
// execution since (the Owner of dispatch.started). A new owner — a
// takeover, a worker on another host, a restarted process with a new
// owner name — binds anew from the checkpoint covering the head
// (resource.bound{From}). With the head uncovered it appends nothing, not
// even its dispatch.started, and Run returns an *AwaitingOwnerError
// (ErrResourceUnavailable) naming the owner that made the binding, which
// reopens it when it returns (even if another owner held the execution
// since, at a covered head: nobody else could). The execution is never
// failed for it; the code resource_unavailable is only found in old logs.
// AwaitedOwner and forkline ls show such an execution as "running,
// awaiting owner X"; forkline fork ID --latest-covered is the way out when
// X is gone for good. A dispatch that parks or whose context ends
// captures its uncovered resources first, so a planned handoff keeps its
// state.
//
// A driver whose DriverID or Configuration differ from the recorded ones
// fails the call with ErrResourceMismatch and the execution with it; a
// fork's checkpoint the driver cannot restore (driver.ErrCheckpointUnavailable)
// fails the execution with code checkpoint_unavailable.
func Resource[H, B any](ctx context.Context, key string, d driver.Driver[H, B], opts ...ResourceOption) (H, error) {
	var zero H
	if key == "" {
		return zero, fmt.Errorf("%w: Resource with an empty key", ErrInvalid)
	}
	pol := policy.DefaultCheckpoints()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&pol); err != nil {
			return zero, fmt.Errorf("resource %q: %w", key, err)
		}
	}
	drv, err := resource.Erase(d)
	if err != nil {
		return zero, fmt.Errorf("resource %q: %w", key, err)
	}
	disp, err := dispatchFrom(ctx)
	if err != nil {
		return zero, fmt.Errorf("resource %q: %w", key, err)
	}
	if replayOnly, err := disp.replayOnlyResource(key, drv); replayOnly {
		return zero, err
	}
	h, err := disp.obtain(ctx, key, drv, pol)
	if err != nil {
		return zero, err
	}
	handle, ok := h.(H)
	if !ok {
		return zero, fmt.Errorf("%w: resource %q has a handle of type %T, not %T", ErrResourceMismatch, key, h, zero)
	}
	return handle, nil
}
