package sdk_test

import (
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestStepIDsPinned pins the StepIDs of valid args, so that a change to how
// args are checked or canonicalized (for example refusing invalid UTF-8)
// provably changes no identity a recorded log relies on.
func TestStepIDsPinned(t *testing.T) {
	for _, c := range []struct {
		name string
		args any
		want string
	}{
		{"nil", nil, "f4f6730a19bdac955439f543f21ee17c"},
		{"int", 42, "45e265f326d48944efb8ea3bf092826f"},
		{"string", "hello", "1f383b8ae81f83043a3ccf1b3b18f3e6"},
		{"unicode", "héllo wörld ✓ 日本", "f14eee92d5dfbfb8bdc50821ebfda9b9"},
		{"replacement char", "a\uFFFDb", "14d20b5fceae5c38ec9228b2c7c8cdd0"},
		{"literal backslash-u", `a\ufffd`, "3428ef9fb6d9a22d181487e237e164e2"},
		{"html", "<a&b>", "23ce629cda5e35e79b7f8f353429e84a"},
		{"control", "tab\tnewline\n\x01", "33eb7cccb407f1043e8bc8f25b92defb"},
		{"line separator", "a\u2028b", "6a41a5519cf37208bce60710680af476"},
		{"map sorted", map[string]any{"b": 1, "a": []any{"x", 2.5}}, "958bfadeb91a158622b6e0da32617ab3"},
		{"struct", struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}{"main.go", "package main\n"}, "f4544a3a6344d0da7e6cba8b4eabead4"},
		{"bytes", []byte{0xff, 0x00, 0x80}, "23fff3efb2b6e50afb0c0e7963f88198"},
	} {
		got := callEchoID(t, c.args)
		if got != c.want {
			t.Errorf("%s: StepID %s, pinned %s", c.name, got, c.want)
		}
	}
	// The function itself, on fixed canonical args.
	if got := sdk.StepID(eventlog.StepTool, "echo", []byte(`{"a":1}`), 3); got != "dc1c70f24e90d4f86daad1071ceae9b5" {
		t.Errorf("StepID(tool, echo, {\"a\":1}, 3) = %s", got)
	}
}

func callEchoID(t *testing.T, args any) string {
	t.Helper()
	id, _ := callEcho(t, args)
	return id
}
