package eventlog

// CommitPerAppend is implemented by a Log on which every append is a
// transaction and a round trip of its own, unsynced or not (pgstore), so
// that two appends cost about twice one. A kernel on such a log writes a
// safe_to_retry step's step.started in its outcome's append, the one
// commit of the step, when the body ends before anything else must be
// written (DESIGN §21): the events and their order are those of two
// appends; only what the log shows while the body runs differs — the
// step is not in flight in the log, and a crash then leaves no trace of
// the attempt, which the next dispatch runs again as it may any
// safe_to_retry call. At_most_once steps and steps that affect a resource
// are never deferred: their intent must be in the log before the body
// runs. Callers find it with As.
type CommitPerAppend interface {
	// CommitPerAppend reports whether the log commits each append on
	// its own (true for pgstore).
	CommitPerAppend() bool
}
