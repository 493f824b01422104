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

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestApprovalsPage: a call the gate sends for approval shows on the
// approvals page and on its execution's page, with forms whose requests
// record exactly one decision; bad, repeated and cross-site decisions are
// refused and append nothing (DESIGN §12).
func TestApprovalsPage(t *testing.T) {
	ctx := context.Background()
	rules, err := policy.ParseRules("approve tool:pay payments need a person")
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.Open("", sdk.WithGate(rules.Gate()), sdk.ParkAfter(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	pay := sdk.DefineTool("pay", func(_ context.Context, cents int) (string, error) { return "paid", nil }, sdk.AtMostOnce())
	if _, err := sdk.Register(k, "payer", func(ctx context.Context, cents int) (string, error) { return pay.Call(ctx, cents) }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(webui.Handler(k))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/approvals"); code != 200 || !strings.Contains(body, "no call awaits an approval") {
		t.Fatalf("GET /approvals with none = %d:\n%s", code, body)
	}

	id, err := k.Start(ctx, "payer", 250)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	pending, err := k.AwaitedApprovals(ctx, id)
	if err != nil || len(pending) != 1 {
		t.Fatalf("AwaitedApprovals = %v, %v; want one", pending, err)
	}
	step := pending[0].StepID
	for _, path := range []string{"/approvals", "/e/" + id.String()} {
		code, body := get(path)
		if code != 200 || !strings.Contains(body, step) || !strings.Contains(body, "payments need a person") || !strings.Contains(body, "tool pay") {
			t.Fatalf("GET %s = %d, want the awaited call:\n%s", path, code, body)
		}
	}
	// The forms' actions resolve to the decision endpoints from both pages.
	if _, body := get("/approvals"); !strings.Contains(body, `action="e/`+id.String()+`/approve"`) {
		t.Fatalf("approvals page: no approve form for %s:\n%s", id, body)
	}
	if _, body := get("/e/" + id.String()); !strings.Contains(body, `action="`+id.String()+`/reject"`) {
		t.Fatalf("execution page: no reject form:\n%s", body)
	}

	heads := func() []string {
		var out []string
		for ev, err := range k.Events(ctx, id) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev.Kind().String())
		}
		return out
	}
	before := strings.Join(heads(), " ")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(verb string, form url.Values, header http.Header) int {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/e/"+id.String()+"/"+verb, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusSeeOther {
			if loc := resp.Header.Get("Location"); loc != "../"+id.String() {
				t.Errorf("POST %s: Location %q, want ../%s", verb, loc, id)
			}
		}
		return resp.StatusCode
	}
	for _, c := range []struct {
		verb   string
		form   url.Values
		header http.Header
		want   int
	}{
		{"approve", url.Values{}, nil, 400},
		{"approve", url.Values{"step": {"nosuchstep"}}, nil, 409},
		{"reject", url.Values{"step": {step}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, 403},
		{"approve", url.Values{"step": {step}, "by": {"a\x00b"}}, nil, 400}, // a name with a control character
	} {
		if got := post(c.verb, c.form, c.header); got != c.want {
			t.Errorf("POST %s %v = %d, want %d", c.verb, c.form, got, c.want)
		}
	}
	if after := strings.Join(heads(), " "); after != before {
		t.Fatalf("refused decisions appended: %s, was %s", after, before)
	}
	if got := post("approve", url.Values{"step": {step}, "note": {"ok by web"}, "by": {"carol"}}, nil); got != 303 {
		t.Fatalf("POST approve = %d, want 303", got)
	}
	granted := strings.Join(heads(), " ")
	if granted != before+" approval.granted" {
		t.Fatalf("events after approve: %s, want %s approval.granted", granted, before)
	}
	var last eventlog.Event
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if g, ok := last.Data.(*eventlog.ApprovalGranted); !ok || g.StepID != step || g.Note != "ok by web" || g.By != "carol" {
		t.Fatalf("last event %+v, want approval.granted of %s by carol noted %q", last.Data, step, "ok by web")
	}
	if got := post("reject", url.Values{"step": {step}}, nil); got != 409 {
		t.Errorf("deciding again = %d, want 409", got)
	}
	if after := strings.Join(heads(), " "); after != granted {
		t.Fatalf("the second decision appended: %s", after)
	}
	if code, body := get("/approvals"); code != 200 || !strings.Contains(body, "no call awaits an approval") {
		t.Fatalf("GET /approvals after the decision = %d:\n%s", code, body)
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil || out != "paid" {
		t.Fatalf("output %q, %v; want paid", out, err)
	}
}
