// Package kernelapi is a forkline kernel over HTTP, for agents written in
// any language that run as HTTP services (DESIGN §20). Its wire shape is
// that of Rebuno's v0 API: routes under /v0, JSON bodies, errors as
// {"code", "message", "details"}.
//
// Underneath is an ordinary [sdk.Kernel]: each registered agent is a proxy
// handler whose calls arrive over the network. The same events are
// appended, to the same store, under the same gate, approvals, cancel and
// deadlines as for a handler written in Go; step IDs are computed by the
// kernel from kind, target, canonical args and the occurrence counted per
// dispatch attempt (DESIGN §4).
//
// # Dispatch
//
// [Server.Serve] runs the kernel's Serve loop. Each run of an execution is
// one dispatch: its own dispatch.started, claim and store epoch. The
// dispatch delivers a webhook to the agent — POST to its webhook URL with
// {"execution_id", "dispatch_id", "dispatch_attempt"}, signed like the
// agent's own requests — and then serves the agent's requests until it
// completes or fails the execution. dispatch_id is "<execution id>-<n>"
// and dispatch_attempt is n, the execution's dispatch number (1-based over
// its lineage). A failed delivery, or an agent silent (no request, no
// heartbeat) for Options.StallAfter, parks the dispatch (dispatch.parked,
// reason retry) with a doubling backoff; the next attempt is a new
// dispatch. After Options.MaxAttempts failed deliveries the execution
// fails with code dispatch_exhausted. A write under an attempt that is not
// the current one gets 409 lease_superseded.
//
// # Authentication
//
// Client and admin routes take "Authorization: Bearer <token>" (no check
// when Options.Dev). Agent routes are signed: headers Rebuno-Agent-Id,
// Rebuno-Timestamp (Unix seconds) and Rebuno-Signature:
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + raw body)). A
// timestamp more than 5 minutes from the server's clock is refused, so a
// captured request cannot be replayed later (DESIGN §21½.3); the
// signature is compared in constant time. Writes also carry
// Rebuno-Dispatch-Id and Rebuno-Dispatch-Attempt. Reads of an execution
// and its steps take either a bearer token or a signature. Secrets are
// never logged nor returned.
//
// # Routes
//
// Client (bearer):
//
//	POST   /v0/executions                     {agent_id, input, deadline_at?} → 201 execution
//	GET    /v0/executions/{id}                execution (bearer or signed)
//	GET    /v0/executions?agent_id=&status=&cursor=&limit=   {executions, next_cursor}
//	GET    /v0/executions/{id}/events?after_seq=&limit=      [events]
//	POST   /v0/executions/{id}/cancel         → 204
//	POST   /v0/executions/{id}/fork           {at} → 201 execution (forkline's addition)
//	GET    /v0/executions/{id}/coverage?at=N  {seq, covered, resources} (forkline's addition)
//
// Operational (no authentication): GET /v0/health ({"status":"ok"}) and
// GET /v0/ready (503 unavailable when the store does not answer).
//
// Agent (signed; the POSTs with the dispatch headers except heartbeat's
// attempt check, which it needs too):
//
//	GET    /v0/executions/{id}/steps?status=terminal         {steps}
//	GET    /v0/executions/{id}/steps/{step_id}               step, or 404
//	POST   /v0/executions/{id}/steps          {kind, target, args, idempotency} → decision
//	POST   /v0/executions/{id}/steps/{step_id}/complete      {result} → 204
//	POST   /v0/executions/{id}/steps/{step_id}/fail          {error} → 204
//	POST   /v0/executions/{id}/steps/{step_id}/stream        {seq, data} → 204
//	POST   /v0/executions/{id}/heartbeat      → 204
//	POST   /v0/executions/{id}/complete       {output} → 204
//	POST   /v0/executions/{id}/fail           {error} → 204
//
// Admin (bearer):
//
//	POST   /v0/agents                         {id, webhook_url, secret} → 201
//	GET    /v0/agents                         {agents} (secrets redacted)
//	GET    /v0/agents/{id}
//	DELETE /v0/agents/{id}                    → 204
//	GET    /v0/approvals                      {approvals} (pending; id "<execution>.<step id>")
//	GET    /v0/approvals/{id}
//	POST   /v0/approvals/{id}/grant           {decided_by, rationale?} → 204
//	POST   /v0/approvals/{id}/deny            {decided_by, rationale?} → 204
//
// Submit decisions: proceed (run the effect, then complete or fail it),
// replay (the recorded result or error comes back), denied (the gate
// refused; reason), blocked (stop the dispatch: an at_most_once step with
// the same identity is already started under this attempt, or an approval
// is pending, approval_id given), execution_blocked (the dispatch already
// waits for an approval), execution_terminal (the execution ended).
//
// # Bad input
//
// Every request is validated before anything is written: malformed JSON or
// wrong types (400 invalid_request), a body over Options.MaxBody (413
// payload_too_large), a missing or wrong token or signature (401
// unauthorized), an agent that does not own the execution (403
// forbidden), missing dispatch headers (400), an unknown execution, step
// or agent (404 not_found), a replaced attempt (409 lease_superseded).
//
// Agents are registered with each server process (held in memory), not in
// the store; see the package README section.
package kernelapi
