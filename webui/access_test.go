package webui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
	"github.com/forkline/forkline/webui"
)

const secret = "0123456789abcdef0123456789abcdef"

// guarded is a kernel whose execution "payer" awaits the approval of a
// payment, served with a token and the Host check, as forkline serve does.
type guarded struct {
	k    *sdk.Kernel
	srv  *httptest.Server
	h    http.Handler
	id   eventlog.ID // waits for an approval of step
	done eventlog.ID // completed, to fork
	step string
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
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
	if _, err := sdk.Register(k, "echo", func(ctx context.Context, s string) (string, error) {
		return sdk.Step(ctx, "echo", func(context.Context) (string, error) { return s, nil })
	}); err != nil {
		t.Fatal(err)
	}
	g := &guarded{k: k}
	if g.id, err = k.Start(ctx, "payer", 250); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, g.id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	pending, err := k.AwaitedApprovals(ctx, g.id)
	if err != nil || len(pending) != 1 {
		t.Fatalf("AwaitedApprovals = %v, %v; want one", pending, err)
	}
	g.step = pending[0].StepID
	if g.done, err = k.Start(ctx, "echo", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, g.done); err != nil {
		t.Fatal(err)
	}
	g.h = webui.Handler(k, webui.WithToken(secret), webui.WithHosts("forkline.test"))
	g.srv = httptest.NewServer(g.h)
	t.Cleanup(g.srv.Close)
	return g
}

// snapshot is every event of every execution, as text.
func (g *guarded) snapshot(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	infos, err := g.k.List(ctx, sdk.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, info := range infos {
		for ev, err := range g.k.Log().Events(ctx, info.ID, 1) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %d %s", info.ID, ev.Seq, ev.Kind()))
		}
	}
	return out
}

// request is one request of the access table.
type request struct {
	method, path string
	form         url.Values
	host         string // "" = the server's own address
	origin       string // "" = none
	bearer       string
	cookie       string
}

func (g *guarded) do(t *testing.T, q request) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if q.form != nil {
		body = strings.NewReader(q.form.Encode())
	}
	req, err := http.NewRequest(q.method, g.srv.URL+q.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if q.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if q.host != "" {
		req.Host = q.host
	}
	if q.origin != "" {
		req.Header.Set("Origin", q.origin)
	}
	if q.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+q.bearer)
	}
	if q.cookie != "" {
		req.AddCookie(&http.Cookie{Name: webui.SessionCookie, Value: q.cookie})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// leaks fails t if an answer carries the token.
func leaks(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	if strings.Contains(body, secret) {
		t.Errorf("%s: the body carries the token", what)
	}
	for name, vs := range resp.Header {
		for _, v := range vs {
			if strings.Contains(v, secret) {
				t.Errorf("%s: header %s carries the token", what, name)
			}
		}
	}
}

// TestAccessRefused: with a token and the Host check, every route — pages,
// the JSON API, and the forms that fork, approve and reject — refuses a
// request without the token (401), with a wrong one (401), naming a
// foreign Host as a DNS rebinding does (421, even with the token), from a
// foreign site's page (403), and a cookie-signed write that names no page
// (403); the refusals carry no payload and append nothing. Then the same
// approval, asked properly, is still pending and is recorded once.
func TestAccessRefused(t *testing.T) {
	g := newGuarded(t)
	before := g.snapshot(t)
	_, port, _ := strings.Cut(g.srv.Listener.Addr().String(), ":")
	evil := "evil.example:" + port
	self := "http://" + g.srv.Listener.Addr().String()
	login, _ := g.do(t, request{method: "GET", path: "/login?token=" + secret})
	var cookie string
	for _, c := range login.Cookies() {
		if c.Name == webui.SessionCookie {
			cookie = c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("login set no session cookie: %s %v", login.Status, login.Header)
	}
	id, done := g.id.String(), g.done.String()
	type route struct {
		method, path string
		form         url.Values
	}
	routes := []route{
		{"GET", "/", nil}, {"GET", "/e/" + id, nil}, {"GET", "/e/" + done + "/timeline", nil},
		{"GET", "/e/" + done + "/events", nil}, {"GET", "/e/" + done + "/fork?at=2", nil},
		{"GET", "/diff?a=" + id + "&b=" + done, nil}, {"GET", "/approvals", nil},
		{"GET", "/api/executions", nil}, {"GET", "/api/e/" + id, nil}, {"GET", "/api/e/" + id + "/events", nil},
		{"GET", "/api/e/" + id + "/coverage?at=1", nil}, {"GET", "/api/usage", nil}, {"GET", "/api/nothing", nil},
		{"POST", "/e/" + done + "/fork", url.Values{"at": {"2"}}},
		{"POST", "/e/" + id + "/approve", url.Values{"step": {g.step}, "by": {"mallory"}}},
		{"POST", "/e/" + id + "/reject", url.Values{"step": {g.step}, "by": {"mallory"}}},
	}
	type variant struct {
		name  string
		q     request
		want  int
		write bool // applies to writes only
	}
	variants := []variant{
		{"no credential", request{}, 401, false},
		{"no credential, same origin", request{origin: self}, 401, false},
		{"wrong bearer", request{bearer: "0123456789abcdef0123456789abcdee"}, 401, false},
		{"token as the cookie", request{cookie: secret}, 401, false},
		{"wrong cookie", request{cookie: strings.Repeat("0", len(cookie))}, 401, false},
		{"foreign Host with the token (DNS rebinding)", request{host: evil, origin: "http://" + evil, bearer: secret}, 421, false},
		{"foreign Host with the cookie (DNS rebinding)", request{host: evil, origin: "http://" + evil, cookie: cookie}, 421, false},
		{"foreign Host, no credential", request{host: evil}, 421, false},
		{"foreign Origin with the cookie", request{origin: "http://evil.example", cookie: cookie}, 403, true},
		{"foreign Origin with the token", request{origin: "http://evil.example", bearer: secret}, 403, true},
		{"missing Origin with the cookie", request{cookie: cookie}, 403, true},
	}
	for _, rt := range routes {
		for _, v := range variants {
			if v.write && rt.method != "POST" {
				continue
			}
			q := v.q
			q.method, q.path, q.form = rt.method, rt.path, rt.form
			resp, body := g.do(t, q)
			what := fmt.Sprintf("%s %s, %s", rt.method, rt.path, v.name)
			if resp.StatusCode != v.want {
				t.Errorf("%s: %s, want %d: %s", what, resp.Status, v.want, body)
			}
			if strings.Contains(body, "payer") || strings.Contains(body, "hello") || strings.Contains(body, g.step) {
				t.Errorf("%s: the refusal carries payloads: %s", what, body)
			}
			if v.want != http.StatusForbidden && resp.Header.Get(serveapi.ProofHeader) != "" {
				t.Errorf("%s: a refused request got the proof", what)
			}
			leaks(t, what, resp, body)
		}
	}
	if after := g.snapshot(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("refused requests changed the log:\nbefore\n%s\nafter\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}

	// Asked properly, each write works, once: the approval was still
	// pending.
	resp, body := g.do(t, request{method: "POST", path: "/e/" + id + "/approve", form: url.Values{"step": {g.step}, "by": {"alice"}},
		origin: self, cookie: cookie})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve with the cookie from the page: %s: %s", resp.Status, body)
	}
	leaks(t, "approve", resp, body)
	resp, body = g.do(t, request{method: "POST", path: "/e/" + done + "/fork", form: url.Values{"at": {"2"}}, bearer: secret})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("fork with the bearer token: %s: %s", resp.Status, body)
	}
	fid := strings.TrimPrefix(resp.Header.Get("Location"), "../")
	var added []string
	for _, s := range g.snapshot(t) {
		if !contains(before, s) {
			added = append(added, s)
		}
	}
	want := []string{id + " 5 approval.granted", fid + " 1 execution.created", fid + " 2 dispatch.started", fid + " 3 fork.created"}
	if !contains(before, id+" 4 dispatch.parked") || strings.Join(added, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the proper requests appended\n%s\nwant\n%s\n(before:\n%s)", strings.Join(added, "\n"), strings.Join(want, "\n"), strings.Join(before, "\n"))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestLogin: /login with the token sets an HttpOnly, SameSite=Strict
// cookie that is not the token and redirects to the list without the
// token; the cookie then reads the pages and the proof comes with the
// answers; a wrong token sets nothing.
func TestLogin(t *testing.T) {
	g := newGuarded(t)
	resp, body := g.do(t, request{method: "GET", path: "/login?token=nope"})
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("login with a wrong token: %s, cookies %v: %s", resp.Status, resp.Cookies(), body)
	}
	resp, body = g.do(t, request{method: "GET", path: "/login?token=" + secret})
	leaks(t, "login", resp, body)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./" {
		t.Fatalf("login: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != webui.SessionCookie || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Value == "" {
		t.Fatalf("login cookies: %+v", cs)
	}
	resp, body = g.do(t, request{method: "GET", path: "/", cookie: cs[0].Value})
	if resp.StatusCode != 200 || !strings.Contains(body, g.id.String()) {
		t.Fatalf("GET / with the cookie: %s", resp.Status)
	}
	if resp.Header.Get(serveapi.ProofHeader) != serveapi.Proof(secret) {
		t.Fatalf("answer with the cookie: proof %q", resp.Header.Get(serveapi.ProofHeader))
	}
	// The allowed names: localhost, loopback addresses, WithHosts'.
	for _, host := range []string{"localhost", "LOCALHOST:1", "127.0.0.1:9", "[::1]:9", "forkline.test", "Forkline.Test.:80"} {
		if resp, body := g.do(t, request{method: "GET", path: "/api/executions", host: host, bearer: secret}); resp.StatusCode != 200 {
			t.Errorf("Host %q: %s: %s", host, resp.Status, body)
		}
	}
	for _, host := range []string{"forkline.test.evil.example", "10.0.0.1", "127.0.0.1.nip.io"} {
		if resp, _ := g.do(t, request{method: "GET", path: "/api/executions", host: host, bearer: secret}); resp.StatusCode != 421 {
			t.Errorf("Host %q: %s, want 421", host, resp.Status)
		}
	}
}

// countingReader yields n bytes of multipart form and counts what is read.
type countingReader struct {
	r    io.Reader
	read int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}

// bigForm is a multipart fork form whose file part holds size bytes.
func bigForm(size int64) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("at", "2")
		var fw io.Writer
		if err == nil {
			fw, err = mw.CreateFormFile("junk", "junk.bin")
		}
		if err == nil {
			_, err = io.Copy(fw, io.LimitReader(zeros{}, size))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, mw.FormDataContentType()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestBodyCapped: a 150 MB multipart fork form is refused 413 without
// being read when it says its length, and after at most MaxBody bytes
// when it does not; nothing is written either way.
func TestBodyCapped(t *testing.T) {
	g := newGuarded(t)
	before := g.snapshot(t)
	const size = 150 << 20
	for _, declared := range []bool{true, false} {
		body, ctype := bigForm(size)
		cr := &countingReader{r: body}
		req := httptest.NewRequest("POST", "/e/"+g.done.String()+"/fork", cr)
		req.Host = "127.0.0.1:7070"
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Authorization", "Bearer "+secret)
		req.ContentLength = -1
		if declared {
			req.ContentLength = size + 1000
		}
		rec := httptest.NewRecorder()
		g.h.ServeHTTP(rec, req)
		limit := int64(0)
		if !declared {
			limit = webui.MaxBody + 64<<10
		}
		if rec.Code != http.StatusRequestEntityTooLarge || cr.read > limit {
			t.Errorf("declared length %v: %d after reading %d bytes; want 413 after at most %d: %s", declared, rec.Code, cr.read, limit, rec.Body)
		}
		_ = body.(*io.PipeReader).Close()
	}
	if after := g.snapshot(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("a refused form changed the log")
	}
}

// TestLongInputClipped: a 100 KB execution ID (or status, or path) is
// quoted in the error by its first 64 characters, once, not echoed whole.
func TestLongInputClipped(t *testing.T) {
	g := newGuarded(t)
	long := strings.Repeat("a", 100<<10)
	for _, path := range []string{
		"/e/" + long, "/e/" + long + "/timeline", "/e/" + long + "/fork?at=1", "/api/e/" + long,
		"/api/e/" + long + "/events", "/api/executions?parent=" + long, "/api/executions?status=" + long,
		"/?status=" + long, "/?parent=" + long, "/api/" + long,
		"/e/" + g.done.String() + "/fork?at=" + long,
	} {
		resp, body := g.do(t, request{method: "GET", path: path, bearer: secret})
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Errorf("GET %.40s…: %s, want 400 or 404", path, resp.Status)
		}
		if len(body) > 600 || !strings.Contains(body, strings.Repeat("a", 60)+"…") {
			t.Errorf("GET %.40s…: %d bytes of error, want the input cut to 64 characters: %.300s", path, len(body), body)
		}
	}
}
