package sdk

import (
	"fmt"

	"github.com/forkline/forkline/eventlog"
)

// DurabilityMode says when a kernel's appends must reach the disk (DESIGN
// §4, §21). The zero value is [SyncEveryStep].
type DurabilityMode uint8

const (
	// SyncEveryStep is the default: every terminal event is synced before
	// the caller sees its outcome (DESIGN §4). Only a safe_to_retry step's
	// step.started rides on a later sync, so a crash re-runs at most the
	// safe_to_retry calls whose bodies had not ended.
	SyncEveryStep DurabilityMode = iota
	// SyncAtEffects is the explicit lighter mode of DESIGN §21, never the
	// default: the outcome (step.succeeded, or step.failed, a retried
	// attempt's included) of a safe_to_retry tool, local or llm call is
	// appended unsynced (eventlog.Log.AppendUnsynced) when no capture is
	// committed with it. It becomes durable with the next synced append of
	// the log — an at_most_once intent, an approval, a park, a capture, a
	// child, the completion — which the log's order guarantees on both
	// stores (Pebble's one write-ahead log; Postgres's WAL, in which a
	// commit made with synchronous_commit off is durable once a later
	// synced commit is). Everything else is synced as under SyncEveryStep:
	// at_most_once intents and outcomes, captures, bindings, denials,
	// timers, a streamed reply's outcome, a cancelled step, every
	// execution.* event.
	//
	// The guarantee: after a crash — of the machine; on Pebble, of the
	// process too, since Pebble buffers an unsynced write in the process
	// before its write-ahead log file has it; on Postgres, of the server —
	// the safe_to_retry calls whose outcomes were appended after the last
	// synced append run again, and only those; an at_most_once body still
	// runs at most once, and a completed execution's result is the one an
	// uninterrupted run gives. A caller must therefore not act outside the
	// execution on a safe_to_retry result before a synced append follows
	// it: between them it may be run again, and return another value.
	SyncAtEffects
)

// String returns the mode's name: "sync_every_step" or "sync_at_effects".
func (m DurabilityMode) String() string {
	switch m {
	case SyncEveryStep:
		return "sync_every_step"
	case SyncAtEffects:
		return "sync_at_effects"
	}
	return fmt.Sprintf("DurabilityMode(%d)", uint8(m))
}

// Durability sets when the kernel's appends are synced (default
// [SyncEveryStep]); see [SyncAtEffects] for the lighter mode and what it
// guarantees. An unknown mode is ErrInvalid.
func Durability(m DurabilityMode) Option {
	return func(k *Kernel) error {
		switch m {
		case SyncEveryStep, SyncAtEffects:
		default:
			return fmt.Errorf("%w: durability mode %d; want SyncEveryStep or SyncAtEffects", ErrInvalid, uint8(m))
		}
		k.durability = m
		return nil
	}
}

// lazyOutcome reports whether the terminal event of c, appended alone (no
// capture committed with it), may be appended unsynced: under
// SyncAtEffects, the step.succeeded or step.failed of a safe_to_retry
// tool, local or llm call (DESIGN §21).
func (k *Kernel) lazyOutcome(c call, payloads []eventlog.Payload) bool {
	if k.durability != SyncAtEffects || c.idem != eventlog.SafeToRetry || len(payloads) != 1 {
		return false
	}
	switch c.kind {
	case eventlog.StepTool, eventlog.StepLocal, eventlog.StepLLM:
	default:
		return false
	}
	switch payloads[0].(type) {
	case *eventlog.StepSucceeded, *eventlog.StepFailed:
		return true
	}
	return false
}
