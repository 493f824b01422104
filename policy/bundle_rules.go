package policy

// RuleInfo describes one rule of a [Bundle]: its id, priority and line in
// the bundle's text, its verdict, and the settings its decisions carry
// (nil when it has none). The settings are shared with the bundle: read
// them, never change them.
type RuleInfo struct {
	ID        string
	Priority  int
	Line      int
	Verdict   Verdict
	Approval  *ApprovalSettings
	RateLimit *RateLimit
}

// Rules returns b's rules by priority, the first that matches a call
// deciding it.
func (b *Bundle) Rules() []RuleInfo {
	out := make([]RuleInfo, len(b.rules))
	for i := range b.rules {
		r := &b.rules[i]
		out[i] = RuleInfo{ID: r.id, Priority: r.priority, Line: r.line, Verdict: r.verdict,
			Approval: r.approval, RateLimit: r.limit}
	}
	return out
}
