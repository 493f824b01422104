package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/internal/serveapi"
)

// folderOwner is the owner name a kernel with sdk.WithLocalOwner of data
// folder dir's log records (DESIGN §15½.2): the host and the folder's ID.
func folderOwner(t *testing.T, dir string) string {
	t.Helper()
	id, err := pebblestore.ReadIdentity(logDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":folder-" + id.ID
}

// demoFolder runs the demo on the scripted model into a fresh folder and
// returns it with the ID of the demo's first run.
func demoFolder(t *testing.T) (string, eventlog.ID) {
	t.Helper()
	t.Setenv("LLM_MODEL", "")
	dir := t.TempDir()
	if _, stderr, code := runCLI(t, "--dir", dir, "--json", "demo"); code != exitOK {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	return dir, readDemoLog(t, dir)[0].info.ID
}

// pageFork forks parent at seq through serve's page, as its form does,
// and returns the fork's ID.
func (s *served) pageFork(t *testing.T, parent eventlog.ID, seq string) eventlog.ID {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+"e/"+parent.String()+"/fork", strings.NewReader(url.Values{"at": {seq}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+s.token)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id, err := eventlog.ParseID(strings.TrimPrefix(resp.Header.Get("Location"), "../"))
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("POST fork: %s, Location %q (%v)", resp.Status, resp.Header.Get("Location"), err)
	}
	return id
}

// waitEnded follows the page's live stream of execution id until it says
// the execution ended.
func (s *served) waitEnded(t *testing.T, id eventlog.ID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"e/"+id.String()+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if sc.Text() == "event: end" {
			return
		}
	}
	t.Fatalf("the stream of %s stopped before the execution ended: %v", id, sc.Err())
}

// term stops the server with SIGTERM, as a service manager does, and
// checks that it exits 0 and removes its advert.
func (s *served) term(t *testing.T, dir string) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v; want exit 0", err)
	}
	if _, ok, err := serveapi.ReadAdvert(dir); ok || err != nil {
		t.Fatalf("serve.json outlived a SIGTERM (%v)", err)
	}
}

// ownEvents are the events of execution id past its fork point.
func ownEvents(t *testing.T, dir string, id eventlog.ID) []eventlog.Event {
	t.Helper()
	for _, x := range readDemoLog(t, dir) {
		if x.info.ID == id {
			return x.events[x.info.ForkSeq:]
		}
	}
	t.Fatalf("no execution %s", id)
	return nil
}

// dispatches are the owners of the dispatch.started among evs.
func dispatches(evs []eventlog.Event) []string {
	var out []string
	for _, ev := range evs {
		if d, ok := ev.Data.(*eventlog.DispatchStarted); ok {
			out = append(out, d.Owner)
		}
	}
	return out
}

// TestServeRunsPageFork: a fork made on the page of `forkline serve` on a
// Pebble folder is run to completion by the serving process's worker
// (default --workers 1), under the folder's owner, in one dispatch; serve
// says at start what its worker runs, and SIGTERM stops it with exit 0
// and no advert left.
func TestServeRunsPageFork(t *testing.T) {
	dir, root := demoFolder(t)
	s := startServe(t, dir)
	if !strings.HasPrefix(s.workers, "1 worker runs agent coder in this process") {
		t.Fatalf("serve's third line %q does not say that one worker runs the coder agent", s.workers)
	}
	fk := s.pageFork(t, root, "45")
	s.waitEnded(t, fk)
	s.term(t, dir)

	evs := ownEvents(t, dir, fk)
	if _, ok := evs[0].Data.(*eventlog.ForkCreated); !ok {
		t.Fatalf("the fork's first own event is %s", evs[0].Kind())
	}
	if owners := dispatches(evs); len(owners) != 1 || owners[0] != folderOwner(t, dir) {
		t.Fatalf("the fork's dispatches were by %q, want one by the folder's owner %q", owners, folderOwner(t, dir))
	}
	if last := evs[len(evs)-1]; last.Kind() != eventlog.KindExecutionCompleted {
		t.Fatalf("the fork ended with %s, want execution.completed", last.Kind())
	}
}

// TestRunThroughServe: while `forkline serve --workers 0` holds a Pebble
// folder, it runs nothing by itself — a fork made before it started and
// one made on its page stay pending — and `forkline run ID` of another
// process runs the execution there (POST /api/e/{id}/run), printing what
// a local run of the same fork prints, text and JSON, and failing as it
// does; the dispatch is the serving process's, under the folder's owner.
// The run route wants the token and refuses a cross-site request.
func TestRunThroughServe(t *testing.T) {
	dir, root := demoFolder(t)
	cli := func(args ...string) (string, string, int) {
		return runCLI(t, append([]string{"--dir", dir}, args...)...)
	}
	forkAt45 := func() eventlog.ID {
		t.Helper()
		stdout, stderr, code := cli("--json", "fork", root.String(), "45")
		var fk struct{ ID string }
		if code != exitOK || json.Unmarshal([]byte(stdout), &fk) != nil {
			t.Fatalf("fork: exit %d: %s%s", code, stdout, stderr)
		}
		id, err := eventlog.ParseID(fk.ID)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	local, localJSON, served, servedJSON, idle := forkAt45(), forkAt45(), forkAt45(), forkAt45(), forkAt45()
	type outcome struct {
		stdout, stderr string
		code           int
	}
	run := func(args ...string) outcome {
		stdout, stderr, code := cli(args...)
		return outcome{stdout, stderr, code}
	}
	want := []outcome{run("run", local.String()), run("--json", "run", localJSON.String()), run("run", "ffff")}
	if want[0].code != exitOK || want[1].code != exitOK || want[2].code != exitInput {
		t.Fatalf("local runs: %+v", want)
	}

	s := startServe(t, dir, "--workers", "0")
	if !strings.HasPrefix(s.workers, "no worker (--workers 0)") {
		t.Fatalf("serve --workers 0 says %q", s.workers)
	}
	page := s.pageFork(t, root, "45")
	// The run route is guarded as the page's forms are: no token is 401, a
	// browser's cross-site request 403; an unknown execution is 404 in the
	// API's envelope. None runs anything.
	for _, c := range []struct {
		token, site string
		id          eventlog.ID
		want        int
	}{
		{"", "", idle, http.StatusUnauthorized},
		{s.token, "cross-site", idle, http.StatusForbidden},
		{s.token, "", eventlog.NewID(), http.StatusNotFound},
	} {
		req, err := http.NewRequest("POST", s.url+serveapi.RunPath(c.id), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST run, token %q, Sec-Fetch-Site %q: %s, want %d", c.token, c.site, resp.Status, c.want)
		}
	}
	got := []outcome{run("run", served.String()), run("--json", "run", servedJSON.String()), run("run", "ffff")}
	got[0].stdout = strings.ReplaceAll(got[0].stdout, served.String(), local.String())
	got[1].stdout = strings.ReplaceAll(got[1].stdout, servedJSON.String(), localJSON.String())
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("run %d through serve:\nexit %d\n%s%s\nwant what the local run printed:\nexit %d\n%s%s",
				i, got[i].code, got[i].stdout, got[i].stderr, want[i].code, want[i].stdout, want[i].stderr)
		}
	}
	s.term(t, dir)

	owner := folderOwner(t, dir)
	for _, id := range []eventlog.ID{served, servedJSON} {
		evs := ownEvents(t, dir, id)
		if owners := dispatches(evs); len(owners) != 1 || owners[0] != owner {
			t.Errorf("%s: dispatches by %q, want one by %q", id, owners, owner)
		}
		if last := evs[len(evs)-1]; last.Kind() != eventlog.KindExecutionCompleted {
			t.Errorf("%s ended with %s, want execution.completed", id, last.Kind())
		}
	}
	for _, id := range []eventlog.ID{idle, page} {
		if evs := ownEvents(t, dir, id); len(evs) != 1 {
			t.Errorf("serve --workers 0 ran %s: %d own events after its fork.created, want none", id, len(evs)-1)
		}
	}
}

// TestServeSIGTERMCutsDispatch: SIGTERM stops a serve whose worker is in
// the middle of a model call: exit 0, serve.json gone, and the dispatch
// cut records no outcome (DESIGN §15½.1) — the call is cancelled, the
// execution stays running, to be resumed.
func TestServeSIGTERMCutsDispatch(t *testing.T) {
	called := make(chan struct{}, 1)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		// Answers never: the call is in flight until cut. (The body read
		// whole, the server sees the client go.)
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(model.Close) // after serve's cleanup, which kills a serve left running
	t.Setenv("LLM_MODEL", "hanging-model")
	t.Setenv("OPENAI_BASE_URL", model.URL)
	t.Setenv("OPENAI_API_KEY", "k")

	dir := t.TempDir()
	store, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	id, err := store.Create(context.Background(), &eventlog.ExecutionCreated{Agent: coderAgent, Input: js(map[string]string{"task": "wait"})}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	s := startServe(t, dir)
	select {
	case <-called:
	case <-time.After(2 * time.Minute):
		t.Fatal("serve's worker never called the model")
	}
	s.term(t, dir)

	store, err = pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	info, err := store.Info(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := collectEvents(store, id)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	cancelled := false
	for _, ev := range evs {
		ks = append(ks, ev.Kind().String())
		switch p := ev.Data.(type) {
		case *eventlog.ExecutionCompleted, *eventlog.ExecutionFailed, *eventlog.StepSucceeded, *eventlog.StepFailed:
			t.Errorf("seq %d: %s recorded for a dispatch cut by SIGTERM", ev.Seq, ev.Kind())
		case *eventlog.StepCancelled:
			cancelled = true
		case *eventlog.DispatchStarted:
			if p.Owner != folderOwner(t, dir) {
				t.Errorf("dispatch by %q, want the folder's owner", p.Owner)
			}
		}
	}
	if !cancelled || info.Status != eventlog.StatusRunning {
		t.Fatalf("after SIGTERM: %s, events %v; want running with the model call cancelled", info.Status, ks)
	}
}

// TestServeWorkersBadInput: --workers that is negative or not a number is
// bad input: exit 2, one line naming the flag, nothing started or written.
func TestServeWorkersBadInput(t *testing.T) {
	f := newFixture(t)
	before := fingerprint(t, f.dir)
	for _, v := range []string{"-1", "two", ""} {
		stdout, stderr, code := runCLI(t, "--dir", f.dir, "serve", "--addr", "127.0.0.1:0", "--workers", v)
		if code != exitInput || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "-workers") || !strings.Contains(stderr, "0 or more") {
			t.Errorf("--workers %q: exit %d, stdout %q, stderr %q; want exit 2 and one line about --workers", v, code, stdout, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, serveapi.AdvertFile)); !os.IsNotExist(err) {
		t.Fatalf("a refused serve advertised itself (%v)", err)
	}
	if after := fingerprint(t, f.dir); after != before {
		t.Fatal("a refused serve changed the folder")
	}
}

// TestServeRunsOnPostgres: `forkline serve --db URL` runs what the
// database holds too: a fork made before it started and one made on its
// page are both run to completion by its worker, each in one dispatch
// under the serving process's own owner (host/pid/…); SIGTERM stops it
// with exit 0.
func TestServeRunsOnPostgres(t *testing.T) {
	t.Setenv("LLM_MODEL", "")
	url := pgtest.SchemaURL(t)
	dir := t.TempDir()
	db := []string{"--dir", dir, "--db", url}
	if _, stderr, code := runCLI(t, append(db, "--json", "demo")...); code != exitOK {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	s, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var root eventlog.ID
	for info, err := range s.List(t.Context(), eventlog.Filter{Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		root = info.ID
	}
	stdout, stderr, code := runCLI(t, append(db, "--json", "fork", root.String(), "45")...)
	var fk struct{ ID string }
	if code != exitOK || json.Unmarshal([]byte(stdout), &fk) != nil {
		t.Fatalf("fork: exit %d: %s%s", code, stdout, stderr)
	}
	before, err := eventlog.ParseID(fk.ID)
	if err != nil {
		t.Fatal(err)
	}

	srv := startServe(t, dir, "--db", url)
	page := srv.pageFork(t, root, "40")
	srv.waitEnded(t, before)
	srv.waitEnded(t, page)
	host, _ := os.Hostname()
	prefix := fmt.Sprintf("%s/%d/", host, srv.cmd.Process.Pid)
	srv.term(t, dir)

	for _, id := range []eventlog.ID{before, page} {
		info, err := s.Info(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := collectEvents(s, id)
		if err != nil {
			t.Fatal(err)
		}
		own := evs[info.ForkSeq:]
		if owners := dispatches(own); len(owners) != 1 || !strings.HasPrefix(owners[0], prefix) {
			t.Errorf("%s: dispatches by %q, want one by serve's owner %s…", id, owners, prefix)
		}
		if info.Status != eventlog.StatusCompleted || own[len(own)-1].Kind() != eventlog.KindExecutionCompleted {
			t.Errorf("%s: %s, last event %s; want completed", id, info.Status, own[len(own)-1].Kind())
		}
	}
}
