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
		{"permit tool:x", `line 1: unknown verb "permit" (want allow or deny)`},
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
		for _, c := range []Call{{Kind: "tool", Target: "x"}, {Kind: "llm", Target: "a/b", InFork: true}} {
			_ = rules.Decide(c)
		}
	})
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
