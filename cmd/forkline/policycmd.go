package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
)

// policyTest is the call `forkline policy test` decides.
type policyTest struct {
	call, args, agent  string
	inFork, atMostOnce bool
}

// cmdPolicy runs `forkline policy check FILE` and `forkline policy test
// FILE --call KIND:TARGET …`. Neither opens a log.
func cmdPolicy(e *env, verb, file string, pt policyTest) error {
	switch verb {
	case "check", "test":
	default:
		return inputErrorf("policy: unknown subcommand %q (want check or test; forkline help policy)", verb)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return inputErrorf("policy %s: %w", verb, err)
	}
	if verb == "check" && (pt.call != "" || pt.args != "" || pt.agent != "" || pt.inFork || pt.atMostOnce) {
		return inputErrorf("policy check: --call, --args, --agent, --in-fork and --at-most-once belong to policy test")
	}
	b, err := policy.ParseBundle(data)
	if err != nil {
		return inputErrorf("%s: %w", file, err)
	}
	if verb == "check" {
		if e.opts.json {
			return writeJSON(e.stdout, map[string]any{"file": file, "valid": true, "bundle": b.String()})
		}
		_, err := fmt.Fprint(e.stdout, b.String())
		return err
	}
	c, err := pt.toCall()
	if err != nil {
		return err
	}
	d := b.Decide(c)
	out := decisionOut(d)
	if e.opts.json {
		return writeJSON(e.stdout, out)
	}
	w := newTable(e.stdout)
	fmt.Fprintf(w, "decision\t%s\n", out.Decision)
	rule := out.RuleID
	if rule == "" {
		rule = "(none: the bundle's default)"
	}
	fmt.Fprintf(w, "rule\t%s\n", rule)
	fmt.Fprintf(w, "reason\t%s\n", out.Reason)
	if l := out.RateLimit; l != nil {
		fmt.Fprintf(w, "rate limit\t%d calls per %s per %s, waits up to %s, on a limiter error %s\n",
			l.MaxCalls, l.Window, l.Per, l.MaxWait, l.OnLimiterError)
	}
	if a := out.Approval; a != nil {
		who := "anyone"
		if len(a.Approvers) > 0 {
			who = strings.Join(a.Approvers, ", ")
		}
		expires := "never"
		if a.Timeout != "" {
			expires = "after " + a.Timeout
		}
		fmt.Fprintf(w, "approvers\t%s\n", who)
		fmt.Fprintf(w, "expires\t%s\n", expires)
		if a.Message != "" {
			fmt.Fprintf(w, "message\t%s\n", a.Message)
		}
	}
	return w.Flush()
}

// toCall checks the flags of policy test and makes its call.
func (pt policyTest) toCall() (policy.Call, error) {
	if pt.call == "" {
		return policy.Call{}, inputErrorf("policy test: --call KIND:TARGET is required")
	}
	kind, target, ok := strings.Cut(pt.call, ":")
	switch kind {
	case string(eventlog.StepTool), string(eventlog.StepLocal), string(eventlog.StepLLM), string(eventlog.StepChild):
	default:
		ok = false
	}
	if !ok || target == "" {
		return policy.Call{}, inputErrorf("policy test: --call %q: want KIND:TARGET, KIND one of tool, local, llm, child", pt.call)
	}
	c := policy.Call{Kind: kind, Target: target, Agent: pt.agent, InFork: pt.inFork, Idempotency: string(eventlog.SafeToRetry)}
	if pt.atMostOnce {
		c.Idempotency = string(eventlog.AtMostOnce)
	}
	if pt.args != "" {
		if !json.Valid([]byte(pt.args)) {
			return policy.Call{}, inputErrorf("policy test: --args is not JSON: %.100s", pt.args)
		}
		c.Args = []byte(pt.args)
	}
	return c, nil
}

// decisionJSON is a decision as policy test prints it.
type decisionJSON struct {
	Decision  string        `json:"decision"`
	RuleID    string        `json:"rule_id,omitempty"`
	Reason    string        `json:"reason"`
	RateLimit *rateLimitOut `json:"rate_limit,omitempty"`
	Approval  *approvalOut  `json:"approval,omitempty"`
}

type rateLimitOut struct {
	MaxCalls       int    `json:"max_calls"`
	Window         string `json:"window"`
	Per            string `json:"per"`
	MaxWait        string `json:"max_wait"`
	OnLimiterError string `json:"on_limiter_error"`
}

type approvalOut struct {
	Approvers []string `json:"approvers,omitempty"`
	Timeout   string   `json:"timeout,omitempty"`
	Message   string   `json:"message,omitempty"`
}

func decisionOut(d policy.Decision) decisionJSON {
	out := decisionJSON{Decision: "deny", RuleID: d.RuleID, Reason: d.Reason}
	switch {
	case d.Approval:
		out.Decision = "approve"
	case d.Allow:
		out.Decision = "allow"
	}
	if l := d.RateLimit; l != nil {
		onErr := "open"
		if l.FailClosed {
			onErr = "closed"
		}
		out.RateLimit = &rateLimitOut{MaxCalls: l.MaxCalls, Window: l.Window.String(), Per: string(l.Per),
			MaxWait: l.MaxWait.String(), OnLimiterError: onErr}
	}
	if a := d.ApprovalSettings; a != nil {
		out.Approval = &approvalOut{Approvers: a.Approvers, Message: a.Message}
		if a.Timeout > 0 {
			out.Approval.Timeout = a.Timeout.String()
		}
	}
	return out
}
