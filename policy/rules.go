package policy

import (
	"fmt"
	"path"
	"strings"
	"unicode"

	"github.com/forkline/forkline/eventlog"
)

// stepKinds are the call kinds a rule's Kind pattern must be able to match.
var stepKinds = []string{string(eventlog.StepTool), string(eventlog.StepLocal), string(eventlog.StepLLM), string(eventlog.StepChild)}

// ParseRules reads a rule set in the text form described in the package
// documentation. An error names the line and what was wrong with it, and
// wraps [eventlog.ErrInvalid]. Text with no rules returns nil Rules.
func ParseRules(text string) (Rules, error) {
	var rules Rules
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		r, err := parseRule(line)
		if err != nil {
			return nil, fmt.Errorf("policy: rules line %d: %s: %w", i+1, err, eventlog.ErrInvalid)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// parseRule parses one trimmed, non-empty, non-comment line. Its errors say
// what was wrong, without the line number.
func parseRule(line string) (Rule, error) {
	var r Rule
	verb, rest := nextWord(line)
	switch verb {
	case "allow":
		r.Allow = true
	case "deny":
	case "approve":
		r.Approve = true
	default:
		return Rule{}, fmt.Errorf("unknown verb %q (want allow, deny or approve)", verb)
	}
	pattern, rest := nextWord(rest)
	if pattern == "" {
		return Rule{}, fmt.Errorf("%s without KIND:TARGET", verb)
	}
	kind, target, ok := strings.Cut(pattern, ":")
	if !ok {
		return Rule{}, fmt.Errorf("%q is not KIND:TARGET", pattern)
	}
	if err := checkKind(kind); err != nil {
		return Rule{}, err
	}
	if _, err := path.Match(target, ""); err != nil {
		return Rule{}, fmt.Errorf("target pattern %q: %v", target, err)
	}
	r.Kind, r.Target = kind, target
	// Qualifiers, in any order, each at most once: a repeated one begins
	// the reason.
	for {
		word, after := nextWord(rest)
		switch {
		case word == "in-fork" && !r.InFork:
			r.InFork = true
		case word == "at-most-once" && !r.AtMostOnce:
			r.AtMostOnce = true
		default:
			r.Reason = rest
			return r, nil
		}
		rest = after
	}
}

// checkKind checks that a Kind pattern is well formed and matches at least
// one call kind.
func checkKind(kind string) error {
	if kind == "" || kind == "*" {
		return nil
	}
	if _, err := path.Match(kind, ""); err != nil {
		return fmt.Errorf("kind pattern %q: %v", kind, err)
	}
	for _, k := range stepKinds {
		if globMatch(kind, k) {
			return nil
		}
	}
	return fmt.Errorf("kind pattern %q matches none of tool, local, llm, child", kind)
}

// nextWord splits s, which has no leading space, into its first word and
// the rest with leading space removed.
func nextWord(s string) (word, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
}
