package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestBrowserReplyGrows (DESIGN §16): while an llm step's reply streams
// from a slow fake server — two events sent, the third held back — the
// execution's page in headless chromium shows the two events' text under
// the step (through /e/{id}/deltas), not the third; once the server sends
// the rest and the stream reaches EOF, the page shows the whole reply, the
// body step.succeeded recorded.
func TestBrowserReplyGrows(t *testing.T) {
	path := chromium(t)
	ctx := context.Background()
	release := make(chan struct{})
	first := "data: {\"text\":\"Hello\"}\n\n" + "data: {\"text\":\", wor\"}\n\n"
	rest := "data: {\"text\":\"ld!\"}\n\n"
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, s := range []string{first[:24], first[24:]} {
			_, _ = io.WriteString(w, s)
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
		<-release
		_, _ = io.WriteString(w, rest)
	}))
	defer model.Close()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	rt := sdk.Transport(nil)
	chat, err := sdk.Register(k, "chat", func(ctx context.Context, _ int) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, model.URL+"/v1/chat", strings.NewReader(`{"stream":true}`))
		if err != nil {
			return "", err
		}
		resp, err := (&http.Client{Transport: rt}).Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	if err != nil {
		t.Fatal(err)
	}
	id, err := chat.Start(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)

	srv := httptest.NewServer(webui.Handler(k))
	t.Cleanup(srv.Close) // after the browser is gone (openBrowser)
	br := openBrowser(t, path, 1000)
	bctx := br.ctx
	reply := func() string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#replies pre")).map(function (p) { return p.id + "=" + p.textContent; }).join("|")`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// The page is open (its deltas stream subscribed) before the run starts.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/e/"+id.String())); err != nil {
		t.Fatal(err)
	}
	// (The route flushes its headers just before it subscribes.)
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("replies").dataset.watching === "1"`)); err != nil {
		t.Fatalf("the page never opened its deltas stream: %v", err)
	}
	go func() { _, err := chat.Run(ctx, id); ran <- err }()

	// Partial: the first two events, not the third.
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`(function () { var p = document.querySelector("#replies pre"); return !!p && p.textContent.indexOf(", wor") >= 0; })()`)); err != nil {
		t.Fatalf("the page never showed the partial reply: %v (it shows %q)", err, reply())
	}
	partial := reply()
	stepID := llmStep(t, k, id)
	if want := "reply-" + stepID + "=" + first; partial != want {
		t.Fatalf("while streaming the page shows %q, want %q", partial, want)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if ink, total := inked(t, shot); ink == 0 || ink == total {
		t.Fatalf("screenshot while streaming has %d of %d pixels inked", ink, total)
	}

	// The rest arrives: the whole reply, as recorded.
	close(release)
	released = true
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`(function () { var p = document.querySelector("#replies pre"); return !!p && p.textContent.indexOf("ld!") >= 0; })()`)); err != nil {
		t.Fatalf("the page never showed the whole reply: %v (it shows %q)", err, reply())
	}
	if got, want := reply(), "reply-"+stepID+"="+first+rest; got != want {
		t.Fatalf("after EOF the page shows %q, want %q", got, want)
	}
}

// llmStep returns the StepID of id's llm step.started.
func llmStep(t *testing.T, k *sdk.Kernel, id eventlog.ID) string {
	t.Helper()
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.Data.(*eventlog.StepStarted); ok && p.StepKind == eventlog.StepLLM {
			return p.StepID
		}
	}
	t.Fatalf("%s has no llm step.started", id)
	return ""
}
