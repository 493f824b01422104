package eventlog

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// Filter selects executions for List (DESIGN §9). The zero Filter selects
// every execution. Conditions combine with AND; Status matches any of its
// values.
type Filter struct {
	Agent  string   // "" for any
	Status []Status // nil for any
	Parent ID       // the zero ID for any; else forks of Parent
	Caller ID       // the zero ID for any; else children started by Caller
	After  ID       // the zero ID to start at the first; else executions whose ID is greater
	Limit  int      // 0 for no limit
	// Version is "" for any; else executions whose Info.Version is
	// Version (unversioned ones are not selected).
	Version string
}

// Validate refuses a filter with an unknown status or a negative limit.
func (f Filter) Validate() error {
	for _, s := range f.Status {
		if !s.Valid() {
			return fmt.Errorf("%w: filter with unknown %s", ErrInvalid, s)
		}
	}
	if f.Limit < 0 {
		return fmt.Errorf("%w: filter with a negative limit %d", ErrInvalid, f.Limit)
	}
	return nil
}

// Match reports whether info passes every condition of f except After and
// Limit, which are about paging.
func (f Filter) Match(info Info) bool {
	if f.Agent != "" && info.Agent != f.Agent {
		return false
	}
	if !f.Parent.IsZero() && info.Parent != f.Parent {
		return false
	}
	if !f.Caller.IsZero() && info.Caller != f.Caller {
		return false
	}
	if f.Version != "" && info.Version != f.Version {
		return false
	}
	if len(f.Status) == 0 {
		return true
	}
	for _, s := range f.Status {
		if s == info.Status {
			return true
		}
	}
	return false
}

// CreateOption sets what Create records beside execution.created.
type CreateOption func(*CreateOptions)

// CreateOptions is what the CreateOptions of a Create call set; stores read
// it with NewCreateOptions.
type CreateOptions struct {
	// Caller is the execution that started this one as its child (DESIGN
	// §9). It is kept in the header, not in an event, so that forks of
	// the child do not inherit it.
	Caller ID

	// CallerStep is the StepID of the caller's step that started this
	// child: the StepID of the child.ended request the child's terminal
	// append writes into the caller's inbox (DESIGN §15½.6). Kept in the
	// header beside Caller.
	CallerStep string
}

// WithCaller records caller as the parent execution of a child.
func WithCaller(caller ID) CreateOption { return func(o *CreateOptions) { o.Caller = caller } }

// WithCallerStep records the StepID of the caller's step that starts a
// child (with WithCaller).
func WithCallerStep(stepID string) CreateOption {
	return func(o *CreateOptions) { o.CallerStep = stepID }
}

// NewCreateOptions applies opts.
func NewCreateOptions(opts []CreateOption) CreateOptions {
	var o CreateOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Request is a write to an execution's inbox by someone who does not own
// it (DESIGN §8½): a cancel, an approval decision, a message. The owner moves it into
// the lineage as its event.
type Request struct {
	Execution ID
	N         uint64    // 1-based, per execution, in the order requests arrived
	Time      time.Time // when it was requested
	Data      Payload   // *CancelRequested, *ApprovalGranted, *ApprovalRejected *MessageReceived or *ChildEnded
}

// IsRequest reports whether events of kind k arrive through the inbox: a
// cancel, an approval decision, a message sent to the execution (DESIGN
// §18).
func IsRequest(k Kind) bool {
	switch k {
	case KindCancelRequested, KindApprovalGranted, KindApprovalRejected, KindMessageReceived, KindChildEnded:
		return true
	}
	return false
}

// Inbox keeps, per execution, the requests of everyone who is not its
// owner (DESIGN §8½). A request never conflicts with the owner's appends:
// it carries no expected head and no epoch. The owner moves requests into
// the lineage with Take, at its next append point; when no live owner
// exists, the requester claims the execution and takes its own request.
type Inbox interface {
	// Request stores p for id's owner and returns its number. p must be of
	// a request kind (IsRequest) and valid, else ErrInvalid; an unknown id
	// is ErrNotFound. It is durable when Request returns.
	Request(ctx context.Context, id ID, p Payload, at time.Time) (uint64, error)

	// Requests returns id's requests not yet taken, oldest first.
	Requests(ctx context.Context, id ID) ([]Request, error)

	// Take appends events as Append does (synced, fenced by the epoch of
	// ctx) and, in the same atomic write, removes the requests numbered ns
	// from id's inbox. A number that is not pending wraps ErrConflict and
	// nothing is written.
	Take(ctx context.Context, id ID, expectedHead uint64, ns []uint64, events ...Event) (uint64, error)
}

// MessageInbox is an Inbox that keeps the MessageIDs sent to each
// execution (DESIGN §18), so that a MessageID is checked and recorded in
// one atomic write with its request: of two concurrent sends of one
// MessageID exactly one is stored.
type MessageInbox interface {
	Inbox

	// SendMessage stores m in id's inbox as Request does and, in the same
	// atomic write, records m.MessageID with m's MessageDigest, checked
	// under the lock every append, Take and Request of id takes. When id
	// has a record of m.MessageID already, nothing is written: SendMessage
	// returns 0 and a nil error when the record's digest is m's (the same
	// message, sent again), and an error wrapping ErrConflict when not.
	// It returns the request's number otherwise. A record lives as long as
	// its execution; it is not copied into forks. A bad m is ErrInvalid;
	// an unknown id ErrNotFound.
	SendMessage(ctx context.Context, id ID, m *MessageReceived, at time.Time) (uint64, error)
}

// MessageDigest is what a MessageInbox records of a message beside its
// MessageID: a SHA-256 of its topic and value (not of its sender), so that
// a message sent again is told from another one reusing its ID.
func MessageDigest(m *MessageReceived) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(m.Topic)))])
	h.Write([]byte(m.Topic))
	h.Write(m.Value)
	return h.Sum(nil)
}
