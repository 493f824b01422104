package policy

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// Verdict is what a bundle rule decides about a call it matches.
type Verdict string

// The verdicts of a bundle rule's then.decision, and of its default (allow
// or deny only).
const (
	VerdictAllow   Verdict = "allow"
	VerdictDeny    Verdict = "deny"
	VerdictApprove Verdict = "approve"
)

// Scope is what a rate limit counts calls per (then.rate_limit.per).
type Scope string

// The scopes of a rate limit.
const (
	PerExecution Scope = "execution"
	PerAgent     Scope = "agent"
	PerGlobal    Scope = "global"
)

// RateLimit is a bundle rule's then.rate_limit: at most MaxCalls calls the
// rule allows in any Window, counted Per execution, agent or globally by a
// store's eventlog.Limiter (the kernel applies it; policy does no IO). A
// call over the limit waits when the wait is at most MaxWait, and is denied
// otherwise. FailClosed (on_limiter_error: closed) denies a call when the
// limiter fails; by default (open) such a call runs.
type RateLimit struct {
	MaxCalls   int
	Window     time.Duration
	Per        Scope
	MaxWait    time.Duration
	FailClosed bool
}

// Key returns the limiter key of a call the rule ruleID decided in
// execution: the rule id and the scope, "ID/global", "ID/agent/NAME" or
// "ID/execution/EXECUTION". Keys of different rules never meet.
func (r *RateLimit) Key(ruleID string, c Call, execution eventlog.ID) string {
	switch r.Per {
	case PerAgent:
		return ruleID + "/agent/" + c.Agent
	case PerExecution:
		return ruleID + "/execution/" + execution.String()
	}
	return ruleID + "/global"
}

// ApprovalSettings is a bundle rule's then.approval: who may decide
// (Approvers; empty: anyone), how long the request stays open (Timeout;
// 0: until decided) and the Message shown to them.
type ApprovalSettings struct {
	Approvers []string
	Timeout   time.Duration
	Message   string
}

// Bundle is a policy bundle (DESIGN §17): rules with ids and priorities,
// the lowest priority first, of which the first that matches a call decides
// it, and a default for calls no rule matches. Parse one with
// [ParseBundle]; it is immutable and safe for concurrent use. Its text
// form is described in the package documentation.
type Bundle struct {
	def      Verdict
	onBudget Verdict
	rules    []bundleRule // by priority
}

// bundleRule is a rule of a bundle, compiled.
type bundleRule struct {
	id       string
	priority int
	line     int

	kind       string
	targets    []string // any matches; empty: any target
	agents     []string // any matches; empty: any agent
	kindG      glob
	targetsG   []glob
	agentsG    []glob
	inFork     tri
	atMostOnce tri
	args       []argPredicate

	verdict  Verdict
	reason   string // as written; "" for the default reason
	decided  string // the reason a decision carries
	approval *ApprovalSettings
	limit    *RateLimit
}

// tri is a condition that may be absent, true or false.
type tri int8

const (
	triAny tri = iota
	triTrue
	triFalse
)

// matches reports whether a condition admits v.
func (t tri) matches(v bool) bool {
	return t == triAny || (t == triTrue) == v
}

// argPredicate is one args: predicate, compiled: the path split at dots,
// and its constraints, all of which must hold.
type argPredicate struct {
	path     string
	segs     []string
	equals   *scalar
	contains *scalar
	oneOf    []scalar
	regex    *regexp.Regexp
}

// scalar is a JSON scalar a predicate compares with.
type scalar struct {
	kind byte // 's' string, 'n' number, 'b' bool, 'z' null
	s    string
	sb   []byte // s, for bytes.Contains
	n    float64
	b    bool
}

// Default returns the verdict for calls no rule matches (allow or deny).
func (b *Bundle) Default() Verdict { return b.def }

// OnBudget returns what a call past its execution's budget gets (DESIGN
// §21½.9): VerdictDeny (the default) or VerdictApprove.
func (b *Bundle) OnBudget() Verdict { return b.onBudget }

// Decide returns the decision of the first rule, by priority, that matches
// c: its verdict, reason and RuleID, and its approval and rate-limit
// settings; or the bundle's default when none does. It does no IO: the
// kernel applies the rate limit and asks for the approval. Evaluating a
// rule that does not match allocates nothing.
func (b *Bundle) Decide(c Call) Decision {
	for i := range b.rules {
		r := &b.rules[i]
		if !r.matches(&c) {
			continue
		}
		d := Decision{
			Allow:     r.verdict == VerdictAllow,
			Approval:  r.verdict == VerdictApprove,
			Reason:    r.decided,
			RuleID:    r.id,
			RateLimit: r.limit,

			ApprovalSettings: r.approval,
		}
		return d
	}
	if b.def == VerdictDeny {
		return Decision{Reason: "denied by the bundle's default"}
	}
	return Decision{Allow: true, Reason: "allowed by the bundle's default"}
}

// Gate returns a Gate that decides with b.
func (b *Bundle) Gate() Gate {
	return func(_ context.Context, c Call) Decision { return b.Decide(c) }
}

// matches reports whether r applies to c.
func (r *bundleRule) matches(c *Call) bool {
	if !r.inFork.matches(c.InFork) || !r.atMostOnce.matches(c.Idempotency == string(eventlog.AtMostOnce)) {
		return false
	}
	if !r.kindG.match(c.Kind) || !anyGlob(r.targetsG, c.Target) || !anyGlob(r.agentsG, c.Agent) {
		return false
	}
	for i := range r.args {
		if !r.args[i].matches(c.Args) {
			return false
		}
	}
	return true
}

// anyGlob reports whether name matches one of globs; no globs match any
// name.
func anyGlob(globs []glob, name string) bool {
	if len(globs) == 0 {
		return true
	}
	for i := range globs {
		if globs[i].match(name) {
			return true
		}
	}
	return false
}

// glob is a pattern compiled for globMatch's rules: "" and "*" match any
// name, a pattern without metacharacters only itself, "prefix*" (no other
// metacharacter) a name with that prefix and no slash after it; others go
// to path.Match.
type glob struct {
	op byte // 'a' any, 'l' literal, 'p' prefix, 'm' path.Match
	s  string
}

// compileGlob compiles a well-formed pattern.
func compileGlob(pattern string) glob {
	const meta = `*?[\`
	switch {
	case pattern == "" || pattern == "*":
		return glob{op: 'a'}
	case !strings.ContainsAny(pattern, meta):
		return glob{op: 'l', s: pattern}
	case strings.IndexAny(pattern, meta) == len(pattern)-1 && pattern[len(pattern)-1] == '*':
		return glob{op: 'p', s: pattern[:len(pattern)-1]}
	}
	return glob{op: 'm', s: pattern}
}

// match reports whether name matches g, as globMatch(pattern, name) does.
func (g *glob) match(name string) bool {
	switch g.op {
	case 'a':
		return true
	case 'l':
		return name == g.s
	case 'p':
		return strings.HasPrefix(name, g.s) && strings.IndexByte(name[len(g.s):], '/') < 0
	}
	ok, err := path.Match(g.s, name)
	return ok && err == nil
}

// matches reports whether the value at p's path in args meets every
// constraint of p. Args that are not a JSON object, or have no value at
// the path, meet none.
func (p *argPredicate) matches(args []byte) bool {
	v, ok := lookup(args, p.segs)
	if !ok {
		return false
	}
	if p.equals != nil && !p.equals.equal(v) {
		return false
	}
	if p.contains != nil && !p.contains.containedIn(v) {
		return false
	}
	if p.oneOf != nil {
		found := false
		for i := range p.oneOf {
			if p.oneOf[i].equal(v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if p.regex != nil {
		if len(v) == 0 || v[0] != '"' {
			return false
		}
		end, esc, ok := stringEnd(v, 0)
		if !ok || end != len(v) {
			return false
		}
		s := v[1 : len(v)-1]
		if esc {
			// The regexp keeps what it reads: a string with escapes is
			// decoded into a slice of its own.
			if s, ok = unquote(nil, v); !ok {
				return false
			}
		}
		if !p.regex.Match(s) {
			return false
		}
	}
	return true
}

// equal reports whether the JSON value v equals x: a string of the same
// text, a number of the same value, the same bool, or null.
func (x *scalar) equal(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	switch x.kind {
	case 's':
		if v[0] != '"' {
			return false
		}
		end, esc, ok := stringEnd(v, 0)
		return ok && end == len(v) && stringEquals(v, esc, x.s)
	case 'n':
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return false
		}
		f, err := strconv.ParseFloat(string(v), 64)
		return err == nil && f == x.n
	case 'b':
		if x.b {
			return string(v) == "true"
		}
		return string(v) == "false"
	}
	return string(v) == "null"
}

// containedIn reports whether the JSON value v contains x: a string that
// has x's text as a substring, or an array with an element equal to x.
func (x *scalar) containedIn(v []byte) bool {
	switch {
	case len(v) == 0:
		return false
	case v[0] == '"' && x.kind == 's':
		var buf [256]byte
		s, ok := unquote(buf[:0], v)
		return ok && bytes.Contains(s, x.sb)
	case v[0] == '[':
		return elements(v, x.equal)
	}
	return false
}

// BundleError is the error of a bundle [ParseBundle] refuses: the line of
// the YAML it is about (0 when the whole text), the field by its path
// (rules[2].then.rate_limit.window) and what was wrong. It wraps
// [eventlog.ErrInvalid].
type BundleError struct {
	Line  int
	Field string
	Msg   string
}

// Error implements error, on one line.
func (e *BundleError) Error() string {
	var b strings.Builder
	b.WriteString("policy: bundle")
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(strings.ReplaceAll(e.Msg, "\n", " "))
	return b.String()
}

// Unwrap returns eventlog.ErrInvalid.
func (e *BundleError) Unwrap() error { return eventlog.ErrInvalid }

// errorf returns a *BundleError.
func errorf(line int, field, format string, args ...any) error {
	return &BundleError{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// checkGlob checks that pattern is a well-formed path.Match pattern.
func checkGlob(pattern string) error {
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("pattern %q: %v", pattern, err)
	}
	return nil
}

// finite reports whether f is a finite number.
func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
