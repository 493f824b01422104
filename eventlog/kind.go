package eventlog

import "fmt"

// Kind is the type of an event. Its numeric value is stored on disk and its
// String form is the wire and CLI name; both are part of the format (pinned by
// TestFormatPinned) and never change meaning.
type Kind uint8

// The event kinds of DESIGN §3 (format version 1), §8½ (format version 2)
// and Part III (format version 3). The numbers are the on-disk codes.
const (
	KindExecutionCreated      Kind = 1  // execution.created
	KindDispatchStarted       Kind = 2  // dispatch.started
	KindStepStarted           Kind = 3  // step.started
	KindStepSucceeded         Kind = 4  // step.succeeded
	KindStepFailed            Kind = 5  // step.failed
	KindStepCancelled         Kind = 6  // step.cancelled
	KindStepDenied            Kind = 7  // step.denied
	KindResourceBound         Kind = 8  // resource.bound
	KindResourceCaptured      Kind = 9  // resource.captured
	KindResourceCaptureFailed Kind = 10 // resource.capture_failed
	KindExecutionCompleted    Kind = 11 // execution.completed
	KindExecutionFailed       Kind = 12 // execution.failed
	KindForkCreated           Kind = 13 // fork.created

	KindCancelRequested    Kind = 14 // execution.cancel_requested (format 2)
	KindExecutionCancelled Kind = 15 // execution.cancelled (format 2)
	KindDispatchParked     Kind = 16 // dispatch.parked (format 2)
	KindTimerStarted       Kind = 17 // timer.started (format 2)
	KindTimerFired         Kind = 18 // timer.fired (format 2)
	KindApprovalRequested  Kind = 19 // approval.requested (format 2)
	KindApprovalGranted    Kind = 20 // approval.granted (format 2)
	KindApprovalRejected   Kind = 21 // approval.rejected (format 2)
	KindMarkerRecorded     Kind = 22 // marker.recorded (format 2)
	KindStepAbandoned      Kind = 23 // step.abandoned (format 2)
	KindForkDiverged       Kind = 24 // fork.diverged (format 2)

	KindMessageReceived Kind = 25 // message.received (format 3)
	KindEventSet        Kind = 26 // event.set (format 3)
	KindChildEnded      Kind = 27 // child.ended (format 3): an inbox request only
)

// Sync says when an append holding an event must have reached the disk.
type Sync uint8

// The sync classes of DESIGN §4 and §8½.
const (
	// SyncBeforeEffect: the append is synced before the caller sees its
	// effect (Log.Append). Every event but a safe_to_retry step.started.
	SyncBeforeEffect Sync = 1
	// SyncIfAtMostOnce: a step.started is synced before its body runs when
	// the step is at_most_once (the durable intent that makes an orphan
	// detectable); a safe_to_retry one may ride on the next synced append
	// (Log.AppendUnsynced), since losing it only runs the step again.
	SyncIfAtMostOnce Sync = 2
)

// kindSpec is one row of the format table: everything the format says
// about a kind.
type kindSpec struct {
	name  string         // wire and CLI name
	since byte           // the record format version that introduced the kind
	sync  Sync           // when an append of it must be durable
	new   func() Payload // a zero payload to decode into
}

// kinds is the format table, indexed by kind code. The payload types and
// their field tags (payload.go) are the rest of the format; the field tags
// that format versions 2 and 3 added are listed in V2Fields and V3Fields
// (codec.go).
var kinds = [...]kindSpec{
	KindExecutionCreated:      {"execution.created", 1, SyncBeforeEffect, func() Payload { return new(ExecutionCreated) }},
	KindDispatchStarted:       {"dispatch.started", 1, SyncBeforeEffect, func() Payload { return new(DispatchStarted) }},
	KindStepStarted:           {"step.started", 1, SyncIfAtMostOnce, func() Payload { return new(StepStarted) }},
	KindStepSucceeded:         {"step.succeeded", 1, SyncBeforeEffect, func() Payload { return new(StepSucceeded) }},
	KindStepFailed:            {"step.failed", 1, SyncBeforeEffect, func() Payload { return new(StepFailed) }},
	KindStepCancelled:         {"step.cancelled", 1, SyncBeforeEffect, func() Payload { return new(StepCancelled) }},
	KindStepDenied:            {"step.denied", 1, SyncBeforeEffect, func() Payload { return new(StepDenied) }},
	KindResourceBound:         {"resource.bound", 1, SyncBeforeEffect, func() Payload { return new(ResourceBound) }},
	KindResourceCaptured:      {"resource.captured", 1, SyncBeforeEffect, func() Payload { return new(ResourceCaptured) }},
	KindResourceCaptureFailed: {"resource.capture_failed", 1, SyncBeforeEffect, func() Payload { return new(ResourceCaptureFailed) }},
	KindExecutionCompleted:    {"execution.completed", 1, SyncBeforeEffect, func() Payload { return new(ExecutionCompleted) }},
	KindExecutionFailed:       {"execution.failed", 1, SyncBeforeEffect, func() Payload { return new(ExecutionFailed) }},
	KindForkCreated:           {"fork.created", 1, SyncBeforeEffect, func() Payload { return new(ForkCreated) }},
	KindCancelRequested:       {"execution.cancel_requested", 2, SyncBeforeEffect, func() Payload { return new(CancelRequested) }},
	KindExecutionCancelled:    {"execution.cancelled", 2, SyncBeforeEffect, func() Payload { return new(ExecutionCancelled) }},
	KindDispatchParked:        {"dispatch.parked", 2, SyncBeforeEffect, func() Payload { return new(DispatchParked) }},
	KindTimerStarted:          {"timer.started", 2, SyncBeforeEffect, func() Payload { return new(TimerStarted) }},
	KindTimerFired:            {"timer.fired", 2, SyncBeforeEffect, func() Payload { return new(TimerFired) }},
	KindApprovalRequested:     {"approval.requested", 2, SyncBeforeEffect, func() Payload { return new(ApprovalRequested) }},
	KindApprovalGranted:       {"approval.granted", 2, SyncBeforeEffect, func() Payload { return new(ApprovalGranted) }},
	KindApprovalRejected:      {"approval.rejected", 2, SyncBeforeEffect, func() Payload { return new(ApprovalRejected) }},
	KindMarkerRecorded:        {"marker.recorded", 2, SyncBeforeEffect, func() Payload { return new(MarkerRecorded) }},
	KindStepAbandoned:         {"step.abandoned", 2, SyncBeforeEffect, func() Payload { return new(StepAbandoned) }},
	KindForkDiverged:          {"fork.diverged", 2, SyncBeforeEffect, func() Payload { return new(ForkDiverged) }},
	KindMessageReceived:       {"message.received", 3, SyncBeforeEffect, func() Payload { return new(MessageReceived) }},
	KindEventSet:              {"event.set", 3, SyncBeforeEffect, func() Payload { return new(EventSet) }},
	KindChildEnded:            {"child.ended", 3, SyncBeforeEffect, func() Payload { return new(ChildEnded) }},
}

// Kinds returns every known kind in code order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds)-1)
	for k := KindExecutionCreated; int(k) < len(kinds); k++ {
		out = append(out, k)
	}
	return out
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k >= KindExecutionCreated && int(k) < len(kinds) }

// Since returns the record format version that introduced k (1, 2 or 3), or 0
// for an unknown kind. A record of an older version never holds k.
func (k Kind) Since() byte {
	if !k.Valid() {
		return 0
	}
	return kinds[k].since
}

// String returns the wire name, such as "resource.captured", or "kind(N)" for
// an unknown code.
func (k Kind) String() string {
	if !k.Valid() {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kinds[k].name
}

// ParseKind returns the kind whose wire name is s.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds() {
		if kinds[k].name == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("eventlog: unknown event kind %q", s)
}

// MustSync reports whether an append holding events must be durable before
// it returns: whether a kernel writes it with Log.Append (true) or may use
// Log.AppendUnsynced (false). Only a safe_to_retry step.started may ride on a later sync
// (DESIGN §4); every other event, every Part II event included, is synced
// before the caller sees its effect (§8½). An append of several events is
// synced when any of them must be. This is the default contract; a kernel
// in the explicit lighter mode of DESIGN §21 (sdk.SyncAtEffects) also
// appends a safe_to_retry step's outcome unsynced, which the log's order
// makes durable with its next synced append.
func MustSync(events ...Event) bool {
	for _, ev := range events {
		if !ev.Kind().Valid() {
			return true
		}
		switch kinds[ev.Kind()].sync {
		case SyncIfAtMostOnce:
			if p, ok := ev.Data.(*StepStarted); !ok || p == nil || p.Idempotency != SafeToRetry {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// Sync returns the sync class of k (0 for an unknown kind).
func (k Kind) Sync() Sync {
	if !k.Valid() {
		return 0
	}
	return kinds[k].sync
}

// newPayload returns a zero payload of kind k for decoding, or nil for an
// unknown kind.
func newPayload(k Kind) Payload {
	if !k.Valid() {
		return nil
	}
	return kinds[k].new()
}
