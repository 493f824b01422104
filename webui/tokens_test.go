package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestTokensOnPage: an execution's page shows the tokens of its lineage's
// llm calls (a fold, a fork's prefix included) beside its own run's (the
// store's Info.Tokens), and the JSON API's execution record carries the
// own run's (DESIGN §16).
func TestTokensOnPage(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":5}}`)
	}))
	defer model.Close()
	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	client := &http.Client{Transport: sdk.Transport(nil)}
	chat, err := sdk.Register(k, "chat", func(ctx context.Context, _ int) (int, error) {
		for _, q := range []string{"a", "b"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, model.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","q":"`+q+`"}`))
			resp, err := client.Do(req)
			if err != nil {
				return 0, err
			}
			_ = resp.Body.Close()
		}
		return 2, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	id, err := chat.Start(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Run(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	// The fork starts after the first llm call: its prefix used 12+5, and
	// its own run the second call's 12+5.
	var firstDone uint64
	for ev, err := range k.Log().Events(context.Background(), id, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ev.Data.(*eventlog.StepSucceeded); ok && firstDone == 0 {
			firstDone = ev.Seq
		}
	}
	f, err := k.Fork(context.Background(), id, firstDone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Run(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(webui.Handler(k))
	defer srv.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	for _, c := range []struct{ path, want string }{
		{"/e/" + id.String(), "tokens: 24 in, 10 out over the lineage's llm calls (this run's own: 24 in, 10 out)"},
		{"/e/" + f.String(), "tokens: 24 in, 10 out over the lineage's llm calls (this run's own: 12 in, 5 out)"},
		{"/api/e/" + f.String(), `"tokens":{"input":12,"output":5}`},
		{"/api/e/" + id.String(), `"tokens":{"input":24,"output":10}`},
	} {
		if body := get(c.path); !strings.Contains(body, c.want) {
			t.Errorf("GET %s: want %q in:\n%s", c.path, c.want, body)
		}
	}
}
