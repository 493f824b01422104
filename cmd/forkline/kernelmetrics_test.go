package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestKernelMetrics: `forkline kernel` serves /metrics from the kernel's
// meter behind its bearer token: a fork made over the API shows in
// forkline_forks_total.
func TestKernelMetrics(t *testing.T) {
	const token = "kernel-metrics-token"
	cmd := exec.Command(os.Args[0], "--dir", t.TempDir(), "kernel", "--listen", "127.0.0.1:0", "--token", token)
	cmd.Env = append(os.Environ(), "FORKLINE_TEST_MAIN=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	_, rest, ok := strings.Cut(line, " on http://")
	if err != nil || !ok {
		t.Fatalf("kernel said %q (%v), stderr %q", line, err, errb.String())
	}
	addr, _, _ := strings.Cut(rest, "/v0")
	base := "http://" + addr
	go func() { _, _ = io.Copy(io.Discard, br) }()

	call := func(method, path, body, tok string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// An agent whose webhook nobody answers: its execution waits, and can
	// be forked.
	if code, body := call("POST", "/v0/agents", `{"id":"idle","webhook_url":"http://127.0.0.1:1/","secret":"0123456789abcdef-secret"}`, token); code != 201 {
		t.Fatalf("register: %d %s", code, body)
	}
	code, body := call("POST", "/v0/executions", `{"agent_id":"idle"}`, token)
	id, _, _ := strings.Cut(strings.TrimPrefix(body, `{"id":"`), `"`)
	if code != 201 || id == "" {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := call("POST", "/v0/executions/"+id+"/fork", `{"at":1}`, token); code != 201 {
		t.Fatalf("fork: %d %s", code, body)
	}
	if code, body := call("GET", "/metrics", "", ""); code != 401 {
		t.Fatalf("/metrics without the token: %d %s", code, body)
	}
	code, body = call("GET", "/metrics", "", token)
	found := false
	for l := range strings.Lines(body) {
		if strings.HasPrefix(l, "forkline_forks_total{") && strings.HasSuffix(strings.TrimSpace(l), " 1") {
			found = true
		}
	}
	if code != 200 || !found {
		t.Fatalf("/metrics: %d, no forkline_forks_total of 1 in:\n%s", code, body)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kernel: %v; stderr %s", err, errb.String())
	}
}
