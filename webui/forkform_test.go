package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestForkFormEdits: the fork preview at a step's terminal event offers
// to edit that step; the form's new result is recorded in fork.created as
// an ordinary override, which the fork replays; a form with both a result
// and tool-call arguments, or tool-call arguments of a step that is not an
// LLM call, is refused and writes nothing (issue 38 item 5). The list page
// has the owner column, "-" for an ended execution.
func TestForkFormEdits(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	id := r.run(t, 1)
	var step string
	for ev, err := range r.k.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.Data.(*eventlog.StepSucceeded); ok && ev.Seq == 4 {
			step = p.StepID
		}
	}
	base := "/e/" + id.String() + "/fork"
	code, body := r.get(t, base+"?at=4")
	if code != 200 || !strings.Contains(body, `name="step" value="`+step+`"`) || !strings.Contains(body, `id="result"`) || strings.Contains(body, `id="toolargs"`) {
		t.Fatalf("preview at a local step's end = %d, want its edit form without tool arguments:\n%s", code, body)
	}
	if _, body := r.get(t, base+"?at=3"); strings.Contains(body, `name="step"`) {
		t.Fatal("the preview at a step.started offers to edit a step")
	}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(form url.Values) int {
		t.Helper()
		resp, err := client.PostForm(r.srv.URL+base, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	n0, ev0 := r.executions(t)
	for name, form := range map[string]url.Values{
		"both":          {"at": {"4"}, "step": {step}, "result": {"41"}, "tool": {"deploy"}, "tool_args": {"env=x"}},
		"no step":       {"at": {"4"}, "result": {"41"}},
		"not an LLM":    {"at": {"4"}, "step": {step}, "tool": {"deploy"}, "tool_args": {"env=x"}},
		"bad tool args": {"at": {"4"}, "step": {step}, "tool": {"deploy"}, "tool_args": {"env:={"}},
	} {
		if code := post(form); code != 400 {
			t.Errorf("%s: POST fork = %d, want 400", name, code)
		}
	}
	if n, ev := r.executions(t); n != n0 || ev != ev0 {
		t.Fatalf("refused fork forms appended: %d executions %d events, were %d and %d", n, ev, n0, ev0)
	}

	if code := post(url.Values{"at": {"4"}, "step": {step}, "result": {"41"}}); code != 303 {
		t.Fatalf("POST fork with a new result = %d, want 303", code)
	}
	forks, err := r.k.List(ctx, sdk.Filter{Parent: id})
	if err != nil || len(forks) != 1 {
		t.Fatalf("forks = %+v, %v", forks, err)
	}
	var fc *eventlog.ForkCreated
	for ev, err := range r.k.Events(ctx, forks[0].ID) {
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := ev.Data.(*eventlog.ForkCreated); ok {
			fc = p
		}
	}
	if fc == nil || !cmp.Equal(fc.Overrides, []eventlog.StepOverride{{StepID: step, Result: []byte("41")}}) {
		t.Fatalf("fork.created = %+v, want one override of %s with 41", fc, step)
	}
	if out, err := r.two.Run(ctx, forks[0].ID); err != nil || out != 82 {
		t.Fatalf("fork output %d (%v), want 82 (the edited 41 doubled)", out, err)
	}

	_, list := r.get(t, "/")
	if !strings.Contains(list, "<th>owner</th>") || !strings.Contains(list, `<td class="mono owner">-</td>`) {
		t.Fatalf("the list lacks the owner column or its \"-\" for ended executions:\n%s", list)
	}
}
