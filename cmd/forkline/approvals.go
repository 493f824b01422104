package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/user"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// approvalRow is one awaited approval as approvals --json prints it.
type approvalRow struct {
	Execution   string          `json:"execution"`
	Agent       string          `json:"agent"`
	Step        string          `json:"step"`
	Kind        string          `json:"kind"`
	Target      string          `json:"target"`
	Args        json.RawMessage `json:"args"` // the call's args as JSON (a JSON string when they are not JSON)
	Reason      string          `json:"reason"`
	RuleID      string          `json:"rule_id,omitempty"`   // the policy rule that asked
	Message     string          `json:"message,omitempty"`   // the rule's message for the approvers
	Approvers   []string        `json:"approvers,omitempty"` // who may decide; none: anyone
	ExpiresAt   string          `json:"expires_at,omitempty"`
	Seq         uint64          `json:"seq"`
	RequestedAt string          `json:"requested_at"`
}

// cmdApprovals lists the calls that await a decision (DESIGN §12).
func cmdApprovals(e *env, agent string) error {
	return withReadLog(e, func(s eventlog.IndexedLog) error {
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		list, err := k.Approvals(e.ctx, sdk.Filter{Agent: agent})
		if err != nil {
			return err
		}
		rows := make([]approvalRow, 0, len(list))
		for _, a := range list {
			rows = append(rows, approvalRow{
				Execution: a.Execution.String(), Agent: a.Agent, Step: a.StepID, Kind: string(a.StepKind),
				Target: a.Target, Args: argsJSON(a.Args), Reason: a.Reason, RuleID: a.RuleID, Message: a.Message,
				Approvers: a.Approvers, Seq: a.RequestedAt, RequestedAt: timeText(a.Time),
			})
			if !a.ExpiresAt.IsZero() {
				rows[len(rows)-1].ExpiresAt = timeText(a.ExpiresAt)
			}
		}
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"approvals": rows})
		}
		if len(rows) == 0 {
			fmt.Fprintf(e.stdout, "no call in %s awaits an approval\n", e.opts.where())
			return nil
		}
		tw := newTable(e.stdout)
		fmt.Fprintln(tw, "EXECUTION\tSTEP\tTARGET\tREASON\tREQUESTED AT")
		for _, r := range rows {
			target := r.Kind + " " + r.Target
			if len(r.Args) > 0 {
				// In full, as JSON (compact: it holds no raw newline), not
				// quoted: a person decides on what the call does.
				target += " " + string(r.Args)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s (seq %d)\n", r.Execution, r.Step, target, clip(oneLine(r.Reason), 60)+whoAndWhen(r), r.RequestedAt, r.Seq)
		}
		return tw.Flush()
	})
}

// whoAndWhen is what an approval row adds to its reason when its rule
// names them (DESIGN §17): who may decide and when it expires; "" when it
// names neither.
func whoAndWhen(r approvalRow) string {
	var t string
	if len(r.Approvers) > 0 {
		t += "; approvers: " + strings.Join(r.Approvers, ", ")
	}
	if r.ExpiresAt != "" {
		t += "; expires " + r.ExpiresAt
	}
	return t
}

// argsJSON is a call's recorded args as they print: the JSON itself, or
// for bytes that are not JSON, a JSON string of them.
func argsJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

// cmdDecide grants (approve) or refuses (reject) the approval that a step
// of an execution awaits, as decided by by (default: the OS user, as
// osUser finds them) with note. The step may be given by a unique prefix
// of its ID among the execution's awaited approvals.
func cmdDecide(e *env, approve bool, prefix, step, by, note string) error {
	verb := "reject"
	if approve {
		verb = "approve"
	}
	if by == "" {
		by = osUser()
	}
	opts := []sdk.DecisionOption{sdk.By(by), sdk.Note(note)}
	return withLog(e, func(s logStore) error {
		info, err := resolve(e, s, prefix)
		if err != nil {
			return err
		}
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		stepID, err := resolveStep(e, k, info.ID, verb, step)
		if err != nil {
			return err
		}
		if approve {
			err = k.Approve(e.ctx, info.ID, stepID, opts...)
		} else {
			err = k.Reject(e.ctx, info.ID, stepID, opts...)
		}
		if errors.Is(err, sdk.ErrNoPendingApproval) || errors.Is(err, sdk.ErrInvalid) || errors.Is(err, sdk.ErrForbidden) {
			return &inputError{err}
		}
		if err != nil {
			return err
		}
		after, err := s.Info(e.ctx, info.ID)
		if err != nil {
			return err
		}
		decided := "approved"
		if !approve {
			decided = "rejected"
		}
		recorded := after.Head > info.Head
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"execution": info.ID.String(), "step": stepID,
				"decision": decided, "by": by, "note": note, "recorded": recorded, "status": after.Status.String()})
		}
		if recorded {
			fmt.Fprintf(e.stdout, "%s: step %s %s by %s (recorded at seq %d)\n", info.ID, stepID, decided, by, after.Head)
		} else {
			fmt.Fprintf(e.stdout, "%s: step %s %s by %s; its owner records it\n", info.ID, stepID, decided, by)
		}
		return nil
	})
}

// osUser is the name of the OS user running forkline: the decider of
// approve and reject without --by; "unknown user" when the system cannot
// say.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown user"
}

// resolveStep returns the StepID of execution id's awaited approval whose
// ID starts with step; a step matching none is passed on as given, for
// Approve or Reject to say why it awaits nothing.
func resolveStep(e *env, k *sdk.Kernel, id eventlog.ID, verb, step string) (string, error) {
	want := strings.ToLower(step)
	if want == "" {
		return "", inputErrorf("%s: empty step id", verb)
	}
	list, err := k.AwaitedApprovals(e.ctx, id)
	if err != nil {
		return "", err
	}
	var found []string
	for _, a := range list {
		if strings.HasPrefix(a.StepID, want) {
			found = append(found, a.StepID)
		}
	}
	switch len(found) {
	case 0:
		return step, nil
	case 1:
		return found[0], nil
	}
	return "", inputErrorf("%s: ambiguous step prefix %q: %d awaited approvals of %s match; give more digits", verb, step, len(found), id)
}

// bulkDecision is the flags of approve --all and reject --all.
type bulkDecision struct {
	all    bool
	agent  string
	prefix string
}

// flags defines b's flags on fs.
func (b *bulkDecision) flags(fs *flag.FlagSet) {
	fs.BoolVar(&b.all, "all", false, "decide every awaited approval of the executions of --agent (no <id> <step>)")
	fs.StringVar(&b.agent, "agent", "", "with --all: the agent whose executions' approvals are decided (required)")
	fs.StringVar(&b.prefix, "step-prefix", "", "with --all: only calls whose target (the step's name, as approvals lists it) starts with this")
}

// bulkRow is one decision of approve --all or reject --all.
type bulkRow struct {
	Execution string `json:"execution"`
	Step      string `json:"step"`
	Target    string `json:"target"`
	Decision  string `json:"decision"`
	Error     string `json:"error,omitempty"` // why this one was not decided
}

// cmdDecideAll grants (approve) or refuses (reject) every approval awaited
// by an execution of b.agent whose call's target starts with b.prefix, as
// approvals lists them, one decision each as cmdDecide makes it. --agent
// is required, so that one command never decides for every agent. An
// approval decided meanwhile by someone else is reported and skipped; the
// command fails when any decision failed otherwise.
func cmdDecideAll(e *env, approve bool, pos []string, b bulkDecision, by, note string) error {
	verb, decided := "reject", "rejected"
	if approve {
		verb, decided = "approve", "approved"
	}
	switch {
	case len(pos) > 0:
		return inputErrorf("%s --all takes no <id> <step>: it decides every awaited approval of --agent", verb)
	case !b.all:
		return inputErrorf("%s: --agent and --step-prefix go with --all", verb)
	case b.agent == "":
		return inputErrorf("%s --all: --agent A is required (the agent whose approvals are decided)", verb)
	}
	if by == "" {
		by = osUser()
	}
	opts := []sdk.DecisionOption{sdk.By(by), sdk.Note(note)}
	return withLog(e, func(s logStore) error {
		k, err := sdk.New(s)
		if err != nil {
			return err
		}
		list, err := k.Approvals(e.ctx, sdk.Filter{Agent: b.agent})
		if err != nil {
			return err
		}
		rows := []bulkRow{}
		failed := 0
		for _, a := range list {
			if !strings.HasPrefix(a.Target, b.prefix) {
				continue
			}
			if approve {
				err = k.Approve(e.ctx, a.Execution, a.StepID, opts...)
			} else {
				err = k.Reject(e.ctx, a.Execution, a.StepID, opts...)
			}
			row := bulkRow{Execution: a.Execution.String(), Step: a.StepID, Target: a.Target, Decision: decided}
			switch {
			case errors.Is(err, sdk.ErrNoPendingApproval):
				row.Decision, row.Error = "skipped", err.Error()
			case err != nil:
				row.Decision, row.Error = "failed", err.Error()
				failed++
			}
			rows = append(rows, row)
		}
		if e.opts.json {
			if err := writeJSON(e.stdout, map[string]any{"decisions": rows, "by": by, "note": note}); err != nil {
				return err
			}
		} else if len(rows) == 0 {
			fmt.Fprintf(e.stdout, "no call of agent %q awaits an approval in %s\n", b.agent, e.opts.where())
		} else {
			for _, r := range rows {
				if r.Error != "" {
					fmt.Fprintf(e.stdout, "%s: step %s (%s) %s: %s\n", r.Execution, r.Step, r.Target, r.Decision, oneLine(r.Error))
					continue
				}
				fmt.Fprintf(e.stdout, "%s: step %s (%s) %s by %s\n", r.Execution, r.Step, r.Target, decided, by)
			}
		}
		if failed > 0 {
			return fmt.Errorf("%s --all: %d of %d decisions failed", verb, failed, len(rows))
		}
		return nil
	})
}
