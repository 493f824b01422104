package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cliBundle = `default: deny
rules:
  - id: models
    priority: 20
    when:
      kind: llm
      agents: [researcher]
      args:
        model: {one_of: [gpt-4o-mini]}
    then:
      decision: allow
      rate_limit: {max_calls: 10, window: 1m, per: agent, max_wait: 5s}
  - id: deploys
    priority: 10
    when: {kind: tool, target: deploy, at_most_once: true}
    then:
      decision: approve
      approval: {approvers: [alice], timeout: 30m, message: "ship it?"}
  - id: fork-writes
    priority: 5
    when: {kind: tool, in_fork: true}
    then: {decision: deny, reason: forks write nothing}
`

// writeBundle writes text to a file in a fresh folder and returns its path.
func writeBundle(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyCheck: check prints the bundle in canonical form (rules by
// priority, every setting), and opens no log.
func TestPolicyCheck(t *testing.T) {
	file := writeBundle(t, cliBundle)
	dir := filepath.Join(t.TempDir(), "data")
	out, errOut, code := runCLI(t, "--dir", dir, "policy", "check", file)
	if code != exitOK || errOut != "" {
		t.Fatalf("policy check: exit %d, stderr %q", code, errOut)
	}
	want := `default: deny
on_budget: deny
rules:
  - id: fork-writes
    priority: 5
    when:
      kind: tool
      in_fork: true
    then:
      decision: deny
      reason: forks write nothing
  - id: deploys
    priority: 10
    when:
      kind: tool
      target: deploy
      at_most_once: true
    then:
      decision: approve
      approval:
        approvers: [alice]
        timeout: 30m0s
        message: ship it?
  - id: models
    priority: 20
    when:
      kind: llm
      agent: researcher
      args:
        model:
          one_of: [gpt-4o-mini]
    then:
      decision: allow
      rate_limit:
        max_calls: 10
        window: 1m0s
        per: agent
        max_wait: 5s
      on_limiter_error: open
`
	if out != want {
		t.Fatalf("policy check printed:\n%s\nwant:\n%s", out, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("policy check touched the data folder: %v", err)
	}
	// What it prints is a bundle it accepts, and prints the same.
	again, _, code := runCLI(t, "policy", "check", writeBundle(t, out))
	if code != exitOK || again != out {
		t.Fatalf("check of the canonical form: exit %d\n%s", code, again)
	}
}

func TestPolicyTest(t *testing.T) {
	file := writeBundle(t, cliBundle)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a model call within the rule, with its rate limit",
			[]string{"--call", "llm:openai", "--args", `{"model":"gpt-4o-mini"}`, "--agent", "researcher"},
			"decision    allow\nrule        models\nreason      allowed by rule models\nrate limit  10 calls per 1m0s per agent, waits up to 5s, on a limiter error open\n"},
		{"another model: the default",
			[]string{"--call", "llm:openai", "--args", `{"model":"gpt-5"}`, "--agent", "researcher"},
			"decision  deny\nrule      (none: the bundle's default)\nreason    denied by the bundle's default\n"},
		{"an at_most_once deploy: approval, who and when",
			[]string{"--call", "tool:deploy", "--at-most-once"},
			"decision   approve\nrule       deploys\nreason     approval asked by rule deploys\napprovers  alice\nexpires    after 30m0s\nmessage    ship it?\n"},
		{"in a fork, the lower priority wins",
			[]string{"--call", "tool:deploy", "--at-most-once", "--in-fork"},
			"decision  deny\nrule      fork-writes\nreason    forks write nothing\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, append([]string{"policy", "test", file}, tc.args...)...)
			if code != exitOK || errOut != "" || out != tc.want {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, tc.want)
			}
		})
	}
	out, _, code := runCLI(t, "policy", "test", file, "--call", "llm:x", "--args", `{"model":"gpt-4o-mini"}`, "--agent", "researcher", "--json")
	var got decisionJSON
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, out)
	}
	if got.Decision != "allow" || got.RuleID != "models" || got.RateLimit == nil || got.RateLimit.MaxCalls != 10 || got.RateLimit.Per != "agent" {
		t.Fatalf("--json: %+v", got)
	}
}

// TestPolicyBadInput: a refused bundle, a missing file and bad flags exit
// 2 with one line naming what was wrong.
func TestPolicyBadInput(t *testing.T) {
	good := writeBundle(t, cliBundle)
	dup := writeBundle(t, strings.Replace(cliBundle, "priority: 10", "priority: 20", 1))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"duplicate priority", []string{"policy", "check", dup}, "bundle.yaml: policy: bundle line 13: rules[1].priority: duplicate priority 20 (also on line 3)"},
		{"bad regex", []string{"policy", "check", writeBundle(t, "default: deny\nrules:\n  - id: r\n    priority: 1\n    when: {args: {a: {regex: '('}}}\n    then: {decision: allow}\n")},
			"policy: bundle line 5: rules[0].when.args.a.regex: bad regex"},
		{"test with a refused bundle", []string{"policy", "test", dup, "--call", "tool:x"}, "duplicate priority"},
		{"no such file", []string{"policy", "check", filepath.Join(t.TempDir(), "none.yaml")}, "no such file"},
		{"unknown subcommand", []string{"policy", "lint", good}, `unknown subcommand "lint"`},
		{"test without --call", []string{"policy", "test", good}, "--call KIND:TARGET is required"},
		{"a bad kind", []string{"policy", "test", good, "--call", "tools:x"}, "want KIND:TARGET"},
		{"no target", []string{"policy", "test", good, "--call", "tool:"}, "want KIND:TARGET"},
		{"args not JSON", []string{"policy", "test", good, "--call", "tool:x", "--args", "{nope"}, "--args is not JSON"},
		{"check with test flags", []string{"policy", "check", good, "--call", "tool:x"}, "belong to policy test"},
		{"no file", []string{"policy", "check"}, "want check FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tc.args...)
			if code != exitInput || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, out, errOut, tc.want)
			}
		})
	}
}
