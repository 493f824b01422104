package webui_test

import (
	"bytes"
	"context"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// chromium returns the path of the headless browser, or skips the test
// (fails it with FORKLINE_REQUIRE_BROWSER=1) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("FORKLINE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium on PATH and FORKLINE_REQUIRE_BROWSER=1 (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: browser test skipped (apt-get install chromium)")
	return ""
}

// inked counts the pixels of a screenshot that are not near-white.
func inked(t *testing.T, shot []byte) (ink, total int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xe800 || g < 0xe800 || bl < 0xe800 {
				ink++
			}
		}
	}
	return ink, b.Dx() * b.Dy()
}

// browser is one test's headless chromium tab: Do runs actions, failing
// the test on an error; Text reads an element's text.
type browser struct {
	t   *testing.T
	ctx context.Context // the tab's, with the test's 90 s limit
}

// openBrowser starts chromium at path with a window height px tall; it
// closes when the test's cleanups run, so a server the page streams from
// must be closed by a cleanup registered before it (t.Cleanup(srv.Close)),
// not by a defer, which would wait for the page's live streams.
func openBrowser(t *testing.T, path string, height int) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, height), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	bctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancelT)
	return &browser{t: t, ctx: bctx}
}

// Do runs steps in the tab.
func (b *browser) Do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// Text returns the text of the element sel selects.
func (b *browser) Text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// TestBrowser drives the page in headless chromium, signed in through
// /login?token= with a token and the Host check on: the list shows a
// running execution, its page gains events while it runs, and forking from
// the page creates a fork whose page opens. FORKLINE_SCREENSHOT=FILE keeps
// the screenshot of the execution page (docs/serve.png is the demo's page,
// made by cmd/forkline's TestServeScreenshot).
func TestBrowser(t *testing.T) {
	path := chromium(t)
	r := newRig(t)
	ctx := context.Background()
	id, err := r.two.Start(ctx, -1) // waits at the gate after step one
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { _, err := r.two.Run(ctx, id); ran <- err }()
	gateOpen := false
	defer func() {
		if !gateOpen {
			close(r.gate)
		}
		<-ran
	}()

	srv := httptest.NewServer(webui.Handler(r.k, webui.WithToken(secret), webui.WithHosts()))
	t.Cleanup(srv.Close) // after the browser is gone (openBrowser), with its live streams
	br := openBrowser(t, path, 1000)
	bctx := br.ctx

	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Served as forkline serve serves it: the browser signs in through
	// the link with the token, which leaves it at the list without the
	// token in the address.
	do(chromedp.Navigate(srv.URL + "/login?token=" + secret))
	if loc, err := chromedp.Run(bctx, chromedp.Location()); err != nil || loc != srv.URL+"/" {
		t.Fatalf("after signing in the browser is at %q (%v), want %s/", loc, err, srv.URL)
	}

	// The list shows the running execution.
	do(chromedp.Navigate(srv.URL + "/?status=running"))
	if list := text("#executions"); !strings.Contains(list, id.String()) || !strings.Contains(list, "running") {
		t.Fatalf("list of running executions:\n%s", list)
	}

	// Its page shows the events so far, then gains the rest live.
	do(chromedp.Click(chromedp.CSS(`a[href="e/`+id.String()+`"]`)), chromedp.WaitVisible(chromedp.CSS("#seq-4")))
	if row := text("#seq-4"); !strings.Contains(row, "step.succeeded") || !strings.Contains(row, "local one") {
		t.Fatalf("row 4 = %q", row)
	}
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#events tr[id]").length`))
	if err != nil {
		t.Fatal(err)
	}
	if rows != 4 {
		t.Fatalf("%d event rows while the handler waits, want 4", rows)
	}
	close(r.gate)
	gateOpen = true
	do(chromedp.WaitVisible(chromedp.CSS("#seq-7")))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("live").textContent.startsWith("ended")`)); err != nil {
		t.Fatal(err)
	}
	if row, live := text("#seq-7"), text("#live"); !strings.Contains(row, "execution.completed") || live != "ended · 7 events" {
		t.Fatalf("after the run: row 7 %q, live %q", row, live)
	}

	// Fork at seq 4 from the page: the preview, then the confirmation.
	do(chromedp.SetValue(chromedp.CSS("#forkat"), "4"), chromedp.Submit(chromedp.CSS("#forkform")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if preview := text("#coverage"); !strings.Contains(preview, "covered: the fork restores every resource") {
		t.Fatalf("fork preview: %q", preview)
	}
	if forks, _ := r.k.List(ctx, sdk.Filter{Parent: id}); len(forks) != 0 {
		t.Fatal("the preview created a fork")
	}
	do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#seq-5"))) // the fork's fork.created
	forks, err := r.k.List(ctx, sdk.Filter{Parent: id})
	if err != nil || len(forks) != 1 || forks[0].ForkSeq != 4 {
		t.Fatalf("forks = %+v, %v; want one at seq 4", forks, err)
	}
	url, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if title := text("h1"); !strings.HasSuffix(url, "/e/"+forks[0].ID.String()) || !strings.Contains(title, forks[0].ID.String()) {
		t.Fatalf("after forking the page is %s (%q), want the fork's", url, title)
	}
	if row := text("#seq-5"); !strings.Contains(row, "fork.created") {
		t.Fatalf("fork's row 5 = %q", row)
	}

	// The parent's page with its fork: a screenshot that is not empty.
	do(chromedp.Navigate(srv.URL+"/e/"+id.String()), chromedp.WaitVisible(chromedp.CSS("#seq-7")),
		chromedp.Sleep(time.Second)) // the timeline frame reloads after the last event
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	ink, total := inked(t, shot)
	if ink*100 < total*3 {
		t.Fatalf("screenshot has %d of %d pixels inked; an empty page?", ink, total)
	}
	if f := os.Getenv("FORKLINE_SCREENSHOT"); f != "" {
		if err := os.WriteFile(f, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
