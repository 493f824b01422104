package eventlog

import "fmt"

// Kind is the type of an event. Its numeric value is stored on disk and its
// String form is the wire and CLI name; both are part of the format (pinned by
// TestFormatPinned) and never change meaning.
type Kind uint8

// The event kinds of DESIGN §3. The numbers are the on-disk codes.
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
)

var kindNames = [...]string{
	KindExecutionCreated:      "execution.created",
	KindDispatchStarted:       "dispatch.started",
	KindStepStarted:           "step.started",
	KindStepSucceeded:         "step.succeeded",
	KindStepFailed:            "step.failed",
	KindStepCancelled:         "step.cancelled",
	KindStepDenied:            "step.denied",
	KindResourceBound:         "resource.bound",
	KindResourceCaptured:      "resource.captured",
	KindResourceCaptureFailed: "resource.capture_failed",
	KindExecutionCompleted:    "execution.completed",
	KindExecutionFailed:       "execution.failed",
	KindForkCreated:           "fork.created",
}

// Kinds returns every known kind in code order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kindNames)-1)
	for k := KindExecutionCreated; int(k) < len(kindNames); k++ {
		out = append(out, k)
	}
	return out
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k >= KindExecutionCreated && int(k) < len(kindNames) }

// String returns the wire name, such as "resource.captured", or "kind(N)" for
// an unknown code.
func (k Kind) String() string {
	if !k.Valid() {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// ParseKind returns the kind whose wire name is s.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds() {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("eventlog: unknown event kind %q", s)
}

// newPayload returns a zero payload of kind k for decoding.
func newPayload(k Kind) Payload {
	switch k {
	case KindExecutionCreated:
		return new(ExecutionCreated)
	case KindDispatchStarted:
		return new(DispatchStarted)
	case KindStepStarted:
		return new(StepStarted)
	case KindStepSucceeded:
		return new(StepSucceeded)
	case KindStepFailed:
		return new(StepFailed)
	case KindStepCancelled:
		return new(StepCancelled)
	case KindStepDenied:
		return new(StepDenied)
	case KindResourceBound:
		return new(ResourceBound)
	case KindResourceCaptured:
		return new(ResourceCaptured)
	case KindResourceCaptureFailed:
		return new(ResourceCaptureFailed)
	case KindExecutionCompleted:
		return new(ExecutionCompleted)
	case KindExecutionFailed:
		return new(ExecutionFailed)
	case KindForkCreated:
		return new(ForkCreated)
	}
	return nil
}
