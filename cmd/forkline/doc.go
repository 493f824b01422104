// Command forkline runs the demo and inspects and forks the executions of a
// forkline event log.
//
//	go run ./cmd/forkline demo
//
// runs the reference page's coder agent ([github.com/forkline/forkline/examples/coder])
// on a Pebble log in ./forkline-data, prints its timeline with the coverage
// of every event, forks it at a covered and at an uncovered event, runs both
// forks and compares their workspaces with the parent's; then forks it at
// the LLM reply that asks for write_file(greet.go) with that reply edited
// to name greet_edited.go (sdk.WithResult), runs that fork and prints
// `forkline diff` of parent and fork: the edited step changed, the steps
// only one side ran, and the workspaces' difference. Run it again and it
// adds a new execution beside the old ones.
//
// # The data folder
//
// --dir (default ./forkline-data) holds everything:
//
//	log/            the event log ([github.com/forkline/forkline/eventlog/pebblestore])
//	dirfs/          the coder agent's workspace store ([github.com/forkline/forkline/driver/dirfs]):
//	                checkpoints and one workspace directory per execution
//	timeline.html   the demo's last timeline picture
//	serve.json      while `forkline serve` runs: where it serves
//	                ([github.com/forkline/forkline/internal/serveapi.Advert])
//
// Commands that only read (ls, tree, events, coverage, show, timeline, diff,
// du, check, gc --dry-run) never create a log: a folder without one is "not a
// forkline log". They open the log read-only: they change no file of it,
// and work on a read-only mount or a full disk. Pebble locks the log even
// for readers, so while `forkline serve` holds it they read through its
// JSON API instead, found by the serve.json it writes (and removes on
// exit; a file left by a crash is ignored once the log is free, and is
// refused when its server does not answer with the proof of its token),
// presenting its token as a bearer header, and print
// exactly what they print reading directly. While another process holds
// the log and no server is advertised, they say the log is "in use" and
// suggest forkline serve; the write commands name the serving process.
// On Postgres (--db) every command reads the database directly; the read
// commands open it read-only (pgstore.ReadOnly): they run no DDL, so a
// role with only USAGE on the schema and SELECT on its tables may run
// them, and a database without the schema is "no forkline log here"
// (exit 2); only the commands that write create or migrate it. A damaged
// log is an error naming the damaged file (exit 1), and nothing is
// rewritten; so is a damaged record (one changed, or moved to another seq
// or execution), named by its execution and seq, for every command that
// reads it (events, show, coverage, diff, timeline, and fork, which
// refuses to fork past it). timeline --html writes FILE through a new file renamed over
// it, so it refuses a FILE that exists and is not a regular file (a symlink
// is not followed: give the file it points to).
//
// # Commands
//
//	demo [--task TEXT]          run, fork three times, compare, diff
//	ls [--key K] [--budget]     executions: agent, start key, events,
//	                            status, parent; --budget adds each
//	                            lineage's budget spend against its limits
//	                            (sdk.Budget; it reads every listed
//	                            lineage); the status is the store's
//	                            (pending, running, waiting, completed,
//	                            failed, cancelled); --key K lists the one
//	                            started with K (the store's key index; a
//	                            lookup never creates); "quarantined" when a
//	                            run found its history damaged (ErrCorrupt):
//	                            Serve does not run it until a person acts
//	schedules                   the schedules: name, agent, spec, last
//	                            and next tick
//	unschedule <name>           remove a schedule
//	queues                      the queues: concurrency, rate, priority,
//	                            waiting (depth: not ended, holding no
//	                            slot) and running (holding a slot)
//	unquarantine <id>           lift a quarantine (once the damage is
//	                            mended, say from a backup): Serve runs the
//	                            execution again; delete <id>, or a fork
//	                            before the damage, are the other ways out
//	tree                        the fork lineage of every execution
//	events <id>                 the lineage's events, one line each
//	coverage <id> [seq]         every event with its coverage and what a fork
//	                            at it restores, and the coverage windows; or
//	                            one event's fork plan (from the store's index)
//	show <id> <seq>             one event, every payload field decoded
//	fork <id> <seq>             create a fork (fork.Create) and print its plan;
//	                            --latest-covered forks at the newest covered
//	                            event at or before <seq> (default: the head),
//	                            the way out for an execution "awaiting owner X"
//	                            whose owner never returns (DESIGN §15½.4);
//	                            the prefix's records are checked first
//	                            (sdk.VerifyPrefix; damage exits 1, nothing
//	                            written) unless --no-verify
//	run <id>                    run an execution of the coder agent, such as a fork
//	                            (through forkline serve while it holds DIR)
//	timeline <id> --html FILE   a self-contained HTML page with an SVG picture
//	approvals [--agent A]       the calls that await an approval (DESIGN §12):
//	                            execution, step, target and its args as
//	                            JSON in full, reason, requested at
//	approve <id> <step> [--by NAME] [--note N]
//	reject <id> <step> [--by NAME] [--note N]
//	approve|reject --all --agent A [--step-prefix P]
//	                            decide every approval awaited by agent A's
//	                            executions whose call's target starts with P
//	                            decide one (a unique prefix of the step id
//	                            will do) as NAME (default: the OS user
//	                            running forkline), with note N (a rejection's
//	                            note reaches the call's ErrDenied, a grant's
//	                            sdk.ApprovalNote): a request its running owner records
//	                            within 100 ms, or, with no owner running, the
//	                            command records itself; a step that awaits no
//	                            decision (never asked, decided already) is bad
//	                            input (exit 2) and nothing is written
//	diff <a> <b> [--html FILE]  compare two executions (fork.Diff): the shared
//	                            prefix, the steps past it aligned by StepID
//	                            (same, changed, only_a, only_b), the outcomes,
//	                            and each resource's difference between the two
//	                            newest checkpoints (driver.Differ; the dirfs
//	                            store in DIR/dirfs), with a note when a head is
//	                            not covered; --html also writes the page
//	                            (webui.WriteDiff)
//	policy check FILE           validate a policy bundle (policy.ParseBundle,
//	                            DESIGN §17) and print it back in canonical
//	                            form; opens no log
//	policy test FILE --call KIND:TARGET [--args JSON] [--agent A] [--in-fork]
//	                            [--at-most-once]
//	                            what the bundle decides about that call
//	                            (safe_to_retry unless --at-most-once): the
//	                            decision, the rule id (none for the
//	                            default), the reason, and the rule's rate
//	                            limit and approval settings; --json prints
//	                            {"decision", "rule_id", "reason",
//	                            "rate_limit", "approval"}. A bundle it
//	                            refuses, a bad --call or --args: exit 2
//
// Ids are accepted by any unique prefix, with or without dashes. fork only
// creates the fork: running an execution needs its agent's code, which this
// command has only for the coder agent. run serves the scripted model again
// on the loopback address its recorded calls went to (a recorded LLM call's
// identity includes its URL), or calls the real model at its recorded
// endpoint with OPENAI_API_KEY.
//
// # Output
//
// Tables (text/tabwriter) by default. --json prints one JSON document per
// command instead: {"executions": […]} for ls and tree (tree nests
// "forks"), {"execution", "events": […]} for events (each event with its
// payload fields under their wire names), {"execution", "points": […],
// "windows": […]} or {"execution", "point"} for coverage, the event with
// its "data" and "coverage" for show, {"id", "parent", "at", "plan"} for
// fork, {"id", "status", "head", "appended", …} for run, {"execution",
// "html", "events"} for timeline, the fork.Comparison with each
// resource's "difference" for diff, the demo's report (its run, its forks
// and what differed; the edited fork adds "edit" {"step_id", "from", "to"}
// and "diff", the diff of parent and fork as diff --json gives it) for demo, {"approvals": […]} for approvals, and
// {"execution", "step", "decision", "by", "note", "recorded", "status"}
// for approve and reject. Recorded values that are JSON stay JSON; other
// text is a string; other bytes are {"base64": …}. In events --json an LLM
// step's recorded response shows its body as JSON when it is JSON (Go's
// base64 of bytes only for a body that is not).
//
// events and show sum the token usage the lineage's LLM calls recorded
// (step.succeeded Tokens, DESIGN §16) — a fork's prefix included — into
// the events header (", N+M tokens") and --json "tokens", and, for show,
// a "tokens" line up to the event shown; a lineage without usage shows
// none. show prints a lineage's budget (sdk.Budget, DESIGN §17) as a
// "budget" line — its limits and the spend up to the event shown: tokens,
// llm calls and tool calls, a fork's prefix included — and --json as
// "budget" {"limits", "tokens", "llm_calls", "tool_calls"}; a lineage
// without a budget shows none.
//
// A scan of a lineage shows a progress line on stderr every 10,000 events
// when stderr is a terminal, or always with --progress.
//
// # Serve
//
// serve [--addr HOST:PORT] [--allow-host NAME]… [--token T | --insecure]
// [--workers N] serves the web page of the log (package webui) until SIGINT
// or SIGTERM, and runs what the log holds: beside the page, a kernel Serve
// (sdk.Kernel.Serve, sdk.Concurrency(N); --workers defaults to 1, 0 runs
// no worker, a negative or non-numeric N is bad input and nothing starts)
// runs the coder agent's executions — pending ones such as a fork made on
// the page, one an approval made on the page lets go on, ones a crash
// interrupted — on Pebble and on Postgres alike. Each runs on the model its
// lineage recorded (as run picks it; the scripted model is served once by
// the serving process), one with no model call yet on LLM_MODEL of serve's
// environment, else the scripted one; on a data folder under the folder's
// owner (sdk.WithLocalOwner, as run and demo), on Postgres under one of
// its own. Its third line says how many workers run which agents. Other
// agents' executions wait for the program that registers them.
//
// While serve holds a Pebble folder, run of another process goes through
// it: POST /api/e/{id}/run on its API (serveapi.RunPath; the token and the
// page's other guards apply, and a browser's cross-site request is
// refused) runs one dispatch in the serving process (sdk.Kernel.Run, so
// an execution one of its workers holds is busy, exit 1), and run prints
// what a local run prints, reading the lineage before and after through
// the API, with the same exit status. What differs: the model is chosen
// from serve's environment (LLM_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY),
// not run's; the dispatch's owner is serve's (on a data folder the same
// name a local run records); interrupting run ends its request, which cuts
// the dispatch in serve as an interrupt cuts a local one, but run then
// says "context canceled" without a last status line; a serve that stops
// mid-run cuts it too, and run fails (exit 1). On Postgres run never goes
// through serve: it opens the database itself.
//
// SIGTERM stops serve as an interrupt does (for every command: the signal
// cancels the command's context): the page shuts down, the workers'
// dispatches are cut by their context and record no outcome (DESIGN
// §15½.1: a call in flight is recorded cancelled, the execution stays
// resumable), serve.json is removed, and the exit status is 0.
//
// # The model
//
// With LLM_MODEL set, the coder agent calls that model at OPENAI_BASE_URL
// (default https://api.openai.com/v1) with OPENAI_API_KEY. Otherwise it
// uses a built-in deterministic scripted model
// ([github.com/forkline/forkline/internal/scriptedmodel]) served over HTTP
// on loopback with the OpenAI chat-completions wire format, so that the
// recording path (sdk.Transport) is the one a real model takes. The demo
// says which it used.
//
// # Exit status
//
// 0 on success, 1 when a command failed (an IO error, a run that did not
// complete), 2 for bad input: usage errors, an unknown id, an ambiguous
// prefix, a seq out of range, a folder that is not a forkline log, a log in
// use by another process. Bad input gets a one-line error on stderr and
// writes nothing.
package main
