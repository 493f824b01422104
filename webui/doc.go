// Package webui is forkline's web page of executions (DESIGN §13), for
// `forkline serve` and for embedding in a program's own server:
//
//	http.Handle("/forkline/", http.StripPrefix("/forkline", webui.Handler(k)))
//
// # Pages
//
//   - / lists the executions (Kernel.List), filtered by agent, status and
//     parent (?agent=coder&status=running&parent=ID), with links, and
//     the store's schedules (Kernel.Schedules, DESIGN §19): each one's
//     agent, spec, last tick started and next tick; and the store's
//     queues (Kernel.Queues, DESIGN §19): each one's concurrency, rate,
//     priority, waiting (its depth) and running.
//   - /e/{id} shows one execution: its fork and caller tree, the timeline
//     picture, and a table of its events with the coverage of each, which
//     grows live as events are appended (server-sent events from
//     Kernel.Watch), and a fork form.
//   - /e/{id}/timeline is the timeline picture alone, the same page that
//     `forkline timeline --html` writes ([WriteTimeline]).
//   - /e/{id}/events is the server-sent event stream: one "event" message
//     per event of the lineage (JSON: seq, kind, time, summary, covered,
//     restores), then "end" after the execution's terminal event.
//   - /e/{id}/deltas streams the pieces of the model replies that stream
//     to the execution's handler in this process (Kernel.WatchDeltas,
//     never stored): one "delta" message per piece (JSON: step_id, index,
//     data, the bytes as text, U+FFFD for bytes that are not UTF-8), then
//     "end" after the execution ends.
//   - /e/{id}/fork?at=N shows what a fork at event N restores (coverage,
//     and a warning when uncovered) before confirming; POST /e/{id}/fork
//     with at=N creates the fork (Kernel.Fork) and redirects to its page.
//   - /diff?a=ID&b=ID compares two executions (fork.Diff): the shared
//     prefix folded away, the steps past it aligned by StepID with changed
//     results highlighted, the two outcomes, then each resource's
//     difference between the newest checkpoints of the two heads, compared
//     by the driver given with [WithDiffer] ([DiffResources]). A fork's
//     page links to its diff against its parent. [WriteDiff] writes the
//     same page as a file (`forkline diff --html`).
//   - /approvals lists the calls that await a person's decision
//     (Kernel.Approvals, DESIGN §12), linked from the list; a waiting
//     execution's page lists its own. Each has an approve and a reject
//     form: POST /e/{id}/approve or /e/{id}/reject with step=StepID, an
//     optional by (who decides; without it "web page (HOST)" with the
//     request's remote host) and an optional note requests the decision
//     (Kernel.Approve, Kernel.Reject with sdk.By and sdk.Note) and
//     redirects to the execution's page; a step that awaits no decision is
//     409, a name sdk.By refuses is 400, and nothing is written.
//   - An execution's page shows the newest value of each key it published
//     (sdk.SetEvent, DESIGN §18) and, until it ends, a send form: POST
//     /e/{id}/send with topic, value (JSON) and an optional id (the
//     MessageID) sends the message (Kernel.Send) and redirects to the
//     page; a value that is not JSON or an empty topic is 400, an ended
//     execution or an id used with another value 409, and nothing is
//     written.
//
// # Who may ask
//
// With [WithToken] (forkline serve sets it) every route but /login — the
// pages, the live stream and the JSON API alike, since they show every
// payload — demands the token: a program presents it as
// "Authorization: Bearer TOKEN"; a browser signs in once through
// /login?token=TOKEN (the link forkline serve prints at start), which sets
// an HttpOnly, SameSite=Strict cookie holding a value derived from the
// token and redirects to the list without the token in the address. A
// request without the token, or with a wrong one, is 401 and does
// nothing. The token is never in an answer; an answer to a request that
// presented it carries [serveapi.ProofHeader], by which the read commands
// know the server. With [WithHosts], a request whose Host header names
// anything but localhost, a loopback address or the hosts given is 421:
// after a DNS rebinding a foreign page's requests name its own host.
// The forms that write (fork, approve, reject, send) also refuse requests that
// a browser marks as coming from another site (http.CrossOriginProtection,
// 403), and, signed in by the cookie, requests that name no page they come
// from (no Origin or Sec-Fetch-Site, 403). Every request's body is capped
// at [MaxBody] (413, before reading when its length says so).
// Without WithToken and WithHosts, for a program that mounts the handler
// behind its own authentication, every request is answered.
//
// # JSON API
//
// What another process needs to read the log this one holds (DESIGN §11:
// Pebble locks its folder, so `forkline ls` and the other read commands
// read through `forkline serve`). Answers are JSON; errors are
// {"error", "code"} with code not_found, invalid, corrupt, conflict,
// closed or unauthorized, answered 404, 400, 500 or 401.
//
//   - GET /api/executions?agent=&status=a,b&parent=&caller=&after=&limit=
//     lists executions (eventlog.Log.List).
//   - GET /api/e/{id} describes one (eventlog.Info).
//   - GET /api/e/{id}/events?from=&to=&limit= is a page of its lineage:
//     each event's seq, time, kind, summary, data, and its stored record
//     (base64), up to the head when the first page was asked for ("to");
//     "next" is the from= of the next page.
//   - GET /api/e/{id}/resources?at=N and /api/e/{id}/history?key=K&after=N
//     are the checkpoint index (eventlog.Index), the history in pages.
//   - GET /api/e/{id}/coverage?at=N is what a fork at N restores.
//   - GET /api/usage is what each execution takes (eventlog.UsageReporter).
//   - GET /api/schedules is the store's schedules (eventlog.Scheduler,
//     DESIGN §19), ordered by name: {schedules: [{name, agent, spec,
//     input, catch_up, created_ns, last_tick_ns}]}; none for a store that
//     keeps none.
//   - GET /api/queues is the store's queues (eventlog.Queuer, DESIGN
//     §19) with their counts, ordered by name: {queues: [{name,
//     concurrency, rate, per_ns, priority, declared, waiting, running}]};
//     none for a store that keeps none.
//   - GET /api/e/{id}/deltas is the server-sent event stream of the
//     deltas (DESIGN §16) of the streams this process's handlers read, as
//     /e/{id}/deltas: one "delta" message {step_id, index, data} each,
//     never stored; 400 or 404 in the error envelope before it starts.
//
// The API only reads; forks are made through the page. A program adds
// routes of its own behind the same guards with [WithRoute]: forkline
// serve adds POST /api/e/{id}/run, which runs an execution in the serving
// process (see cmd/forkline).
//
// Bad input (an unknown or malformed ID, a seq out of range, an unknown
// status) is answered 400 or 404 with a message that says what was wrong
// (quoting at most 64 characters of it), and nothing is appended. The pages are plain HTML, CSS and a little
// JavaScript embedded in the binary; there is no build step.
package webui
