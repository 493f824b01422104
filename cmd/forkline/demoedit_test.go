package main

import (
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

// TestFirstWrite: the demo finds the first write_file call of a reply,
// whole or streamed, with the call's ID.
func TestFirstWrite(t *testing.T) {
	body := `{"id":"x","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","tool_calls":[` +
		`{"id":"c0","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}},` +
		`{"id":"c1","type":"function","function":{"name":"write_file","arguments":"{\"content\":\"x\",\"path\":\"b.go\"}"}}]}}]}`
	if p, id, ok := firstWrite([]byte(body)); !ok || p != "b.go" || id != "c1" {
		t.Fatalf("firstWrite = %q, %q, %v; want b.go, c1", p, id, ok)
	}
	stream := "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c2\",\"function\":{\"name\":\"write_file\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"c.go\\\"}\"}}]}}]}\n\n" +
		"data: [DONE]\n\n"
	if p, id, ok := firstWrite([]byte(stream)); !ok || p != "c.go" || id != "c2" {
		t.Fatalf("firstWrite of a stream = %q, %q, %v; want c.go, c2", p, id, ok)
	}
	for name, b := range map[string]string{
		"not JSON":      `{"choices":`,
		"no write_file": `{"choices":[{"message":{"content":"done"}}]}`,
		"no path":       `{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"write_file","arguments":"{}"}}]}}]}`,
	} {
		if p, _, ok := firstWrite([]byte(b)); ok {
			t.Errorf("%s: firstWrite = %q, want none", name, p)
		}
	}
}
