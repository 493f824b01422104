package webui_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestBrowserApproveLive approves from the page in headless chromium, as
// forkline serve serves it, with a Serve running the execution (issue 38,
// item 7): the page of an execution awaiting approval shows the status
// badge "waiting" and the approval form; approving sends the browser back
// to the page, the Serve runs the approved at_most_once call, and while it
// runs the page — without being reloaded — shows the badge "running" and,
// in the live event table, the call in flight; when the call ends the
// badge turns "completed", still without a reload. The fork form at the
// in-flight event warns that a fork there sees the call as indeterminate.
// The lineage is checked event by event: one approval.granted by the name
// typed in the form, then the call.
func TestBrowserApproveLive(t *testing.T) {
	path := chromium(t)
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
	entered, release := make(chan struct{}), make(chan struct{})
	pay := sdk.DefineTool("pay", func(_ context.Context, cents int) (string, error) {
		close(entered)
		<-release
		return "paid " + strconv.Itoa(cents), nil
	}, sdk.AtMostOnce())
	if _, err := sdk.Register(k, "payer", func(ctx context.Context, cents int) (string, error) { return pay.Call(ctx, cents) }); err != nil {
		t.Fatal(err)
	}
	id, err := k.Start(ctx, "payer", 250)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(20*time.Millisecond)) }()
	released := false
	defer func() {
		if !released {
			close(release)
		}
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	}()
	waiting := []string{"execution.created", "dispatch.started", "approval.requested", "dispatch.parked"}
	waitFor(t, "the execution to park awaiting its approval", func() bool {
		return cmp.Equal(kindsOf(t, k, id), waiting)
	})
	if info, err := k.Info(ctx, id); err != nil || info.Status != eventlog.StatusWaiting {
		t.Fatalf("parked awaiting approval: status %s (%v), want waiting", info.Status, err)
	}

	srv := httptest.NewServer(webui.Handler(k, webui.WithToken(secret), webui.WithHosts()))
	t.Cleanup(srv.Close) // after the browser is gone (openBrowser)
	br := openBrowser(t, path, 1000)
	bctx := br.ctx
	do, text := br.Do, br.Text
	do(chromedp.Navigate(srv.URL + "/login?token=" + secret))
	do(chromedp.Navigate(srv.URL+"/e/"+id.String()), chromedp.WaitVisible(chromedp.CSS("#pending")))
	if badge := text("#status"); badge != "waiting" {
		t.Fatalf("badge of the execution awaiting approval = %q, want waiting", badge)
	}
	if pending := text("#pending"); !strings.Contains(pending, "tool pay") || !strings.Contains(pending, "payments need a person") {
		t.Fatalf("approval form: %q", pending)
	}

	do(chromedp.SetValue(chromedp.CSS(`#pending form[action$="/approve"] input[name="by"]`), "ana"),
		chromedp.Evaluate[chromedp.Void](`window.beforeApprove = true`),
		chromedp.Submit(chromedp.CSS(`#pending form[action$="/approve"]`)))
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call did not run 30 s after the page's approval")
	}
	// The page the approval's answer led to (it may reload once, on
	// leaving "waiting") shows the call in flight in its live table.
	poll(t, bctx, "the in-flight call in the live event table",
		`window.beforeApprove === undefined && document.readyState === "complete" && !!document.querySelector("#events td.inflight")`)
	inflight := text("#events td.inflight")
	if !strings.Contains(inflight, `at_most_once tool "pay" in flight`) {
		t.Fatalf("in-flight cell = %q", inflight)
	}
	poll(t, bctx, "the badge to read running", `document.getElementById("status").textContent === "running"`)
	seq, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("#events td.inflight").parentElement.id`))
	if err != nil || !strings.HasPrefix(seq, "seq-") {
		t.Fatalf("row of the in-flight cell: %q (%v)", seq, err)
	}
	do(chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`))

	close(release)
	released = true
	poll(t, bctx, "the badge to read completed", `document.getElementById("status").textContent === "completed"`)
	poll(t, bctx, "the live line to say ended", `document.getElementById("live").textContent.startsWith("ended")`)
	if same, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.sameDocument === true`)); err != nil || !same {
		t.Fatalf("the page was reloaded to show the completion (%v): the badge should follow the events live", err)
	}
	want := append(waiting, "approval.granted", "dispatch.started", "step.started", "step.succeeded", "execution.completed")
	got := kindsOf(t, k, id)
	if !cmp.Equal(got[:len(waiting)], waiting) || !cmp.Equal(dropKind(got[len(waiting):], "dispatch.started"), dropKind(want[len(waiting):], "dispatch.started")) {
		t.Fatalf("lineage after the page's approval (-want +got):\n%s", cmp.Diff(want, got))
	}
	var by []string
	for ev, err := range k.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := ev.Data.(*eventlog.ApprovalGranted); ok {
			by = append(by, g.By)
		}
	}
	if !cmp.Equal(by, []string{"ana"}) {
		t.Fatalf("approvals granted by %q, want one by the name typed in the form", by)
	}

	// The fork form at the event where the call was in flight.
	do(chromedp.Navigate(srv.URL+"/e/"+id.String()+"/fork?at="+strings.TrimPrefix(seq, "seq-")), chromedp.WaitVisible(chromedp.CSS("#coverage")))
	if warn := text(".warn.inflight"); !strings.Contains(warn, "at_most_once tool") || !strings.Contains(warn, "pay") || !strings.Contains(warn, "indeterminate") {
		t.Fatalf("fork form at %s: in-flight warning %q", seq, warn)
	}
}

// dropKind returns kinds without the kind drop (a dispatch.started the
// Serve may or may not have appended before the approval settled).
func dropKind(kinds []string, drop string) []string {
	var out []string
	for _, k := range kinds {
		if k != drop {
			out = append(out, k)
		}
	}
	return out
}

// poll waits until expr is true in the tab, failing the test after 30 s;
// an evaluation made while a document goes fails, and is tried again.
func poll(t *testing.T, bctx context.Context, what, expr string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; {
		ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("waited 30 s for %s (%v)", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor waits until cond holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
