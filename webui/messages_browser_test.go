package webui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestBrowserSendForm drives the send form in headless chromium, signed in
// by the cookie as forkline serve serves the page (DESIGN §18): a page of
// another origin whose form posts a message to the execution — the cookie
// goes with it, the two servers being one site — is refused and nothing is
// appended; the execution's own page shows what it published and its form
// sends the message, which the waiting Recv returns; the page then shows
// the published reply and no form.
func TestBrowserSendForm(t *testing.T) {
	path := chromium(t)
	ctx := context.Background()
	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	if _, err := sdk.Register(k, "chat", func(ctx context.Context, _ int) (string, error) {
		if err := sdk.SetEvent(ctx, "status", "waiting for you"); err != nil {
			return "", err
		}
		msg, err := sdk.Recv[string](ctx, "user", time.Hour)
		if err != nil {
			return "", err
		}
		return "you said " + msg, sdk.SetEvent(ctx, "reply", "you said "+msg)
	}); err != nil {
		t.Fatal(err)
	}
	id, err := k.Start(ctx, "chat", 0)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { _, err := k.Run(runCtx, id); ran <- err }()
	waiting := []string{"execution.created", "dispatch.started", "event.set", "step.started"}
	deadline := time.Now().Add(30 * time.Second)
	for !cmp.Equal(kindsOf(t, k, id), waiting) {
		if time.Now().After(deadline) {
			t.Fatalf("the execution never reached its Recv: %v", kindsOf(t, k, id))
		}
		time.Sleep(10 * time.Millisecond)
	}

	srv := httptest.NewServer(webui.Handler(k, webui.WithToken(secret), webui.WithHosts()))
	t.Cleanup(srv.Close) // after the browser is gone (openBrowser)
	// Another origin on the same host: a page that posts the form to the
	// execution as soon as it loads.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/e/%s/send">
<input name="topic" value="user"><input name="value" value='"from elsewhere"'></form>
<script>document.getElementById("f").submit()</script>`, srv.URL, id)
	}))
	t.Cleanup(evil.Close)

	br := openBrowser(t, path, 1000)
	bctx := br.ctx
	do, text := br.Do, br.Text

	do(chromedp.Navigate(srv.URL + "/login?token=" + secret))

	// The other origin's post: the browser lands on the refusal, and the
	// lineage and the inbox are as they were.
	do(chromedp.Navigate(evil.URL), chromedp.WaitReady(chromedp.CSS("body")))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`location.href.includes("/send")`)); err != nil {
		t.Fatal(err)
	}
	if body := text("body"); !strings.Contains(strings.ToLower(body), "cross-origin") {
		t.Fatalf("the cross-site post was answered %q, want a refusal", body)
	}
	if got := kindsOf(t, k, id); !cmp.Equal(got, waiting) {
		t.Fatalf("after the cross-site post the lineage is %v, want %v", got, waiting)
	}
	if info, err := k.Info(ctx, id); err != nil || len(info.Pending) != 0 {
		t.Fatalf("after the cross-site post: %d message(s) pending (%v)", len(info.Pending), err)
	}

	// The execution's own page: what it published, then the form.
	do(chromedp.Navigate(srv.URL+"/e/"+id.String()), chromedp.WaitVisible(chromedp.CSS("#sendform")))
	if pub := text("#published"); !strings.Contains(pub, "status") || !strings.Contains(pub, "waiting for you") {
		t.Fatalf("published events: %q", pub)
	}
	fields, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#sendform input[name="topic"], #sendform input[name="value"], #sendform input[name="id"]').length`))
	if err != nil || fields != 3 {
		t.Fatalf("the send form has %d of its 3 fields (topic, value, id) (%v)", fields, err)
	}
	do(chromedp.SetValue(chromedp.CSS(`#sendform input[name="topic"]`), "user"),
		chromedp.SetValue(chromedp.CSS(`#sendform input[name="value"]`), `"hello"`),
		chromedp.SetValue(chromedp.CSS(`#sendform input[name="id"]`), "m1"),
		chromedp.Evaluate[chromedp.Void](`window.beforeSend = true`),
		chromedp.Submit(chromedp.CSS("#sendform")))
	// The post answers 303 to the page: wait for the new document.
	// (An evaluation made while the old document goes fails: try again.)
	for end := time.Now().Add(30 * time.Second); ; {
		fresh, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.beforeSend === undefined && document.readyState === "complete"`))
		if err == nil && fresh {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no new page 30 s after the send (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run after the page's send: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Recv did not return 30 s after the page's send")
	}
	want := append(waiting, "message.received", "step.succeeded", "event.set", "execution.completed")
	if got := kindsOf(t, k, id); !cmp.Equal(got, want) {
		t.Fatalf("after the page's send (-want +got):\n%s", cmp.Diff(want, got))
	}
	info, err := k.Info(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Messages) != 1 || info.Messages[0].MessageID != "m1" || info.Messages[0].Topic != "user" || !info.Messages[0].Consumed() {
		t.Fatalf("messages after the send: %+v", info.Messages)
	}

	// The ended execution's page: the reply it published, no form.
	do(chromedp.Navigate(srv.URL+"/e/"+id.String()), chromedp.WaitVisible(chromedp.CSS("#published")))
	if pub := text("#published"); !strings.Contains(pub, "reply") || !strings.Contains(pub, "you said hello") {
		t.Fatalf("published events after the reply: %q", pub)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#sendform").length`)); err != nil || n != 0 {
		t.Fatalf("the ended execution's page has %d send form(s) (%v)", n, err)
	}
}

// kindsOf returns the kinds of id's lineage in order.
func kindsOf(t *testing.T, k *sdk.Kernel, id eventlog.ID) []string {
	t.Helper()
	var out []string
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Kind().String())
	}
	return out
}
