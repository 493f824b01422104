package sdk

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/forkline/forkline/eventlog"
)

// WithLogger makes the kernel log what an operator wants to know — each
// dispatch's start and end, failed captures, lost leases — to l, and makes
// l the logger handlers get from Logger. Nothing is logged per replayed
// step. Without it the kernel logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(k *Kernel) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalid)
		}
		k.logger = l
		return nil
	}
}

// IsReplaying reports whether the handler of ctx is replaying (DESIGN
// §15½.9): recorded steps of its lineage (terminal ones, and ones started
// but never finished) remain that this dispatch has not reached again,
// and no call of the dispatch has gone live yet. Replaying ends at the
// dispatch's first call that is not answered from the record (a new call,
// a retry, an unfinished step run again), even when recorded steps remain
// (a handler whose code changed), and when the handler returns. A fork's
// override of a step its lineage does not hold is not a recorded step:
// reaching it neither ends replaying nor counts toward its end. Outside a
// handler it is false.
func IsReplaying(ctx context.Context) bool {
	d, err := dispatchFrom(ctx)
	if err != nil {
		return false
	}
	return d.replaying()
}

// Logger returns the kernel's logger (WithLogger) for a handler, with the
// execution's ID and agent as attributes; it drops every record while the
// handler is replaying, so a progress line prints once, not once per
// dispatch. Outside a handler it returns slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	d, err := dispatchFrom(ctx)
	if err != nil {
		return slog.Default()
	}
	return slog.New(&replayHandler{Handler: d.k.logger.Handler(), d: d}).
		With("execution", d.id.String(), "agent", d.state.Agent)
}

// replayHandler drops records while its dispatch replays.
type replayHandler struct {
	slog.Handler
	d *dispatch
}

// Enabled implements slog.Handler.
func (h *replayHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.d.replaying() && h.Handler.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h *replayHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.d.replaying() {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *replayHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &replayHandler{Handler: h.Handler.WithAttrs(as), d: h.d}
}

// WithGroup implements slog.Handler.
func (h *replayHandler) WithGroup(name string) slog.Handler {
	return &replayHandler{Handler: h.Handler.WithGroup(name), d: h.d}
}

// replaying reports whether recorded steps remain unconsumed.
func (d *dispatch) replaying() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.wentLive && !d.ended && d.nConsumed < d.recorded
}

// logCaptures logs the failed captures among payloads at Warn.
func (d *dispatch) logCaptures(payloads []eventlog.Payload) {
	for _, p := range payloads {
		if f, ok := p.(*eventlog.ResourceCaptureFailed); ok {
			d.k.logger.Warn("forkline: capture failed", "execution", d.id.String(), "resource", f.Key,
				"reason", string(f.Reason), "error", f.Error)
		}
	}
}
