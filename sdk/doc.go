// Package sdk is what a Go agent runtime embeds: a [Kernel] that runs
// registered agents' executions durably on an event log, with tools
// ([DefineTool]), local steps ([Step]), LLM calls ([Transport]) and external
// resources ([Resource]) whose checkpoints make any event forkable ([Kernel.Fork]).
//
// # Replay
//
// Each [Kernel.Run] is one dispatch: the handler runs from the top, and each
// call is looked up by its StepID (kind, target, canonical args and
// occurrence in the dispatch — DESIGN §4). A recorded outcome is returned
// without running the body and without appending anything; a call that
// started but never finished is run again if it is safe to retry, or failed
// as indeterminate if it is [AtMostOnce]; anything else is gated and run
// live. A step's error is recorded as text and returned as a *[StepError],
// live and on replay alike, so a handler sees the same outcome either way.
//
// # Durability
//
// An at_most_once step's step.started is synced before its body runs; a
// safe_to_retry step's rides on the sync of its terminal event, so a live
// safe_to_retry call costs one fsync. Terminal events, captures, bindings
// and execution.* events are synced before the caller sees their outcome.
//
// [Durability]([SyncAtEffects]) is an explicit lighter mode, never the
// default (DESIGN §21): a safe_to_retry tool, local or llm call's outcome
// that commits no capture is appended unsynced, and becomes durable with
// the next synced append — an at_most_once intent, an approval, a park, a
// capture, the completion — which the log's order guarantees on both
// stores. After a crash (of the machine; on Pebble a kill of the process
// too: Pebble buffers an unsynced write in the process before its
// write-ahead log file has it), the safe_to_retry calls whose outcomes
// were appended after the last synced append run again, and only those;
// at_most_once bodies still run at most once, and a completed result is
// an uninterrupted run's.
//
// # Resources
//
// [Resource] follows DESIGN §5: the same handle per key in a dispatch; the
// execution's own binding opened on later dispatches; a fork's own resource
// created from its selection; a baseline capture after creating from the
// initial environment; captures every [EverySteps] counted calls committed
// with the call's terminal event; completion captures committed with
// execution.completed. While an execution has resources, tool and local-step
// bodies run one at a time. Only resources obtained in the dispatch that
// completes can be captured at completion: the kernel has no driver for the
// others. When a dispatch ends, every handle it obtained that implements
// io.Closer is closed; handles belong to one dispatch.
//
// Every dispatch.started records the kernel's owner name ([WithOwner]),
// on every store, leased or not (DESIGN §15½.2); that name decides who may
// reopen a binding that is not portable. The kernel finds a store's leases,
// inbox, Delete and bulk claims through wrappers of the log with
// eventlog.As (DESIGN §15½.3), so a Log that wraps another and exposes
// Unwrap() eventlog.Log loses none of them. A kernel [Open] makes on a
// Pebble folder is named [LocalOwner] of the folder: the host and an ID
// written into the folder, so a folder moved on its host is the same
// owner ([WithLocalOwner]).
//
// # Changing code safely
//
// A changed handler meets histories its old code recorded (DESIGN §15).
// Without [Strict], a recorded call the new code no longer makes is left
// as it is — except an orphan (a step started on an earlier dispatch and
// never finished) that a completing dispatch never reached again: the
// kernel ends it with step.abandoned before the completion captures, so it
// stops holding its resources' coverage, and counts it like an ended
// attempt. With [Strict], a call made where the history recorded another
// call, and a dispatch that completes with recorded calls unmade (a
// renamed or removed step, an unreached orphan), fail the execution with
// Code nondeterministic and an error that is [ErrNonDeterministic] (a
// *[NonDeterministicError] naming the expected and the actual call).
// [Patched] guards a change so that old histories keep replaying by the
// old path; [ReplayOnly] replays histories without running anything, which
// proptest.Replay and forkline check build on. See [AtMostOnce] for the
// nonce trap.
//
// # Idempotency keys
//
// [IdempotencyKey] is derived from the StepID and the execution that runs
// the body, so every attempt of one step in one execution shares it while a
// fork running the same step live gets its own (its effect is its own).
//
// # Choices where the design is silent
//
// Tool and local-step bodies do not nest ([ErrNestedStep]); an HTTP request
// made through [Transport] from inside a body passes straight through and is
// part of that body's recorded result. Values travel as JSON; a recorded
// result that no longer decodes into the caller's type (including a field
// the type no longer has) is an error, never a zero value.
//
// # Model replies that stream
//
// A streamed response through [Transport] reaches the caller as it
// arrives; the llm step's step.succeeded (the whole body, the headers,
// the reply's Tokens) is appended when the caller reads to EOF, Truncated
// when it closes early or the handler returns or parks with it open
// (DESIGN §16, §21½.8). A replay returns the recorded bytes and headers as
// a body the client's parser reads. [Kernel.WatchDeltas] yields the pieces
// ([Delta]) in this process, never stored.
//
// # Retries, timeouts and timers
//
// A call retries under its [RetryPolicy] ([Retry], [TransportRetry], or the
// kernel's [WithRetry]; by default nothing is retried). A failed attempt
// that will be retried is recorded as step.failed with RetryAt, the time of
// the next attempt: the backoff (exponential with jitter, from
// github.com/cenkalti/backoff) is chosen live, on the kernel's [Clock], and
// never recomputed on replay. The final failure has no RetryAt. MaxAttempts
// counts every step.started of the step, the re-run of an orphan included;
// an orphan that was the last allowed attempt is failed as indeterminate
// without running. A dispatch that restarts while a step is retrying waits
// only what is left until RetryAt, then runs the next attempt. An
// [AtMostOnce] call is retried only when its body's error wraps
// [ErrNotStarted]. [Timeout] gives each attempt's body a deadline; the
// kernel waits for the body to return before it records the failure
// (bodies never overlap), and a timed-out at_most_once attempt is recorded
// indeterminate, whatever the body's error says. A call's first attempt
// is gated; in a fork every retry is gated too (DESIGN §8½), and a denied
// retry ends the step denied (step.denied after its step.failed{RetryAt}),
// returned as a *[DeniedError] live and on replay. In a fork the re-run of
// an orphan (a safe_to_retry step started but never ended) is gated too:
// a denied re-run first abandons the orphan's attempt (step.abandoned, so
// that it lands and is counted like any ended attempt), then ends the
// step denied. Child calls ([Agent.Call]) are retried only under their own
// [Retry] (not the kernel's WithRetry); each retry starts a new child, as
// the child's key is hash(parent, StepID, failed attempts) (DESIGN
// §15½.7), and only failed attempts use up MaxAttempts: the re-run of a
// child step after its dispatch parked or crashed finds the same child.
// The key of a first attempt is the one earlier versions derived from
// (parent, StepID), so their recorded executions find their children
// again; it differs only for attempts after a failed one, which earlier
// versions never retried.
//
// Retried attempts and resources, in DESIGN's terms: a retried step that
// affects a resource is counted per attempt. Each attempt's step.started
// advances the resources it may change (a new generation, in flight until
// the attempt ends); its step.failed{RetryAt} ends the attempt — it lands,
// is no longer in flight, and is a counted call for every resource it
// Affects, counted once — and the next attempt's step.started advances
// again. So a step that succeeds on its third attempt counts three calls
// toward [EverySteps], and a capture that falls due after a failed attempt
// is committed with that attempt's step.failed. The step itself is not
// terminal for replay until its final outcome.
//
// [Sleep] records timer.started{TimerID, WakeAt} and timer.fired; a fired
// timer replays at once, and a dispatch that died mid-sleep sleeps only the
// rest. Timers advance nothing and are never counted. Any wait — a sleep,
// a retry's backoff, a child — longer than [ParkAfter] parks the dispatch:
// it captures every resource it holds that is uncovered (reason park,
// DESIGN §15½.8), appends dispatch.parked{WakeAt, Reason}, and Run returns
// [ErrWaiting]; the execution is waiting, and [Kernel.Serve] runs it again
// at WakeAt.
//
// A waiting execution is runnable only for the reason it waits (DESIGN
// §15½.6): its wake time, a request in its inbox (an approval decision, a
// cancel), or — parked for a child, with no wake time and no approval
// awaited — the end of one of its children: a child's terminal append
// writes a child.ended request into its parent's inbox in the same
// atomic write, and the parent's next dispatch removes it without an
// event. One that awaits an approval is never dispatched again because
// its children ended, and a parent whose child itself waits (asleep,
// awaiting a decision) stays parked until the child ends.
//
// # Wakeups across processes
//
// Serve and Watch wake at once on this kernel's own appends and requests.
// What another process writes to a shared store they find at their poll
// ([PollEvery]; Watch about every second) — or, on a store that
// implements eventlog.Notifier (pgstore, through LISTEN/NOTIFY), as soon
// as the store announces it (DESIGN §15½.6, §15½.14): a child's end, an
// Approve, Reject or Cancel, or a released lease in another process wakes
// Serve, and another process's terminal append to the watched execution —
// any append, when that process's store has pgstore.NotifyEveryAppend —
// wakes Watch, typically within milliseconds. The poll stays as the fallback,
// since an announcement may be lost (a listener that reconnects tells
// Serve and Watch to look at everything).
//
// # Shutdown
//
// The context given to [Kernel.Run] or [Kernel.Serve] belongs to the
// process, not to the execution: when it ends (a shutdown, Serve stopping,
// the caller's own timeout) the dispatch records no outcome (DESIGN
// §15½.1, §21½.2), whatever the handler returns — a handler that swallows
// a step's cancellation error and returns a fallback answer does not turn
// a shutdown into a result. The calls in flight get step.cancelled (a body
// that returns a value after the context ended included: its value is not
// recorded and the handler gets the cancellation); every uncovered
// resource whose driver is not portable is captured with reason shutdown,
// so that the next owner binds from the head; and nothing else is
// appended: no step outcome, no execution.completed or execution.failed,
// no park, no request taken from the inbox. These writes run on a context
// detached from the ended one, each bounded by a timeout. Run returns an
// error wrapping the context's error; the execution stays resumable, and
// the next Run replays it and ends it as an uninterrupted run would. A
// step whose outcome was being appended when the context ended keeps it.
// A dispatch whose lease was lost writes nothing at all. [Kernel.Cancel]
// and a [Deadline] are not shutdowns: they end the execution as before.
// The kernel logs a shutdown at Info ("dispatch stopped by its caller").
//
// # Serve's backoff
//
// A run that Serve started and that fails with an error the log does not
// record — a store error only that execution meets, a corrupt lineage —
// backs that execution off (DESIGN §15½.11): Serve runs it again after
// the poll interval, then after twice that, up to a minute, and spends no
// slot on it meanwhile (a dispatch resumed under its lease after a store
// error is resumed at most three times in a row before it backs off).
// Serve logs at Warn when the error changes (the first failure, another
// message), not at every attempt, and at Info when a run gets past it. A
// store that implements eventlog.RetryKeeper (both stores do) keeps the
// note: Info shows LastError and RetryAt, and ClaimRunnable skips the
// execution until then. An execution Serve must leave to its owner
// (DESIGN §15½.4, [AwaitingOwnerError]) backs off the same way, from a
// second: on a store that implements eventlog.AwaitKeeper (both stores
// do) the note also names the owner (Info.AwaitedOwner), whose own Serve
// runs it at once and whose claim clears the note. A listing never
// restarts a run that ended while it was read.
//
// A run that fails because a history it reads is damaged (an error that
// is a *eventlog.CorruptionError naming an execution: its own or an
// ancestor's) would fail the same way every time: on a store that
// implements eventlog.Quarantiner (both stores do) Serve quarantines the
// execution instead of backing it off, and logs it at Error once. Info
// shows Quarantined and QuarantineError; ClaimRunnable and Serve's
// listing skip it until a person acts: forkline unquarantine ID
// (Quarantiner.Unquarantine) once the damage is mended, a delete, or a
// fork before the damage.
//
// # Approvals
//
// A gate ([WithGate]) may answer policy.Decision{Approval: true} (DESIGN
// §12; Approval wins over Allow; policy.ApproveForkEffects asks it for every
// at_most_once call in a fork). The kernel then appends approval.requested
// {StepID, StepKind, Target, Args, Reason}, synced, and the call blocks: the
// execution is waiting. [Kernel.Approvals] lists the calls that wait;
// [Kernel.Approve] and [Kernel.Reject] decide one. A decision is a request
// to the execution's inbox (DESIGN §8½): its running owner moves it into
// the lineage as approval.granted or approval.rejected within 100 ms; with
// no live owner the requester appends it itself under a fresh claim.
// Granted, the call runs live; rejected, it ends as a denial does —
// step.denied with Reason "approval rejected: NOTE" — and returns a
// *[DeniedError], live and on replay. Deciding a step that awaits no
// decision, or deciding twice, is [ErrNoPendingApproval] and writes
// nothing.
//
// Who decided and why (DESIGN §21½.10): Approve and Reject take [By]
// (recorded as the decision's By; without it, the OS user running the
// process, "user:NAME", else the kernel's owner name) and [Note]. A
// rejection's note and decider are the *DeniedError's Note and By, live
// and on replay; a grant's note is what [ApprovalNote] returns inside the
// approved call's body, on its retries and re-runs too. By is a label, not
// authentication.
//
// A wait for a decision longer than [ParkAfter] parks the dispatch
// (dispatch.parked{Reason: approval}, no WakeAt) and costs no goroutine. A
// decision folded while the execution is parked sets its WakeAt to the
// decision's time, so [Kernel.Serve] runs it again — also when the
// requester appended the decision with no owner running — and the
// replayed call finds the decision. A recorded approval.requested is
// awaited again after a crash, and a recorded decision is followed,
// without asking the gate again. A fork never inherits an approval of its
// prefix: a live call in a fork asks again, and every live attempt of a
// fork (a retry, an orphan's re-run) is gated. A decision applies to the
// attempt it was asked for: an approval recorded before a step's newest
// event (an earlier attempt's) never approves a retry.
//
// # Messages and published events
//
// DESIGN §18. [Kernel.Send] writes a message (topic, JSON value,
// [MessageID]) to the execution's inbox; its owner appends it as
// message.received within 100 ms (at once in the same process), or the
// sender under a fresh claim when nobody runs it. One MessageID is one
// message: the same value again writes nothing, another value is
// eventlog.ErrConflict. An ended execution is [ErrEnded]; a message still
// in the inbox when the execution ends is dropped and [Kernel.Info] counts
// it. [Recv] is a step of StepKind recv with no body (§21½.1): it returns
// the oldest received, unconsumed message of its topic as its recorded
// result, waits for one (parking past ParkAfter with reason message, woken
// when a message is received), and records step.failed — [ErrTimeout] —
// once its WakeAt (start + timeout, in step.started) passes. [SetEvent]
// appends event.set, matched on replay by (key, occurrence) like
// [Patched]; [Kernel.GetEvent] returns a key's newest value, waiting for
// the first. A fork at N owns the messages received at seq ≤ N, and
// [WithMessages] injects messages received at fork.created.
//
// # Keys
//
// An execution started [WithKey] shows its key as Info.Key, and
// [Kernel.Lookup] finds it by the key without ever creating one
// (eventlog.ErrNotFound for a key nobody started). A key is UTF-8 text
// without NUL bytes, at most [MaxKeyLen] bytes.
//
// # Wake times
//
// Every time the kernel waits for — a Sleep's wake time, a retry's
// RetryAt, a Deadline — saturates at eventlog.MaxWakeTime (2262-01-01
// UTC) instead of overflowing: Sleep(math.MaxInt64) parks "forever", and
// the stores keep that time, never a negative one that would make the
// execution always due.
//
// # Decisions accepted as built (DESIGN §15½.12)
//
// These were choices of the first build, now part of the contract: an
// append after an execution's terminal event is refused (its lineage is
// closed, DESIGN §3); driver.Collector's Live takes the refs, the bindings
// and a grace period; deleting an execution (a tombstone) frees its start
// key; eventlog.Deleter, UsageReporter, KeptPrefix and Claimer are the
// stores' optional interfaces for Delete, usage, tombstones' prefixes and
// Serve's claim, found through eventlog.As; a child step is gated in a
// fork like any live step; a refused re-run of an orphan is step.abandoned
// then step.denied; [Strict]'s exact promise covers calls of different
// (kind, target) pairs, and concurrent calls of one pair past the recorded
// history may be reported as nondeterministic; a nondeterministic failure
// is terminal; [ReplayOnly] replays without running anything;
// driver.Differ returns a driver.Difference; a lease's expiry is judged by
// the store's clock (the database's on Postgres) and wake times by the
// kernel's; driver.Sizer reports a capture's size; a divergence mark
// (fork.diverged) survives later binds — the coverage users are told of
// (logical) may differ from the coverage that decides captures (physical);
// and on Pebble the WAL's last synced record after a crash cannot be told
// from a torn write (eventlog/pebblestore's doc says what that means).
package sdk
