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

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// TestSendForm: the page of an execution that waits in a Recv shows the
// values it published and a send form; a post of the form sends the
// message (appended at once, nobody running it); a value that is not
// JSON, an empty topic, a cross-site post and a post to an ended
// execution are refused and append nothing (DESIGN §18).
func TestSendForm(t *testing.T) {
	ctx := context.Background()
	k, err := sdk.Open("", sdk.ParkAfter(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	if _, err := sdk.Register(k, "chat", func(ctx context.Context, _ int) (string, error) {
		if err := sdk.SetEvent(ctx, "status", "waiting for you"); err != nil {
			return "", err
		}
		return sdk.Recv[string](ctx, "user", time.Hour)
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(webui.Handler(k))
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(id eventlog.ID, form url.Values, h http.Header) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/e/"+id.String()+"/send", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	kinds := func(id eventlog.ID) []string {
		var out []string
		for ev, err := range k.Events(ctx, id) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev.Kind().String())
		}
		return out
	}

	id, _ := k.Start(ctx, "chat", 0)
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	resp, err := http.Get(srv.URL + "/e/" + id.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`id="sendform"`, `id="published"`, "status", "waiting for you"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("the page lacks %q:\n%s", want, body)
		}
	}
	parked := []string{"execution.created", "dispatch.started", "event.set", "step.started", "dispatch.parked"}
	for _, c := range []struct {
		name string
		form url.Values
		h    http.Header
		want int
	}{
		{"not JSON", url.Values{"topic": {"user"}, "value": {"hello"}}, nil, 400},
		{"empty topic", url.Values{"topic": {""}, "value": {`"hello"`}}, nil, 400},
		{"cross-site", url.Values{"topic": {"user"}, "value": {`"hello"`}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, 403},
	} {
		if code := post(id, c.form, c.h); code != c.want {
			t.Errorf("%s: %d, want %d", c.name, code, c.want)
		}
	}
	if diff := cmp.Diff(parked, kinds(id)); diff != "" {
		t.Fatalf("refused posts wrote (-want +got):\n%s", diff)
	}
	form := url.Values{"topic": {"user"}, "value": {`"hello"`}, "id": {"m1"}}
	if code := post(id, form, nil); code != http.StatusSeeOther {
		t.Fatalf("send: %d, want 303", code)
	}
	if diff := cmp.Diff(append(parked, "message.received"), kinds(id)); diff != "" {
		t.Fatalf("after the send (-want +got):\n%s", diff)
	}
	if res, err := k.Run(ctx, id); err != nil || string(res.Output) != `"hello"` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	if code := post(id, url.Values{"topic": {"user"}, "value": {`"late"`}}, nil); code != http.StatusConflict {
		t.Fatalf("send to the ended execution: %d, want 409", code)
	}
	resp, err = http.Get(srv.URL + "/e/" + id.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), `id="sendform"`) {
		t.Fatal("an ended execution's page offers the send form")
	}
}
