package webui_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestPolicyOnLivePage (DESIGN §17): an execution's page lists each
// policy decision with its rule id and reason (a denial and an approval
// request), and its awaited approval shows who may decide, when it
// expires and the rule's message, on the execution's page and on
// /approvals. A decider not among the approvers is 403 and nothing is
// appended.
func TestPolicyOnLivePage(t *testing.T) {
	ctx := context.Background()
	bundle, err := policy.ParseBundle([]byte(`default: allow
rules:
  - id: no-fives
    priority: 1
    when: {target: pay, args: {cents: {equals: 5}}}
    then: {decision: deny, reason: "fives are not paid"}
  - id: big-pay
    priority: 2
    when: {target: pay, args: {cents: {equals: 700}}}
    then:
      decision: approve
      reason: "a big payment"
      approval: {approvers: [alice, carol], timeout: 2h, message: "pay 7 dollars?"}
`))
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.Open("", sdk.WithBundle(bundle), sdk.ParkAfter(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	type payArgs struct {
		Cents int `json:"cents"`
	}
	pay := sdk.DefineTool("pay", func(_ context.Context, a payArgs) (string, error) { return "paid", nil }, sdk.AtMostOnce())
	if _, err := sdk.Register(k, "payer", func(ctx context.Context, cents int) (string, error) {
		if _, err := pay.Call(ctx, payArgs{Cents: 5}); !errors.Is(err, sdk.ErrDenied) {
			return "", errors.New("pay 5 was not denied")
		}
		return pay.Call(ctx, payArgs{Cents: cents})
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(webui.Handler(k))
	t.Cleanup(srv.Close)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d:\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	id, err := k.Start(ctx, "payer", 700)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	page := get("/e/" + id.String())
	_, decisions, ok := strings.Cut(page, `<table id="decisions">`)
	if !ok {
		t.Fatalf("no policy decisions table:\n%s", page)
	}
	decisions, _, _ = strings.Cut(decisions, "</table>")
	for _, want := range []string{"denied policy", "no-fives", "fives are not paid", "approval asked", "big-pay", "a big payment"} {
		if !strings.Contains(decisions, want) {
			t.Errorf("policy decisions lack %q:\n%s", want, decisions)
		}
	}
	if strings.Index(decisions, "no-fives") > strings.Index(decisions, "big-pay") {
		t.Errorf("policy decisions out of order:\n%s", decisions)
	}
	for _, path := range []string{"/e/" + id.String(), "/approvals"} {
		body := get(path)
		_, pending, ok := strings.Cut(body, `<table id="pending">`)
		if !ok {
			t.Fatalf("GET %s: no pending table:\n%s", path, body)
		}
		for _, want := range []string{`<td class="approvers">alice, carol`, `<span class="expires">expires `, "pay 7 dollars?", "big-pay"} {
			if !strings.Contains(pending, want) {
				t.Errorf("GET %s: awaited approval lacks %q:\n%s", path, want, pending)
			}
		}
	}

	count := func() int {
		n := 0
		for _, err := range k.Events(ctx, id) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	before := count()
	pending, err := k.AwaitedApprovals(ctx, id)
	if err != nil || len(pending) != 1 {
		t.Fatalf("AwaitedApprovals = %v, %v", pending, err)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/e/"+id.String()+"/approve",
		strings.NewReader(url.Values{"step": {pending[0].StepID}, "by": {"mallory"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || count() != before {
		t.Fatalf("approve by mallory: %d, %d events (was %d); want 403 and nothing appended", resp.StatusCode, count(), before)
	}
}
