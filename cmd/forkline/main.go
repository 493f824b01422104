package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command failed: IO, a run that did not complete
	exitInput   = 2 // bad input: usage, unknown id, seq out of range, not a log, log in use
)

// defaultDir is the data folder when --dir is not given.
const defaultDir = "forkline-data"

const usageText = `forkline — inspect, fork and run durable agent executions

Usage:
  forkline [--dir DIR] [--db URL] [--blob URL] <command> [flags] [args]

Commands:
  demo [--task TEXT]        run the coder agent, fork it at a covered and an
                            uncovered event and at an edited LLM reply, run
                            the forks, compare workspaces, diff the third
  ls [--status S,…] [--agent A] [--key K]
                            list executions (statuses: pending, running,
                            waiting, completed, failed, cancelled), with
                            their start keys; --key: the one started with K
  tree                      the fork lineage of every execution, and the
                            children each started (marked child, ─▸)
  cancel <id> [--reason R]  cancel an execution: at once when nobody runs it,
                            else by its owner within 100 ms
  approvals [--agent A]     the calls that await an approval: execution,
                            step, target, reason, requested at
  approve <id> <step> [--by NAME] [--note N]
                            grant the approval a step awaits (a step id
                            prefix will do): the call runs; recorded as
                            decided by NAME (default: the OS user)
  approve --all --agent A [--step-prefix P]
                            grant every approval awaited by A's executions
                            (only calls whose target starts with P); reject
                            --all refuses them
  reject <id> <step> [--by NAME] [--note N]
                            refuse it: the call returns ErrDenied with the
                            note
  delete <id>               delete an execution; its forks keep reading the
                            part of it they inherited
  gc --older-than D [--status S,…] [--grace G] [--dry-run]
                            delete executions (default: completed, failed,
                            cancelled) whose newest event is older than D,
                            then the checkpoints and workspaces in DIR/dirfs
                            no kept execution can use (sparing those younger
                            than G, default 15m)
  du                        bytes per execution: own events, shared prefix,
                            checkpoints
  events <id> [--kind K]    the events of an execution's lineage (--kind:
                            only kind K or its family, say message), then
                            its messages (consumed, waiting, pending,
                            dropped) and the newest value of each event it
                            published
  send <id> <topic> <json> [--id ID]
                            send a message to the execution (its Recv of
                            the topic returns it); one ID is one message
  coverage <id> [seq]       each event's coverage, or what a fork at seq restores
  show <id> <seq>           one event, its payload decoded
  fork <id> <seq> [--input JSON] [--result STEPID=JSON]… [--require-covered]
       [--result-file STEPID=FILE]… [--edit-tool-args STEPID TOOL key=value…]…
                            create a fork at an event and print its plan;
                            --input gives it a new input (for the coder
                            agent, JSON its input type takes), --result replays
                            JSON as a step's result (fork at that step's
                            terminal event), --result-file a file's bytes (an
                            LLM call: the response body as is),
                            --edit-tool-args the recorded reply of an LLM call
                            with arguments of one tool call changed
                            (key=string, key:=JSON), --require-covered refuses
                            an uncovered point
  run <id>                  run an execution of the demo's coder agent (a fork);
                            while forkline serve holds DIR, it runs there
  timeline <id> --html FILE write the lineage as a self-contained HTML page
  diff <a> <b> [--html F]   compare two executions: the shared prefix, the
                            steps aligned by StepID (changed, only in one),
                            the outcomes, and the workspace difference between
                            their newest checkpoints (dirfs, in DIR/dirfs)
  check --agent coder [DIR] replay every recorded execution of the coder agent
                            against the current code (read-only) and list
                            where they diverge; exit 1 if any does
  reclose                   when Open says FORKLINE-CLOSED (the clean-close
                            record) fails its check and the record is what
                            was damaged: re-verify DIR/log without it (tables,
                            write-ahead logs, every event's checksum), then
                            write a new one; the old one is kept aside
  policy check FILE         validate a policy bundle (YAML, DESIGN §17) and
                            print it back in canonical form
  policy test FILE --call KIND:TARGET [--args JSON] [--agent A] [--in-fork]
                            [--at-most-once]
                            what the bundle decides about that call: the
                            decision, the rule, its reason, rate limit and
                            approval settings
  serve [--addr HOST:PORT]  serve the web page of the executions (default
                            127.0.0.1:7070): list, fork tree, live timelines,
                            coverage, forking; until interrupted. Meanwhile
                            the read commands on DIR read through it. Every
                            page wants a token: open the sign-in link it
                            prints (--token T sets the token; --insecure
                            demands none). It answers only requests for
                            localhost, loopback addresses and the listening
                            address (--allow-host NAME adds one); an address
                            that is not loopback needs --token or --insecure.
                            It runs the coder agent's executions (--workers N
                            at once, default 1; 0: none): a fork or approval
                            made on the page runs in it, and forkline run on
                            DIR goes through it. SIGINT or SIGTERM stops it

Flags (before or after the command):
  --dir DIR    data folder (default ./forkline-data): the event log lives in
               DIR/log, the coder agent's dirfs workspace store in DIR/dirfs
  --db URL     keep the event log in PostgreSQL instead of DIR/log
               (postgres://user@host:5432/db[?forkline_schema=NAME]; default
               $FORKLINE_DB). Every command reads it directly, also while
               workers run; the workspace store stays in DIR/dirfs
  --blob URL   share the workspace checkpoints of demo and run with other
               data folders and hosts: a Postgres URL (tables blobs and
               blob_chunks in its forkline_schema, default forkline) or a
               directory (default $FORKLINE_BLOB; none: DIR/dirfs alone).
               A fork made on one host then runs on another
  --json       one JSON document per command instead of tables
  --progress   progress line on stderr during long scans (default: only when
               stderr is a terminal)
  --accept-wal-loss
               open DIR/log although its write-ahead log was cut short or
               deleted after a crash (an error says so): what it still
               holds is kept, the lost appends are gone for good

Ids are accepted by any unique prefix, with or without dashes.

fork only creates the fork: running it needs the agent's code, which the
command has only for the demo's coder agent (forkline run <id>). Other agents'
forks are run by the program that registers them (sdk.Kernel.Run).

Model (demo, run, serve): with LLM_MODEL set, the coder agent calls that
model at OPENAI_BASE_URL (default https://api.openai.com/v1) with
OPENAI_API_KEY; otherwise a built-in deterministic scripted model, served over
HTTP on loopback with the same wire format. A lineage that recorded a model
call goes on with the model it recorded.

Exit status: 0 success; 1 failure; 2 bad input (usage, unknown id, ambiguous
prefix, seq out of range, a folder that is not a forkline log, a log in use by
another process), with a one-line error and nothing written.
`

// options are the flags every command accepts.
type options struct {
	dir      string
	db       string // --db or FORKLINE_DB: a Postgres log instead of DIR/log
	blob     string // --blob or FORKLINE_BLOB: a shared checkpoint store (Postgres URL or directory)
	json     bool
	progress bool
	// acceptWALLoss opens a Pebble log whose write-ahead log lost synced
	// appends in a crash with what it holds (pebblestore.AcceptWALLoss).
	acceptWALLoss bool
}

// commonFlags defines the flags of options on fs, with o's values as
// defaults, so that they may appear before or after the command.
func (o *options) commonFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.dir, "dir", o.dir, "data folder")
	fs.StringVar(&o.db, "db", o.db, "Postgres URL of the event log")
	fs.StringVar(&o.blob, "blob", o.blob, "shared checkpoint store: Postgres URL or directory")
	fs.BoolVar(&o.json, "json", o.json, "JSON output")
	fs.BoolVar(&o.progress, "progress", o.progress, "progress line on stderr")
	fs.BoolVar(&o.acceptWALLoss, "accept-wal-loss", o.acceptWALLoss, "open a log whose write-ahead log lost synced appends")
}

// env is what a command runs with.
type env struct {
	ctx    context.Context
	opts   options
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand.
type command struct {
	name  string
	args  string // positional arguments, for the usage line
	short string
	// flags defines the command's own flags; nil for none.
	flags func(fs *flag.FlagSet)
	// npos is the allowed number of positional arguments.
	minPos, maxPos int
	run            func(e *env, pos []string) error
	// take removes from the arguments, before the flags are parsed, the
	// flags that take several words (fork's --edit-tool-args); nil for
	// none.
	take func(args []string) ([]string, error)
}

func commands() []*command {
	var demoTask string
	var htmlFile, diffHTML string
	sv := serveFlags{addr: defaultAddr, workers: defaultWorkers}
	var lsStatus, lsAgent, lsKey, lsVersion, cancelReason, checkAgent string
	var lsBudget bool
	var approvalsAgent, approveNote, rejectNote, approveBy, rejectBy string
	var approveAll, rejectAll bulkDecision
	var gcStatus, gcOlder string
	var eventsKind, sendID string
	var gcDry bool
	var gcGrace time.Duration
	var edit forkEdit
	var pt policyTest
	var kf kernelFlags
	return []*command{
		{name: "demo", short: "run the coder agent, fork it three times, compare, diff",
			flags: func(fs *flag.FlagSet) { fs.StringVar(&demoTask, "task", defaultTask, "the coder agent's task") },
			run:   func(e *env, _ []string) error { return cmdDemo(e, demoTask) }},
		{name: "ls", short: "list executions",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&lsStatus, "status", "", "only these statuses, separated by commas")
				fs.StringVar(&lsAgent, "agent", "", "only this agent's executions")
				fs.StringVar(&lsKey, "key", "", "only the execution started with this key")
				fs.StringVar(&lsVersion, "version", "", "only the executions of this code version (sdk.WithVersion)")
				fs.BoolVar(&lsBudget, "budget", false, "add a BUDGET column: each budget's spend against its limits (reads every listed lineage)")
			},
			run: func(e *env, _ []string) error { return cmdLs(e, lsStatus, lsAgent, lsKey, lsVersion, lsBudget) }},
		{name: "tree", short: "the fork lineage of every execution", run: func(e *env, _ []string) error { return cmdTree(e) }},
		{name: "events", args: "<id> [--kind K]", short: "the events of an execution's lineage", minPos: 1, maxPos: 1,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&eventsKind, "kind", "", "only events of this kind, or family (message, step, event)")
			},
			run: func(e *env, pos []string) error { return cmdEvents(e, pos[0], eventsKind) }},
		{name: "send", args: "<id> <topic> <json> [--id MESSAGEID]", short: "send a message to an execution's Recv", minPos: 3, maxPos: 3,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&sendID, "id", "", "the message ID: sending one ID twice sends one message (default: random)")
			},
			run: func(e *env, pos []string) error { return cmdSend(e, pos[0], pos[1], pos[2], sendID) }},
		{name: "coverage", args: "<id> [seq]", short: "each event's coverage, or what a fork at seq restores", minPos: 1, maxPos: 2,
			run: func(e *env, pos []string) error { return cmdCoverage(e, pos) }},
		{name: "show", args: "<id> <seq>", short: "one event, its payload decoded", minPos: 2, maxPos: 2,
			run: func(e *env, pos []string) error { return cmdShow(e, pos[0], pos[1]) }},
		{name: "fork", args: "<id> <seq> [--input JSON] [--result STEPID=JSON]… [--result-file STEPID=FILE]… [--edit-tool-args STEPID TOOL key=value…]… [--require-covered] [--no-verify] | <id> [<seq>] --latest-covered",
			short: "create a fork at an event (it does not run it)", minPos: 1, maxPos: 2, take: edit.takeToolArgs,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&edit.input, "input", "", "the fork's new input (JSON)")
				fs.Func("result", "replay JSON as step STEPID's result (an LLM call: the response body); repeatable", edit.addResult)
				fs.Func("result-file", "replay FILE's bytes as step STEPID's result (an LLM call: the response body as is; another step: JSON); repeatable", edit.addResultFile)
				fs.Func(editToolArgsFlag, "STEPID TOOL key=value… (key:=JSON for a JSON value): replay LLM call STEPID's reply with those arguments of its call of TOOL (or of the call with that ID) changed; OpenAI chat completions and Anthropic messages; repeatable",
					func(string) error { return inputErrorf("fork: --%s: want STEPID TOOL key=value…", editToolArgsFlag) })
				fs.BoolVar(&edit.requireCovered, "require-covered", false, "refuse an uncovered fork point; write nothing")
				fs.Func("version", "move the fork onto this code version (sdk.OnVersion; \"\": unversioned); default: the parent's", edit.setVersion)
				fs.BoolVar(&edit.noVerify, "no-verify", false,
					"do not check the records of the prefix first (a check whose cost grows with <seq>; without it a damaged prefix is found when the fork runs)")
				fs.BoolVar(&edit.latestCovered, "latest-covered", false,
					"fork at the newest covered event at or before <seq> (default: the head); the way out for an execution awaiting an owner that never returns")
			},
			run: func(e *env, pos []string) error {
				seq := ""
				if len(pos) > 1 {
					seq = pos[1]
				}
				return cmdFork(e, pos[0], seq, edit)
			}},
		{name: "cancel", args: "<id>", short: "cancel an execution (a request its owner carries out)", minPos: 1, maxPos: 1,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&cancelReason, "reason", "cancelled from the command line", "the reason recorded")
			},
			run: func(e *env, pos []string) error { return cmdCancel(e, pos[0], cancelReason) }},
		{name: "approvals", short: "the calls that await an approval",
			flags: func(fs *flag.FlagSet) { fs.StringVar(&approvalsAgent, "agent", "", "only this agent's executions") },
			run:   func(e *env, _ []string) error { return cmdApprovals(e, approvalsAgent) }},
		{name: "approve", args: "<id> <step> | --all --agent A [--step-prefix P]", short: "grant the approval a step awaits", maxPos: 2,
			flags: func(fs *flag.FlagSet) {
				approveAll.flags(fs)
				fs.StringVar(&approveNote, "note", "", "the note recorded with the decision")
				fs.StringVar(&approveBy, "by", "", "who decides (default: the OS user)")
			},
			run: func(e *env, pos []string) error {
				if approveAll.all || approveAll.agent != "" || approveAll.prefix != "" {
					return cmdDecideAll(e, true, pos, approveAll, approveBy, approveNote)
				}
				if len(pos) != 2 {
					return inputErrorf("approve: want <id> <step>, or --all --agent A (forkline help approve)")
				}
				return cmdDecide(e, true, pos[0], pos[1], approveBy, approveNote)
			}},
		{name: "reject", args: "<id> <step> | --all --agent A [--step-prefix P]", short: "refuse the approval a step awaits", maxPos: 2,
			flags: func(fs *flag.FlagSet) {
				rejectAll.flags(fs)
				fs.StringVar(&rejectNote, "note", "", "the note recorded with the decision")
				fs.StringVar(&rejectBy, "by", "", "who decides (default: the OS user)")
			},
			run: func(e *env, pos []string) error {
				if rejectAll.all || rejectAll.agent != "" || rejectAll.prefix != "" {
					return cmdDecideAll(e, false, pos, rejectAll, rejectBy, rejectNote)
				}
				if len(pos) != 2 {
					return inputErrorf("reject: want <id> <step>, or --all --agent A (forkline help reject)")
				}
				return cmdDecide(e, false, pos[0], pos[1], rejectBy, rejectNote)
			}},
		{name: "delete", args: "<id>", short: "delete an execution (its forks keep what they read)", minPos: 1, maxPos: 1,
			run: func(e *env, pos []string) error { return cmdDelete(e, pos[0]) }},
		{name: "schedules", short: "the schedules: name, agent, spec, last and next tick",
			run: func(e *env, _ []string) error { return cmdSchedules(e) }},
		{name: "queues", short: "the queues: concurrency, rate, priority, waiting (depth) and running",
			run: func(e *env, _ []string) error { return cmdQueues(e) }},
		{name: "unschedule", args: "<name>", short: "remove a schedule: no Serve starts its ticks any more", minPos: 1, maxPos: 1,
			run: func(e *env, pos []string) error { return cmdUnschedule(e, pos[0]) }},
		{name: "unquarantine", args: "<id>", short: "let Serve run again an execution quarantined for a damaged history", minPos: 1, maxPos: 1,
			run: func(e *env, pos []string) error { return cmdUnquarantine(e, pos[0]) }},
		{name: "gc", short: "delete ended executions older than an age",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&gcStatus, "status", gcStatuses, "statuses to delete, separated by commas")
				fs.StringVar(&gcOlder, "older-than", "", "delete executions whose newest event is older than this (say 168h)")
				fs.BoolVar(&gcDry, "dry-run", false, "list what would be deleted; delete nothing")
				fs.DurationVar(&gcGrace, "grace", 15*time.Minute, "spare checkpoints and workspaces younger than this")
			},
			run: func(e *env, _ []string) error { return cmdGC(e, gcStatus, gcOlder, gcGrace, gcDry) }},
		{name: "du", short: "bytes per execution: own events, shared prefix, checkpoints",
			run: func(e *env, _ []string) error { return cmdDu(e) }},
		{name: "run", args: "<id>", short: "run an execution of the demo's coder agent", minPos: 1, maxPos: 1,
			run: func(e *env, pos []string) error { return cmdRun(e, pos[0]) }},
		{name: "check", args: "--agent coder [DIR]", short: "replay recorded executions against the current code", maxPos: 1,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&checkAgent, "agent", "", "the agent whose executions to replay (the command has the coder agent's code)")
			},
			run: func(e *env, pos []string) error { return cmdCheck(e, checkAgent, pos) }},
		{name: "timeline", args: "<id> --html FILE", short: "write the lineage as a self-contained HTML page", minPos: 1, maxPos: 1,
			flags: func(fs *flag.FlagSet) { fs.StringVar(&htmlFile, "html", "", "the HTML file to write (required)") },
			run: func(e *env, pos []string) error {
				if htmlFile == "" {
					return inputErrorf("timeline: --html FILE is required")
				}
				return cmdTimeline(e, pos[0], htmlFile)
			}},
		{name: "diff", args: "<a> <b> [--html FILE]", short: "compare two executions and their workspaces", minPos: 2, maxPos: 2,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&diffHTML, "html", "", "also write the comparison as an HTML page to this file")
			},
			run: func(e *env, pos []string) error { return cmdDiff(e, pos[0], pos[1], diffHTML) }},
		{name: "reclose", short: "re-verify a log whose clean-close record (FORKLINE-CLOSED) fails its check, and rewrite the record",
			run: func(e *env, _ []string) error { return cmdReclose(e) }},
		{name: "kernel", args: "[--listen ADDR] [--token T | --dev]", short: "serve the kernel's HTTP API to agents in any language (Rebuno's v0 wire shape)",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&kf.listen, "listen", "127.0.0.1:8480", "the address to listen on (loopback unless you name another)")
				fs.StringVar(&kf.token, "token", "", "the bearer token of client and admin routes")
				fs.BoolVar(&kf.dev, "dev", false, "demand no bearer token (agent routes stay signed)")
			},
			run: func(e *env, _ []string) error { return cmdKernel(e, kf) }},
		{name: "policy", args: "check FILE | test FILE --call KIND:TARGET [--args JSON] [--agent A] [--in-fork] [--at-most-once]",
			short: "validate a policy bundle and print it back, or say what it decides about a call", minPos: 2, maxPos: 2,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&pt.call, "call", "", "test: the call's KIND:TARGET (kind tool, local, llm or child)")
				fs.StringVar(&pt.args, "args", "", "test: the call's args (JSON)")
				fs.StringVar(&pt.agent, "agent", "", "test: the agent making the call")
				fs.BoolVar(&pt.inFork, "in-fork", false, "test: the call runs live in a fork")
				fs.BoolVar(&pt.atMostOnce, "at-most-once", false, "test: the call is at_most_once (default safe_to_retry)")
			},
			run: func(e *env, pos []string) error { return cmdPolicy(e, pos[0], pos[1], pt) }},
		{name: "serve", args: "[--addr HOST:PORT] [--allow-host NAME]… [--token T | --insecure] [--workers N]",
			short: "serve the web page of the executions and run the coder agent's (stop: SIGINT or SIGTERM)",
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&sv.addr, "addr", defaultAddr, "the address to listen on")
				fs.Func("allow-host", "also answer requests whose Host header names `NAME` (repeatable)", func(v string) error {
					sv.hosts = append(sv.hosts, v)
					return nil
				})
				fs.StringVar(&sv.token, "token", "", "the secret clients present (default: a random one, printed in the sign-in link)")
				fs.BoolVar(&sv.insecure, "insecure", false, "demand no token: anyone who reaches the address reads and writes")
				fs.Func("workers", "run up to `N` executions of the coder agent at once in this process (default 1; 0: none, the page only)", func(v string) error {
					n, err := parseWorkers(v)
					sv.workers = n
					return err
				})
			},
			run: func(e *env, _ []string) error { return cmdServe(e, sv) }},
	}
}

// run is the whole command: it parses args, runs one subcommand and returns
// the exit status. Tests call it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	// SIGTERM (a service manager's stop) is an interrupt too: serve
	// shuts down cleanly, and a run stops its dispatch resumable.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := options{dir: defaultDir, db: os.Getenv("FORKLINE_DB"), blob: os.Getenv("FORKLINE_BLOB")}
	global := flag.NewFlagSet("forkline", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	opts.commonFlags(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			return exitOK
		}
		return fail(stderr, inputErrorf("%v (forkline -h for help)", err))
	}
	rest := global.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitInput
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 1 {
			if c := findCommand(rest[0]); c != nil {
				fmt.Fprint(stdout, commandUsage(c))
				return exitOK
			}
		}
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	c := findCommand(name)
	if c == nil {
		return fail(stderr, inputErrorf("unknown command %q (forkline -h for help)", name))
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.commonFlags(fs)
	if c.flags != nil {
		c.flags(fs)
	}
	if c.take != nil {
		var err error
		if rest, err = c.take(rest); err != nil {
			return fail(stderr, err)
		}
	}
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, commandUsage(c))
			return exitOK
		}
		return fail(stderr, inputErrorf("%s: %v (forkline help %s)", name, err, name))
	}
	if len(pos) < c.minPos || len(pos) > c.maxPos {
		return fail(stderr, inputErrorf("%s: want %s, got %d argument(s) (forkline help %s)",
			name, describeArgs(c), len(pos), name))
	}
	if opts.dir == "" {
		return fail(stderr, inputErrorf("--dir must not be empty"))
	}
	e := &env{ctx: ctx, opts: opts, stdout: stdout, stderr: stderr}
	if err := c.run(e, pos); err != nil {
		return fail(stderr, err)
	}
	return exitOK
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func describeArgs(c *command) string {
	if c.args == "" {
		return "no arguments"
	}
	return c.args
}

func commandUsage(c *command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: forkline [--dir DIR] %s", c.name)
	if c.args != "" {
		fmt.Fprintf(&b, " %s", c.args)
	}
	fmt.Fprintf(&b, " [--json] [--progress]\n\n%s.\n", upperFirst(c.short))
	if c.flags != nil {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		b.WriteString("\nFlags:\n")
		fs.SetOutput(&b)
		fs.PrintDefaults()
	}
	b.WriteString("\nforkline -h lists every command and the common flags.\n")
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// parseInterleaved parses flags that may appear before, between and after
// positional arguments; everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return append(pos, tail...), nil
}

// fail prints err as one line and returns its exit status.
func fail(stderr io.Writer, err error) int {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
	fmt.Fprintf(stderr, "forkline: %s\n", msg)
	return exitStatus(err)
}
