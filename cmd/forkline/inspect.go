package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/forkline/forkline/coverage"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// listing is one execution in ls, tree and the timeline's forks.
type listing struct {
	ID      string `json:"id"`
	Agent   string `json:"agent"`
	Parent  string `json:"parent,omitempty"`
	ForkSeq uint64 `json:"fork_seq,omitempty"`
	Caller  string `json:"caller,omitempty"` // the parent of a child execution
	Key     string `json:"key,omitempty"`    // the start key (sdk.WithKey)
	// Version is the code version it runs on (eventlog.Info.Version,
	// DESIGN §19); absent for an unversioned execution.
	Version string `json:"version,omitempty"`
	Head    uint64 `json:"head"`
	Status  string `json:"status"`
	// Tokens is the own run's token usage the store keeps
	// (eventlog.Info.Tokens, DESIGN §16): a fork's prefix is not in it.
	Tokens *eventlog.Tokens `json:"tokens,omitempty"`
	// Budget is, with ls --budget, the lineage's budget (sdk.Budget,
	// DESIGN §17) and its spend, a fork's prefix included; absent without
	// a budget.
	Budget *budgetJSON `json:"budget,omitempty"`
	// AwaitingOwner is the owner a running execution waits for (DESIGN
	// §15½.4, sdk.AwaitedOwner): ls shows "running, awaiting owner X".
	AwaitingOwner *string `json:"awaiting_owner,omitempty"`
	// Quarantined is the error that quarantined the execution
	// (eventlog.Quarantiner): a run found its history damaged, and Serve
	// does not run it until forkline unquarantine.
	Quarantined string `json:"quarantined,omitempty"`
	// Owner is, for a running execution, the owner of its newest
	// dispatch.started: who holds it, or held it last. OwnerAlive says
	// whether that owner's lease is live (false: "owner gone", its lease
	// expired or its process ended); absent when the log cannot say (one
	// read through forkline serve).
	Owner      string     `json:"owner,omitempty"`
	OwnerAlive *bool      `json:"owner_alive,omitempty"`
	Created    time.Time  `json:"created"`
	Forks      []*listing `json:"forks,omitempty"`    // tree only
	Children   []*listing `json:"children,omitempty"` // tree only: executions it started with Agent.Call

	info eventlog.Info
}

// listAll describes every execution, in creation order.
func listAll(e *env, log eventlog.Log) ([]*listing, error) {
	return listSome(e, log, eventlog.Filter{})
}

// listSome describes the executions f selects, in creation order.
func listSome(e *env, log eventlog.Log, f eventlog.Filter) ([]*listing, error) {
	var out []*listing
	p := newProgress(e, "listing", "executions")
	defer p.done()
	for info, err := range log.List(e.ctx, f) {
		if err != nil {
			return nil, fmt.Errorf("list executions: %w", err)
		}
		p.tick()
		// The store keeps each execution's status (DESIGN §9): listing
		// folds no lineage.
		out = append(out, listingOf(info))
	}
	return out, nil
}

// listKey describes the execution started with key when f selects it;
// none when no execution has the key. A log that cannot look keys up is
// an input error.
func listKey(e *env, log eventlog.Log, f eventlog.Filter, key string) ([]*listing, error) {
	var kl eventlog.KeyLookup
	if !eventlog.As(log, &kl) {
		return nil, inputErrorf("ls --key: this log cannot look keys up")
	}
	id, err := kl.LookupKey(e.ctx, key)
	if errors.Is(err, eventlog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := log.Info(e.ctx, id)
	if err != nil {
		return nil, err
	}
	if !f.Match(info) {
		return nil, nil
	}
	return []*listing{listingOf(info)}, nil
}

// listingOf describes info as the store keeps it (DESIGN §9): it folds no
// lineage.
func listingOf(info eventlog.Info) *listing {
	l := &listing{ID: info.ID.String(), Agent: info.Agent, ForkSeq: info.ForkSeq,
		Head: info.Head, Status: info.Status.String(), Created: info.Created.UTC(), Key: info.Key, Version: info.Version,
		Quarantined: info.QuarantineError, info: info}
	if info.Tokens != (eventlog.Tokens{}) {
		l.Tokens = &info.Tokens
	}
	if !info.Parent.IsZero() {
		l.Parent = info.Parent.String()
	}
	if !info.Caller.IsZero() {
		l.Caller = info.Caller.String()
	}
	return l
}

// writeJSON writes v as the command's one JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// parseFilter makes the filter of command cmd (ls, gc) from its flags:
// statuses separated by
// commas, and an agent.
func parseFilter(cmd, statuses, agent string) (eventlog.Filter, error) {
	f := eventlog.Filter{Agent: agent}
	if statuses == "" {
		return f, nil
	}
	for _, name := range strings.Split(statuses, ",") {
		st, err := eventlog.ParseStatus(strings.TrimSpace(name))
		if err != nil {
			return f, inputErrorf("%s --status: %v", cmd, err)
		}
		f.Status = append(f.Status, st)
	}
	return f, nil
}

// cmdLs lists the executions the flags select; with key, only the one
// started with that key (found by the store's key index, never created).
func cmdLs(e *env, statuses, agent, key, version string, budgets bool) error {
	f, err := parseFilter("ls", statuses, agent)
	if err != nil {
		return err
	}
	if err := eventlog.CheckVersionName(version); err != nil {
		return inputErrorf("ls --version: %v", err)
	}
	f.Version = version
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		var all []*listing
		if key != "" {
			all, err = listKey(e, s, f, key)
		} else {
			all, err = listSome(e, s, f)
		}
		if err != nil {
			return err
		}
		if err := markAwaiting(e, s, all); err != nil {
			return err
		}
		if err := markOwners(e, s, all); err != nil {
			return err
		}
		if budgets {
			if err := markBudgets(e, s, all); err != nil {
				return err
			}
		}
		if e.opts.json {
			if all == nil {
				all = []*listing{}
			}
			return writeJSON(e.stdout, map[string]any{"executions": all})
		}
		if len(all) == 0 {
			if statuses != "" || agent != "" || key != "" || version != "" {
				fmt.Fprintf(e.stdout, "no executions in %s match\n", e.opts.where())
				return nil
			}
			fmt.Fprintf(e.stdout, "no executions in %s\n", e.opts.where())
			return nil
		}
		tw := newTable(e.stdout)
		budgetHead := ""
		if budgets {
			budgetHead = "\tBUDGET"
		}
		fmt.Fprintln(tw, "ID\tAGENT\tKEY\tEVENTS\tSTATUS\tOWNER\tTOKENS"+budgetHead+"\tFORK OF\tCREATED")
		for _, l := range all {
			parent := "-"
			if l.Parent != "" {
				parent = fmt.Sprintf("%s@%d", l.Parent, l.ForkSeq)
			}
			key := "-"
			if l.Key != "" {
				key = clip(oneLine(l.Key), 40)
			}
			status := l.Status
			if l.AwaitingOwner != nil {
				status += ", awaiting owner " + ownerName(*l.AwaitingOwner)
			}
			if l.Quarantined != "" {
				status += ", quarantined"
			}
			tokens := "-"
			if l.Tokens != nil {
				tokens = fmt.Sprintf("%d+%d", l.Tokens.Input, l.Tokens.Output)
			}
			if budgets {
				tokens += "\t" + budgetColumn(l.Budget)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", l.ID, l.Agent, key, l.Head, status, ownerColumn(l), tokens, parent, timeText(l.Created))
		}
		if awaiting(all) {
			fmt.Fprintln(tw, "(an execution awaiting its owner resumes when that owner runs it; if it never will: forkline fork ID --latest-covered, or forkline cancel ID)")
		}
		for _, l := range all {
			if l.Quarantined != "" {
				fmt.Fprintf(tw, "(%s is quarantined: %s; Serve does not run it: forkline unquarantine ID once the damage is mended, forkline delete ID, or fork it before the damage)\n",
					l.ID, clip(oneLine(l.Quarantined), 200))
			}
		}
		return tw.Flush()
	})
}

// markAwaiting sets AwaitingOwner of the running executions of all that
// wait for the owner of an uncovered resource that is not portable
// (DESIGN §15½.4). It folds only those running executions no lease holds.
func markAwaiting(e *env, s eventlog.IndexedLog, all []*listing) error {
	for _, l := range all {
		if l.info.Status != eventlog.StatusRunning {
			continue
		}
		owner, ok, err := sdk.AwaitedOwner(e.ctx, s, l.info.ID)
		if err != nil {
			return err
		}
		if ok {
			l.AwaitingOwner = &owner
		}
	}
	return nil
}

// markOwners sets Owner of the running executions of all to the owner of
// their newest dispatch.started and, when s keeps leases
// (eventlog.Leaser, found through wrappers), OwnerAlive to whether that
// owner's lease is live. A Pebble folder's leases live in the process that
// holds it, so a folder ls opens itself has no live lease: every owner is
// gone, which is true, since no process runs it.
func markOwners(e *env, s eventlog.IndexedLog, all []*listing) error {
	var leaser eventlog.Leaser
	hasLeases := eventlog.As(s, &leaser)
	for _, l := range all {
		if l.info.Status != eventlog.StatusRunning {
			continue
		}
		found := false
		for ev, err := range s.Events(e.ctx, l.info.ID, 1) {
			if err != nil {
				return fmt.Errorf("read %s: %w", l.info.ID, err)
			}
			if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
				l.Owner, found = ds.Owner, true
			}
		}
		if !found || !hasLeases {
			continue
		}
		lease, live, err := leaser.Holder(e.ctx, l.info.ID)
		if err != nil {
			return fmt.Errorf("lease of %s: %w", l.info.ID, err)
		}
		alive := live && lease.Owner == l.Owner
		if live && lease.Owner != l.Owner {
			// Claimed by another owner that has not appended its
			// dispatch.started yet: that owner holds it.
			l.Owner, alive = lease.Owner, true
		}
		l.OwnerAlive = &alive
	}
	return nil
}

// ownerColumn is ls's OWNER: the owner of a running execution, with
// "owner gone" when its lease is not live; "-" when none ran it.
func ownerColumn(l *listing) string {
	switch {
	case l.info.Status != eventlog.StatusRunning || l.Owner == "" && l.OwnerAlive == nil:
		return "-"
	case l.OwnerAlive != nil && !*l.OwnerAlive:
		return ownerName(l.Owner) + " (owner gone)"
	}
	return ownerName(l.Owner)
}

// awaiting reports whether some execution of all awaits its owner.
func awaiting(all []*listing) bool {
	for _, l := range all {
		if l.AwaitingOwner != nil {
			return true
		}
	}
	return false
}

// ownerName names an owner for people; "" is one no dispatch recorded.
func ownerName(owner string) string {
	if owner == "" {
		return "(unrecorded)"
	}
	return owner
}

func cmdTree(e *env) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		all, err := listAll(e, s)
		if err != nil {
			return err
		}
		byID := make(map[string]*listing, len(all))
		for _, l := range all {
			byID[l.ID] = l
		}
		roots := []*listing{}
		for _, l := range all {
			switch {
			case l.Parent != "" && byID[l.Parent] != nil:
				byID[l.Parent].Forks = append(byID[l.Parent].Forks, l)
			case l.Caller != "" && byID[l.Caller] != nil:
				byID[l.Caller].Children = append(byID[l.Caller].Children, l)
			default:
				roots = append(roots, l)
			}
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"executions": roots})
		}
		if len(roots) == 0 {
			fmt.Fprintf(e.stdout, "no executions in %s\n", e.opts.where())
			return nil
		}
		tw := newTable(e.stdout)
		// Forks hang from their parent; children (Agent.Call) from their
		// caller, marked "child", so the two relations read apart.
		fmt.Fprintln(tw, "EXECUTION\tAGENT\tFORK AT\tEVENTS\tSTATUS")
		var walk func(l *listing, prefix, branch string, isChild bool)
		walk = func(l *listing, prefix, branch string, isChild bool) {
			at := "-"
			switch {
			case l.Parent != "":
				at = fmt.Sprint(l.ForkSeq)
			case isChild:
				at = "child"
			}
			fmt.Fprintf(tw, "%s%s%s\t%s\t%s\t%d\t%s\n", prefix, branch, l.ID, l.Agent, at, l.Head, l.Status)
			next := prefix
			switch branch {
			case "├── ", "├─▸ ":
				next += "│   "
			case "└── ", "└─▸ ":
				next += "    "
			}
			kids := len(l.Forks) + len(l.Children)
			for i, f := range append(append([]*listing{}, l.Forks...), l.Children...) {
				last := i == kids-1
				child := i >= len(l.Forks)
				b := map[[2]bool]string{{false, false}: "├── ", {true, false}: "└── ", {false, true}: "├─▸ ", {true, true}: "└─▸ "}[[2]bool{last, child}]
				walk(f, next, b, child)
			}
		}
		for _, r := range roots {
			walk(r, "", "", false)
		}
		return tw.Flush()
	})
}

// lineage is an execution's events with their coverage fold.
type lineage struct {
	info   eventlog.Info
	events []eventlog.Event
	cov    *coverage.Fold
	steps  stepIndex
	// tokens sums the llm steps' recorded usage (DESIGN §16), the
	// prefix of a fork included.
	tokens eventlog.Tokens
	// budget is the lineage's budget (DESIGN §17: of execution.created,
	// replaced by a fork.created's own), llmCalls and toolCalls its live
	// calls (step.started of the kind), the prefix of a fork included:
	// with tokens, the spend the budget limits.
	budget              eventlog.Limits
	llmCalls, toolCalls uint64
}

// budgetText is show's "budget" line: the limits and the spend to seq,
// "" for a lineage without a budget.
func (l *lineage) budgetText(seq uint64) string {
	if l.budget == (eventlog.Limits{}) {
		return ""
	}
	var limits []string
	for _, f := range []struct {
		n    uint64
		what string
	}{{l.budget.MaxTokens, "tokens"}, {l.budget.MaxLLMCalls, "llm calls"}, {l.budget.MaxToolCalls, "tool calls"}} {
		if f.n != 0 {
			limits = append(limits, fmt.Sprintf("%d %s", f.n, f.what))
		}
	}
	return fmt.Sprintf("%s (spent to seq %d: %d tokens, %d llm calls, %d tool calls)", strings.Join(limits, ", "), seq,
		l.tokens.Input+l.tokens.Output, l.llmCalls, l.toolCalls)
}

// budgetJSON is show --json's "budget": the limits and the spend.
type budgetJSON struct {
	Limits    eventlog.Limits `json:"limits"`
	Tokens    uint64          `json:"tokens"`
	LLMCalls  uint64          `json:"llm_calls"`
	ToolCalls uint64          `json:"tool_calls"`
}

// foldSpend adds what ev says of the lineage's budget and spend: its
// budget (execution.created's, replaced by a fork.created's own), its
// tokens and its live calls.
func (l *lineage) foldSpend(ev eventlog.Event) {
	switch p := ev.Data.(type) {
	case *eventlog.StepSucceeded, *eventlog.StepFailed:
		l.tokens = l.tokens.Plus(eventlog.TokensOf(p))
	case *eventlog.ExecutionCreated:
		l.budget = p.Budget
	case *eventlog.ForkCreated:
		if p.Budget != (eventlog.Limits{}) {
			l.budget = p.Budget
		}
	case *eventlog.StepStarted:
		switch p.StepKind {
		case eventlog.StepLLM:
			l.llmCalls++
		case eventlog.StepTool:
			l.toolCalls++
		}
	}
}

// markBudgets sets Budget of every listing whose lineage has a budget
// (ls --budget): it reads each listed execution's lineage, so its cost
// grows with the lineages' events.
func markBudgets(e *env, s eventlog.Log, all []*listing) error {
	for _, li := range all {
		id, err := eventlog.ParseID(li.ID)
		if err != nil {
			return err
		}
		l := &lineage{}
		for ev, err := range s.Events(e.ctx, id, 1) {
			if err != nil {
				return fmt.Errorf("execution %s: %w", id, err)
			}
			l.foldSpend(ev)
		}
		if l.budget != (eventlog.Limits{}) {
			li.Budget = &budgetJSON{Limits: l.budget, Tokens: l.tokens.Input + l.tokens.Output, LLMCalls: l.llmCalls, ToolCalls: l.toolCalls}
		}
	}
	return nil
}

// budgetColumn is ls --budget's BUDGET cell: the spend against each limit
// the budget sets ("tokens 40/100, llm calls 2/5"), "-" for none.
func budgetColumn(b *budgetJSON) string {
	if b == nil {
		return "-"
	}
	var parts []string
	for _, f := range []struct {
		spent, limit uint64
		what         string
	}{{b.Tokens, b.Limits.MaxTokens, "tokens"}, {b.LLMCalls, b.Limits.MaxLLMCalls, "llm calls"}, {b.ToolCalls, b.Limits.MaxToolCalls, "tool calls"}} {
		if f.limit != 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", f.what, f.spent, f.limit))
		}
	}
	return strings.Join(parts, ", ")
}

// readLineage reads info's lineage up to seq upTo (0: the head it had when
// resolved), folding coverage on the way.
func readLineage(e *env, log eventlog.Log, info eventlog.Info, upTo uint64) (*lineage, error) {
	if upTo == 0 || upTo > info.Head {
		upTo = info.Head
	}
	l := &lineage{info: info, cov: coverage.New(), steps: stepIndex{}}
	p := newProgress(e, "reading "+info.ID.String(), "events")
	defer p.done()
	for ev, err := range log.Events(e.ctx, info.ID, 1) {
		if err != nil {
			return nil, fmt.Errorf("execution %s: %w", info.ID, err)
		}
		if ev.Seq > upTo {
			break
		}
		if err := l.cov.Apply(ev); err != nil {
			return nil, fmt.Errorf("execution %s: %w", info.ID, err)
		}
		l.steps.Add(ev)
		l.foldSpend(ev)
		l.events = append(l.events, ev)
		p.tick()
	}
	return l, nil
}

// tokensText is ", N+M tokens" for a lineage whose llm calls recorded
// usage, "" for one without.
func tokensText(t eventlog.Tokens) string {
	if t == (eventlog.Tokens{}) {
		return ""
	}
	return fmt.Sprintf(", %d+%d tokens", t.Input, t.Output)
}

// header is the line above an execution's tables.
func header(info eventlog.Info, status string) string {
	s := fmt.Sprintf("execution %s, agent %s", info.ID, info.Agent)
	if !info.Parent.IsZero() {
		s += fmt.Sprintf(", fork of %s at seq %d", info.Parent, info.ForkSeq)
	}
	return s + fmt.Sprintf(", %d events, %s", info.Head, status)
}

// showJSON is show's --json output.
type showJSON struct {
	Execution string `json:"execution"`
	// Version is the execution's code version (DESIGN §19); absent when
	// unversioned.
	Version string          `json:"version,omitempty"`
	Seq     uint64          `json:"seq"`
	Time    time.Time       `json:"time"`
	Kind    string          `json:"kind"`
	Detail  string          `json:"detail"`
	Data    eventlog.Fields `json:"data"`
	// ResponseBody is the HTTP body of a recorded LLM response, decoded.
	ResponseBody json.RawMessage `json:"response_body,omitempty"`
	// Message is, for a message.received, what became of the message.
	Message *messageJSON `json:"message,omitempty"`
	// Tokens sums the usage of the lineage's llm calls up to Seq.
	Tokens *eventlog.Tokens `json:"tokens,omitempty"`
	// Budget is the lineage's budget and its spend up to Seq; none
	// without a budget.
	Budget   *budgetJSON `json:"budget,omitempty"`
	Coverage *pointJSON  `json:"coverage"`
}

// eventJSON is one event in --json output.
type eventJSON struct {
	Seq    uint64          `json:"seq"`
	Time   time.Time       `json:"time"`
	Kind   string          `json:"kind"`
	Detail string          `json:"detail"`
	Data   eventlog.Fields `json:"data"`
}

func cmdEvents(e *env, idArg, kind string) error {
	if err := checkKindFilter(kind); err != nil {
		return err
	}
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		info, err := resolve(e, s, idArg)
		if err != nil {
			return err
		}
		l, err := readLineage(e, s, info, 0)
		if err != nil {
			return err
		}
		t, err := readTalk(e, s, info.ID)
		if err != nil {
			return err
		}
		if e.opts.json {
			out := make([]eventJSON, 0, len(l.events))
			for _, ev := range l.events {
				if !kindMatches(kind, ev.Kind()) {
					continue
				}
				out = append(out, eventJSON{Seq: ev.Seq, Time: ev.Time.UTC(), Kind: ev.Kind().String(),
					Detail: detail(ev, l.steps), Data: eventData(ev, l.steps)})
			}
			doc := map[string]any{"execution": info.ID.String(), "events": out}
			if !t.empty() {
				for k, v := range t.json() {
					doc[k] = v
				}
			}
			if l.tokens != (eventlog.Tokens{}) {
				doc["tokens"] = l.tokens
			}
			return writeJSON(e.stdout, doc)
		}
		fmt.Fprintln(e.stdout, header(info, l.status())+tokensText(l.tokens))
		tw := newTable(e.stdout)
		fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tDETAIL")
		for _, ev := range l.events {
			if kindMatches(kind, ev.Kind()) {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", ev.Seq, timeText(ev.Time), ev.Kind(), detail(ev, l.steps))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		return t.write(e.stdout)
	})
}

// status is the execution's status as the store keeps it (DESIGN §9).
func (l *lineage) status() string { return l.info.Status.String() }

// selectionJSON is one coverage.Selection in --json output.
type selectionJSON struct {
	Key        string `json:"key"`
	Ref        string `json:"ref"` // "" = initial environment
	CapturedAt uint64 `json:"captured_at"`
	Generation uint64 `json:"generation"`
	Covered    bool   `json:"covered"`
}

// pointJSON is one coverage.Point in --json output.
type pointJSON struct {
	Seq       uint64          `json:"seq"`
	Kind      string          `json:"kind,omitempty"`
	Covered   bool            `json:"covered"`
	Resources []selectionJSON `json:"resources"`
	// InFlight lists the at_most_once steps in flight at the point, which
	// a fork there sees as indeterminate; omitted when there are none.
	InFlight []inFlightJSON `json:"in_flight,omitempty"`
}

// inFlightJSON is one coverage.InFlight in --json output.
type inFlightJSON struct {
	StepID    string `json:"step_id"`
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	StartedAt uint64 `json:"started_at"`
}

func pointOut(p coverage.Point, kind string) pointJSON {
	out := pointJSON{Seq: p.Seq, Kind: kind, Covered: p.Covered, Resources: []selectionJSON{}}
	for _, s := range p.Resources {
		out.Resources = append(out.Resources, selectionJSON(s))
	}
	for _, f := range p.InFlight {
		out.InFlight = append(out.InFlight, inFlightJSON{StepID: f.StepID, Kind: string(f.Kind), Target: f.Target, StartedAt: f.StartedAt})
	}
	return out
}

// withInFlight fills p.InFlight (coverage.At reads only the index) from
// the lineage's events up to p.Seq.
func withInFlight(e *env, s eventlog.IndexedLog, id eventlog.ID, p coverage.Point) (coverage.Point, error) {
	inFlight, err := coverage.InFlightAt(s.Events(e.ctx, id, 1), p.Seq)
	if err != nil {
		return p, err
	}
	p.InFlight = inFlight
	return p, nil
}

// windowJSON is one coverage.Window in --json output.
type windowJSON struct {
	Key        string `json:"key"`
	From       uint64 `json:"from"`
	To         uint64 `json:"to"`
	Ref        string `json:"ref"`
	CapturedAt uint64 `json:"captured_at"`
	Generation uint64 `json:"generation"`
}

func cmdCoverage(e *env, pos []string) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		info, err := resolve(e, s, pos[0])
		if err != nil {
			return err
		}
		if len(pos) == 2 {
			seq, err := parseSeq(pos[1], info)
			if err != nil {
				return err
			}
			return coverageAt(e, s, info, seq)
		}
		l, err := readLineage(e, s, info, 0)
		if err != nil {
			return err
		}
		if e.opts.json {
			points := make([]pointJSON, 0, len(l.events))
			for _, ev := range l.events {
				p, err := l.cov.Point(ev.Seq)
				if err != nil {
					return err
				}
				points = append(points, pointOut(p, ev.Kind().String()))
			}
			windows := []windowJSON{}
			for _, w := range l.cov.Windows() {
				windows = append(windows, windowJSON(w))
			}
			return writeJSON(e.stdout, map[string]any{"execution": info.ID.String(), "points": points, "windows": windows})
		}
		fmt.Fprintln(e.stdout, header(info, l.status()))
		return writeTimeline(e.stdout, l)
	})
}

// writeTimeline writes the table of every event with its coverage: the
// demo's timeline and coverage's default output.
func writeTimeline(w io.Writer, l *lineage) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SEQ\tKIND\tCOVERED\tFORK RESTORES\tDETAIL")
	for _, ev := range l.events {
		p, err := l.cov.Point(ev.Seq)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", ev.Seq, ev.Kind(), coveredText(p.Covered), restoresText(p), detail(ev, l.steps))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ws := l.cov.Windows()
	if len(ws) == 0 {
		fmt.Fprintln(w, "coverage windows: none")
		return nil
	}
	fmt.Fprintln(w, "coverage windows (a fork at any seq inside one restores its checkpoint exactly):")
	tw = newTable(w)
	fmt.Fprintln(tw, "  RESOURCE\tSEQS\tCHECKPOINT\tCAPTURED AT\tGENERATION")
	for _, win := range ws {
		seqs := fmt.Sprintf("%d-%d", win.From, win.To)
		if win.From == win.To {
			seqs = fmt.Sprint(win.From)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", win.Key, seqs, shortRef(win.Ref), win.CapturedAt, win.Generation)
	}
	return tw.Flush()
}

// coverageAt prints the coverage of one event from the store's index,
// without reading the lineage.
func coverageAt(e *env, s eventlog.IndexedLog, info eventlog.Info, seq uint64) error {
	p, err := coverage.At(e.ctx, s, info.ID, seq)
	if err == nil {
		p, err = withInFlight(e, s, info.ID, p)
	}
	if err != nil {
		return err
	}
	if e.opts.json {
		return writeJSON(e.stdout, map[string]any{"execution": info.ID.String(), "point": pointOut(p, "")})
	}
	return writePoint(e.stdout, p, fmt.Sprintf("a fork of %s at seq %d", info.ID, seq))
}

// slicesSeq yields evs as a lineage read without error.
func slicesSeq(evs []eventlog.Event) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// writeInFlight says, for each at_most_once call in flight at p, that a
// fork there sees it as indeterminate.
func writeInFlight(w io.Writer, p coverage.Point) {
	for _, f := range p.InFlight {
		fmt.Fprintf(w, "in flight: at_most_once %s %q (started at seq %d) has no outcome at seq %d: a fork there sees the call as indeterminate (sdk.ErrIndeterminate) and does not run it again\n",
			f.Kind, f.Target, f.StartedAt, p.Seq)
	}
}

// writePoint explains a point: covered or not, the at_most_once calls in
// flight, and the selection table.
func writePoint(w io.Writer, p coverage.Point, what string) error {
	switch {
	case len(p.Resources) == 0:
		fmt.Fprintf(w, "%s is covered: no resource is bound at seq %d\n", what, p.Seq)
		writeInFlight(w, p)
		return nil
	case p.Covered:
		fmt.Fprintf(w, "%s is covered: every resource restores its exact state at seq %d\n", what, p.Seq)
	default:
		var un []string
		for _, s := range p.Resources {
			if !s.Covered {
				un = append(un, s.Key)
			}
		}
		verb := "restores"
		if len(un) > 1 {
			verb = "restore"
		}
		fmt.Fprintf(w, "%s is uncovered: %s %s an earlier state (recorded results after it replay without their changes)\n",
			what, strings.Join(un, ", "), verb)
	}
	writeInFlight(w, p)
	tw := newTable(w)
	fmt.Fprintln(tw, "RESOURCE\tRESTORES\tCAPTURED AT\tGENERATION\tCOVERED")
	for _, s := range p.Resources {
		ref := s.Ref
		if ref == "" {
			ref = "initial environment"
		}
		covered := "no"
		if s.Covered {
			covered = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", s.Key, ref, s.CapturedAt, s.Generation, covered)
	}
	return tw.Flush()
}

func cmdShow(e *env, idArg, seqArg string) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		info, err := resolve(e, s, idArg)
		if err != nil {
			return err
		}
		seq, err := parseSeq(seqArg, info)
		if err != nil {
			return err
		}
		l, err := readLineage(e, s, info, seq)
		if err != nil {
			return err
		}
		if uint64(len(l.events)) != seq {
			return fmt.Errorf("execution %s: read %d events, want %d", info.ID, len(l.events), seq)
		}
		ev := l.events[seq-1]
		// Coverage at seq may depend on later events (a capture committed
		// with a step's outcome covers it): ask the index, not the prefix.
		p, err := coverage.At(e.ctx, s, info.ID, seq)
		if err != nil {
			return err
		}
		p.InFlight, _ = coverage.InFlightAt(slicesSeq(l.events), seq)
		data := eventlog.PayloadFields(ev.Data)
		// A recorded LLM response holds the HTTP body base64-encoded; show it.
		var body json.RawMessage
		if ss, ok := ev.Data.(*eventlog.StepSucceeded); ok {
			if st := l.steps[ss.StepID]; st != nil && st.StepKind == eventlog.StepLLM {
				body, _ = llmBody(ss.Result)
			}
		}
		// A message shows what became of it: which recv step consumed it.
		var consumed *messageJSON
		if mr, ok := ev.Data.(*eventlog.MessageReceived); ok {
			t, err := readTalk(e, s, info.ID)
			if err != nil {
				return err
			}
			for _, m := range t.messages {
				if m.MessageID == mr.MessageID {
					consumed = &messageJSON{MessageID: m.MessageID, Topic: m.Topic, Value: jsonValue(m.Value), From: m.From,
						ReceivedAt: m.ReceivedAt, ConsumedAt: m.ConsumedAt, ConsumedBy: m.ConsumedBy}
				}
			}
		}
		if e.opts.json {
			cov := pointOut(p, "")
			out := showJSON{Execution: info.ID.String(), Version: info.Version, Seq: ev.Seq, Time: ev.Time.UTC(),
				Kind: ev.Kind().String(), Detail: detail(ev, l.steps), Data: data, ResponseBody: body, Message: consumed, Coverage: &cov}
			if l.tokens != (eventlog.Tokens{}) {
				out.Tokens = &l.tokens
			}
			if l.budget != (eventlog.Limits{}) {
				out.Budget = &budgetJSON{Limits: l.budget, Tokens: l.tokens.Input + l.tokens.Output, LLMCalls: l.llmCalls, ToolCalls: l.toolCalls}
			}
			return writeJSON(e.stdout, out)
		}
		tw := newTable(e.stdout)
		fmt.Fprintf(tw, "execution\t%s\n", info.ID)
		if info.Version != "" {
			fmt.Fprintf(tw, "version\t%s\n", info.Version)
		}
		fmt.Fprintf(tw, "seq\t%d\n", ev.Seq)
		fmt.Fprintf(tw, "time\t%s\n", timeText(ev.Time))
		fmt.Fprintf(tw, "kind\t%s\n", ev.Kind())
		fmt.Fprintf(tw, "detail\t%s\n", detail(ev, l.steps))
		if consumed != nil {
			state := "no: it waits for a Recv of its topic"
			if consumed.ConsumedAt != 0 {
				state = fmt.Sprintf("by recv step %s at seq %d", consumed.ConsumedBy, consumed.ConsumedAt)
			}
			fmt.Fprintf(tw, "consumed\t%s\n", state)
		}
		if l.tokens != (eventlog.Tokens{}) {
			fmt.Fprintf(tw, "tokens\t%d in, %d out (the lineage's llm calls to seq %d)\n", l.tokens.Input, l.tokens.Output, seq)
		}
		if b := l.budgetText(seq); b != "" {
			fmt.Fprintf(tw, "budget\t%s\n", b)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		writeFields(e.stdout, data, "  ")
		if body != nil {
			fmt.Fprintln(e.stdout, "response body (decoded):")
			fmt.Fprintln(e.stdout, indentJSON(body, "  "))
		}
		fmt.Fprintln(e.stdout)
		return writePoint(e.stdout, p, fmt.Sprintf("a fork at seq %d", seq))
	})
}

// writeFields writes a payload's fields one per line, JSON values indented.
func writeFields(w io.Writer, fs eventlog.Fields, indent string) {
	fmt.Fprintln(w, "data:")
	writeFieldsAt(w, fs, indent)
}

func writeFieldsAt(w io.Writer, fs eventlog.Fields, indent string) {
	for _, f := range fs {
		switch v := f.Value.(type) {
		case json.RawMessage:
			txt := indentJSON(v, indent+"  ")
			if strings.Contains(txt, "\n") {
				fmt.Fprintf(w, "%s%s:\n%s\n", indent, f.Name, txt)
			} else {
				fmt.Fprintf(w, "%s%s: %s\n", indent, f.Name, strings.TrimSpace(txt))
			}
		case []eventlog.Fields:
			fmt.Fprintf(w, "%s%s: %d\n", indent, f.Name, len(v))
			for i, sub := range v {
				fmt.Fprintf(w, "%s  [%d]\n", indent, i)
				writeFieldsAt(w, sub, indent+"    ")
			}
		case []string:
			fmt.Fprintf(w, "%s%s: %s\n", indent, f.Name, strings.Join(v, ", "))
		case string:
			fmt.Fprintf(w, "%s%s: %s\n", indent, f.Name, strconvQuoteIfNeeded(v))
		default:
			fmt.Fprintf(w, "%s%s: %v\n", indent, f.Name, v)
		}
	}
}

// strconvQuoteIfNeeded quotes s when it is empty or not one plain line.
func strconvQuoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, "\n\r\t\"") || strings.TrimSpace(s) != s {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// indentJSON pretty-prints raw, keys in their recorded order, with every
// line indented.
func indentJSON(raw json.RawMessage, indent string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, indent, "  "); err != nil {
		return indent + string(raw)
	}
	return indent + buf.String()
}

// cmdCancel cancels an execution (sdk.Kernel.Cancel): a request to its
// owner, carried out at once when it has none.
func cmdCancel(e *env, prefix, reason string) error {
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, prefix)
		if err != nil {
			return err
		}
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		if err := k.Cancel(e.ctx, info.ID, reason); err != nil {
			return err
		}
		after, err := s.Info(e.ctx, info.ID)
		if err != nil {
			return err
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"execution": info.ID.String(), "status": after.Status.String()})
		}
		switch {
		case info.Status.Terminal():
			fmt.Fprintf(e.stdout, "%s had already ended (%s): nothing to cancel\n", info.ID, info.Status)
		case after.Status == eventlog.StatusCancelled:
			fmt.Fprintf(e.stdout, "%s cancelled\n", info.ID)
		default:
			fmt.Fprintf(e.stdout, "%s: cancel requested; its owner carries it out\n", info.ID)
		}
		return nil
	})
}
