package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
)

// versionChild configures a worker of one code version (sdk.WithVersion)
// on the Postgres log at URL.
type versionChild struct {
	URL     string
	Worker  string
	Version string
}

// versionAgent registers agent "versioned": a step that records which
// worker ran it, then the output "<the step's worker>/<this worker>", so
// that a fork shows both the worker its prefix recorded and the one that
// ran it.
func versionAgent(k *sdk.Kernel, worker string) error {
	_, err := sdk.Register(k, "versioned", func(ctx context.Context, n int) (string, error) {
		who, err := sdk.Step(ctx, "who", func(context.Context) (string, error) { return worker, nil })
		if err != nil {
			return "", err
		}
		return who + "/" + worker, nil
	})
	return err
}

// versionWorkerMain serves the executions its version may run — its own
// and unversioned ones (DESIGN §19, §21½.5) — until none of them is open.
func versionWorkerMain(cfg versionChild, mark func(string)) int {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, cfg.URL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "version worker:", err)
		return 3
	}
	defer store.Close()
	k, err := sdk.New(store, sdk.WithOwner(cfg.Worker), sdk.WithVersion(cfg.Version), sdk.WithLeaseTTL(2*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "version worker:", err)
		return 3
	}
	if err := versionAgent(k, cfg.Worker); err != nil {
		fmt.Fprintln(os.Stderr, "version worker:", err)
		return 3
	}
	return serveWhileOpen(k, "version worker", 4, time.Minute, "versioned", func(info eventlog.Info) bool {
		return info.Version == cfg.Version || info.Version == ""
	}, mark)
}

// TestPostgresVersionWorkers (DESIGN §19, §21½.5; issue 35): two worker
// processes of versions v1 and v2 on one Postgres log each run only the
// executions of their own version, and the unversioned ones either may;
// the dispatch.started events name the owner. Then a fork of a v1
// execution made with OnVersion("v2") is left alone by the v1 worker
// (nothing appended) and run by the v2 worker, which replays the prefix
// the v1 worker recorded.
func TestPostgresVersionWorkers(t *testing.T) {
	pgtest.URL(t) // skips (or fails) at once without a server
	ctx := context.Background()
	url := pgtest.SchemaURL(t)
	store, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	starter := map[string]*sdk.Kernel{}
	for _, v := range []string{"v1", "v2", ""} {
		k, err := sdk.New(store, sdk.WithOwner("parent-"+v), sdk.WithVersion(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := versionAgent(k, "parent"); err != nil {
			t.Fatal(err)
		}
		starter[v] = k
	}
	version := map[eventlog.ID]string{}
	for i := range 10 {
		v := []string{"v1", "v2", "v1", "v2", ""}[i%5]
		id, err := starter[v].Start(ctx, "versioned", i)
		if err != nil {
			t.Fatal(err)
		}
		version[id] = v
	}
	worker := func(v string) *pgWorker {
		t.Helper()
		raw, err := json.Marshal(versionChild{URL: url, Worker: "worker-" + v, Version: v})
		if err != nil {
			t.Fatal(err)
		}
		w, err := startPGWorker(childConfig{Owner: "worker-" + v, Version: raw}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	finish := func(ws ...*pgWorker) {
		t.Helper()
		defer stopWorkers(ws)
		for _, w := range ws {
			w.wait(t, 2*time.Minute)
			if w.count(markDone) != 1 {
				t.Fatalf("worker %s: %s", w.name, w.summary())
			}
		}
	}
	finish(worker("v1"), worker("v2"))

	// Each execution ran on a worker of its version (the unversioned on
	// either): by its dispatches' owners and by its output.
	owners := func(id eventlog.ID) []string {
		var out []string
		for ev, err := range store.Events(ctx, id, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := ev.Data.(*eventlog.DispatchStarted); ok {
				out = append(out, d.Owner)
			}
		}
		return out
	}
	// output is the recorded output of an execution that completed.
	output := func(id eventlog.ID) string {
		for ev, err := range store.Events(ctx, id, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := ev.Data.(*eventlog.ExecutionCompleted); ok {
				var out string
				if err := json.Unmarshal(c.Output, &out); err != nil {
					t.Fatal(err)
				}
				return out
			}
		}
		t.Fatalf("execution %s has no execution.completed", id)
		return ""
	}
	var aV1 eventlog.ID
	for id, v := range version {
		info, err := store.Info(ctx, id)
		if err != nil || info.Status != eventlog.StatusCompleted || info.Version != v {
			t.Fatalf("execution %s of version %q: %+v, %v; want completed, its version recorded", id, v, info, err)
		}
		out := output(id)
		for _, o := range append(owners(id), strings.Split(out, "/")...) {
			if v != "" && o != "worker-"+v || v == "" && o != "worker-v1" && o != "worker-v2" {
				t.Fatalf("execution %s of version %q ran on %s (dispatches %v, output %q)", id, v, o, owners(id), out)
			}
		}
		if v == "v1" {
			aV1 = id
		}
	}

	// A fork moves a v1 execution onto v2 at its step's outcome (seq 4):
	// the v1 worker leaves it, the v2 worker runs it.
	fid, err := starter["v1"].Fork(ctx, aV1, 4, sdk.OnVersion("v2"))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := store.Info(ctx, fid); err != nil || info.Version != "v2" {
		t.Fatalf("fork %s: %+v, %v; want version v2", fid, info, err)
	}
	finish(worker("v1"))
	info, err := store.Info(ctx, fid)
	if err != nil || info.Status != eventlog.StatusPending || info.Head != 5 {
		t.Fatalf("after the v1 worker: fork %+v, %v; want pending with its fork.created only (head 5)", info, err)
	}
	finish(worker("v2"))
	if out := output(fid); out != "worker-v1/worker-v2" {
		t.Fatalf("fork's output %q, want worker-v1/worker-v2 (the step replayed as v1 recorded it, the rest run by v2)", out)
	}
	if o := owners(fid); len(o) != 2 || o[0] != "worker-v1" || o[1] != "worker-v2" {
		t.Fatalf("the fork's lineage's dispatches %v, want the prefix's worker-v1 then worker-v2", o)
	}
}
