package eventlog

import "context"

// StreamDelta is one piece of a model response streaming to a handler in
// some process (DESIGN §16, §21½.4), as a DeltaCarrier carries it to the
// others: never stored.
type StreamDelta struct {
	// ID is the execution whose handler reads the stream.
	ID ID
	// StepID is the llm step whose response streams (hex, as on the wire).
	StepID string
	// Index counts the step's deltas from 0 in its attempt.
	Index int
	// Data is the bytes the handler's read got.
	Data []byte
	// Origin names the sender (a kernel), so that it can tell its own
	// deltas, which it already has, from the others'.
	Origin string
}

// MaxCarriedDelta is the largest Data a DeltaCarrier must carry (DESIGN
// §21½.4: 8 KB); a larger delta is not carried, and a watcher in another
// process sees a gap in Index.
const MaxCarriedDelta = 8 << 10

// DeltaCarrier is implemented by a Log that many processes share and that
// can pass the ephemeral deltas of a streaming model response from the
// process whose handler reads it to the watchers of the others (DESIGN
// §21½.4). pgstore implements it with NOTIFY. Delivery is best-effort:
// a delta may be missed (a watcher sees the gap in Index), never stored,
// never seen by a process that was not listening when it was sent.
type DeltaCarrier interface {
	// SendDeltas announces ds, in order, to every process's Deltas
	// channels (this one's included: receivers drop their own Origin).
	// A delta whose Data is longer than MaxCarriedDelta is skipped. It
	// returns when the store accepted them; the error wraps ErrClosed
	// after Close.
	SendDeltas(ctx context.Context, ds []StreamDelta) error
	// Deltas returns a channel that receives the deltas any process sent,
	// in the order each sender sent them, from when the store listens:
	// Deltas returns once it does (or with ctx's error). When the receiver
	// falls behind, deltas are dropped, never queued without bound. The
	// channel is closed when ctx ends or the log closes. The Data is the
	// receiver's to keep.
	Deltas(ctx context.Context) (<-chan StreamDelta, error)
	// SyncDeltas returns once every delta whose SendDeltas returned before
	// SyncDeltas was called, by any process, was offered to the Deltas
	// channels open at the call, or with ctx's error (a lost connection
	// may lose the mark: bound ctx).
	SyncDeltas(ctx context.Context) error
}
