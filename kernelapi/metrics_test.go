package kernelapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/kernelapi"
)

// rawGet sends a bearer GET (no token when token is "") and returns the
// status and body.
func (r *rig) rawGet(path, token string) (int, string) {
	r.t.Helper()
	req, err := http.NewRequest("GET", r.url+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sample returns the value of the exposition's sample of name whose
// labels include every one of labels (`key="value"`), and whether there
// is one.
func sample(text, name string, labels ...string) (float64, bool) {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		head, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		metric, lbls, _ := strings.Cut(head, "{")
		if metric != name {
			continue
		}
		all := true
		for _, l := range labels {
			if !strings.Contains(lbls, l) {
				all = false
			}
		}
		if !all {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		return v, err == nil
	}
	return 0, false
}

// TestMetricsRoute: a remote agent's run and a fork of it show up in
// /metrics as counts — live steps by kind and outcome, replayed steps,
// forks — and the route takes the bearer token.
func TestMetricsRoute(t *testing.T) {
	m, err := kernelapi.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, kernelapi.Options{Metrics: m}, m.Option())
	hook := webhookServer(t, r.url, "adder", adder(t, 0))
	r.register("adder", hook.URL)
	id := r.create("adder", map[string]int{"n": 3})
	r.await(id, eventlog.StatusCompleted)
	var fk struct{ ID string }
	if code := r.do("POST", "/v0/executions/"+id.String()+"/fork", map[string]uint64{"at": 4}, &fk); code != 201 {
		t.Fatalf("fork: %d", code)
	}
	fid, err := eventlog.ParseID(fk.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.await(fid, eventlog.StatusCompleted)

	code, text := r.rawGet("/metrics", testToken)
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, text)
	}
	// 3 live steps in the run, 2 in the fork (its first is replayed).
	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"forkline_steps_total", []string{`kind="tool"`, `outcome="succeeded"`}, 5},
		{"forkline_steps_replayed_total", []string{`kind="tool"`}, 1},
		{"forkline_forks_total", nil, 1},
	}
	for _, w := range want {
		if v, ok := sample(text, w.name, w.labels...); !ok || v != w.value {
			t.Errorf("%s%v = %v (found %v), want %v; exposition:\n%s", w.name, w.labels, v, ok, w.value, text)
		}
	}
	if _, ok := sample(text, "forkline_steps_total", `outcome="failed"`); ok {
		t.Errorf("a failed step counted:\n%s", text)
	}
	if code, body := r.rawGet("/metrics", ""); code != 401 || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("/metrics without a token: %d %s", code, body)
	}
}

// TestMetricsNotConfigured: a server without Options.Metrics answers
// /metrics with the 404 envelope.
func TestMetricsNotConfigured(t *testing.T) {
	r := newRig(t, kernelapi.Options{})
	if code, body := r.rawGet("/metrics", testToken); code != 404 || !strings.Contains(body, `"not_found"`) {
		t.Fatalf("/metrics: %d %s", code, body)
	}
}
