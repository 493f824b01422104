package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

// pinnedCall is one call the "pins" agent records: its kind, target,
// canonical args and StepID (a TimerID for a sleep).
type pinnedCall struct {
	kind   eventlog.StepKind
	target string
	args   string
	id     string
}

// pinArgs are the arg shapes of TestStepIDsAndArgsPinned, in call order.
var pinArgs = []any{
	map[string]any{"zeta": 1, "alpha": 2, "mid": map[string]any{"y": true, "b": nil, "ä": "x"}},
	map[string]any{"nested": []any{map[string]any{"k2": 1, "k1": []any{1.5, "s", nil}}, []any{}}, "e": map[string]any{}},
	map[string]any{"int": 42, "neg": -7, "float": 3.25, "big": uint64(18446744073709551615), "small": 1e-7, "exp": 1e21, "zero": 0.0},
	json.Number("12345678901234567890.500"),
	"héllo wörld ✓ 日本 \U0001F600",
	nil,
	pinTagged{Path: "main.go", Content: "package main\n\nfunc main() {}\n", Mode: 0o644, Skip: "dropped", Opt: ""},
	pinTagged{Path: "<a&b>", Content: "tab\t\"quote\" back\\slash \u2028 \x7f", Mode: 0},
	json.RawMessage(`{ "b" : "\u0041\/\u00e9", "a" : [ 1 , 2.50 , -0 ] , "b2":"x\ud83d\ude00" }`),
	json.RawMessage(`{"dup":1,"dup":{"z":0,"a":1}}`),
	[]string{"c", "a", "b"},
	[]byte("raw bytes \x00\xff"),
	true,
	map[int]string{10: "ten", 2: "two", -1: "minus one"},
}

// pinTagged is a struct with JSON tags: renamed, omitempty, skipped, and a
// field order that is not the sorted one.
type pinTagged struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    int    `json:"mode,omitempty"`
	Skip    string `json:"-"`
	Opt     string `json:"opt,omitempty"`
}

// TestStepIDsAndArgsPinned pins the canonical args and the StepID of every
// step kind (tool, local, llm, child, and a timer's TimerID) over many arg
// shapes and occurrences, as recorded by a real dispatch: replay's speed
// work must change neither (DESIGN §4: a recorded log must replay in every
// later version).
func TestStepIDsAndArgsPinned(t *testing.T) {
	got := recordPins(t)
	want := []pinnedCall{
		// Recorded by the implementation before the replay speed work.
		{"tool", "echo", "{\"alpha\":2,\"mid\":{\"b\":null,\"y\":true,\"ä\":\"x\"},\"zeta\":1}", "a444c1932307ad855089992d3cf76a63"},
		{"tool", "echo", "{\"e\":{},\"nested\":[{\"k1\":[1.5,\"s\",null],\"k2\":1},[]]}", "a99b9eb5de608eb4df2fa6827f05f0a8"},
		{"tool", "echo", "{\"big\":18446744073709551615,\"exp\":1e+21,\"float\":3.25,\"int\":42,\"neg\":-7,\"small\":1e-7,\"zero\":0}", "b34aa30ea561daa8033f768bcfa0a4a1"},
		{"tool", "echo", "12345678901234567890.500", "d62d8c09c709f4a7497c0b71c788d293"},
		{"tool", "echo", "\"héllo wörld ✓ 日本 😀\"", "14c622ed97d6f4162d3ce022251efc8d"},
		{"tool", "echo", "null", "f4f6730a19bdac955439f543f21ee17c"},
		{"tool", "echo", "{\"content\":\"package main\\n\\nfunc main() {}\\n\",\"mode\":420,\"path\":\"main.go\"}", "8ee6bfe2fc291f1803c6c8319d2cf1f6"},
		{"tool", "echo", "{\"content\":\"tab\\t\\\"quote\\\" back\\\\slash \\u2028 \x7f\",\"path\":\"<a&b>\"}", "e5208a8b2cd1332cb3f66dadb7b3bf60"},
		{"tool", "echo", "{\"a\":[1,2.50,-0],\"b\":\"A/é\",\"b2\":\"x😀\"}", "cc2e9fa7ff07c62d12845fa043cd82c4"},
		{"tool", "echo", "{\"dup\":{\"a\":1,\"z\":0}}", "4dd961b106c6d843b9e27fc350d7641c"},
		{"tool", "echo", "[\"c\",\"a\",\"b\"]", "499c66673a934ac438bd3aef2b59f202"},
		{"tool", "echo", "\"cmF3IGJ5dGVzIAD/\"", "edd9d0dc9fa736a213021a7cf9c16050"},
		{"tool", "echo", "true", "a6b02d2e25bb2328831864af9cc4f626"},
		{"tool", "echo", "{\"-1\":\"minus one\",\"10\":\"ten\",\"2\":\"two\"}", "29882628835a8bb095bd638b298e9f10"},
		{"tool", "echo", "{\"same\":\"args\"}", "8396ef0a52c7023b985ab96d5b73aa10"},
		{"tool", "echo", "{\"same\":\"args\"}", "7668c1f813b656341d3197f4c589e230"},
		{"tool", "echo", "{\"same\":\"args\"}", "c4f2958e7bead2e3ac3b2d40514b1bb7"},
		{"local", "draw", "", "63748724448a21b067b900aa3fbdb849"},
		{"local", "draw", "", "230779bd4133d5b177e79e43c67f120f"},
		{"llm", "m-1", "{\"body\":{\"messages\":[{\"content\":\"hi <b>\",\"role\":\"user\"}],\"model\":\"m-1\",\"temperature\":0.5},\"method\":\"POST\",\"url\":\"/v1/chat?x=1&a=2\"}", "22696b04acb5cb7851aeaf2b4b5f59c6"},
		{"llm", "m-1", "{\"body\":{\"messages\":[{\"content\":\"hi <b>\",\"role\":\"user\"}],\"model\":\"m-1\",\"temperature\":0.5},\"method\":\"POST\",\"url\":\"/v1/chat?x=1&a=2\"}", "c694d5eab4c3d32b3643bc3169e9f0c2"},
		{"llm", "llm.example:8080/v1/chat", "{\"method\":\"POST\",\"raw\":\"bm90IGpzb24g/w==\",\"url\":\"/v1/chat?x=1&a=2\"}", "0ad176050465187f2fe2eeab5f04ad09"},
		{"child", "pin-child", "{\"input\":{\"a\":1,\"n\":3}}", "2f850b33419265bae16bdf842c479828"},
		{"child", "pin-child", "{\"input\":{\"a\":1,\"n\":3}}", "e43e44d2426703634a1cf0a1940a7fbf"},
		{"timer", "sleep", "", "530a5796f8fda36882b4c29cf6fa21f0"},
		{"timer", "sleep", "", "71e53d37a4a2671efc156254c56994a8"},
	}
	if len(got) != len(want) {
		for _, c := range got {
			t.Logf("{%q, %q, %q, %q},", c.kind, c.target, c.args, c.id)
		}
		t.Fatalf("recorded %d calls, pinned %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: recorded\n  %+v\npinned\n  %+v", i, got[i], want[i])
		}
	}
}

// recordPins runs the "pins" agent once and returns, in log order, every
// step.started and timer.started it recorded.
func recordPins(t *testing.T) []pinnedCall {
	t.Helper()
	ctx := context.Background()
	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	echo := sdk.DefineTool("echo", func(ctx context.Context, a any) (string, error) { return "ok", nil })
	child, err := sdk.Register(k, "pin-child", func(ctx context.Context, in map[string]int) (int, error) { return in["n"], nil })
	if err != nil {
		t.Fatal(err)
	}
	llm := &http.Client{Transport: sdk.Transport(pinRoundTripper{})}
	_, err = sdk.Register(k, "pins", func(ctx context.Context, _ string) (string, error) {
		for _, a := range pinArgs {
			if _, err := echo.Call(ctx, a); err != nil {
				return "", fmt.Errorf("echo %#v: %w", a, err)
			}
		}
		for range 3 { // occurrences 0, 1, 2 of one call
			if _, err := echo.Call(ctx, map[string]string{"same": "args"}); err != nil {
				return "", err
			}
		}
		for range 2 {
			if _, err := sdk.Step(ctx, "draw", func(context.Context) (int, error) { return 4, nil }); err != nil {
				return "", err
			}
		}
		for _, body := range []string{
			`{"model":"m-1","messages":[{"role":"user","content":"hi <b>"}],"temperature":0.5}`,
			`{"temperature":0.5,"messages":[{"content":"hi <b>","role":"user"}],"model":"m-1"}`,
			"not json \xff",
		} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://llm.example:8080/v1/chat?x=1&a=2", strings.NewReader(body))
			if err != nil {
				return "", err
			}
			resp, err := llm.Do(req)
			if err != nil {
				return "", err
			}
			resp.Body.Close()
		}
		for range 2 {
			if _, err := child.Call(ctx, map[string]int{"n": 3, "a": 1}); err != nil {
				return "", err
			}
		}
		for range 2 {
			if err := sdk.Sleep(ctx, time.Nanosecond); err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	id, err := k.Start(ctx, "pins", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	var out []pinnedCall
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			out = append(out, pinnedCall{p.StepKind, p.Target, string(p.Args), p.StepID})
		case *eventlog.TimerStarted:
			out = append(out, pinnedCall{"timer", "sleep", "", p.TimerID})
		}
	}
	return out
}

// pinRoundTripper answers every request with an empty JSON object.
type pinRoundTripper struct{}

func (pinRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{}`)), Request: req,
	}, nil
}
