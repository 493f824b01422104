package policy

import (
	"context"
	"errors"
	"go/build"
	"reflect"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// DESIGN §7: the first matching rule decides; no match allows.
func TestDecide(t *testing.T) {
	rules := Rules{
		{Kind: "tool", Target: "rm_*", InFork: true, Reason: "no deletions in forks"},
		{Kind: "tool", Target: "rm_*", Allow: true},
		{Kind: "local", Target: "deploy"},
		{Kind: "l*", Target: "*", InFork: true},
		{Kind: "", Target: "http*", Allow: true, Reason: "web is fine"},
		{Kind: "*", Target: "", InFork: true, Allow: true},
		{Kind: "llm", Target: "*", Reason: "no models"},
	}
	tests := []struct {
		name string
		call Call
		want Decision
	}{
		{"in-fork rule matches a call in a fork",
			Call{Kind: "tool", Target: "rm_rf", InFork: true},
			Decision{Allow: false, Reason: "no deletions in forks"}},
		{"in-fork rule skips a call outside a fork; next rule decides",
			Call{Kind: "tool", Target: "rm_rf"},
			Decision{Allow: true, Reason: "allowed by rule 2: allow tool:rm_*"}},
		{"deny without reason names the rule",
			Call{Kind: "local", Target: "deploy"},
			Decision{Allow: false, Reason: "denied by rule 3: deny local:deploy"}},
		{"kind glob",
			Call{Kind: "llm", Target: "api.example.com/v1/chat", InFork: true},
			Decision{Allow: false, Reason: "denied by rule 4: deny l*:* in-fork"}},
		{"a lone * target matches a name with a slash",
			Call{Kind: "llm", Target: "api.example.com/v1/chat"},
			Decision{Allow: false, Reason: "no models"}},
		{"empty kind matches any kind",
			Call{Kind: "tool", Target: "https_get"},
			Decision{Allow: true, Reason: "web is fine"}},
		{"empty target matches any target",
			Call{Kind: "tool", Target: "write_file", InFork: true},
			Decision{Allow: true, Reason: "allowed by rule 6: allow *: in-fork"}},
		{"no rule matches: allowed",
			Call{Kind: "tool", Target: "write_file"},
			Decision{Allow: true, Reason: "allowed: no rule matched"}},
		{"glob does not cross a slash",
			Call{Kind: "tool", Target: "rm_x/y"},
			Decision{Allow: true, Reason: "allowed: no rule matched"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules.Decide(tc.call); got != tc.want {
				t.Errorf("Decide(%+v) = %+v, want %+v", tc.call, got, tc.want)
			}
		})
	}
	if got := Rules(nil).Decide(Call{Kind: "tool", Target: "x"}); !got.Allow {
		t.Errorf("empty rule set denied: %+v", got)
	}
	// A malformed pattern in a hand-built rule matches nothing.
	if got := (Rules{{Kind: "tool", Target: "["}}).Decide(Call{Kind: "tool", Target: "["}); !got.Allow {
		t.Errorf("malformed pattern matched: %+v", got)
	}
}

// DESIGN §7: the Gate decides like Decide, with the rules as they were.
func TestRulesGate(t *testing.T) {
	rules := Rules{{Kind: "tool", Target: "rm", Reason: "no"}}
	gate := rules.Gate()
	rules[0].Allow = true // later changes do not reach the gate
	got := gate(context.Background(), Call{Agent: "a", Kind: "tool", Target: "rm"})
	if got != (Decision{Allow: false, Reason: "no"}) {
		t.Errorf("gate = %+v, want the denial", got)
	}
}

func TestParseRules(t *testing.T) {
	text := `# forks must not touch production
deny tool:rm_* in-fork   no deletions in forks  

	allow llm:*
deny local:deploy
deny *:secret* keep # out
allow :http_get in-fork
deny l??:x in-fork in-fork twice
allow tool:
`
	want := Rules{
		{Kind: "tool", Target: "rm_*", InFork: true, Reason: "no deletions in forks"},
		{Kind: "llm", Target: "*", Allow: true},
		{Kind: "local", Target: "deploy"},
		{Kind: "*", Target: "secret*", Reason: "keep # out"},
		{Kind: "", Target: "http_get", InFork: true, Allow: true},
		{Kind: "l??", Target: "x", InFork: true, Reason: "in-fork twice"},
		{Kind: "tool", Target: "", Allow: true},
	}
	got, err := ParseRules(text)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseRules:\n got %#v\nwant %#v", got, want)
	}
	wantText := `deny tool:rm_* in-fork no deletions in forks
allow llm:*
deny local:deploy
deny *:secret* keep # out
allow :http_get in-fork
deny l??:x in-fork in-fork twice
allow tool:
`
	if s := got.String(); s != wantText {
		t.Errorf("String:\n%s\nwant:\n%s", s, wantText)
	}
	for _, empty := range []string{"", "\n\n", "# only a comment\n  # and another"} {
		if r, err := ParseRules(empty); err != nil || r != nil {
			t.Errorf("ParseRules(%q) = %#v, %v; want nil, nil", empty, r, err)
		}
	}
}

func TestParseRulesErrors(t *testing.T) {
	tests := []struct{ text, want string }{
		{"permit tool:x", `line 1: unknown verb "permit" (want allow, deny or approve)`},
		{"approve", "line 1: approve without KIND:TARGET"},
		{"# c\n\nAllow tool:x", `line 3: unknown verb "Allow"`},
		{"allow", "line 1: allow without KIND:TARGET"},
		{"deny tool", `line 1: "tool" is not KIND:TARGET`},
		{"allow tool:x\ndeny tool:[x", `line 2: target pattern "[x": syntax error in pattern`},
		{"deny [tool:x", `line 1: kind pattern "[tool": syntax error in pattern`},
		{"deny tools:x", `line 1: kind pattern "tools" matches none of tool, local, llm, child`},
		{"deny x*:y", `line 1: kind pattern "x*" matches none of tool, local, llm, child`},
		{"deny tool:a\\", `line 1: target pattern "a\\": syntax error in pattern`},
	}
	for _, tc := range tests {
		_, err := ParseRules(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "policy: rules ") {
			t.Errorf("ParseRules(%q) = %v, want an error containing %q", tc.text, err, tc.want)
			continue
		}
		if !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("ParseRules(%q): %v does not wrap eventlog.ErrInvalid", tc.text, err)
		}
	}
}

// FuzzParseRules: ParseRules never panics, and a parsed rule set's String
// parses back to the same rules.
func FuzzParseRules(f *testing.F) {
	for _, seed := range []string{
		"",
		"allow tool:x",
		"deny tool:rm_* in-fork no deletions in forks\nallow llm:*\n",
		"# comment\n\n deny *:secret* keep # out \r\n",
		"deny l??:x in-fork in-fork twice",
		"allow :http_get in-fork",
		"approve tool:* at-most-once in-fork at-most-once twice",
		"deny [tool:x",
		"deny tool:a\\",
		"allow\u00a0tool:x\u2003in-fork\u0085reason",
		"deny tool:[^a-c]*",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		rules, err := ParseRules(text)
		if err != nil {
			if !errors.Is(err, eventlog.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := ParseRules(rules.String())
		if err != nil {
			t.Fatalf("String %q does not parse: %v", rules.String(), err)
		}
		if !reflect.DeepEqual(rules, again) {
			t.Fatalf("round trip changed the rules:\n%#v\n%#v", rules, again)
		}
		for _, c := range []Call{{Kind: "tool", Target: "x"}, {Kind: "llm", Target: "a/b", InFork: true, Idempotency: "at_most_once"}} {
			_ = rules.Decide(c)
		}
	})
}

// DESIGN §12: approve rules ask for approval (it wins over Allow), and
// at-most-once restricts a rule to at_most_once calls.
func TestDecideApproval(t *testing.T) {
	amo, str := string(eventlog.AtMostOnce), string(eventlog.SafeToRetry)
	rules := Rules{
		{Kind: "tool", Target: "pay", Approve: true, Allow: true},
		{Kind: "tool", Target: "*", InFork: true, AtMostOnce: true, Approve: true, Reason: "fork effects"},
		{Kind: "local", Target: "*", AtMostOnce: true},
	}
	tests := []struct {
		name string
		call Call
		want Decision
	}{
		{"approve wins over allow; the reason names the rule",
			Call{Kind: "tool", Target: "pay", Idempotency: str},
			Decision{Approval: true, Reason: "approval asked by rule 1: approve tool:pay"}},
		{"at-most-once and in-fork both hold",
			Call{Kind: "tool", Target: "rm", InFork: true, Idempotency: amo},
			Decision{Approval: true, Reason: "fork effects"}},
		{"at-most-once skips a safe_to_retry call",
			Call{Kind: "tool", Target: "rm", InFork: true, Idempotency: str},
			Decision{Allow: true, Reason: "allowed: no rule matched"}},
		{"in-fork skips a root call",
			Call{Kind: "tool", Target: "rm", Idempotency: amo},
			Decision{Allow: true, Reason: "allowed: no rule matched"}},
		{"at-most-once deny",
			Call{Kind: "local", Target: "deploy", Idempotency: amo},
			Decision{Reason: "denied by rule 3: deny local:* at-most-once"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules.Decide(tc.call); got != tc.want {
				t.Errorf("Decide(%+v) = %+v, want %+v", tc.call, got, tc.want)
			}
		})
	}
	parsed, err := ParseRules("approve tool:* at-most-once in-fork fork effects\napprove tool:pay\ndeny local:* at-most-once at-most-once again\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Rules{
		{Kind: "tool", Target: "*", InFork: true, AtMostOnce: true, Approve: true, Reason: "fork effects"},
		{Kind: "tool", Target: "pay", Approve: true},
		{Kind: "local", Target: "*", AtMostOnce: true, Reason: "at-most-once again"},
	}
	if !reflect.DeepEqual(parsed, want) {
		t.Errorf("ParseRules:\n got %#v\nwant %#v", parsed, want)
	}
	wantText := "approve tool:* in-fork at-most-once fork effects\napprove tool:pay\ndeny local:* at-most-once at-most-once again\n"
	if s := parsed.String(); s != wantText {
		t.Errorf("String:\n%s\nwant:\n%s", s, wantText)
	}
}

// DESIGN §12: ApproveForkEffects asks for approval of exactly the
// at_most_once calls that run live in a fork.
func TestApproveForkEffects(t *testing.T) {
	gate := ApproveForkEffects()
	ctx := context.Background()
	for _, kind := range []string{"tool", "local", "llm", "child"} {
		for _, inFork := range []bool{false, true} {
			for _, idem := range []eventlog.Idempotency{eventlog.SafeToRetry, eventlog.AtMostOnce} {
				d := gate(ctx, Call{Agent: "a", Kind: kind, Target: "t", InFork: inFork, Idempotency: string(idem)})
				wantApproval := inFork && idem == eventlog.AtMostOnce
				if d.Approval != wantApproval || d.Allow == wantApproval || d.Reason == "" {
					t.Errorf("%s in-fork=%v %s: %+v, want Approval %v (and Allow the opposite, with a reason)", kind, inFork, idem, d, wantApproval)
				}
			}
		}
	}
}

// DESIGN §2: policy imports only eventlog of forkline's packages.
func TestImportsOnlyEventlog(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/forkline/forkline") && imp != "github.com/forkline/forkline/eventlog" {
			t.Errorf("policy imports %s; it may import only eventlog of forkline's packages", imp)
		}
	}
}
