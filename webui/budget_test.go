package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestBudgetOnPage: an execution's page shows its spend against its
// budget (DESIGN §17), a reached limit marked; a fork inherits the budget
// and its spend counts the prefix; an execution without a budget shows
// none.
func TestBudgetOnPage(t *testing.T) {
	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	tool := sdk.DefineTool("t", func(_ context.Context, i int) (int, error) { return i, nil })
	a, err := sdk.Register(k, "a", func(ctx context.Context, n int) (int, error) {
		ran := 0
		for i := range n {
			if _, err := tool.Call(ctx, i); err == nil {
				ran++
			}
		}
		return ran, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := k.Start(ctx, "a", 2, sdk.Budget(sdk.Limits{MaxToolCalls: 1, MaxTokens: 500}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	plain, err := k.Start(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, plain); err != nil {
		t.Fatal(err)
	}
	f, err := k.Fork(ctx, id, 5) // after the denial: one tool call in the prefix
	if err != nil {
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
	for _, id := range []string{id.String(), f.String()} {
		page := get("/e/" + id)
		for _, want := range []string{`<p id="budget">budget:`, "0 of 500 tokens</span>", "0 (no limit) llm calls</span>",
			`<span class="reached">1 of 1 tool calls — reached</span>`} {
			if !strings.Contains(page, want) {
				t.Errorf("GET /e/%s: want %q in:\n%s", id, want, page)
			}
		}
	}
	if page := get("/e/" + plain.String()); strings.Contains(page, `id="budget"`) {
		t.Errorf("an execution without a budget shows one:\n%s", page)
	}
}
