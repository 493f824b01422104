package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
)

// mustBundle parses text, failing the test on an error.
func mustBundle(t testing.TB, text string) *policy.Bundle {
	t.Helper()
	b, err := policy.ParseBundle([]byte(text))
	if err != nil {
		t.Fatalf("ParseBundle: %v\n%s", err, text)
	}
	return b
}

// exampleBundle is a bundle of four rules, written out of priority order.
const exampleBundle = `
default: deny
on_budget: approve
rules:
  - id: tools
    priority: 30
    when: {kind: tool}
    then: {decision: allow}
  - id: model-calls
    priority: 10
    when:
      kind: llm
      agents: [researcher, "writer-*"]
      args:
        model: {one_of: [gpt-4o-mini, claude-haiku]}
    then:
      decision: allow
      rate_limit: {max_calls: 10, window: 1m, per: agent, max_wait: 5s}
  - id: no-etc-in-forks
    priority: 5
    when:
      kind: tool
      target: "rm_*"
      in_fork: true
      args:
        path: {regex: "^/etc/"}
    then: {decision: deny, reason: forks never touch /etc}
  - id: deploys
    priority: 20
    when: {kind: tool, target: deploy, at_most_once: true}
    then:
      decision: approve
      approval: {approvers: [alice, bob], timeout: 1h, message: "deploy to production?"}
`

func TestBundleDecide(t *testing.T) {
	b := mustBundle(t, exampleBundle)
	amo := string(eventlog.AtMostOnce)
	for _, tc := range []struct {
		name string
		call policy.Call
		want policy.Decision
	}{
		{"an allowed model of an agent by name",
			policy.Call{Agent: "researcher", Kind: "llm", Target: "openai", Args: []byte(`{"model":"gpt-4o-mini"}`)},
			policy.Decision{Allow: true, Reason: "allowed by rule model-calls", RuleID: "model-calls"}},
		{"an allowed model of an agent by glob",
			policy.Call{Agent: "writer-2", Kind: "llm", Args: []byte(`{"model":"claude-haiku","n":1}`)},
			policy.Decision{Allow: true, Reason: "allowed by rule model-calls", RuleID: "model-calls"}},
		{"a model not in one_of: the default",
			policy.Call{Agent: "researcher", Kind: "llm", Args: []byte(`{"model":"gpt-5"}`)},
			policy.Decision{Reason: "denied by the bundle's default"}},
		{"another agent: the default",
			policy.Call{Agent: "boss", Kind: "llm", Args: []byte(`{"model":"gpt-4o-mini"}`)},
			policy.Decision{Reason: "denied by the bundle's default"}},
		{"args not an object: predicates do not match",
			policy.Call{Agent: "researcher", Kind: "llm", Args: []byte(`["gpt-4o-mini"]`)},
			policy.Decision{Reason: "denied by the bundle's default"}},
		{"no args: predicates do not match",
			policy.Call{Agent: "researcher", Kind: "llm"},
			policy.Decision{Reason: "denied by the bundle's default"}},
		{"lowest priority first: no-etc-in-forks (5) before tools (30), though written after it",
			policy.Call{Kind: "tool", Target: "rm_rf", InFork: true, Args: []byte(`{"path":"/etc/passwd"}`)},
			policy.Decision{Reason: "forks never touch /etc", RuleID: "no-etc-in-forks"}},
		{"in_fork: true does not match outside a fork: the next rule",
			policy.Call{Kind: "tool", Target: "rm_rf", Args: []byte(`{"path":"/etc/passwd"}`)},
			policy.Decision{Allow: true, Reason: "allowed by rule tools", RuleID: "tools"}},
		{"an anchored regex: /tmp/etc/ is not under /etc",
			policy.Call{Kind: "tool", Target: "rm_rf", InFork: true, Args: []byte(`{"path":"/tmp/etc/x"}`)},
			policy.Decision{Allow: true, Reason: "allowed by rule tools", RuleID: "tools"}},
		{"at_most_once: an approval with its settings",
			policy.Call{Kind: "tool", Target: "deploy", Idempotency: amo},
			policy.Decision{Approval: true, Reason: "approval asked by rule deploys", RuleID: "deploys"}},
		{"at_most_once: true does not match safe_to_retry",
			policy.Call{Kind: "tool", Target: "deploy", Idempotency: string(eventlog.SafeToRetry)},
			policy.Decision{Allow: true, Reason: "allowed by rule tools", RuleID: "tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := b.Decide(tc.call)
			gotSettings := got.ApprovalSettings != nil || got.RateLimit != nil
			got.ApprovalSettings, got.RateLimit = nil, nil
			if got != tc.want {
				t.Fatalf("Decide = %+v\nwant %+v", got, tc.want)
			}
			if gotSettings != (tc.want.RuleID == "model-calls" || tc.want.RuleID == "deploys") {
				t.Fatalf("settings on a decision by %q: %v", tc.want.RuleID, gotSettings)
			}
		})
	}
	d := b.Decide(policy.Call{Agent: "researcher", Kind: "llm", Args: []byte(`{"model":"gpt-4o-mini"}`)})
	if want := (policy.RateLimit{MaxCalls: 10, Window: time.Minute, Per: policy.PerAgent, MaxWait: 5 * time.Second}); d.RateLimit == nil || *d.RateLimit != want {
		t.Fatalf("RateLimit = %+v, want %+v", d.RateLimit, want)
	}
	d = b.Decide(policy.Call{Kind: "tool", Target: "deploy", Idempotency: amo})
	if a := d.ApprovalSettings; a == nil || strings.Join(a.Approvers, ",") != "alice,bob" || a.Timeout != time.Hour || a.Message != "deploy to production?" {
		t.Fatalf("ApprovalSettings = %+v", a)
	}
	if b.OnBudget() != policy.VerdictApprove || b.Default() != policy.VerdictDeny {
		t.Fatalf("OnBudget %q, Default %q", b.OnBudget(), b.Default())
	}
	if got := b.Gate()(t.Context(), policy.Call{Kind: "tool", Target: "ls"}); got.RuleID != "tools" || !got.Allow {
		t.Fatalf("Gate = %+v", got)
	}
}

// TestBundleWhen decides one call per condition with a one-rule bundle
// whose default is the opposite of the rule's decision.
func TestBundleWhen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		when  string
		call  policy.Call
		match bool
	}{
		{"empty when matches all", `{}`, policy.Call{Kind: "local"}, true},
		{"kind", `{kind: tool}`, policy.Call{Kind: "tool"}, true},
		{"kind other", `{kind: tool}`, policy.Call{Kind: "llm"}, false},
		{"kind glob", `{kind: "l*"}`, policy.Call{Kind: "local"}, true},
		{"target glob", `{target: "web_*"}`, policy.Call{Target: "web_get"}, true},
		{"target glob other", `{target: "web_*"}`, policy.Call{Target: "db_get"}, false},
		{"target star matches a slash", `{target: "*"}`, policy.Call{Target: "https://x/y"}, true},
		{"targets any", `{targets: [a, "b*"]}`, policy.Call{Target: "bc"}, true},
		{"targets none", `{targets: [a, "b*"]}`, policy.Call{Target: "c"}, false},
		{"agent", `{agent: ana}`, policy.Call{Agent: "ana"}, true},
		{"agent other", `{agent: ana}`, policy.Call{Agent: "bo"}, false},
		{"agents", `{agents: [ana, "b?"]}`, policy.Call{Agent: "bo"}, true},
		{"in_fork true, in a fork", `{in_fork: true}`, policy.Call{InFork: true}, true},
		{"in_fork true, not in a fork", `{in_fork: true}`, policy.Call{}, false},
		{"in_fork false, in a fork", `{in_fork: false}`, policy.Call{InFork: true}, false},
		{"in_fork false, not in a fork", `{in_fork: false}`, policy.Call{}, true},
		{"at_most_once true", `{at_most_once: true}`, policy.Call{Idempotency: "at_most_once"}, true},
		{"at_most_once true, safe", `{at_most_once: true}`, policy.Call{Idempotency: "safe_to_retry"}, false},
		{"at_most_once false, safe", `{at_most_once: false}`, policy.Call{Idempotency: "safe_to_retry"}, true},
		{"at_most_once false", `{at_most_once: false}`, policy.Call{Idempotency: "at_most_once"}, false},
		{"equals string", `{args: {a: {equals: x}}}`, args(`{"a":"x"}`), true},
		{"equals string other", `{args: {a: {equals: x}}}`, args(`{"a":"xy"}`), false},
		{"equals string, escaped in JSON", `{args: {a: {equals: "é\"q"}}}`, args(`{"a":"\u00e9\"q"}`), true},
		{"equals string against a number", `{args: {a: {equals: "3"}}}`, args(`{"a":3}`), false},
		{"equals number", `{args: {a: {equals: 3}}}`, args(`{"a":3.0}`), true},
		{"equals number other", `{args: {a: {equals: 3}}}`, args(`{"a":3.5}`), false},
		{"equals number against a string", `{args: {a: {equals: 3}}}`, args(`{"a":"3"}`), false},
		{"equals float", `{args: {a: {equals: 0.5}}}`, args(`{"a":5e-1}`), true},
		{"equals true", `{args: {a: {equals: true}}}`, args(`{"a":true}`), true},
		{"equals false against true", `{args: {a: {equals: false}}}`, args(`{"a":true}`), false},
		{"equals null", `{args: {a: {equals: null}}}`, args(`{"a":null}`), true},
		{"equals null, missing", `{args: {a: {equals: null}}}`, args(`{"b":null}`), false},
		{"dotted path", `{args: {a.b.c: {equals: 1}}}`, args(`{"a":{"x":0,"b":{"c":1}}}`), true},
		{"dotted path into an array", `{args: {m.1.role: {equals: user}}}`, args(`{"m":[{"role":"system"},{"role":"user"}]}`), true},
		{"dotted path past an array's end", `{args: {m.2.role: {equals: user}}}`, args(`{"m":[{"role":"system"},{"role":"user"}]}`), false},
		{"dotted path through a scalar", `{args: {a.b: {equals: 1}}}`, args(`{"a":1}`), false},
		{"contains substring", `{args: {a: {contains: ell}}}`, args(`{"a":"hello"}`), true},
		{"contains substring other", `{args: {a: {contains: elk}}}`, args(`{"a":"hello"}`), false},
		{"contains element", `{args: {a: {contains: 2}}}`, args(`{"a":[1,2,3]}`), true},
		{"contains element string", `{args: {a: {contains: b}}}`, args(`{"a":["a","b"]}`), true},
		{"contains element not a substring", `{args: {a: {contains: b}}}`, args(`{"a":["abc"]}`), false},
		{"contains in a number", `{args: {a: {contains: "1"}}}`, args(`{"a":12}`), false},
		{"one_of", `{args: {a: {one_of: [x, 2, true]}}}`, args(`{"a":2}`), true},
		{"one_of other", `{args: {a: {one_of: [x, 2, true]}}}`, args(`{"a":"2"}`), false},
		{"regex unanchored finds inside", `{args: {a: {regex: "b+c"}}}`, args(`{"a":"abbcd"}`), true},
		{"regex anchored", `{args: {a: {regex: "^b+c$"}}}`, args(`{"a":"abbcd"}`), false},
		{"regex on a number", `{args: {a: {regex: "1"}}}`, args(`{"a":1}`), false},
		{"constraints all hold", `{args: {a: {contains: b, regex: "^a"}}}`, args(`{"a":"abc"}`), true},
		{"constraints one fails", `{args: {a: {contains: b, regex: "^c"}}}`, args(`{"a":"abc"}`), false},
		{"predicates all hold", `{args: {a: {equals: 1}, b: {equals: 2}}}`, args(`{"b":2,"a":1}`), true},
		{"predicates one fails", `{args: {a: {equals: 1}, b: {equals: 2}}}`, args(`{"b":3,"a":1}`), false},
		{"args malformed", `{args: {a: {equals: 1}}}`, args(`{"a":1`), false},
		{"args a string", `{args: {a: {equals: 1}}}`, args(`"a"`), false},
		{"args with spaces", `{args: {a: {equals: 1}}}`, args(" { \"b\" : [ 1 , 2 ] , \"a\" : 1 } "), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBundle(t, "default: deny\nrules:\n  - id: r\n    priority: 1\n    when: "+tc.when+"\n    then: {decision: allow}\n")
			d := b.Decide(tc.call)
			if d.Allow != tc.match || (d.RuleID == "r") != tc.match {
				t.Fatalf("Decide(%+v) = %+v; want a match: %v", tc.call, d, tc.match)
			}
		})
	}
}

// args returns a call with the given args.
func args(s string) policy.Call { return policy.Call{Args: []byte(s)} }

func TestRateLimitKey(t *testing.T) {
	id := eventlog.NewID()
	c := policy.Call{Agent: "ana"}
	for _, tc := range []struct {
		per  policy.Scope
		want string
	}{
		{policy.PerGlobal, "r/global"},
		{policy.PerAgent, "r/agent/ana"},
		{policy.PerExecution, "r/execution/" + id.String()},
	} {
		if got := (&policy.RateLimit{Per: tc.per}).Key("r", c, id); got != tc.want {
			t.Errorf("Key per %s = %q, want %q", tc.per, got, tc.want)
		}
	}
}

// TestBundleRefused: every bundle ParseBundle must refuse, with the line
// and the field its error names.
func TestBundleRefused(t *testing.T) {
	rule := func(when, then string) string {
		return "default: deny\nrules:\n  - id: r\n    priority: 1\n    when: " + when + "\n    then: " + then + "\n"
	}
	for _, tc := range []struct {
		name, text string
		line       int
		field, msg string
	}{
		{"empty", "", 0, "", "empty bundle"},
		{"only a comment", "# nothing\n", 0, "", "empty bundle"},
		{"not YAML", "default: [deny\n", 1, "", "not valid YAML"},
		{"two documents", "default: deny\n---\ndefault: allow\n", 2, "", "second YAML document"},
		{"not a mapping", "- a\n", 1, "", "want a mapping"},
		{"unknown top field", "default: deny\nrulez: []\n", 2, "rulez", "unknown field"},
		{"field twice", "default: deny\ndefault: allow\n", 2, "default", "given twice (first on line 1)"},
		{"missing default", "rules: []\n", 1, "default", "missing"},
		{"bad default", "default: approve\n", 1, "default", `"approve" is not one of allow, deny`},
		{"bad on_budget", "default: deny\non_budget: allow\n", 2, "on_budget", "not one of approve, deny"},
		{"rules not a list", "default: deny\nrules: {}\n", 2, "rules", "want a list"},
		{"unknown rule field", "default: deny\nrules:\n  - id: r\n    priority: 1\n    prio: 2\n    then: {decision: allow}\n", 5, "rules[0].prio", "unknown field"},
		{"missing id", "default: deny\nrules:\n  - priority: 1\n    then: {decision: allow}\n", 3, "rules[0].id", "missing"},
		{"empty id", "default: deny\nrules:\n  - id: ''\n    priority: 1\n    then: {decision: allow}\n", 3, "rules[0].id", "empty"},
		{"id a number", "default: deny\nrules:\n  - id: 7\n    priority: 1\n    then: {decision: allow}\n", 3, "rules[0].id", "want a string"},
		{"missing priority", "default: deny\nrules:\n  - id: r\n    then: {decision: allow}\n", 3, "rules[0].priority", "missing"},
		{"priority not an integer", "default: deny\nrules:\n  - id: r\n    priority: high\n    then: {decision: allow}\n", 4, "rules[0].priority", "want an integer"},
		{"duplicate id", "default: deny\nrules:\n  - id: r\n    priority: 1\n    then: {decision: allow}\n  - id: r\n    priority: 2\n    then: {decision: deny}\n", 6, "rules[1].id", `duplicate id "r" (also on line 3)`},
		{"duplicate priority", "default: deny\nrules:\n  - id: r\n    priority: 1\n    then: {decision: allow}\n  - id: s\n    priority: 1\n    then: {decision: deny}\n", 6, "rules[1].priority", "duplicate priority 1 (also on line 3)"},
		{"missing then", "default: deny\nrules:\n  - id: r\n    priority: 1\n", 3, "rules[0].then", "missing"},
		{"missing decision", rule("{}", "{reason: x}"), 6, "rules[0].then.decision", "missing"},
		{"bad decision", rule("{}", "{decision: maybe}"), 6, "rules[0].then.decision", `"maybe" is not one of allow, deny, approve`},
		{"unknown then field", rule("{}", "{decision: allow, why: x}"), 6, "rules[0].then.why", "unknown field"},
		{"unknown when field", rule("{tool: x}", "{decision: allow}"), 5, "rules[0].when.tool", "unknown field"},
		{"kind matching no call", rule("{kind: tools}", "{decision: allow}"), 5, "rules[0].when.kind", "matches none of"},
		{"bad target pattern", rule(`{target: "a["}`, "{decision: allow}"), 5, "rules[0].when.target", "syntax error in pattern"},
		{"bad targets pattern", rule(`{targets: [a, "b["]}`, "{decision: allow}"), 5, "rules[0].when.targets[1]", "syntax error in pattern"},
		{"target and targets", rule(`{target: a, targets: [b]}`, "{decision: allow}"), 5, "rules[0].when.targets", "given with target"},
		{"agent and agents", rule(`{agent: a, agents: [b]}`, "{decision: allow}"), 5, "rules[0].when.agents", "given with agent"},
		{"empty targets", rule(`{targets: []}`, "{decision: allow}"), 5, "rules[0].when.targets", "non-empty list"},
		{"in_fork not a bool", rule(`{in_fork: sometimes}`, "{decision: allow}"), 5, "rules[0].when.in_fork", "want true or false"},
		{"args not a mapping", rule(`{args: [a]}`, "{decision: allow}"), 5, "rules[0].when.args", "want a mapping of dotted paths"},
		{"empty predicate", rule(`{args: {model: {}}}`, "{decision: allow}"), 5, "rules[0].when.args.model", "no constraint"},
		{"null predicate", "default: deny\nrules:\n  - id: r\n    priority: 1\n    when:\n      args:\n        model:\n    then: {decision: allow}\n", 7, "rules[0].when.args.model", "want a mapping"},
		{"unknown constraint", rule(`{args: {model: {matches: x}}}`, "{decision: allow}"), 5, "rules[0].when.args.model.matches", "unknown field"},
		{"bad regex", rule(`{args: {model: {regex: "a(b"}}}`, "{decision: allow}"), 5, "rules[0].when.args.model.regex", "bad regex"},
		{"a Perl regex RE2 refuses", rule(`{args: {model: {regex: "(?=a)"}}}`, "{decision: allow}"), 5, "rules[0].when.args.model.regex", "bad regex"},
		{"equals a list", rule(`{args: {model: {equals: [a]}}}`, "{decision: allow}"), 5, "rules[0].when.args.model.equals", "want a string, number"},
		{"empty one_of", rule(`{args: {model: {one_of: []}}}`, "{decision: allow}"), 5, "rules[0].when.args.model.one_of", "non-empty list"},
		{"empty path segment", rule(`{args: {a..b: {equals: 1}}}`, "{decision: allow}"), 5, "rules[0].when.args.a..b", "empty segment"},
		{"approval on allow", rule("{}", "{decision: allow, approval: {message: x}}"), 6, "rules[0].then.approval", "only a rule whose decision is approve"},
		{"negative timeout", rule("{}", "{decision: approve, approval: {timeout: -1m}}"), 6, "rules[0].then.approval.timeout", "negative duration"},
		{"unknown approval field", rule("{}", "{decision: approve, approval: {who: [a]}}"), 6, "rules[0].then.approval.who", "unknown field"},
		{"rate_limit on deny", rule("{}", "{decision: deny, rate_limit: {max_calls: 1, window: 1m}}"), 6, "rules[0].then.rate_limit", "denies"},
		{"missing max_calls", rule("{}", "{decision: allow, rate_limit: {window: 1m}}"), 6, "rules[0].then.rate_limit.max_calls", "missing"},
		{"negative max_calls", rule("{}", "{decision: allow, rate_limit: {max_calls: -1, window: 1m}}"), 6, "rules[0].then.rate_limit.max_calls", "-1: want 1 to"},
		{"zero max_calls", rule("{}", "{decision: allow, rate_limit: {max_calls: 0, window: 1m}}"), 6, "rules[0].then.rate_limit.max_calls", "0: want 1 to"},
		{"missing window", rule("{}", "{decision: allow, rate_limit: {max_calls: 1}}"), 6, "rules[0].then.rate_limit.window", "missing"},
		{"negative window", rule("{}", "{decision: allow, rate_limit: {max_calls: 1, window: -1m}}"), 6, "rules[0].then.rate_limit.window", "negative duration"},
		{"zero window", rule("{}", "{decision: allow, rate_limit: {max_calls: 1, window: 0s}}"), 6, "rules[0].then.rate_limit.window", "zero duration"},
		{"window not a duration", rule("{}", "{decision: allow, rate_limit: {max_calls: 1, window: 60}}"), 6, "rules[0].then.rate_limit.window", "want a duration"},
		{"negative max_wait", rule("{}", "{decision: allow, rate_limit: {max_calls: 1, window: 1m, max_wait: -1s}}"), 6, "rules[0].then.rate_limit.max_wait", "negative duration"},
		{"bad per", rule("{}", "{decision: allow, rate_limit: {max_calls: 1, window: 1m, per: host}}"), 6, "rules[0].then.rate_limit.per", "not one of execution, agent, global"},
		{"on_limiter_error without rate_limit", rule("{}", "{decision: allow, on_limiter_error: open}"), 6, "rules[0].then.on_limiter_error", "without a rate_limit"},
		{"bad on_limiter_error", rule("{}", "{decision: allow, rate_limit: {max_calls: 1, window: 1m}, on_limiter_error: ajar}"), 6, "rules[0].then.on_limiter_error", "not one of open, closed"},
		{"an alias", "default: &d deny\non_budget: *d\n", 2, "on_budget", "alias"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := policy.ParseBundle([]byte(tc.text))
			var be *policy.BundleError
			if !errors.As(err, &be) || !errors.Is(err, eventlog.ErrInvalid) {
				t.Fatalf("ParseBundle = %v, %v; want a *BundleError wrapping ErrInvalid", b, err)
			}
			if be.Line != tc.line || be.Field != tc.field || !strings.Contains(be.Msg, tc.msg) {
				t.Fatalf("error %q: line %d, field %q, message %q; want line %d, field %q, a message with %q",
					err, be.Line, be.Field, be.Msg, tc.line, tc.field, tc.msg)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "policy: bundle") {
				t.Fatalf("error %q: want one line starting policy: bundle", msg)
			}
		})
	}
}

// TestBundleCanonical: String prints every field in a fixed order, and
// reads back to the same text.
func TestBundleCanonical(t *testing.T) {
	b := mustBundle(t, exampleBundle)
	want := `default: deny
on_budget: approve
rules:
  - id: no-etc-in-forks
    priority: 5
    when:
      kind: tool
      target: rm_*
      in_fork: true
      args:
        path:
          regex: ^/etc/
    then:
      decision: deny
      reason: forks never touch /etc
  - id: model-calls
    priority: 10
    when:
      kind: llm
      agents: [researcher, writer-*]
      args:
        model:
          one_of: [gpt-4o-mini, claude-haiku]
    then:
      decision: allow
      rate_limit:
        max_calls: 10
        window: 1m0s
        per: agent
        max_wait: 5s
      on_limiter_error: open
  - id: deploys
    priority: 20
    when:
      kind: tool
      target: deploy
      at_most_once: true
    then:
      decision: approve
      approval:
        approvers: [alice, bob]
        timeout: 1h0m0s
        message: deploy to production?
  - id: tools
    priority: 30
    when:
      kind: tool
    then:
      decision: allow
`
	if got := b.String(); got != want {
		t.Fatalf("String:\n%s\nwant:\n%s", got, want)
	}
	again := mustBundle(t, b.String())
	if again.String() != want {
		t.Fatalf("String of the parsed String:\n%s", again.String())
	}
	// Scalars keep their types through the text: "true" the string is not
	// true the bool, "3" the string is not 3.
	b = mustBundle(t, `default: allow
rules:
  - id: s
    priority: -3
    when: {args: {a: {one_of: ["true", true, "3", 3, 0.5, null, "null", ""]}}}
    then: {decision: allow, rate_limit: {max_calls: 2, window: 90s}}
`)
	if got := b.String(); !strings.Contains(got, `one_of: ["true", true, "3", 3, 0.5, null, "null", ""]`) || !strings.Contains(got, "priority: -3") {
		t.Fatalf("String:\n%s", got)
	}
}

// TestBundleNoRules: a bundle of a default alone decides every call so.
func TestBundleNoRules(t *testing.T) {
	for _, text := range []string{"default: allow\n", "default: allow\nrules:\n", "default: allow\nrules: []\n"} {
		b := mustBundle(t, text)
		if d := b.Decide(policy.Call{Kind: "tool"}); !d.Allow || d.RuleID != "" || d.Reason != "allowed by the bundle's default" {
			t.Fatalf("%q: Decide = %+v", text, d)
		}
		if b.OnBudget() != policy.VerdictDeny {
			t.Fatalf("%q: OnBudget = %q, want deny by default", text, b.OnBudget())
		}
	}
}

// fiftyRules is a bundle of 50 rules on tools, each with a target and an
// args predicate, and an llm rule last.
func fiftyRules() string {
	var sb strings.Builder
	sb.WriteString("default: deny\nrules:\n")
	for i := range 49 {
		fmt.Fprintf(&sb, "  - id: tool-%d\n    priority: %d\n    when:\n      kind: tool\n      targets: [\"tool_%d_*\", \"t%d\"]\n      agents: [a, b]\n      args: {path: {regex: \"^/srv/%d/\"}, mode: {one_of: [r, w]}}\n    then: {decision: allow, rate_limit: {max_calls: 10, window: 1m}}\n", i, i, i, i, i)
	}
	sb.WriteString("  - id: models\n    priority: 100\n    when:\n      kind: llm\n      args: {model: {equals: gpt-4o-mini}}\n    then: {decision: allow}\n")
	return sb.String()
}

// TestDecideAllocs: a rule that does not match allocates nothing — not on
// its kind, not on its target, and not on its args predicates.
func TestDecideAllocs(t *testing.T) {
	b := mustBundle(t, fiftyRules())
	for _, c := range []policy.Call{
		{Agent: "a", Kind: "llm", Target: "openai", Args: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)},
		{Agent: "a", Kind: "tool", Target: "tool_48_x", Args: []byte(`{"path":"/srv/47/x","mode":"r"}`)},
		{Agent: "a", Kind: "tool", Target: "t48", Args: []byte(`{"mode":"x","path":"/srv/48/\u00e9"}`)},
	} {
		if n := testing.AllocsPerRun(100, func() { _ = b.Decide(c) }); n != 0 {
			t.Errorf("Decide(%s %s %s) allocates %v times", c.Kind, c.Target, c.Args, n)
		}
	}
}

// BenchmarkDecide50 decides a call with a bundle of 50 rules: a call no
// tool rule matches, decided by the last rule (miss), and a call whose
// target matches the last tool rule but whose args do not, decided by the
// default (args).
func BenchmarkDecide50(b *testing.B) {
	bundle := mustBundle(b, fiftyRules())
	for _, bc := range []struct {
		name string
		call policy.Call
	}{
		{"miss", policy.Call{Agent: "a", Kind: "llm", Target: "openai", Args: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)}},
		{"args", policy.Call{Agent: "a", Kind: "tool", Target: "tool_48_x", Args: []byte(`{"path":"/srv/47/x","mode":"r"}`)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = bundle.Decide(bc.call)
			}
		})
	}
}
