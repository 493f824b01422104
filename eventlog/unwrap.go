package eventlog

import "reflect"

// A Log that wraps another (to count, trace or record what passes through
// it) keeps the wrapped log's optional capabilities — Leaser, Claimer,
// Inbox, Deleter, UsageReporter, and any a caller defines — by exposing
// the log it wraps (DESIGN §15½.3):
//
//	func (w *Wrapper) Unwrap() eventlog.Log { return w.inner }
//
// Callers then find a capability with As, never with a type assertion,
// which would stop at the wrapper. A wrapper must pass its calls' context
// through unchanged: the lease's epoch travels in it (WithEpoch), so that
// the store under the wrapper fences the wrapper's appends too.

// As finds the first log in log's chain of wrappers that is assignable to
// the value target points to, and if one is found, sets *target to that
// log and returns true. Otherwise it returns false. The chain is log
// itself, then the log its Unwrap() Log method returns, repeatedly, until
// a log has no such method or returns nil, as errors.As walks Unwrap()
// error. A log in the chain that implements target's interface itself —
// a wrapper that adds a capability, or overrides one — is found before
// the logs it wraps.
//
// target must be a non-nil pointer to an interface type or to a type that
// implements Log; As returns false (it never panics) when it is not, or
// when log is nil. A chain that loops is followed at most 100 links.
func As(log Log, target any) bool {
	if log == nil || target == nil {
		return false
	}
	val := reflect.ValueOf(target)
	if val.Kind() != reflect.Pointer || val.IsNil() {
		return false
	}
	want := val.Type().Elem()
	if want.Kind() != reflect.Interface && !want.Implements(logType) {
		return false
	}
	for range maxUnwrap {
		if reflect.TypeOf(log).AssignableTo(want) {
			val.Elem().Set(reflect.ValueOf(log))
			return true
		}
		u, ok := log.(interface{ Unwrap() Log })
		if !ok {
			return false
		}
		if log = u.Unwrap(); log == nil {
			return false
		}
	}
	return false
}

// maxUnwrap bounds As's walk, so that a chain that loops ends.
const maxUnwrap = 100

var logType = reflect.TypeFor[Log]()
