package sdk

import "github.com/forkline/forkline/eventlog"

// DeltaWatchers reports how many WatchDeltas of execution id are
// subscribed in k: a test starts a stream once its watcher is.
func DeltaWatchers(k *Kernel, id eventlog.ID) int {
	k.deltas.mu.RLock()
	defer k.deltas.mu.RUnlock()
	return len(k.deltas.subs[id])
}
