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
//	GET    /v0/executions/{id}/diff?with=ID   comparison (forkline's addition; fork.Diff)
//	GET    /v0/executions/{id}/stream         server-sent events: the execution's deltas
//
// The diff compares the execution (a) with the one named by with= (b): the
// length of the prefix their lineages share and its steps, every other
// step aligned by step ID with each side's outcome and a change of same,
// changed, only_a or only_b, both outputs, and each resource's newest
// checkpoint; it writes nothing. Its JSON is fork.Comparison's, with step
// kinds in the wire's names.
//
// A delta's data is capped at 7,000 bytes, as Rebuno caps it: a longer
// one is 400 invalid_request and nothing is published; the agent slices.
// The stream is a live tail, never stored: one frame
// "data: {step_id, seq, data}" per delta an agent posted to a step's
// stream route (or a Go handler's streaming model call read), from when
// the client connects — nothing is replayed, so a client reads the
// recorded result from the step route once step.succeeded lands — a
// ": keep-alive" comment every Options.KeepAlive (15 s) while none comes,
// and the end of the response when the execution ends. seq counts each
// step's deltas; a gap says deltas were dropped (a client more than 1024
// behind). Deltas reach the clients of the process that received them,
// and on Postgres those of the others too (DESIGN §21½.4).
//
// Operational (no authentication): GET /v0/health ({"status":"ok"}) and
// GET /v0/ready (503 unavailable when the store does not answer).
//
// Metrics (bearer, like the admin routes, unless Options.Dev): GET
// /metrics is the Prometheus text exposition of the kernel's OpenTelemetry
// instruments (forkline_steps_total by kind and outcome,
// forkline_steps_replayed_total, forkline_captures_total,
// forkline_forks_total, forkline_lease_takeovers_total, the capture
// histograms, and the run-level metrics of sdk.WithMeterProvider:
// forkline_executions_started_total, forkline_executions_ended_total by
// outcome, the forkline_executions_backlog gauge by status — each scrape
// lists the store's unended executions once — and the first dispatch
// delay, approval wait and step duration histograms), read from the meter of [NewMetrics] given both to the
// kernel (Metrics.Option) and to Options.Metrics; without it the route is
// 404. It takes the token because the counts describe the workload; a
// Prometheus scrape job gives it with its authorization setting.
//
// Agent (signed; the POSTs with the dispatch headers except heartbeat's
// attempt check, which it needs too):
//
//	GET    /v0/executions/{id}/steps?status=terminal         {steps}
//	GET    /v0/executions/{id}/steps/{step_id}               step, or 404
//	POST   /v0/executions/{id}/steps          {kind, target, args, idempotency, resources?} → decision
//	POST   /v0/executions/{id}/steps/{step_id}/complete      {result, captures?} → 204
//	POST   /v0/executions/{id}/steps/{step_id}/fail          {error, captures?} → 204
//	POST   /v0/executions/{id}/resources      {key, driver_id, configuration?} → {key, action, from} (forkline's addition)
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
//	PUT    /v0/agents/{id}/policy             bundle YAML (DESIGN §17) → {agent_id, bundle, default, rules}
//	GET    /v0/agents/{id}/policy             {agent_id, bundle, default, rules}, or 404
//	DELETE /v0/agents/{id}/policy             → 204
//	GET    /v0/approvals                      {approvals} (pending; id "<execution>.<step id>")
//	GET    /v0/approvals/{id}
//	POST   /v0/approvals/{id}/grant           {decided_by, rationale?} → 204
//	POST   /v0/approvals/{id}/deny            {decided_by, rationale?} → 204
//
// An agent's policy bundle (sdk.Kernel.SetAgentBundle) decides that
// agent's live calls in place of the kernel's own bundle, with the
// kernel's gate as DESIGN §21½.11 says: a deny is recorded as step.denied
// with the rule's id (Code policy) and the submit gets denied with the
// reason; an approve asks an approval. A call already recorded replays as
// recorded. The body of PUT is the bundle's text; one policy.ParseBundle
// refuses is 400 invalid_request with details {line, field}, and the
// agent keeps the bundle it had. Like the agents, bundles are held by the
// server process, not the store.
//
// Submit decisions: proceed (run the effect, then complete or fail it),
// replay (the recorded result or error comes back), denied (the gate
// refused; reason), blocked (stop the dispatch: an at_most_once step with
// the same identity is already started under this attempt, or an approval
// is pending, approval_id given), execution_blocked (the dispatch already
// waits for an approval), execution_terminal (the execution ended).
//
// # Remote resources
//
// State an agent keeps itself — a workspace, a scratch database — is bound
// to the execution through the kernel so that a fork restores it (DESIGN
// §21½.4); the agent takes and restores its checkpoints, the kernel
// records the binding and the refs. POST …/resources binds key with the
// agent's driver_id (recorded as "remote:" + driver_id, with the
// configuration) and answers what to do: {action: "create", from: ref}
// restores the checkpoint ref (a fork's selection), {action: "create",
// from: ""} starts from the initial environment, {action: "open"}
// continues the resource this execution bound on an earlier attempt. A
// resource created from the initial environment gets its baseline at
// once (ref "kernelapi:initial", which restores as the initial
// environment). A tool_call or local step lists the keys it affects in
// resources; proceed names them again in capture, and the step's
// completion (or failure) carries each one's new ref in captures
// {key: ref}: the checkpoints due after the step (every step by default)
// are appended with its outcome. A due checkpoint whose ref the agent did
// not send is recorded as resource.capture_failed.
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
