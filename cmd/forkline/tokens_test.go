package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// TestTokensShown: the usage an execution's llm calls recorded (DESIGN
// §16) is summed over the lineage by forkline events (its header, and
// --json) and forkline show (to the event shown); forkline ls shows the
// sums the store keeps for the execution's own run (Info.Tokens).
func TestTokensShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":5}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: sdk.Transport(nil)}
	if _, err := sdk.Register(k, "chat", func(ctx context.Context, _ struct{}) (string, error) {
		for _, q := range []string{"a", "b"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","q":"`+q+`"}`))
			resp, err := client.Do(req)
			if err != nil {
				return "", err
			}
			_ = resp.Body.Close()
		}
		return "ok", nil
	}); err != nil {
		t.Fatal(err)
	}
	id, _ := k.Start(t.Context(), "chat", struct{}{})
	if _, err := k.Run(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events", id.String()}, ", 24+10 tokens\n"},
		{[]string{"--json", "events", id.String()}, `"tokens": {`},
		{[]string{"show", id.String(), "4"}, "tokens     12 in, 5 out (the lineage's llm calls to seq 4)"},
		{[]string{"show", id.String(), "6"}, "tokens     24 in, 10 out (the lineage's llm calls to seq 6)"},
		// ls reads the sums the store keeps (Info.Tokens), folding nothing.
		{[]string{"ls"}, "completed  -      24+10   -"},
		{[]string{"--json", "ls"}, "\"tokens\": {\n        \"input\": 24,\n        \"output\": 10\n      }"},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"--dir", dir}, c.args...)...)
		if code != 0 || !strings.Contains(stdout, c.want) {
			t.Errorf("%v: exit %d, want %q in:\n%s%s", c.args, code, c.want, stdout, stderr)
		}
	}
}
