package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEditedName(t *testing.T) {
	for in, want := range map[string]string{
		"greet.go":          "greet_edited.go",
		"cmd/greet/main.go": "cmd/greet/main_edited.go",
		"LICENSE":           "LICENSE_edited",
		".env":              ".env_edited",
		"a.b/c":             "a.b/c_edited",
	} {
		if got := editedName(in); got != want {
			t.Errorf("editedName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEditReply(t *testing.T) {
	body := `{"id":"x","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","tool_calls":[` +
		`{"id":"c0","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}},` +
		`{"id":"c1","type":"function","function":{"name":"write_file","arguments":"{\"content\":\"x\",\"path\":\"a.go\",\"mode\":420}"}}]}}],` +
		`"usage":{"total_tokens":20}}`
	got, err := editReply([]byte(body), "a.go", "a_edited.go")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := firstWrite(got); !ok || p != "a_edited.go" {
		t.Fatalf("edited reply writes %q (%v), want a_edited.go:\n%s", p, ok, got)
	}
	var r chatReply
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	calls := r.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].Function.Arguments != `{"path":"a.go"}` || calls[1].Function.Arguments != `{"content":"x","mode":420,"path":"a_edited.go"}` {
		t.Errorf("edited reply's calls %+v: want the read untouched and only the write's path changed", calls)
	}
	if !strings.Contains(string(got), `"usage":{"total_tokens":20}`) || !strings.Contains(string(got), `"id":"c1"`) {
		t.Errorf("edited reply lost recorded fields:\n%s", got)
	}

	for name, c := range map[string]struct{ body, from string }{
		"not JSON":        {`{"choices":`, "a.go"},
		"no choices":      {`{"choices":[]}`, "a.go"},
		"no write_file":   {`{"choices":[{"message":{"content":"done"}}]}`, "a.go"},
		"another path":    {body, "b.go"},
		"bad arguments":   {`{"choices":[{"message":{"tool_calls":[{"function":{"name":"write_file","arguments":"{"}}]}}]}`, "a.go"},
		"choice not JSON": {`{"choices":[1]}`, "a.go"},
	} {
		if out, err := editReply([]byte(c.body), c.from, "x"); err == nil {
			t.Errorf("%s: editReply = %s, want an error", name, out)
		}
	}
}
