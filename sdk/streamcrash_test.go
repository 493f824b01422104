package sdk_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// streamCrashEnv carries the crash child's configuration (JSON).
const streamCrashEnv = "FORKLINE_STREAMCRASH_CHILD"

type streamCrashConfig struct{ Dir, URL, Marker string }

// streamCrashAgent reads a model's streamed reply whole; in the child
// (crash), it writes the marker once the first piece arrived and reads
// on, blocking until it is killed.
func streamCrashAgent(cfg streamCrashConfig, crash bool) func(*sdk.Kernel) {
	rt := sdk.Transport(nil)
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "chat", func(ctx context.Context, _ none) (string, error) {
			resp, err := openStream(ctx, rt, cfg.URL)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			if crash {
				first, err := readSome(resp.Body, 4)
				if err != nil {
					return "", err
				}
				if err := os.WriteFile(cfg.Marker, []byte(first), 0o644); err != nil {
					return "", err
				}
			}
			b, err := io.ReadAll(resp.Body)
			return string(b), err
		})
	}
}

// TestStreamCrashChild is the worker of TestStreamCrash when run as its
// child; otherwise it does nothing.
func TestStreamCrashChild(t *testing.T) {
	raw := os.Getenv(streamCrashEnv)
	if raw == "" {
		t.Skip("only runs as the child of TestStreamCrash")
	}
	var cfg streamCrashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	store, err := pebblestore.Open(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(store)
	if err != nil {
		t.Fatal(err)
	}
	streamCrashAgent(cfg, true)(k)
	ctx := context.Background()
	id, err := k.Start(ctx, "chat", none{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Marker+".id", []byte(id.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = k.Run(ctx, id)
	t.Fatalf("the worker was to block until killed; Run = %v", err)
}

// TestStreamCrash: a process SIGKILLed while a model's reply streams to
// its handler leaves the llm step unfinished (an orphan, or — its
// step.started rides on the next sync — not even started); the resumed
// run asks the model again and records one complete reply: one
// step.succeeded, with the whole body, not Truncated (DESIGN §16).
func TestStreamCrash(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		send(w, "data: one\n\n")
		if requests.Add(1) == 1 {
			<-r.Context().Done() // until the worker dies
			return
		}
		send(w, "data: two\n\n")
	}))
	defer srv.Close()
	root := t.TempDir()
	cfg := streamCrashConfig{Dir: filepath.Join(root, "log"), URL: srv.URL, Marker: filepath.Join(root, "marker")}
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^TestStreamCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), streamCrashEnv+"="+string(raw))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(15 * time.Second)
	for {
		if _, err := os.Stat(cfg.Marker); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the worker exited before the stream began: %v\n%s", err, out.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("the worker never read the stream's first piece\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	idText, err := os.ReadFile(cfg.Marker + ".id")
	if err != nil {
		t.Fatal(err)
	}
	id, err := eventlog.ParseID(string(idText))
	if err != nil {
		t.Fatal(err)
	}

	store, err := pebblestore.Open(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k := newKernel(t, store, streamCrashAgent(cfg, false))
	before := describeAll(events(t, k, id))
	res, err := k.Run(context.Background(), id)
	if err != nil || string(res.Output) != `"data: one\n\ndata: two\n\n"` {
		t.Fatalf("resumed Run = %v, %v", res, err)
	}
	want := []string{"created chat", "dispatch 1", "dispatch 2", "started llm m1",
		`succeeded 200 "data: one\n\ndata: two\n\n"`, "completed"}
	if len(before) == 3 { // the orphan's step.started reached the disk
		if before[2] != "started llm m1" {
			t.Fatalf("the killed worker left %q", before)
		}
		want = []string{"created chat", "dispatch 1", "started llm m1", "dispatch 2", "started llm m1 attempt=2",
			`succeeded 200 "data: one\n\ndata: two\n\n"`, "completed"}
	}
	swant(t, k, id, want)
	if requests.Load() != 2 {
		t.Fatalf("%d requests, want 2 (the killed one and the re-run)", requests.Load())
	}
}
