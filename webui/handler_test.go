package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

// rig is a kernel in memory with agent "two" (two local steps) and the web
// handler on a test server.
type rig struct {
	k    *sdk.Kernel
	srv  *httptest.Server
	two  *sdk.Agent[int, int]
	gate chan struct{}
}

func newRig(t *testing.T) *rig {
	t.Helper()
	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	r := &rig{k: k, gate: make(chan struct{})}
	r.two, err = sdk.Register(k, "two", func(ctx context.Context, n int) (int, error) {
		x, err := sdk.Step(ctx, "one", func(context.Context) (int, error) { return n + 1, nil })
		if err != nil {
			return 0, err
		}
		if n < 0 {
			<-r.gate
		}
		return sdk.Step(ctx, "two", func(context.Context) (int, error) { return x * 2, nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(webui.Handler(k))
	t.Cleanup(r.srv.Close)
	return r
}

// run starts and runs one execution of n to its end.
func (r *rig) run(t *testing.T, n int) eventlog.ID {
	t.Helper()
	id, err := r.two.Start(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.two.Run(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	return id
}

// get returns the status and body of a GET of path.
func (r *rig) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(r.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// executions counts the executions and all their events.
func (r *rig) executions(t *testing.T) (n int, events uint64) {
	t.Helper()
	infos, err := r.k.List(context.Background(), sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		events += i.Head
	}
	return len(infos), events
}

func TestList(t *testing.T) {
	r := newRig(t)
	id := r.run(t, 1)
	pending, _ := r.two.Start(context.Background(), 2)
	code, body := r.get(t, "/")
	if code != 200 || !strings.Contains(body, id.String()) || !strings.Contains(body, pending.String()) {
		t.Fatalf("GET / = %d, want both executions listed:\n%s", code, body)
	}
	code, body = r.get(t, "/?status=pending")
	if code != 200 || strings.Contains(body, id.String()) || !strings.Contains(body, pending.String()) {
		t.Fatalf("GET /?status=pending = %d, want only the pending execution:\n%s", code, body)
	}
	code, body = r.get(t, "/?agent=nobody")
	if code != 200 || !strings.Contains(body, "no executions match the filter") {
		t.Fatalf("GET /?agent=nobody = %d:\n%s", code, body)
	}
	for path, want := range map[string]string{
		"/?status=sleeping": `status "sleeping"`,
		"/?parent=xyz":      `parent "xyz"`,
	} {
		if code, body := r.get(t, path); code != 400 || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 400 saying %s", path, code, body, want)
		}
	}
}

func TestExecutionPages(t *testing.T) {
	r := newRig(t)
	id := r.run(t, 1)
	fid, err := r.k.Fork(context.Background(), id, 3)
	if err != nil {
		t.Fatal(err)
	}
	code, body := r.get(t, "/e/"+id.String())
	if code != 200 || !strings.Contains(body, id.String()+"/timeline") || !strings.Contains(body, `href="`+fid.String()+`"`) {
		t.Fatalf("GET /e/id = %d, want the timeline frame and the fork linked:\n%s", code, body)
	}
	code, body = r.get(t, "/e/"+fid.String())
	if code != 200 || !strings.Contains(body, "fork of") || !strings.Contains(body, id.String()) {
		t.Fatalf("GET /e/fork = %d, want its parent named:\n%s", code, body)
	}
	code, body = r.get(t, "/e/"+id.String()+"/timeline")
	if code != 200 || !strings.Contains(body, "<svg") || !strings.Contains(body, "fork "+fid.String()) {
		t.Fatalf("GET timeline = %d, want the picture with the fork:\n%s", code, body)
	}
	var unknown eventlog.ID
	unknown[0] = 7
	for path, want := range map[string]int{
		"/e/nonsense":                        400,
		"/e/" + unknown.String():             404,
		"/e/nonsense/timeline":               400,
		"/e/" + unknown.String() + "/events": 404,
		"/nothing-here":                      404,
	} {
		if code, body := r.get(t, path); code != want {
			t.Errorf("GET %s = %d %q, want %d", path, code, body, want)
		}
	}
}

// sse reads server-sent events from body until "end" or EOF.
func sse(t *testing.T, body io.Reader, each func(kind string, data []byte)) {
	t.Helper()
	sc := bufio.NewScanner(body)
	var kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			each(kind, []byte(strings.TrimPrefix(line, "data: ")))
			if kind == "end" {
				return
			}
		}
	}
}

type message struct {
	Seq      uint64 `json:"seq"`
	Kind     string `json:"kind"`
	Summary  string `json:"summary"`
	Covered  bool   `json:"covered"`
	Restores string `json:"restores"`
}

// TestEventsLive: the stream yields the lineage, then each event as the
// running execution appends it, then "end" after its terminal event.
func TestEventsLive(t *testing.T) {
	r := newRig(t)
	id, err := r.two.Start(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(r.srv.URL + "/e/" + id.String() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events = %d %s", resp.StatusCode, ct)
	}
	ran := make(chan error, 1)
	go func() { _, err := r.two.Run(context.Background(), id); ran <- err }()
	var got []string
	ended := false
	sse(t, resp.Body, func(kind string, data []byte) {
		if kind == "end" {
			ended = true
			return
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		got = append(got, m.Kind+" "+m.Summary)
		if m.Seq == 4 { // step "one" succeeded: the handler now waits
			close(r.gate)
		}
		if !m.Covered || m.Restores != "-" {
			t.Errorf("seq %d: covered %v restores %q; an execution without resources is covered everywhere", m.Seq, m.Covered, m.Restores)
		}
	})
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	want := []string{"execution.created two -1", "dispatch.started dispatch 1", "step.started local one",
		"step.succeeded local one → 0", "step.started local two", "step.succeeded local two → 0", "execution.completed 0"}
	if !ended || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stream (ended %v):\n%s\nwant:\n%s", ended, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFork(t *testing.T) {
	r := newRig(t)
	id := r.run(t, 1)
	base := "/e/" + id.String() + "/fork"
	n0, ev0 := r.executions(t)
	for _, at := range []string{"", "0", "8", "x", "-1"} {
		code, body := r.get(t, base+"?at="+at)
		if code != 400 || !strings.Contains(body, "want the seq of an event") {
			t.Errorf("GET fork?at=%s = %d %q, want 400", at, code, body)
		}
		resp, err := http.PostForm(r.srv.URL+base, url.Values{"at": {at}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("POST fork at=%s = %d, want 400", at, resp.StatusCode)
		}
	}
	if n, ev := r.executions(t); n != n0 || ev != ev0 {
		t.Fatalf("bad fork requests appended: %d executions %d events, were %d and %d", n, ev, n0, ev0)
	}
	code, body := r.get(t, base+"?at=4")
	if code != 200 || !strings.Contains(body, "covered: the fork restores") || !strings.Contains(body, "step.succeeded · local one") {
		t.Fatalf("GET fork?at=4 = %d:\n%s", code, body)
	}
	if n, _ := r.executions(t); n != n0 {
		t.Fatal("the fork preview created a fork")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(r.srv.URL+base, url.Values{"at": {"4"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	forks, err := r.k.List(context.Background(), sdk.Filter{Parent: id})
	if err != nil || len(forks) != 1 || forks[0].ForkSeq != 4 {
		t.Fatalf("forks after POST = %+v, %v; want one at 4", forks, err)
	}
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || loc != "../"+forks[0].ID.String() {
		t.Fatalf("POST fork = %d Location %q, want 303 to ../%s", resp.StatusCode, loc, forks[0].ID)
	}
	// The redirect resolves to the fork's page.
	u, _ := url.Parse(r.srv.URL + base)
	if code, body := r.get(t, u.ResolveReference(&url.URL{Path: resp.Header.Get("Location")}).Path); code != 200 || !strings.Contains(body, forks[0].ID.String()) {
		t.Fatalf("fork page = %d", code)
	}
}

// TestDeltasLive: /e/{id}/deltas streams the pieces of a model reply as
// the handler reads them (the fake model sends one every 10 ms until the
// page has shown one), then "end" when the execution ends.
func TestDeltasLive(t *testing.T) {
	// The page's route, and the JSON API's that another process (forkline
	// serve's clients) reads.
	for _, route := range []string{"/e/%s/deltas", "/api/e/%s/deltas"} {
		t.Run(strings.Split(route, "/")[1], func(t *testing.T) { testDeltasLive(t, route) })
	}
}

func testDeltasLive(t *testing.T, route string) {
	seen := make(chan struct{})
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			_, _ = io.WriteString(w, "data: tick\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-seen:
				return
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	defer model.Close()
	k, err := sdk.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	client := &http.Client{Transport: sdk.Transport(nil)}
	chat, err := sdk.Register(k, "chat", func(ctx context.Context, _ int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, model.URL+"/v1/chat", strings.NewReader(`{"model":"m"}`))
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b), err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(webui.Handler(k))
	defer srv.Close()
	id, err := chat.Start(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + fmt.Sprintf(route, id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("deltas = %d %s", resp.StatusCode, ct)
	}
	ran := make(chan error, 1)
	go func() { _, err := chat.Run(context.Background(), id); ran <- err }()
	var got []webuiDelta
	ended := false
	sse(t, resp.Body, func(kind string, data []byte) {
		if kind == "end" {
			ended = true
			return
		}
		var d webuiDelta
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s %s: %v", kind, data, err)
		}
		if len(got) == 0 {
			close(seen)
		}
		got = append(got, d)
	})
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if !ended || len(got) == 0 {
		t.Fatalf("ended %v after %d deltas", ended, len(got))
	}
	var started *eventlog.StepStarted
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := ev.Data.(*eventlog.StepStarted); ok {
			started = s
		}
	}
	for i, d := range got {
		if d.StepID != started.StepID || d.Data != "data: tick\n\n" || i > 0 && d.Index != got[i-1].Index+1 {
			t.Fatalf("delta %d = %+v, want the llm step's ticks in order", i, d)
		}
	}
}

// webuiDelta is one "delta" message of /e/{id}/deltas.
type webuiDelta struct {
	StepID string `json:"step_id"`
	Index  int    `json:"index"`
	Data   string `json:"data"`
}
