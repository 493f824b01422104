// Package webui is forkline's web page of executions (DESIGN §13), for
// `forkline serve` and for embedding in a program's own server:
//
//	http.Handle("/forkline/", http.StripPrefix("/forkline", webui.Handler(k)))
//
// # Pages
//
//   - / lists the executions (Kernel.List), filtered by agent, status and
//     parent (?agent=coder&status=running&parent=ID), with links.
//   - /e/{id} shows one execution: its fork and caller tree, the timeline
//     picture, and a table of its events with the coverage of each, which
//     grows live as events are appended (server-sent events from
//     Kernel.Watch), and a fork form.
//   - /e/{id}/timeline is the timeline picture alone, the same page that
//     `forkline timeline --html` writes ([WriteTimeline]).
//   - /e/{id}/events is the server-sent event stream: one "event" message
//     per event of the lineage (JSON: seq, kind, time, summary, covered,
//     restores), then "end" after the execution's terminal event.
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
//
// Bad input (an unknown or malformed ID, a seq out of range, an unknown
// status) is answered 400 or 404 with a message that says what was wrong,
// and nothing is appended. The pages are plain HTML, CSS and a little
// JavaScript embedded in the binary; there is no build step.
package webui
