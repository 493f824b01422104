package sdk

import (
	"context"

	"github.com/forkline/forkline/eventlog"
)

// Patched reports whether the handler takes the new path of a change named
// name (DESIGN §15), so that a changed handler still replays the histories
// its old code recorded:
//
//	if sdk.Patched(ctx, "summarize-before-write") {
//		// new code
//	} else {
//		// old code, kept while executions recorded before the patch run
//	}
//
// A Patched call has a position, like a step: its name and how many Patched
// calls of that name the dispatch made before it. It returns
//
//   - true when the lineage recorded marker.recorded{name} at this position
//     (the patched code ran here before);
//   - false while the dispatch replays (IsReplaying: recorded steps of the
//     lineage remain unconsumed) and no marker is recorded at this
//     position: the history was recorded before the patch, so the old path
//     replays it;
//   - true otherwise — the dispatch no longer replays, nothing recorded
//     here — and it then records marker.recorded{name} (synced), so that
//     every later dispatch, and every fork past it, takes the new path too.
//
// A fork replays its prefix like any dispatch: a fork past the marker (its
// fork point at or after the marker.recorded) holds the marker in its
// prefix and takes the new path, because its prefix was recorded by the
// patched code; a fork before the marker, of a history recorded before the
// patch, takes the old path while it replays the prefix and the new one
// once it runs live.
//
// Outside a running handler, with an empty name, or once the dispatch can
// make no more calls (its handler returned, the execution is failing), it
// returns true and records nothing.
func Patched(ctx context.Context, name string) bool {
	d, err := dispatchFrom(ctx)
	if err != nil || name == "" {
		return true
	}
	replaying := d.replaying()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enterCallLocked("marker", name); err != nil {
		return true
	}
	defer d.calls.Done()
	n := d.pos.markers[name]
	d.pos.markers[name]++
	seen := 0
	for _, m := range d.state.Markers {
		if m.Name != name {
			continue
		}
		if seen == n {
			return true
		}
		seen++
	}
	if replaying {
		return false
	}
	if d.usableLocked() != nil {
		return true
	}
	_ = d.appendLocked(false, &eventlog.MarkerRecorded{Name: name}) // a failure makes the dispatch dead
	return true
}
