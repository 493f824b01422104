package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
)

// The queue of TestPostgresQueueWorkers: 30 executions of agent "queued"
// in a queue of concurrency 2, served by three worker processes with
// eight slots each; each body takes queueBody, and a lease lasts
// queueLeaseTTL (short, so that a killed worker's slot is freed soon).
const (
	queueName       = "two"
	queueLimit      = 2
	queueExecutions = 30
	queueBody       = 60 * time.Millisecond
	queueLeaseTTL   = 1 * time.Second
	markBody        = "body" // a queued body began (followed by its input)
)

// queueChild is what a queue worker child runs (childConfig.Queue): as
// owner Worker on the Postgres log at URL, Serve until every execution of
// agent "queued" has ended.
type queueChild struct {
	URL    string
	Worker string
}

// queueAgent registers agent "queued": one step that marks its start and
// sleeps queueBody.
func queueAgent(k *sdk.Kernel, mark func(string)) error {
	_, err := sdk.Register(k, "queued", func(ctx context.Context, n int) (int, error) {
		return sdk.Step(ctx, "work", func(context.Context) (int, error) {
			mark(fmt.Sprintf("%s %d", markBody, n))
			time.Sleep(queueBody)
			return n, nil
		})
	})
	return err
}

// queueWorkerMain is a queue worker child.
func queueWorkerMain(cfg queueChild, mark func(string)) int {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, cfg.URL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "queue worker:", err)
		return 3
	}
	defer store.Close()
	k, err := sdk.New(store, sdk.WithOwner(cfg.Worker), sdk.WithLeaseTTL(queueLeaseTTL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "queue worker:", err)
		return 3
	}
	if err := queueAgent(k, mark); err != nil {
		fmt.Fprintln(os.Stderr, "queue worker:", err)
		return 3
	}
	return serveWhileOpen(k, "queue worker", 8, 2*time.Minute, "queued", func(eventlog.Info) bool { return true }, mark)
}

// serveWhileOpen runs k.Serve with concurrency n until no execution of
// agent that mine accepts is open (pending, running or waiting), then
// marks done and returns 0; it returns 3, saying why on stderr, when
// Serve fails or timeout passes first.
func serveWhileOpen(k *sdk.Kernel, who string, n int, timeout time.Duration, agent string, mine func(eventlog.Info) bool, mark func(string)) int {
	ctx := context.Background()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.Concurrency(n), sdk.PollEvery(20*time.Millisecond)) }()
	mark(markReady)
	deadline := time.After(timeout)
	for {
		list, err := k.List(ctx, sdk.Filter{Agent: agent, Status: []eventlog.Status{
			eventlog.StatusPending, eventlog.StatusRunning, eventlog.StatusWaiting}})
		open := 0
		for _, info := range list {
			if mine(info) {
				open++
			}
		}
		if err == nil && open == 0 {
			break
		}
		select {
		case <-deadline:
			fmt.Fprintf(os.Stderr, "%s: %d executions still open (%v)\n", who, open, err)
			return 3
		case err := <-served:
			fmt.Fprintln(os.Stderr, who+": serve:", err)
			return 3
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	<-served
	mark(markDone)
	return 0
}

// TestPostgresQueueWorkers (DESIGN §19, issue 35): three worker processes
// on one Postgres log serve 30 executions of a queue of concurrency 2.
// Every execution completes, and at no instant do more than 2 of the
// queue's dispatches run — a dispatch running from its dispatch.started
// to the last event it appended. In "kill", one worker is SIGKILLed
// inside a body: its slot is freed when its lease expires (the others
// finish everything, the killed dispatch's execution included, in a new
// dispatch), and still no more than 2 ran at once.
func TestPostgresQueueWorkers(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "all", true: "kill"}[kill], func(t *testing.T) { testQueueWorkers(t, kill) })
	}
}

func testQueueWorkers(t *testing.T, kill bool) {
	pgtest.URL(t) // skips (or fails) at once without a server
	ctx := context.Background()
	url := pgtest.SchemaURL(t)
	store, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k, err := sdk.New(store, sdk.WithOwner("parent"))
	if err != nil {
		t.Fatal(err)
	}
	if err := queueAgent(k, func(string) {}); err != nil {
		t.Fatal(err)
	}
	if err := k.Queue(queueName, sdk.QueueConcurrency(queueLimit)); err != nil {
		t.Fatal(err)
	}
	ids := make([]eventlog.ID, queueExecutions)
	for i := range ids {
		if ids[i], err = k.Start(ctx, "queued", i, sdk.OnQueue(queueName)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		workers []*pgWorker
		killed  = make(chan string, 1)
		once    sync.Once
	)
	defer func() { stopWorkers(workers) }()
	for i := range 3 {
		name := fmt.Sprintf("q-%d", i)
		raw, err := json.Marshal(queueChild{URL: url, Worker: name})
		if err != nil {
			t.Fatal(err)
		}
		on := func(w *pgWorker, m string, nth int) {
			// The first worker dies inside its second body.
			if kill && w.name == "q-0" && strings.HasPrefix(m, markBody+" ") && nth == 2 {
				once.Do(func() {
					_ = w.cmd.Process.Signal(syscall.SIGKILL)
					killed <- strings.TrimPrefix(m, markBody+" ")
				})
			}
		}
		w, err := startPGWorker(childConfig{Owner: name, Queue: raw}, on)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		w.wait(t, 3*time.Minute)
	}
	var victim string
	if kill {
		select {
		case victim = <-killed:
		default:
			t.Fatalf("worker q-0 ran fewer than two bodies; nothing was killed: %s", workers[0].summary())
		}
		if !workers[0].killed {
			t.Fatalf("worker q-0 was not killed: %s", workers[0].summary())
		}
	}
	for _, w := range workers {
		if kill && w.name == "q-0" {
			continue
		}
		if w.count(markDone) != 1 {
			t.Fatalf("worker %s: %s", w.name, w.summary())
		}
	}

	type span struct {
		start, end time.Time
		owner      string
	}
	var spans []span
	redispatched := false
	for i, id := range ids {
		info, err := store.Info(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != eventlog.StatusCompleted || info.Queue != queueName {
			t.Fatalf("execution %d is %s in queue %q, want completed in %s", i, info.Status, info.Queue, queueName)
		}
		var mine []span
		for ev, err := range store.Events(ctx, id, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if ds, ok := ev.Data.(*eventlog.DispatchStarted); ok {
				mine = append(mine, span{start: ev.Time, end: ev.Time, owner: ds.Owner})
			} else if len(mine) > 0 {
				mine[len(mine)-1].end = ev.Time
			}
		}
		if kill && fmt.Sprint(i) == victim {
			if len(mine) < 2 || mine[0].owner != "q-0" || mine[len(mine)-1].owner == "q-0" {
				t.Fatalf("the killed body's execution has dispatches %+v; want q-0's, then another worker's", mine)
			}
			redispatched = true
		}
		spans = append(spans, mine...)
	}
	if kill && !redispatched {
		t.Fatalf("the killed body (input %s) is not one of the executions", victim)
	}
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.start, 1}, edge{s.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	if most > queueLimit {
		t.Fatalf("%d of the queue's dispatches ran at one instant; its concurrency is %d", most, queueLimit)
	}
	owners := map[string]int{}
	for _, s := range spans {
		owners[s.owner]++
	}
	t.Logf("%d dispatches by worker %v; at most %d at once", len(spans), owners, most)
}
