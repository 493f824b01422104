package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/forkline/forkline/eventlog"
)

// ErrRunning is returned (wrapped) by Delete for an execution that is
// running or owned by a live kernel: cancel it, or wait for it, first.
var ErrRunning = eventlog.ErrRunning

// Delete deletes an execution (DESIGN §14). It becomes a tombstone: List
// never shows it, and Run, Wait, Fork, Events, Coverage and Cancel on it
// return an error wrapping eventlog.ErrNotFound. Every surviving fork of it
// reads exactly what it read before — the store keeps the deleted
// execution's events only up to the furthest point a surviving fork reads —
// so its forks still run, replay and fork as before. Its idempotency key
// is freed.
//
// Delete refuses, with an error wrapping ErrRunning and nothing changed,
// an execution that is running (dispatched and not ended, even when its
// owner died: Cancel it first) or owned by a live kernel. Children an
// execution started are executions of their own and are not deleted with
// it. Deleting an unknown or already deleted execution is ErrNotFound.
//
// Delete removes only log records: checkpoints and workspaces of the
// execution stay with the drivers that hold them.
func (k *Kernel) Delete(ctx context.Context, id eventlog.ID) error {
	var d eventlog.Deleter
	ok := eventlog.As(k.log, &d)
	if !ok {
		return fmt.Errorf("%w: this log (%T) cannot delete executions", ErrInvalid, k.log)
	}
	if err := d.Delete(ctx, id); err != nil {
		if errors.Is(err, eventlog.ErrRunning) {
			return fmt.Errorf("sdk: delete %s: %w", id, err)
		}
		return err
	}
	return nil
}
