package webui_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/internal/serveapi"
	"github.com/forkline/forkline/sdk"
)

// TestListShowsQueues (DESIGN §19): the list page shows the store's
// queues — concurrency, rate, priority, waiting and running — whatever
// the executions' filter, and GET /api/queues answers the same; a run
// that holds a slot counts as running, and none once it ended.
func TestListShowsQueues(t *testing.T) {
	r := newRig(t)
	if _, body := r.get(t, "/"); strings.Contains(body, `id="queues"`) {
		t.Fatalf("GET / with no queue shows a queues table:\n%s", body)
	}
	ctx := context.Background()
	if err := r.k.Queue("ingest", sdk.QueueConcurrency(1), sdk.QueueRate(5, time.Second)); err != nil {
		t.Fatal(err)
	}
	held, err := r.two.Start(ctx, -1, sdk.OnQueue("ingest")) // its body waits for the gate
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.two.Start(ctx, 2, sdk.OnQueue("ingest")); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { _, err := r.k.Run(ctx, held); ran <- err }()
	table := func(path string) string {
		t.Helper()
		code, body := r.get(t, path)
		if code != 200 {
			t.Fatalf("GET %s = %d:\n%s", path, code, body)
		}
		_, table, ok := strings.Cut(body, `<table id="queues">`)
		if !ok {
			t.Fatalf("GET %s shows no queues table:\n%s", path, body)
		}
		table, _, _ = strings.Cut(table, "</table>")
		return table
	}
	api := func() []serveapi.Queue {
		t.Helper()
		code, body := r.get(t, "/api/queues")
		var x serveapi.Queues
		if code != 200 || json.Unmarshal([]byte(body), &x) != nil {
			t.Fatalf("GET /api/queues = %d:\n%s", code, body)
		}
		return x.Queues
	}
	// Until the run holds its slot, the queue shows two waiting.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if qs := api(); len(qs) == 1 && qs[0].Running == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never held a slot: /api/queues = %+v", api())
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := serveapi.Queue{Name: "ingest", Concurrency: 1, Rate: 5, PerNS: int64(time.Second), Declared: true, Waiting: 1, Running: 1}
	if qs := api(); len(qs) != 1 || qs[0] != want {
		t.Fatalf("/api/queues = %+v, want [%+v]", qs, want)
	}
	for _, path := range []string{"/", "/?agent=nobody"} {
		tb := table(path)
		for _, w := range []string{"ingest", "<td>1</td>", "5 per 1s", "<td>no</td>"} {
			if !strings.Contains(tb, w) {
				t.Errorf("GET %s: the queues table lacks %q:\n%s", path, w, tb)
			}
		}
		if strings.Count(tb, "<td>1</td>") != 3 { // concurrency, waiting, running
			t.Errorf("GET %s: the queues table does not show concurrency 1, 1 waiting, 1 running:\n%s", path, tb)
		}
	}
	close(r.gate)
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	want.Running = 0
	if qs := api(); len(qs) != 1 || qs[0] != want {
		t.Fatalf("after the run ended /api/queues = %+v, want [%+v]", qs, want)
	}
}
