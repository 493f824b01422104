package webui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/fork"
	"github.com/forkline/forkline/webui"
)

// forked runs an execution of 1, forks it at seq 4 (after step one) and
// runs the fork.
func (r *rig) forked(t *testing.T) (parent, child eventlog.ID) {
	t.Helper()
	ctx := context.Background()
	parent = r.run(t, 1)
	child, err := r.k.Fork(ctx, parent, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.two.Run(ctx, child); err != nil {
		t.Fatal(err)
	}
	return parent, child
}

// TestDiffPage: a fork's page links to its diff against its parent, which
// shows the shared prefix and the aligned steps; two unrelated executions
// with other inputs show changed results; bad input is 400 or 404 and
// appends nothing. DESIGN §12, §13.
func TestDiffPage(t *testing.T) {
	r := newRig(t)
	parent, child := r.forked(t)
	other := r.run(t, 5)

	_, page := r.get(t, "/e/"+child.String())
	link := `href="../diff?a=` + parent.String() + `&amp;b=` + child.String() + `"`
	if !strings.Contains(page, link) {
		t.Fatalf("the fork's page lacks the link %s:\n%s", link, page)
	}
	code, body := r.get(t, "/diff?a="+parent.String()+"&b="+child.String())
	for _, want := range []string{"shared prefix: events 1–4", `<tr class="same">`, "local two", "0 changed · 0 only in A · 0 only in B · 1 same"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET /diff parent/fork = %d, want %q in:\n%s", code, want, body)
		}
	}
	code, body = r.get(t, "/diff?a="+parent.String()+"&b="+other.String())
	for _, want := range []string{"no shared prefix", `<tr class="changed">`, "succeeded 2", "succeeded 6", "2 changed"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET /diff unrelated = %d, want %q in:\n%s", code, want, body)
		}
	}

	n, events := r.executions(t)
	var unknown eventlog.ID
	unknown[0] = 7
	for path, want := range map[string]int{
		"/diff":                           400,
		"/diff?a=" + parent.String():      400,
		"/diff?a=xyz&b=" + child.String(): 400,
		"/diff?a=" + parent.String() + "&b=" + unknown.String(): 404,
	} {
		if code, body := r.get(t, path); code != want {
			t.Errorf("GET %s = %d %q, want %d", path, code, body, want)
		}
	}
	if n2, events2 := r.executions(t); n2 != n || events2 != events {
		t.Errorf("bad diff requests changed the log: %d executions, %d events; before %d, %d", n2, events2, n, events)
	}
}

// TestDiffBrowser opens the diff page in headless chromium twice: the live
// page, reached from the fork's page by its link, and the file WriteDiff
// writes (what forkline diff --html writes), opened from disk. Each must
// show the aligned steps, and its screenshot must not be an empty page.
// FORKLINE_SCREENSHOT_DIFF=FILE keeps the file page's screenshot.
func TestDiffBrowser(t *testing.T) {
	path := chromium(t)
	r := newRig(t)
	parent, child := r.forked(t)
	other := r.run(t, 5)
	ctx := context.Background()

	c, err := fork.Diff(ctx, r.k.Log(), parent, other)
	if err != nil {
		t.Fatal(err)
	}
	res, err := webui.DiffResources(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "diff.html")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := webui.WriteDiff(f, c, res); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	br := openBrowser(t, path, 800)
	bctx := br.ctx
	do, text := br.Do, br.Text
	shot := func() []byte {
		t.Helper()
		b, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if ink, total := inked(t, b); ink*100 < total {
			t.Fatalf("screenshot has %d of %d pixels inked; an empty page?", ink, total)
		}
		return b
	}

	// The live page, from the fork's link.
	do(chromedp.Navigate(r.srv.URL+"/e/"+child.String()), chromedp.WaitVisible(chromedp.CSS("#diffparent")),
		chromedp.Click(chromedp.CSS("#diffparent")), chromedp.WaitVisible(chromedp.CSS("#steps")))
	if p := text("#prefix"); !strings.Contains(p, "shared prefix: events 1–4") {
		t.Errorf("live diff page: prefix line %q", p)
	}
	if steps := text("#steps tbody"); !strings.Contains(steps, "local two") || !strings.Contains(steps, "same") {
		t.Errorf("live diff page: steps %q", steps)
	}
	shot()

	// The file, opened from disk: changed results highlighted.
	do(chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.CSS("#steps")))
	changed, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#steps tr.changed").length`))
	if err != nil {
		t.Fatal(err)
	}
	if changed != 2 {
		t.Errorf("the file page highlights %d changed steps, want 2", changed)
	}
	bg, err := chromedp.Run(bctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("#steps tr.changed td")).backgroundColor`))
	if err != nil || bg == "rgba(0, 0, 0, 0)" {
		t.Errorf("a changed row's background is %q (%v), want highlighted", bg, err)
	}
	b := shot()
	if f := os.Getenv("FORKLINE_SCREENSHOT_DIFF"); f != "" {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The diff page shows the changed fields of a changed result (issue 38
// item 6), one row each.
func TestWriteDiffFields(t *testing.T) {
	c := &fork.Comparison{Steps: []fork.StepDiff{{StepID: "s1", Kind: eventlog.StepTool, Target: "deploy", Args: json.RawMessage(`{}`),
		Change: fork.Changed,
		A:      &fork.StepOutcome{Seq: 4, Status: "succeeded", Result: json.RawMessage(`{"env":"prod"}`)},
		B:      &fork.StepOutcome{Seq: 4, Status: "succeeded", Result: json.RawMessage(`{"env":"staging"}`), Overridden: true},
		Fields: fork.JSONDiff(json.RawMessage(`{"env":"prod"}`), json.RawMessage(`{"env":"staging"}`))}}}
	var buf bytes.Buffer
	if err := webui.WriteDiff(&buf, c, nil); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`<tr class="field"><td class="step">field <span class="mono">/env</span>`, `&#34;prod&#34;`, `&#34;staging&#34;`} {
		if !strings.Contains(page, want) {
			t.Errorf("the diff page does not hold %s", want)
		}
	}
}
