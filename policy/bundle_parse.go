package policy

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
	"go.yaml.in/yaml/v3"
)

// ParseBundle reads a policy bundle in YAML, as the package documentation
// describes. A bundle with an unknown or repeated field, a missing
// required one, a duplicate rule id or priority, a malformed pattern, a
// bad regex, an args predicate without a constraint, or a negative window,
// max or timeout is refused with a *BundleError that names the line and
// the field, on one line, and wraps eventlog.ErrInvalid.
func ParseBundle(data []byte) (*Bundle, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errorf(0, "", "empty bundle: want at least default: allow or deny")
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(err)
		}
		return nil, errorf(extra.Line, "", "a second YAML document: a bundle is one document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errorf(doc.Line, "", "empty bundle: want at least default: allow or deny")
	}
	return parseTop(doc.Content[0])
}

// yamlError turns an error of the YAML parser into a *BundleError.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if l, err := strconv.Atoi(n); err == nil {
				line, msg = l, after
			}
		}
	}
	return &BundleError{Line: line, Msg: "not valid YAML: " + msg}
}

// mapping checks that n is a mapping whose keys are among allowed, each
// once, and returns its values by key.
func mapping(n *yaml.Node, field string, allowed ...string) (map[string]*yaml.Node, error) {
	if err := plain(n, field); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, errorf(n.Line, field, "want a mapping of %s", strings.Join(allowed, ", "))
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	keyLines := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, errorf(k.Line, field, "a key that is not a name")
		}
		name := join(field, k.Value)
		if !slices.Contains(allowed, k.Value) {
			return nil, errorf(k.Line, name, "unknown field (want %s)", strings.Join(allowed, ", "))
		}
		if l, dup := keyLines[k.Value]; dup {
			return nil, errorf(k.Line, name, "given twice (first on line %d)", l)
		}
		keyLines[k.Value] = k.Line
		out[k.Value] = v
	}
	return out, nil
}

// plain refuses YAML aliases, anchors' uses, which a bundle has no need of.
func plain(n *yaml.Node, field string) error {
	if n.Kind == yaml.AliasNode {
		return errorf(n.Line, field, "a YAML alias: write the value out")
	}
	return nil
}

// join appends a field name to a field path.
func join(field, name string) string {
	if field == "" {
		return name
	}
	return field + "." + name
}

// str reads a string scalar.
func str(n *yaml.Node, field string) (string, error) {
	if err := plain(n, field); err != nil {
		return "", err
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", errorf(n.Line, field, "want a string, got %s", describe(n))
	}
	return n.Value, nil
}

// nonEmpty reads a non-empty string scalar.
func nonEmpty(n *yaml.Node, field string) (string, error) {
	s, err := str(n, field)
	if err == nil && s == "" {
		err = errorf(n.Line, field, "empty")
	}
	return s, err
}

// integer reads an integer scalar.
func integer(n *yaml.Node, field string) (int, error) {
	if err := plain(n, field); err != nil {
		return 0, err
	}
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return 0, errorf(n.Line, field, "want an integer, got %s", describe(n))
	}
	return v, nil
}

// boolean reads a bool scalar.
func boolean(n *yaml.Node, field string) (bool, error) {
	if err := plain(n, field); err != nil {
		return false, err
	}
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		return false, errorf(n.Line, field, "want true or false, got %s", describe(n))
	}
	return v, nil
}

// duration reads a duration ("90s", "5m", "1h30m"), refusing a negative
// one, and a zero one unless zeroOK.
func duration(n *yaml.Node, field string, zeroOK bool) (time.Duration, error) {
	s, err := str(n, field)
	if err != nil {
		return 0, errorf(n.Line, field, "want a duration such as 30s or 5m, got %s", describe(n))
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errorf(n.Line, field, "want a duration such as 30s or 5m, got %q", s)
	case d < 0:
		return 0, errorf(n.Line, field, "negative duration %s", s)
	case d == 0 && !zeroOK:
		return 0, errorf(n.Line, field, "zero duration: it must be positive")
	}
	return d, nil
}

// stringList reads a non-empty sequence of non-empty strings.
func stringList(n *yaml.Node, field string) ([]string, error) {
	if err := plain(n, field); err != nil {
		return nil, err
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, errorf(n.Line, field, "want a non-empty list of strings, got %s", describe(n))
	}
	out := make([]string, 0, len(n.Content))
	for i, e := range n.Content {
		s, err := nonEmpty(e, field+"["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// enum reads a string scalar that must be one of allowed.
func enum[T ~string](n *yaml.Node, field string, allowed ...T) (T, error) {
	s, err := str(n, field)
	if err == nil && !slices.Contains(allowed, T(s)) {
		err = errorf(n.Line, field, "%q is not one of %s", s, joinAny(allowed))
	}
	return T(s), err
}

func joinAny[T ~string](vs []T) string {
	ss := make([]string, len(vs))
	for i, v := range vs {
		ss[i] = string(v)
	}
	return strings.Join(ss, ", ")
}

// describe names what n is, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// parseTop reads the bundle's top-level mapping.
func parseTop(n *yaml.Node) (*Bundle, error) {
	f, err := mapping(n, "", "default", "on_budget", "rules")
	if err != nil {
		return nil, err
	}
	b := &Bundle{onBudget: VerdictDeny}
	dn, ok := f["default"]
	if !ok {
		return nil, errorf(n.Line, "default", "missing: say default: allow or default: deny")
	}
	if b.def, err = enum(dn, "default", VerdictAllow, VerdictDeny); err != nil {
		return nil, err
	}
	if on, ok := f["on_budget"]; ok {
		if b.onBudget, err = enum(on, "on_budget", VerdictApprove, VerdictDeny); err != nil {
			return nil, err
		}
	}
	rn, ok := f["rules"]
	if !ok || rn.Kind == yaml.ScalarNode && rn.ShortTag() == "!!null" {
		return b, nil
	}
	if err := plain(rn, "rules"); err != nil {
		return nil, err
	}
	if rn.Kind != yaml.SequenceNode {
		return nil, errorf(rn.Line, "rules", "want a list of rules, got %s", describe(rn))
	}
	ids := make(map[string]int)
	prios := make(map[int]int)
	for i, e := range rn.Content {
		field := "rules[" + strconv.Itoa(i) + "]"
		r, err := parseRuleNode(e, field)
		if err != nil {
			return nil, err
		}
		if l, dup := ids[r.id]; dup {
			return nil, errorf(r.line, field+".id", "duplicate id %q (also on line %d)", r.id, l)
		}
		if l, dup := prios[r.priority]; dup {
			return nil, errorf(r.line, field+".priority", "duplicate priority %d (also on line %d): first match wins, so priorities must differ", r.priority, l)
		}
		ids[r.id], prios[r.priority] = r.line, r.line
		b.rules = append(b.rules, r)
	}
	slices.SortFunc(b.rules, func(x, y bundleRule) int { return cmp.Compare(x.priority, y.priority) })
	for i := range b.rules {
		r := &b.rules[i]
		r.kindG = compileGlob(r.kind)
		for _, p := range r.targets {
			r.targetsG = append(r.targetsG, compileGlob(p))
		}
		for _, p := range r.agents {
			r.agentsG = append(r.agentsG, compileGlob(p))
		}
	}
	return b, nil
}

// parseRuleNode reads one rule.
func parseRuleNode(n *yaml.Node, field string) (bundleRule, error) {
	f, err := mapping(n, field, "id", "priority", "when", "then")
	if err != nil {
		return bundleRule{}, err
	}
	r := bundleRule{line: n.Line}
	idn, ok := f["id"]
	if !ok {
		return r, errorf(n.Line, field+".id", "missing")
	}
	if r.id, err = nonEmpty(idn, field+".id"); err != nil {
		return r, err
	}
	r.line = idn.Line
	pn, ok := f["priority"]
	if !ok {
		return r, errorf(n.Line, field+".priority", "missing")
	}
	if r.priority, err = integer(pn, field+".priority"); err != nil {
		return r, err
	}
	if w, ok := f["when"]; ok {
		if err := parseWhen(&r, w, field+".when"); err != nil {
			return r, err
		}
	}
	t, ok := f["then"]
	if !ok {
		return r, errorf(n.Line, field+".then", "missing: say what the rule decides (then: decision: allow, deny or approve)")
	}
	if err := parseThen(&r, t, field+".then"); err != nil {
		return r, err
	}
	return r, nil
}

// parseWhen reads a rule's conditions.
func parseWhen(r *bundleRule, n *yaml.Node, field string) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	f, err := mapping(n, field, "kind", "target", "targets", "agent", "agents", "in_fork", "at_most_once", "args")
	if err != nil {
		return err
	}
	if kn, ok := f["kind"]; ok {
		if r.kind, err = nonEmpty(kn, field+".kind"); err != nil {
			return err
		}
		if err := checkKind(r.kind); err != nil {
			return errorf(kn.Line, field+".kind", "%v", err)
		}
	}
	if r.targets, err = patterns(f, field, "target", "targets"); err != nil {
		return err
	}
	if r.agents, err = patterns(f, field, "agent", "agents"); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		to   *tri
	}{{"in_fork", &r.inFork}, {"at_most_once", &r.atMostOnce}} {
		if bn, ok := f[c.name]; ok {
			v, err := boolean(bn, field+"."+c.name)
			if err != nil {
				return err
			}
			*c.to = triFalse
			if v {
				*c.to = triTrue
			}
		}
	}
	if an, ok := f["args"]; ok {
		if r.args, err = parseArgs(an, field+".args"); err != nil {
			return err
		}
	}
	return nil
}

// patterns reads one of a pattern field and its list form (target or
// targets), which may not both be given.
func patterns(f map[string]*yaml.Node, field, one, many string) ([]string, error) {
	on, hasOne := f[one]
	mn, hasMany := f[many]
	var out []string
	switch {
	case hasOne && hasMany:
		return nil, errorf(mn.Line, join(field, many), "given with %s: use one of them", one)
	case hasOne:
		s, err := nonEmpty(on, join(field, one))
		if err != nil {
			return nil, err
		}
		out = []string{s}
	case hasMany:
		var err error
		if out, err = stringList(mn, join(field, many)); err != nil {
			return nil, err
		}
	}
	for i, p := range out {
		if err := checkGlob(p); err != nil {
			line, name := on, join(field, one)
			if hasMany {
				line, name = mn.Content[i], join(field, many)+"["+strconv.Itoa(i)+"]"
			}
			return nil, errorf(line.Line, name, "%v", err)
		}
	}
	return out, nil
}

// parseArgs reads args predicates: a mapping of dotted paths to
// constraints.
func parseArgs(n *yaml.Node, field string) ([]argPredicate, error) {
	if err := plain(n, field); err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil, errorf(n.Line, field, "want a mapping of dotted paths to predicates (equals, contains, one_of, regex), got %s", describe(n))
	}
	var out []argPredicate
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, errorf(k.Line, field, "want a dotted path such as model or messages.0.content")
		}
		pf := field + "." + k.Value
		if l, dup := seen[k.Value]; dup {
			return nil, errorf(k.Line, pf, "given twice (first on line %d)", l)
		}
		seen[k.Value] = k.Line
		p := argPredicate{path: k.Value, segs: strings.Split(k.Value, ".")}
		if slices.Contains(p.segs, "") {
			return nil, errorf(k.Line, pf, "path %q has an empty segment", k.Value)
		}
		f, err := mapping(v, pf, "equals", "contains", "one_of", "regex")
		if err != nil {
			return nil, err
		}
		if len(f) == 0 {
			return nil, errorf(v.Line, pf, "a predicate with no constraint: give equals, contains, one_of or regex")
		}
		if en, ok := f["equals"]; ok {
			x, err := scalarOf(en, pf+".equals")
			if err != nil {
				return nil, err
			}
			p.equals = &x
		}
		if cn, ok := f["contains"]; ok {
			x, err := scalarOf(cn, pf+".contains")
			if err != nil {
				return nil, err
			}
			p.contains = &x
		}
		if on, ok := f["one_of"]; ok {
			if on.Kind != yaml.SequenceNode || len(on.Content) == 0 {
				return nil, errorf(on.Line, pf+".one_of", "want a non-empty list of values, got %s", describe(on))
			}
			for j, e := range on.Content {
				x, err := scalarOf(e, pf+".one_of["+strconv.Itoa(j)+"]")
				if err != nil {
					return nil, err
				}
				p.oneOf = append(p.oneOf, x)
			}
		}
		if rn, ok := f["regex"]; ok {
			s, err := str(rn, pf+".regex")
			if err != nil {
				return nil, err
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return nil, errorf(rn.Line, pf+".regex", "bad regex %q: %s", s, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			}
			p.regex = re
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b argPredicate) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// scalarOf reads a value a predicate compares with: a string, a number,
// a bool or null.
func scalarOf(n *yaml.Node, field string) (scalar, error) {
	if err := plain(n, field); err != nil {
		return scalar{}, err
	}
	if n.Kind != yaml.ScalarNode {
		return scalar{}, errorf(n.Line, field, "want a string, number, true, false or null, got %s", describe(n))
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		return scalar{kind: 's', s: n.Value, sb: []byte(n.Value)}, nil
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || !finite(f) {
			return scalar{}, errorf(n.Line, field, "number %s is not finite", n.Value)
		}
		return scalar{kind: 'n', n: f}, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return scalar{}, errorf(n.Line, field, "want true or false, got %q", n.Value)
		}
		return scalar{kind: 'b', b: b}, nil
	case "!!null":
		return scalar{kind: 'z'}, nil
	}
	return scalar{}, errorf(n.Line, field, "want a string, number, true, false or null, got %s", describe(n))
}

// parseThen reads what a rule decides.
func parseThen(r *bundleRule, n *yaml.Node, field string) error {
	f, err := mapping(n, field, "decision", "reason", "approval", "rate_limit", "on_limiter_error")
	if err != nil {
		return err
	}
	dn, ok := f["decision"]
	if !ok {
		return errorf(n.Line, field+".decision", "missing: allow, deny or approve")
	}
	if r.verdict, err = enum(dn, field+".decision", VerdictAllow, VerdictDeny, VerdictApprove); err != nil {
		return err
	}
	if rn, ok := f["reason"]; ok {
		if r.reason, err = str(rn, field+".reason"); err != nil {
			return err
		}
	}
	r.decided = r.reason
	if r.decided == "" {
		verb := map[Verdict]string{VerdictAllow: "allowed", VerdictDeny: "denied", VerdictApprove: "approval asked"}[r.verdict]
		r.decided = verb + " by rule " + r.id
	}
	if an, ok := f["approval"]; ok {
		if r.verdict != VerdictApprove {
			return errorf(an.Line, field+".approval", "only a rule whose decision is approve asks for approval (this one is %s)", r.verdict)
		}
		if r.approval, err = parseApproval(an, field+".approval"); err != nil {
			return err
		}
	}
	if ln, ok := f["rate_limit"]; ok {
		if r.verdict == VerdictDeny {
			return errorf(ln.Line, field+".rate_limit", "a rule that denies runs no call to limit")
		}
		if r.limit, err = parseRateLimit(ln, field+".rate_limit"); err != nil {
			return err
		}
	}
	if on, ok := f["on_limiter_error"]; ok {
		if r.limit == nil {
			return errorf(on.Line, field+".on_limiter_error", "without a rate_limit")
		}
		v, err := enum(on, field+".on_limiter_error", "open", "closed")
		if err != nil {
			return err
		}
		r.limit.FailClosed = v == "closed"
	}
	return nil
}

// parseApproval reads then.approval.
func parseApproval(n *yaml.Node, field string) (*ApprovalSettings, error) {
	f, err := mapping(n, field, "approvers", "timeout", "message")
	if err != nil {
		return nil, err
	}
	a := &ApprovalSettings{}
	if an, ok := f["approvers"]; ok {
		if a.Approvers, err = stringList(an, field+".approvers"); err != nil {
			return nil, err
		}
	}
	if tn, ok := f["timeout"]; ok {
		if a.Timeout, err = duration(tn, field+".timeout", true); err != nil {
			return nil, err
		}
	}
	if mn, ok := f["message"]; ok {
		if a.Message, err = str(mn, field+".message"); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// parseRateLimit reads then.rate_limit.
func parseRateLimit(n *yaml.Node, field string) (*RateLimit, error) {
	f, err := mapping(n, field, "max_calls", "window", "per", "max_wait")
	if err != nil {
		return nil, err
	}
	l := &RateLimit{Per: PerGlobal}
	mn, ok := f["max_calls"]
	if !ok {
		return nil, errorf(n.Line, field+".max_calls", "missing")
	}
	if l.MaxCalls, err = integer(mn, field+".max_calls"); err != nil {
		return nil, err
	}
	if l.MaxCalls <= 0 || l.MaxCalls > eventlog.MaxLimiterCalls {
		return nil, errorf(mn.Line, field+".max_calls", "%d: want 1 to %d", l.MaxCalls, eventlog.MaxLimiterCalls)
	}
	wn, ok := f["window"]
	if !ok {
		return nil, errorf(n.Line, field+".window", "missing")
	}
	if l.Window, err = duration(wn, field+".window", false); err != nil {
		return nil, err
	}
	if pn, ok := f["per"]; ok {
		if l.Per, err = enum(pn, field+".per", PerExecution, PerAgent, PerGlobal); err != nil {
			return nil, err
		}
	}
	if wn, ok := f["max_wait"]; ok {
		if l.MaxWait, err = duration(wn, field+".max_wait", true); err != nil {
			return nil, err
		}
	}
	return l, nil
}
