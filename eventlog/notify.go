package eventlog

import "context"

// Notifier is implemented by a Log that many processes share and that can
// tell each of them, soon after the commit, what another one wrote
// (DESIGN §15½.6, §15½.14). pgstore implements it with LISTEN/NOTIFY; a
// single-process store needs none, since its kernel's own signals wake
// its Serve and Watch. Callers find it with As and keep polling as the
// fallback: delivery is prompt but not guaranteed.
type Notifier interface {
	// Changes returns a channel that receives the ID of each execution
	// that any process (this one included) appended events to (a store
	// may announce only the appends that end an execution: say so),
	// requested something of (Inbox.Request) or released the lease of
	// (Leaser.Release), soon after the write committed. A zero ID says that changes may have been missed (the
	// listener reconnected): the receiver should look at everything it
	// waits for. When the receiver falls behind, IDs are dropped, never
	// queued without bound. The channel is closed when ctx ends or the
	// log closes. The error wraps ErrClosed after Close.
	Changes(ctx context.Context) (<-chan ID, error)
}
