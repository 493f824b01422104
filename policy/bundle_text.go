package policy

import (
	"bytes"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// String returns b in its canonical YAML form: every field that has a
// value, in a fixed order — default, on_budget, then the rules by
// priority, each with id, priority, when (kind, target or targets, agent
// or agents, in_fork, at_most_once, args by path) and then (decision,
// reason, approval, rate_limit with every setting, on_limiter_error).
// ParseBundle(b.String()) decides as b does, and prints the same text.
func (b *Bundle) String() string {
	top := mapNode()
	add(top, "default", strNode(string(b.def)))
	add(top, "on_budget", strNode(string(b.onBudget)))
	rules := &yaml.Node{Kind: yaml.SequenceNode}
	for i := range b.rules {
		rules.Content = append(rules.Content, b.rules[i].node())
	}
	if len(rules.Content) == 0 {
		rules.Style = yaml.FlowStyle
	}
	add(top, "rules", rules)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(top); err != nil {
		// The tree is built of plain scalars, mappings and lists, which the
		// encoder always writes.
		return "# policy: bundle cannot be written: " + err.Error() + "\n"
	}
	_ = enc.Close()
	return buf.String()
}

// node returns r as a YAML mapping.
func (r *bundleRule) node() *yaml.Node {
	n := mapNode()
	add(n, "id", strNode(r.id))
	add(n, "priority", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(r.priority)})
	when := mapNode()
	if r.kind != "" {
		add(when, "kind", strNode(r.kind))
	}
	addPatterns(when, "target", "targets", r.targets)
	addPatterns(when, "agent", "agents", r.agents)
	addTri(when, "in_fork", r.inFork)
	addTri(when, "at_most_once", r.atMostOnce)
	if len(r.args) > 0 {
		args := mapNode()
		for i := range r.args {
			add(args, r.args[i].path, r.args[i].node())
		}
		add(when, "args", args)
	}
	if len(when.Content) > 0 {
		add(n, "when", when)
	}
	then := mapNode()
	add(then, "decision", strNode(string(r.verdict)))
	if r.reason != "" {
		add(then, "reason", strNode(r.reason))
	}
	if a := r.approval; a != nil {
		an := mapNode()
		if len(a.Approvers) > 0 {
			add(an, "approvers", listNode(a.Approvers))
		}
		if a.Timeout > 0 {
			add(an, "timeout", strNode(a.Timeout.String()))
		}
		if a.Message != "" {
			add(an, "message", strNode(a.Message))
		}
		if len(an.Content) == 0 {
			an.Style = yaml.FlowStyle
		}
		add(then, "approval", an)
	}
	if l := r.limit; l != nil {
		ln := mapNode()
		add(ln, "max_calls", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(l.MaxCalls)})
		add(ln, "window", strNode(l.Window.String()))
		add(ln, "per", strNode(string(l.Per)))
		add(ln, "max_wait", strNode(l.MaxWait.String()))
		add(then, "rate_limit", ln)
		onErr := "open"
		if l.FailClosed {
			onErr = "closed"
		}
		add(then, "on_limiter_error", strNode(onErr))
	}
	add(n, "then", then)
	return n
}

// node returns p's constraints as a YAML mapping.
func (p *argPredicate) node() *yaml.Node {
	n := mapNode()
	if p.equals != nil {
		add(n, "equals", p.equals.node())
	}
	if p.contains != nil {
		add(n, "contains", p.contains.node())
	}
	if p.oneOf != nil {
		l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for i := range p.oneOf {
			l.Content = append(l.Content, p.oneOf[i].node())
		}
		add(n, "one_of", l)
	}
	if p.regex != nil {
		add(n, "regex", strNode(p.regex.String()))
	}
	return n
}

// node returns x as a YAML scalar of its type.
func (x *scalar) node() *yaml.Node {
	switch x.kind {
	case 's':
		return strNode(x.s)
	case 'n':
		if x.n == float64(int64(x.n)) && x.n > -1e15 && x.n < 1e15 {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(x.n), 10)}
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(x.n, 'g', -1, 64)}
	case 'b':
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x.b)}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}

func mapNode() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func listNode(ss []string) *yaml.Node {
	l := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range ss {
		l.Content = append(l.Content, strNode(s))
	}
	return l
}

// add appends key: v to the mapping m.
func add(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, strNode(key), v)
}

// addPatterns adds one pattern as one, several as many.
func addPatterns(m *yaml.Node, one, many string, ps []string) {
	switch len(ps) {
	case 0:
	case 1:
		add(m, one, strNode(ps[0]))
	default:
		add(m, many, listNode(ps))
	}
}

// addTri adds a condition that is given.
func addTri(m *yaml.Node, key string, t tri) {
	if t != triAny {
		add(m, key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t == triTrue)})
	}
}
