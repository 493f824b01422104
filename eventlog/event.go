package eventlog

import (
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Event is one entry of an execution's log.
type Event struct {
	Seq  uint64    // 1-based position in the lineage
	Time time.Time // when the kernel wrote it (the folds never look at it)
	Data Payload   // one of the payload pointer types, e.g. *ResourceCaptured
}

// Kind returns the kind of the event's payload, or 0 if Data is nil.
func (e Event) Kind() Kind {
	if e.Data == nil {
		return 0
	}
	return e.Data.Kind()
}

// Validate checks that the event has a payload whose invariants hold. Stores
// validate every event before they write it and after they read it.
func (e Event) Validate() error {
	if e.Data == nil || reflect.ValueOf(e.Data).IsNil() {
		return fmt.Errorf("%w: event %d has no payload", ErrInvalid, e.Seq)
	}
	if err := e.Data.validate(); err != nil {
		return fmt.Errorf("%w: %s event %d: %v", ErrInvalid, e.Kind(), e.Seq, err)
	}
	return nil
}

// ErrNotFound is returned for an execution (or event) that does not exist.
var ErrNotFound = errors.New("eventlog: not found")

// ErrConflict is returned by Append when the execution's head is not the
// expected one: another writer appended first. Nothing was written.
var ErrConflict = errors.New("eventlog: conflict: head moved")

// ErrCorrupt classifies stored data that cannot be decoded or fails its
// checksum. Errors that wrap it are *CorruptionError values naming the
// execution and seq.
var ErrCorrupt = errors.New("eventlog: corrupt record")

// ErrInvalid classifies bad input: an event that breaks its payload's
// invariants, a bad seq, a fork point out of range. Nothing is written.
var ErrInvalid = errors.New("eventlog: invalid input")

// ErrClosed is returned by every operation on a closed log.
var ErrClosed = errors.New("eventlog: log closed")

// ErrDiskFull is returned by a write (Create, Append, AppendUnsynced, Fork)
// that a store refused because the disk holding it is (nearly) full. Nothing
// was written, everything acknowledged before is kept, and the log stays
// usable: once space is freed, the same write can be made again.
var ErrDiskFull = errors.New("eventlog: disk full")

// CorruptionError says which record of which execution could not be read.
// errors.Is(err, ErrCorrupt) holds for it.
type CorruptionError struct {
	Execution ID     // zero when the damage is to the store's files, not one execution
	Seq       uint64 // 0 when the record is not an event (a header, an index entry)
	What      string // what was being read, e.g. "event", "header"
	Err       error  // the decoding failure
}

// Error implements error.
func (e *CorruptionError) Error() string {
	if e.Execution.IsZero() { // damage to the store's files, not to one execution
		return fmt.Sprintf("eventlog: %s: corrupt: %v", e.What, e.Err)
	}
	if e.Seq == 0 {
		return fmt.Sprintf("eventlog: execution %s: %s: corrupt record: %v", e.Execution, e.What, e.Err)
	}
	return fmt.Sprintf("eventlog: execution %s: seq %d: corrupt %s: %v", e.Execution, e.Seq, e.What, e.Err)
}

// Unwrap returns the decoding failure.
func (e *CorruptionError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// StepID returns the StepID an event is about: that of a step.* event or an
// approval.* event, "" for any other kind.
func (e Event) StepID() string {
	switch p := e.Data.(type) {
	case *StepStarted:
		return p.StepID
	case *StepSucceeded:
		return p.StepID
	case *StepFailed:
		return p.StepID
	case *StepCancelled:
		return p.StepID
	case *StepDenied:
		return p.StepID
	case *StepAbandoned:
		return p.StepID
	case *ApprovalRequested:
		return p.StepID
	case *ApprovalGranted:
		return p.StepID
	case *ApprovalRejected:
		return p.StepID
	}
	return ""
}
