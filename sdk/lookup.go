package sdk

import (
	"context"
	"fmt"

	"github.com/forkline/forkline/eventlog"
)

// Lookup returns the execution started with key (WithKey; its Info.Key),
// without creating one: a key nobody started is an error wrapping
// eventlog.ErrNotFound, as is the key of a deleted execution (deleting
// frees it). An empty key is ErrInvalid; a log that cannot look keys up
// (no eventlog.KeyLookup) is ErrInvalid too.
func (k *Kernel) Lookup(ctx context.Context, key string) (eventlog.Info, error) {
	if key == "" {
		return eventlog.Info{}, fmt.Errorf("%w: Lookup of an empty key", ErrInvalid)
	}
	var kl eventlog.KeyLookup
	if !eventlog.As(k.log, &kl) {
		return eventlog.Info{}, fmt.Errorf("%w: the log cannot look keys up (eventlog.KeyLookup)", ErrInvalid)
	}
	id, err := kl.LookupKey(ctx, key)
	if err != nil {
		return eventlog.Info{}, fmt.Errorf("sdk: lookup of key %q: %w", key, err)
	}
	info, err := k.log.Info(ctx, id)
	if err != nil {
		return eventlog.Info{}, fmt.Errorf("sdk: lookup of key %q: %w", key, err)
	}
	return info, nil
}
