package policy_test

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/forkline/forkline/policy"
	"pgregory.net/rapid"
)

// The naive model of a bundle: rules as written, tried in a sorted copy,
// args decoded with encoding/json and walked as maps and slices.

type modelRule struct {
	id         string
	priority   int
	kind       string
	targets    []string
	agents     []string
	inFork     *bool
	atMostOnce *bool
	preds      []modelPred
	verdict    string
}

type modelPred struct {
	path     string
	equals   any // string, float64, bool or nil; absent when !hasEq
	hasEq    bool
	contains any
	hasCont  bool
	oneOf    []any
	regex    string
}

type modelBundle struct {
	def   string
	rules []modelRule
}

// yamlValue writes a model scalar in YAML (JSON's forms are YAML's).
func yamlValue(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func yamlList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// text writes the bundle's YAML.
func (m modelBundle) text() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "default: %s\nrules:\n", m.def)
	for _, r := range m.rules {
		fmt.Fprintf(&sb, "  - id: %s\n    priority: %d\n    when:\n", r.id, r.priority)
		if r.kind != "" {
			fmt.Fprintf(&sb, "      kind: %q\n", r.kind)
		}
		if len(r.targets) > 0 {
			fmt.Fprintf(&sb, "      targets: %s\n", yamlList(r.targets))
		}
		if len(r.agents) > 0 {
			fmt.Fprintf(&sb, "      agents: %s\n", yamlList(r.agents))
		}
		if r.inFork != nil {
			fmt.Fprintf(&sb, "      in_fork: %v\n", *r.inFork)
		}
		if r.atMostOnce != nil {
			fmt.Fprintf(&sb, "      at_most_once: %v\n", *r.atMostOnce)
		}
		if len(r.preds) > 0 {
			sb.WriteString("      args:\n")
			for _, p := range r.preds {
				var cs []string
				if p.hasEq {
					cs = append(cs, "equals: "+yamlValue(p.equals))
				}
				if p.hasCont {
					cs = append(cs, "contains: "+yamlValue(p.contains))
				}
				if p.oneOf != nil {
					vs := make([]string, len(p.oneOf))
					for i, v := range p.oneOf {
						vs[i] = yamlValue(v)
					}
					cs = append(cs, "one_of: ["+strings.Join(vs, ", ")+"]")
				}
				if p.regex != "" {
					cs = append(cs, "regex: "+strconv.Quote(p.regex))
				}
				fmt.Fprintf(&sb, "        %q: {%s}\n", p.path, strings.Join(cs, ", "))
			}
		}
		fmt.Fprintf(&sb, "    then: {decision: %s}\n", r.verdict)
	}
	return sb.String()
}

func naiveGlob(pattern, name string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return ok && err == nil
}

func naiveAny(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if naiveGlob(p, name) {
			return true
		}
	}
	return false
}

// naiveLookup decodes args and walks path.
func naiveLookup(args []byte, p string) (any, bool) {
	var doc any
	if err := json.Unmarshal(args, &doc); err != nil {
		return nil, false
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, false
	}
	v := doc
	for _, seg := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) || seg[0] == '+' {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// naiveEqual compares a decoded value with a scalar: only scalars of the
// same type and value are equal.
func naiveEqual(v, want any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return v == want
}

func (p modelPred) holds(args []byte) bool {
	v, ok := naiveLookup(args, p.path)
	if !ok {
		return false
	}
	if p.hasEq && !naiveEqual(v, p.equals) {
		return false
	}
	if p.hasCont {
		switch x := v.(type) {
		case string:
			s, isStr := p.contains.(string)
			if !isStr || !strings.Contains(x, s) {
				return false
			}
		case []any:
			if !slices.ContainsFunc(x, func(e any) bool { return naiveEqual(e, p.contains) }) {
				return false
			}
		default:
			return false
		}
	}
	if p.oneOf != nil && !slices.ContainsFunc(p.oneOf, func(w any) bool { return naiveEqual(v, w) }) {
		return false
	}
	if p.regex != "" {
		s, isStr := v.(string)
		if !isStr || !regexp.MustCompile(p.regex).MatchString(s) {
			return false
		}
	}
	return true
}

func (r modelRule) matches(c policy.Call) bool {
	if r.inFork != nil && *r.inFork != c.InFork {
		return false
	}
	if r.atMostOnce != nil && *r.atMostOnce != (c.Idempotency == "at_most_once") {
		return false
	}
	if !naiveGlob(r.kind, c.Kind) || !naiveAny(r.targets, c.Target) || !naiveAny(r.agents, c.Agent) {
		return false
	}
	for _, p := range r.preds {
		if !p.holds(c.Args) {
			return false
		}
	}
	return true
}

// decide returns the deciding rule's id and verdict, or "" and the default.
func (m modelBundle) decide(c policy.Call) (string, string) {
	rules := slices.Clone(m.rules)
	slices.SortFunc(rules, func(a, b modelRule) int { return a.priority - b.priority })
	for _, r := range rules {
		if r.matches(c) {
			return r.id, r.verdict
		}
	}
	return "", m.def
}

// scalars are the values predicates compare with and args hold.
var scalars = []any{"a", "ab", "b", "é\"", "", 1.0, 2.0, 0.5, true, false, nil}

func genScalar(t *rapid.T, label string) any {
	return scalars[rapid.IntRange(0, len(scalars)-1).Draw(t, label)]
}

func genTri(t *rapid.T, label string) *bool {
	switch rapid.IntRange(0, 2).Draw(t, label) {
	case 1:
		v := true
		return &v
	case 2:
		v := false
		return &v
	}
	return nil
}

func genPred(t *rapid.T) modelPred {
	p := modelPred{path: rapid.SampledFrom([]string{"p", "q.r", "s.0", "s.1", "p.x"}).Draw(t, "path")}
	for !p.hasEq && !p.hasCont && p.oneOf == nil && p.regex == "" {
		if rapid.Bool().Draw(t, "equals") {
			p.equals, p.hasEq = genScalar(t, "eq"), true
		}
		if rapid.Bool().Draw(t, "contains") {
			p.contains, p.hasCont = genScalar(t, "cont"), true
		}
		if rapid.Bool().Draw(t, "one_of") {
			n := rapid.IntRange(1, 3).Draw(t, "n")
			for range n {
				p.oneOf = append(p.oneOf, genScalar(t, "one"))
			}
		}
		if rapid.Bool().Draw(t, "regex") {
			p.regex = rapid.SampledFrom([]string{"a", "^a", "b$", "^$", "é", "a|b"}).Draw(t, "re")
		}
	}
	return p
}

func genBundle(t *rapid.T) modelBundle {
	m := modelBundle{def: rapid.SampledFrom([]string{"allow", "deny"}).Draw(t, "default")}
	n := rapid.IntRange(0, 8).Draw(t, "rules")
	prios := rapid.Permutation([]int{-5, 0, 1, 2, 3, 7, 10, 11, 40, 99}).Draw(t, "priorities")
	for i := range n {
		r := modelRule{
			id:       "r" + strconv.Itoa(i),
			priority: prios[i],
			kind:     rapid.SampledFrom([]string{"", "tool", "llm", "*", "l*"}).Draw(t, "kind"),
			verdict:  rapid.SampledFrom([]string{"allow", "deny", "approve"}).Draw(t, "verdict"),
		}
		r.targets = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b*", "c", "d/*", "?"}), 0, 2, rapid.ID).Draw(t, "targets")
		r.agents = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"x", "y*", "z"}), 0, 2, rapid.ID).Draw(t, "agents")
		r.inFork, r.atMostOnce = genTri(t, "in_fork"), genTri(t, "at_most_once")
		np := rapid.IntRange(0, 2).Draw(t, "preds")
		seen := map[string]bool{}
		for range np {
			p := genPred(t)
			if !seen[p.path] {
				seen[p.path] = true
				r.preds = append(r.preds, p)
			}
		}
		m.rules = append(m.rules, r)
	}
	return m
}

// genArgs draws args: an object with some of the paths the predicates
// read, or something that is not an object.
func genArgs(t *rapid.T) []byte {
	switch rapid.IntRange(0, 9).Draw(t, "args kind") {
	case 0:
		return nil
	case 1:
		return []byte(rapid.SampledFrom([]string{`[]`, `3`, `"a"`, `{`, `{"p":`, `null`}).Draw(t, "not an object"))
	}
	doc := map[string]any{}
	if rapid.Bool().Draw(t, "has p") {
		if rapid.Bool().Draw(t, "p scalar") {
			doc["p"] = genScalar(t, "p")
		} else {
			doc["p"] = []any{genScalar(t, "p0"), genScalar(t, "p1")}
		}
	}
	if rapid.Bool().Draw(t, "has q") {
		doc["q"] = map[string]any{"r": genScalar(t, "q.r")}
	}
	if rapid.Bool().Draw(t, "has s") {
		doc["s"] = []any{genScalar(t, "s0"), map[string]any{"x": 1.0}}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBundleMatchesModel: over random bundles and calls, Decide returns
// the decision of the naive model, and so does the bundle read back from
// its canonical text.
func TestBundleMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genBundle(t)
		text := m.text()
		b, err := policy.ParseBundle([]byte(text))
		if err != nil {
			t.Fatalf("ParseBundle: %v\n%s", err, text)
		}
		again, err := policy.ParseBundle([]byte(b.String()))
		if err != nil {
			t.Fatalf("ParseBundle of String: %v\n%s", err, b.String())
		}
		for range 20 {
			c := policy.Call{
				Agent:       rapid.SampledFrom([]string{"x", "yy", "z", "w"}).Draw(t, "agent"),
				Kind:        rapid.SampledFrom([]string{"tool", "llm", "local", "child"}).Draw(t, "kind"),
				Target:      rapid.SampledFrom([]string{"a", "bb", "c", "d/e", "e", "b/c"}).Draw(t, "target"),
				InFork:      rapid.Bool().Draw(t, "in fork"),
				Idempotency: rapid.SampledFrom([]string{"safe_to_retry", "at_most_once"}).Draw(t, "idempotency"),
				Args:        genArgs(t),
			}
			id, verdict := m.decide(c)
			for _, bb := range []*policy.Bundle{b, again} {
				d := bb.Decide(c)
				got := "deny"
				switch {
				case d.Approval:
					got = "approve"
				case d.Allow:
					got = "allow"
				}
				if d.RuleID != id || got != verdict {
					t.Fatalf("Decide(%+v args %s) = rule %q %s; the model says rule %q %s\n%s", c, c.Args, d.RuleID, got, id, verdict, text)
				}
			}
		}
	})
}
