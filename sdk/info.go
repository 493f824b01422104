package sdk

import "github.com/forkline/forkline/eventlog"

// StepIdempotencyKey returns the key IdempotencyKey gives the body of step
// stepID (a StepID, as step.started records it) of execution id: what a
// tool passed to an outside service, for a tool that looks the request up
// there, or a test kit that tells a fork's keys from its parent's
// (proptest.CheckAgent). A fork is another execution, so its steps have
// other keys than its parent's.
func StepIdempotencyKey(id eventlog.ID, stepID string) string {
	return idempotencyKey(id, stepID)
}
