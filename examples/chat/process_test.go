package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/examples/chat"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
)

// fakeModel is a chat completions server that streams its reply — "turn
// N: LINE", N the number of user messages — in server-sent events, one
// flushed chunk at a time, and records every request's last line.
type fakeModel struct {
	mu    sync.Mutex
	lines []string
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || len(req.Messages) == 0 {
		http.Error(w, fmt.Sprintf("bad request (%v)", err), http.StatusBadRequest)
		return
	}
	users := 0
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			users++
		}
	}
	line := req.Messages[len(req.Messages)-1].Content
	m.mu.Lock()
	m.lines = append(m.lines, line)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, piece := range []string{fmt.Sprintf("turn %d: ", users), line} {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"delta": map[string]string{"content": piece}}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (m *fakeModel) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lines)
}

// buildChat builds cmd/chat into a temporary folder and returns its path.
func buildChat(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH to build cmd/chat: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "chat")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/forkline/forkline/examples/chat/cmd/chat").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/chat: %v\n%s", err, out)
	}
	return bin
}

// TestChatProcessesKilledBetweenTurns: the chat served by one process of
// cmd/chat and driven by others (start, say: Send and GetEvent) on
// Postgres. After the first turn's reply the serving process is SIGKILLed
// and a new one serves the rest. The conversation completes; the fake
// model was asked once per line — the first turn's streamed reply, an llm
// step recorded through sdk.Transport, replays in the new process — and
// the lineage holds one llm step per turn, each recorded whole with its
// stream, the killed process's dispatch and then the new one's.
func TestChatProcessesKilledBetweenTurns(t *testing.T) {
	url, schema := pgtest.Schema(t)
	bin := buildChat(t)
	var model fakeModel
	srv := httptest.NewServer(&model)
	defer srv.Close()
	common := []string{"-pg", url, "-schema", schema}

	drive := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(append(args[:1:1], common...), args[1:]...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	serve := func(owner string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"serve"}, append(common, "-model", srv.URL+"/v1/chat/completions",
			"-owner", owner, "-park", "100ms", "-lease", "2s")...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}

	idText := drive("start", "-wait", "1m")
	id, err := eventlog.ParseID(idText)
	if err != nil {
		t.Fatalf("start printed %q: %v", idText, err)
	}
	first := serve("first")
	if r := drive("say", "-id", idText, "-n", "1", "-wait", "30s", "hello"); r != "turn 1: hello" {
		t.Fatalf("turn 1's reply %q", r)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil { // between turns
		t.Fatal(err)
	}
	_ = first.Wait()
	serve("second")
	got := []string{
		drive("say", "-id", idText, "-n", "2", "-wait", "30s", "what is forkline?"),
		drive("say", "-id", idText, "-n", "3", "-wait", "30s", "thanks"),
	}
	drive("say", "-id", idText, chat.Bye)
	if diff := cmp.Diff([]string{"turn 2: what is forkline?", "turn 3: thanks"}, got); diff != "" {
		t.Fatalf("replies (-want +got):\n%s", diff)
	}

	store, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k, err := sdk.New(store)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	wctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := k.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out chat.Output
	if err := res.Decode(&out); err != nil || out.Ended != "bye" || len(out.Turns) != 3 {
		t.Fatalf("output %+v (%v)", out, err)
	}
	if diff := cmp.Diff([]string{"hello", "what is forkline?", "thanks"}, model.calls()); diff != "" {
		t.Fatalf("requests at the model (-want +got): one per line, none repeated\n%s", diff)
	}
	checkProcessEvents(t, k, id)
}

// checkProcessEvents checks the lineage of the conversation served by two
// processes, the first killed after turn 1.
func checkProcessEvents(t *testing.T, k *sdk.Kernel, id eventlog.ID) {
	t.Helper()
	evs := events(t, k, id)
	var owners, msgs []string
	llm := map[string]int{} // StepID → times started
	var replies []string    // llm results' bodies, in order
	reply1 := -1            // index of the event.set reply-1
	secondAt := -1          // index of the second process's first dispatch
	for i, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.DispatchStarted:
			if len(owners) == 0 || owners[len(owners)-1] != p.Owner {
				owners = append(owners, p.Owner)
			}
			if p.Owner == "second" && secondAt < 0 {
				secondAt = i
			}
		case *eventlog.MessageReceived:
			msgs = append(msgs, string(p.Value))
		case *eventlog.StepStarted:
			if p.StepKind == eventlog.StepLLM {
				llm[p.StepID]++
				if p.Target != "chat-model" {
					t.Fatalf("llm step's target %q, want the model's name", p.Target)
				}
			}
		case *eventlog.StepSucceeded:
			if _, ok := llm[p.StepID]; ok {
				var r struct {
					Header http.Header `json:"header"`
					Body   []byte      `json:"body"`
				}
				if err := json.Unmarshal(p.Result, &r); err != nil {
					t.Fatal(err)
				}
				if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" || p.Truncated ||
					!strings.HasSuffix(string(r.Body), "data: [DONE]\n\n") {
					t.Fatalf("llm reply recorded as %s, truncated %v:\n%s", ct, p.Truncated, r.Body)
				}
				replies = append(replies, string(r.Body))
			}
		case *eventlog.EventSet:
			if p.Key == chat.ReplyKey(1) {
				reply1 = i
			}
		}
	}
	if diff := cmp.Diff([]string{"first", "second"}, owners); diff != "" {
		t.Fatalf("dispatch owners (-want +got):\n%s", diff)
	}
	if reply1 < 0 || secondAt < reply1 {
		t.Fatalf("the second process's first dispatch (event %d) is not after turn 1's reply (event %d)", secondAt, reply1)
	}
	if diff := cmp.Diff([]string{`"hello"`, `"what is forkline?"`, `"thanks"`, `"/bye"`}, msgs); diff != "" {
		t.Fatalf("messages received (-want +got):\n%s", diff)
	}
	if len(llm) != 3 || len(replies) != 3 {
		t.Fatalf("%d llm steps, %d replies recorded; want 3 of each", len(llm), len(replies))
	}
	for step, n := range llm {
		if n != 1 {
			t.Fatalf("llm step %s started %d times", step, n)
		}
	}
	if last := evs[len(evs)-1].Kind(); last != eventlog.KindExecutionCompleted {
		t.Fatalf("last event %s", last)
	}
}
