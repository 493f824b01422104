package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// TestLsKey: forkline ls shows each execution's start key in a KEY
// column; ls --key K lists only the execution started with K, and a key
// nobody has lists none and creates nothing.
func TestLsKey(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sdk.Register(k, "mailer", func(_ context.Context, n int) (int, error) { return n, nil })
	keyed, err := k.Start(context.Background(), "mailer", 1, sdk.WithKey("order-42"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := k.Start(context.Background(), "mailer", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "--dir", dir, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID AGENT KEY EVENTS STATUS OWNER TOKENS FORK OF CREATED" {
		t.Fatalf("ls:\n%s", stdout)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch f[0] {
		case keyed.String():
			if f[2] != "order-42" {
				t.Errorf("keyed row %q: want KEY order-42", l)
			}
		case plain.String():
			if f[2] != "-" {
				t.Errorf("plain row %q: want KEY -", l)
			}
		default:
			t.Errorf("unexpected row %q", l)
		}
	}
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "ls", "--key", "order-42")
	var got struct{ Executions []listing }
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil {
		t.Fatalf("ls --key: exit %d: %s%s", code, stdout, stderr)
	}
	if len(got.Executions) != 1 || got.Executions[0].ID != keyed.String() || got.Executions[0].Key != "order-42" {
		t.Fatalf("ls --key order-42 = %+v, want only %s", got.Executions, keyed)
	}
	stdout, _, code = runCLI(t, "--dir", dir, "ls", "--key", "order-43")
	if code != 0 || !strings.Contains(stdout, "no executions in") {
		t.Fatalf("ls --key of a key nobody has: exit %d: %s", code, stdout)
	}
	stdout, _, _ = runCLI(t, "--dir", dir, "--json", "ls")
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Executions) != 2 {
		t.Fatalf("ls after the lookups: %s (a lookup must create nothing)", stdout)
	}
}

// TestApprovalsShowReadableArgs: forkline approvals shows a call's args as
// the JSON they are, in full — not escaped, not cut — in the table and in
// --json.
func TestApprovalsShowReadableArgs(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		return policy.Decision{Approval: true, Allow: true, Reason: "writes need a person"}
	}
	k, err := sdk.New(s, sdk.WithGate(gate), sdk.WithClock(stillClock{baseTime}))
	if err != nil {
		t.Fatal(err)
	}
	type writeArgs struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	write := sdk.DefineTool("write_file", func(_ context.Context, a writeArgs) (string, error) { return a.Path, nil })
	_, _ = sdk.Register(k, "coder", func(ctx context.Context, a writeArgs) (string, error) { return write.Call(ctx, a) })
	content := `package main; func main() { println("hello, a greeting longer than forty characters") }`
	id, err := k.Start(context.Background(), "coder", writeArgs{Path: "greet.go", Content: content})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(context.Background(), id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "--dir", dir, "approvals")
	want := `tool write_file {"content":"package main; func main() { println(\"hello, a greeting longer than forty characters\") }","path":"greet.go"}`
	if code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("approvals: exit %d: %s%s\nwant it to show %s", code, stdout, stderr, want)
	}
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "approvals")
	var listed struct {
		Approvals []struct {
			Args writeArgs `json:"args"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &listed) != nil || len(listed.Approvals) != 1 {
		t.Fatalf("approvals --json: exit %d: %s%s", code, stdout, stderr)
	}
	if a := listed.Approvals[0].Args; a.Path != "greet.go" || a.Content != content {
		t.Fatalf("approvals --json args = %+v, want the call's args as a JSON object", a)
	}
}

// TestReadableLLMResult: events --json shows an LLM response's body as
// JSON when it is JSON, and leaves other bytes base64 (the golden file
// events_json shows the first case in context).
func TestReadableLLMResult(t *testing.T) {
	for _, c := range []struct {
		name, result, want string
		ok                 bool
	}{
		{"json body", `{"status":200,"body":"eyJhIjogMX0="}`, `{"status":200,"body":{"a":1}}`, true},
		{"text body", `{"status":200,"body":"aGVsbG8="}`, "", false},
		{"binary body", `{"status":200,"body":"/w=="}`, "", false},
		{"not a response", `"hello"`, "", false},
	} {
		got, ok := readableLLMResult([]byte(c.result))
		if ok != c.ok || string(got) != c.want {
			t.Errorf("%s: readableLLMResult(%s) = %s, %v; want %s, %v", c.name, c.result, got, ok, c.want, c.ok)
		}
	}
}
