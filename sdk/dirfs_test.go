package sdk_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/sdk"
	"github.com/google/go-cmp/cmp"
)

// treeOf reads every regular file under dir.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCoderOnDirfs runs the coder agent on a real workspace directory and an
// on-disk log, forks it where the workspace is covered, and checks that the
// checkpoint the fork restores from holds exactly the files the parent's
// workspace had at that point, and that the fork ends where the parent did.
func TestCoderOnDirfs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	srv := httptest.NewServer(coder.Script())
	t.Cleanup(srv.Close)
	newDrv := func() driver.Driver[*dirfs.Workspace, dirfs.Binding] {
		return dirfs.New(dirfs.Config{Store: filepath.Join(root, "store")})
	}
	k, err := sdk.Open(filepath.Join(root, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := sdk.Register(k, "coder", coder.Handler(newDrv, coder.Model{Name: coder.ScriptedName, BaseURL: srv.URL + "/v1", APIKey: "test"})); err != nil {
		t.Fatal(err)
	}
	id, _ := k.Start(ctx, "coder", coder.Input{Task: coderTask})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs := events(t, k, id)
	if diff := cmp.Diff(coderFirstRun, describeAll(evs)); diff != "" {
		t.Fatalf("events on dirfs (-want +got):\n%s", diff)
	}
	at := seqOf(t, evs, "captured workspace steps gen=15", 1)
	pt, err := k.Coverage(ctx, id, at)
	if err != nil || !pt.Covered {
		t.Fatalf("coverage at %d: %+v, %v", at, pt, err)
	}
	// What the parent's workspace held at the fork point: the five files
	// written by then, as the scripted model wrote them.
	wantAtFork := map[string]string{}
	for _, ev := range evs[:at] {
		if s, ok := ev.Data.(*eventlog.StepStarted); ok && s.Target == "write_file" {
			var a struct{ Path, Content string }
			if err := decodeJSON(s.Args, &a); err != nil {
				t.Fatal(err)
			}
			wantAtFork[a.Path] = a.Content
		}
	}
	restored, _, err := newDrv().Create(ctx, pt.Resources[0].Ref)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantAtFork, treeOf(t, restored.Dir())); diff != "" {
		t.Fatalf("checkpoint at the fork point (-parent at %d +restored):\n%s", at, diff)
	}

	fid, err := k.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fid); err != nil {
		t.Fatal(err)
	}
	dirOf := func(id eventlog.ID) string {
		var b dirfs.Binding
		for _, ev := range events(t, k, id) {
			if rb, ok := ev.Data.(*eventlog.ResourceBound); ok {
				if err := decodeJSON(rb.Binding, &b); err != nil {
					t.Fatal(err)
				}
			}
		}
		ws, err := newDrv().Open(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return ws.Dir()
	}
	parentDir, forkDir := dirOf(id), dirOf(fid)
	if parentDir == forkDir {
		t.Fatal("the fork opened its parent's workspace; a fork always gets its own")
	}
	if diff := cmp.Diff(treeOf(t, parentDir), treeOf(t, forkDir)); diff != "" {
		t.Fatalf("final workspaces (-parent +fork):\n%s", diff)
	}
}

// TestTransportPassThrough: requests from outside a handler go straight to
// the network and record nothing; inside a handler a non-JSON body is
// identified by host and path, and headers are never recorded.
func TestTransportPassThrough(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Header().Set("X-Answer", "42")
		_, _ = w.Write([]byte("plain answer"))
	}))
	defer srv.Close()
	client := &http.Client{Transport: sdk.Transport(nil)}
	resp, err := client.Post(srv.URL+"/ask", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits != 1 {
		t.Fatalf("outside a handler: %d hits", hits)
	}

	k, id, res, err := runOnce(t, func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/ask", strings.NewReader("hello"))
			req.Header.Set("Authorization", "Bearer secret-token")
			resp, err := client.Do(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			b := new(strings.Builder)
			if _, err := io.Copy(b, resp.Body); err != nil {
				return "", err
			}
			return resp.Header.Get("X-Answer") + " " + b.String(), nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"42 plain answer"` {
		t.Fatalf("output %s", res.Output)
	}
	for _, ev := range events(t, k, id) {
		if s, ok := ev.Data.(*eventlog.StepStarted); ok {
			if s.StepKind != eventlog.StepLLM || s.Target != strings.TrimPrefix(srv.URL, "http://")+"/ask" {
				t.Fatalf("step %s %q", s.StepKind, s.Target)
			}
			if strings.Contains(string(s.Args), "secret-token") {
				t.Fatal("a request header was recorded")
			}
		}
	}
	// A fork after the call replays the response without a request.
	before := hits
	fid, _ := k.Fork(context.Background(), id, 4)
	res2, err := k.Run(context.Background(), fid)
	if err != nil || string(res2.Output) != string(res.Output) || hits != before {
		t.Fatalf("fork: %s, %v, %d new hits", res2.Output, err, hits-before)
	}
}
