package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestServeScreenshot opens, in headless chromium, the page that the
// README's quick start shows: `forkline serve` on the folder of
// `forkline demo`, at the demo's first execution with its two forks. The
// page must show the execution, both forks and every event; with
// FORKLINE_SCREENSHOT=FILE the screenshot is kept (docs/serve.png). The
// browser signs in through the link serve prints (before, the page is
// refused). It
// skips without chromium (fails with FORKLINE_REQUIRE_BROWSER=1).
func TestServeScreenshot(t *testing.T) {
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("FORKLINE_REQUIRE_BROWSER") == "1" {
			t.Fatal("no chromium on PATH and FORKLINE_REQUIRE_BROWSER=1 (apt-get install chromium)")
		}
		t.Skip("no chromium on PATH: browser test skipped (apt-get install chromium)")
	}
	t.Setenv("LLM_MODEL", "")
	dir := t.TempDir()
	if _, stderr, code := runCLI(t, "--dir", dir, "demo"); code != exitOK {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	listed := lsJSON(t, "--dir", dir)
	if len(listed) != 4 {
		t.Fatalf("the demo made %d executions, want a run and three forks", len(listed))
	}
	root := listed[0]

	// serve in another process; the browser signs in through the link
	// it prints.
	s := startServe(t, dir)
	defer s.stop(t)
	if s.login == "" {
		t.Fatal("serve printed no sign-in link")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	bctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()
	last := fmt.Sprintf("#seq-%d", root.Head)
	if err := chromedp.Do(bctx, chromedp.Navigate(s.url+"e/"+root.ID)); err != nil {
		t.Fatal(err)
	}
	if body, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("body"))); err != nil || !strings.Contains(body, "wants its token") {
		t.Fatalf("the page before signing in: %q, %v", body, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(s.login)); err != nil {
		t.Fatal(err)
	}
	if loc, err := chromedp.Run(bctx, chromedp.Location()); err != nil || loc != s.url {
		t.Fatalf("after signing in the browser is at %q (%v), want %s without the token", loc, err, s.url)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(s.url+"e/"+root.ID)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(last)),
		chromedp.Sleep(time.Second)); err != nil { // the timeline frame loads after the table
		t.Fatal(err)
	}
	page, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{root.ID, listed[1].ID, listed[2].ID, "execution.completed", "resource.captured"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page of %s does not show %q:\n%s", root.ID, want, page)
		}
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	ink := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); r < 0xe800 || g < 0xe800 || bl < 0xe800 {
				ink++
			}
		}
	}
	if ink*100 < b.Dx()*b.Dy()*3 {
		t.Fatalf("screenshot has %d of %d pixels inked; an empty page?", ink, b.Dx()*b.Dy())
	}
	if f := os.Getenv("FORKLINE_SCREENSHOT"); f != "" {
		if err := os.WriteFile(f, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
