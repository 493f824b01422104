package proptest

// The kit on forkline's own agents: the coder agent of the reference page
// passes CheckAgent; three small agents with a planted bug each fail it,
// with a message that names the cause.

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/driver/sqlitedb"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/examples/coder"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
	"pgregory.net/rapid"
)

// kernelFor returns a NewKernel that registers h as agent "a".
func kernelFor[In, Out any](h func(context.Context, In) (Out, error)) NewKernel {
	return func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
		k, err := sdk.New(log, opts...)
		if err != nil {
			return nil, err
		}
		_, err = sdk.Register(k, "a", h)
		return k, err
	}
}

// coderKernel is the coder agent on a test driver and the scripted model.
func coderKernel(t testing.TB) (NewKernel, *testdriver.Driver) {
	srv := httptest.NewServer(coder.Script())
	t.Cleanup(srv.Close)
	drv := testdriver.New()
	m := coder.Model{Name: coder.ScriptedName, BaseURL: srv.URL + "/v1", APIKey: "test"}
	h := coder.Handler(func() driver.Driver[*testdriver.Handle, testdriver.Binding] { return drv }, m)
	return func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
		k, err := sdk.New(log, opts...)
		if err != nil {
			return nil, err
		}
		_, err = sdk.Register(k, "coder", h)
		return k, err
	}, drv
}

// The unchanged coder agent passes: killed and resumed at every event,
// forked at every event, its workspace compared with driver.Differ.
func TestCheckAgentCoder(t *testing.T) {
	newKernel, drv := coderKernel(t)
	CheckAgent(t, newKernel, "coder", coder.Input{Task: "Build a tiny Go module that greets people."}, WithDiffer("workspace", drv))
}

// mustFail runs the check and returns its failure's text.
func mustFail(t *testing.T, newKernel NewKernel, opts ...Option) string {
	t.Helper()
	err := checkAgent(context.Background(), newKernel, "a", struct{}{}, opts...)
	if err == nil {
		t.Fatal("the planted bug was not caught")
	}
	t.Logf("caught:\n%v", err)
	return err.Error()
}

func wantAll(t *testing.T, msg string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("the failure does not say %q:\n%s", p, msg)
		}
	}
}

// Planted bug 1: the handler reads the clock outside a step and passes it
// to a tool.
func TestCheckAgentCatchesClock(t *testing.T) {
	msg := mustFail(t, kernelFor(func(ctx context.Context, _ struct{}) (string, error) {
		note := sdk.DefineTool("note", func(ctx context.Context, s string) (string, error) { return s, nil })
		for i := range 3 {
			if _, err := note.Call(ctx, fmt.Sprintf("%d at %s", i, time.Now().Format(time.RFC3339Nano))); err != nil {
				return "", err
			}
		}
		return "noted", nil
	}))
	wantAll(t, msg, "DESIGN §8.6", "nondeterministic", `tool "note"`, "reads the clock outside a step", "\n  >    3  ")
}

// Planted bug 2: a tool writes a resource it does not declare in Affects,
// on a driver with CoverageReuse. States are compared with driver.Differ,
// or with a state function.
func TestCheckAgentCatchesUndeclaredWrite(t *testing.T) {
	drv := testdriver.New().WithCoverageReuse()
	state := func(ctx context.Context, ref string) (string, error) {
		files, ok := drv.Restore(ref)
		if !ok {
			return "", fmt.Errorf("no checkpoint %s", ref)
		}
		return fmt.Sprint(files), nil
	}
	for _, opt := range []Option{WithDiffer("ws", drv), WithState("ws", state)} {
		msg := mustFail(t, sneakyAgent(drv), opt)
		wantAll(t, msg, "DESIGN §8.1", `resource "ws"`, "sneak.txt", `tool "sneak"`, `without declaring "ws" in Affects`)
	}
}

// sneakyAgent writes ws with a tool that does not declare it.
func sneakyAgent(drv *testdriver.Driver) NewKernel {
	return kernelFor(func(ctx context.Context, _ struct{}) (string, error) {
		ws, err := sdk.Resource(ctx, "ws", drv, sdk.EverySteps(1))
		if err != nil {
			return "", err
		}
		put := func(name string, opts ...sdk.CallOption) error {
			_, err := sdk.DefineTool(name, func(ctx context.Context, file string) (string, error) {
				return file, ws.WriteFile(file, []byte(name))
			}, opts...).Call(ctx, name+".txt")
			return err
		}
		if err := put("write", sdk.Affects("ws")); err != nil {
			return "", err
		}
		if err := put("sneak"); err != nil { // the bug: it writes ws, and does not say so
			return "", err
		}
		return "done", put("write_more", sdk.Affects("ws"))
	})
}

// Planted bug 3: the handler ranges over a map to decide the order of its
// calls.
func TestCheckAgentCatchesMapOrder(t *testing.T) {
	msg := mustFail(t, kernelFor(func(ctx context.Context, _ struct{}) (string, error) {
		files := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6"}
		put := sdk.DefineTool("put", func(ctx context.Context, kv [2]string) (string, error) { return kv[0], nil })
		for k, v := range files { // the bug: map iteration order changes between runs
			if _, err := put.Call(ctx, [2]string{k, v}); err != nil {
				return "", err
			}
		}
		return "put", nil
	}))
	wantAll(t, msg, "nondeterministic", `tool "put"`, "in another order", "ranges over a map")
}

// CheckAgent takes a *rapid.T: generated inputs, each checked in full.
func TestCheckAgentGeneratedInputs(t *testing.T) {
	drv := testdriver.New()
	newKernel := greeter(drv, 1)
	rapid.Check(t, func(rt *rapid.T) {
		names := rapid.SliceOfN(rapid.StringMatching(`[a-z]{1,4}`), 0, 2).Draw(rt, "names")
		CheckAgent(rt, newKernel, "greeter", names, WithDiffer("ws", drv), Every(3))
	})
}

// An agent on a dirfs workspace (not portable) passes when a kill lands
// inside a step that Affects it (issue 38): the resumed run is the same
// owner, so it reopens the workspace the killed run bound instead of
// failing with resource_unavailable.
func TestCheckAgentDirfsKilledInAffectsStep(t *testing.T) {
	drv := dirfs.New(dirfs.Config{Store: t.TempDir(), CoverageReuse: true})
	write := sdk.DefineTool("write", func(ctx context.Context, n int) (string, error) {
		ws, err := sdk.Resource(ctx, "ws", drv)
		if err != nil {
			return "", err
		}
		name := fmt.Sprintf("f%d", n)
		return name, os.WriteFile(filepath.Join(ws.Dir(), name), []byte(name), 0o644)
	}, sdk.Affects("ws"))
	newKernel := kernelFor(func(ctx context.Context, _ struct{}) (string, error) {
		if _, err := sdk.Resource(ctx, "ws", drv); err != nil {
			return "", err
		}
		var out []string
		for n := range 3 {
			name, err := write.Call(ctx, n)
			if err != nil {
				return "", err
			}
			out = append(out, name)
		}
		return strings.Join(out, ","), nil
	})
	CheckAgent(t, newKernel, "a", struct{}{}, WithDiffer("ws", drv))
}

// An agent whose output derives from sdk.IdempotencyKey — a deploy named
// by its key, as a Temporal or DBOS user writes it — passes (issue 38 item
// 1): a kill trial resumes the same execution, so its keys are the
// uninterrupted run's.
func TestCheckAgentIdempotencyKeyOutput(t *testing.T) {
	deploy := sdk.DefineTool("deploy", func(ctx context.Context, env string) (string, error) {
		return "dep-" + env + "-" + sdk.IdempotencyKey(ctx)[:8], nil
	})
	newKernel := kernelFor(func(ctx context.Context, _ struct{}) (string, error) {
		var out []string
		for _, env := range []string{"staging", "prod"} {
			name, err := deploy.Call(ctx, env)
			if err != nil {
				return "", err
			}
			out = append(out, name)
		}
		return strings.Join(out, ","), nil
	})
	CheckAgent(t, newKernel, "a", struct{}{})
}

// An agent with an at_most_once deploy passes (issue 38 item 3): a kill
// or a fork at the deploy's step.started leaves the call in flight, which
// the resumed run or the fork sees as indeterminate — here the handler
// fails with it — and the kit does not compare that run with the
// uninterrupted one.
func TestCheckAgentAtMostOnceInFlight(t *testing.T) {
	deploy := sdk.DefineTool("deploy", func(ctx context.Context, env string) (string, error) {
		return "deployed " + env, nil
	}, sdk.AtMostOnce())
	note := sdk.DefineTool("note", func(ctx context.Context, s string) (string, error) { return s, nil })
	newKernel := kernelFor(func(ctx context.Context, _ struct{}) (string, error) {
		if _, err := note.Call(ctx, "before"); err != nil {
			return "", err
		}
		out, err := deploy.Call(ctx, "prod")
		if err != nil {
			return "", err
		}
		_, err = note.Call(ctx, "after")
		return out, err
	})
	CheckAgent(t, newKernel, "a", struct{}{})
}

// An agent on a sqlitedb database (not portable) passes with kills inside
// the steps that Affect it (issue 38 item 2): the resumed run reopens the
// database the killed one bound, the states of every covered fork equal
// the parent's (driver.Differ). The insert is idempotent (INSERT OR
// IGNORE on a key), as a safe_to_retry tool must be: a kill after its body
// and before its step.succeeded runs it again.
func TestCheckAgentSqlitedbKilledInAffectsStep(t *testing.T) {
	drv := sqlitedb.New(sqlitedb.Config{Store: t.TempDir(), Schema: `CREATE TABLE notes (n INTEGER PRIMARY KEY)`, CoverageReuse: true})
	insert := sdk.DefineTool("insert", func(ctx context.Context, n int) (int, error) {
		db, err := sdk.Resource(ctx, "db", drv)
		if err != nil {
			return 0, err
		}
		if _, err := db.ExecContext(ctx, `INSERT OR IGNORE INTO notes VALUES (?)`, n); err != nil {
			return 0, err
		}
		var count int
		return count, db.QueryRowContext(ctx, `SELECT count(*) FROM notes`).Scan(&count)
	}, sdk.Affects("db"))
	newKernel := kernelFor(func(ctx context.Context, _ struct{}) (string, error) {
		if _, err := sdk.Resource(ctx, "db", drv); err != nil {
			return "", err
		}
		var out []string
		for n := range 3 {
			count, err := insert.Call(ctx, n)
			if err != nil {
				return "", err
			}
			out = append(out, fmt.Sprint(count))
		}
		return strings.Join(out, ","), nil
	})
	CheckAgent(t, newKernel, "a", struct{}{}, WithDiffer("db", drv))
}

// childKernel is an agent "a" that calls a child agent "c" between two
// tools, the child making a tool call of its own.
func childKernel(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
	k, err := sdk.New(log, opts...)
	if err != nil {
		return nil, err
	}
	note := sdk.DefineTool("note", func(ctx context.Context, s string) (string, error) { return s, nil })
	child, err := sdk.Register(k, "c", func(ctx context.Context, s string) (string, error) {
		return note.Call(ctx, "child "+s)
	})
	if err != nil {
		return nil, err
	}
	_, err = sdk.Register(k, "a", func(ctx context.Context, _ struct{}) (string, error) {
		before, err := note.Call(ctx, "before")
		if err != nil {
			return "", err
		}
		got, err := child.Call(ctx, "work")
		if err != nil {
			return "", err
		}
		after, err := note.Call(ctx, "after")
		return before + "," + got + "," + after, err
	})
	return k, err
}

// An agent with a child passes, and a kill trial that kills the run while
// its child runs resumes at once (issue 38 item 4): the killed kernel's
// child ends at its next use of the log, and the resumed parent runs it
// again in process instead of waiting ParkAfter — here an hour, which a
// kill trial that waited would spend.
func TestCheckAgentChild(t *testing.T) {
	newKernel := func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
		return childKernel(log, append(opts, sdk.ParkAfter(time.Hour))...)
	}
	CheckAgent(t, newKernel, "a", struct{}{})
}

// A killed killLog refuses reads, creates and claims, and drain returns
// once the leases claimed through it are released.
func TestKillLogRefusesWhenKilled(t *testing.T) {
	ctx := context.Background()
	store, err := pebblestore.Open("", pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	id, err := store.Create(ctx, &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`{}`)}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	kl := newKillLog(store, 0)
	var leaser eventlog.Leaser
	if !eventlog.As(kl, &leaser) || leaser != eventlog.Leaser(kl) {
		t.Fatal("the kernel does not claim its leases through the killLog")
	}
	lease, err := kl.Claim(ctx, id, "x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	kl.mu.Lock()
	held := kl.held
	kl.mu.Unlock()
	if held != 1 {
		t.Fatalf("the killLog counts %d leases held after one claim, want 1: drain would not wait for it", held)
	}
	if _, err := kl.Info(ctx, id); err != nil {
		t.Fatalf("a live killLog refuses a read: %v", err)
	}
	kl.kill()
	if _, err := kl.Info(ctx, id); !errors.Is(err, errKilled) {
		t.Errorf("Info after the kill: %v, want errKilled", err)
	}
	for _, err := range kl.Events(ctx, id, 1) {
		if !errors.Is(err, errKilled) {
			t.Errorf("Events after the kill: %v, want errKilled", err)
		}
	}
	if _, err := kl.Create(ctx, &eventlog.ExecutionCreated{Agent: "a", Input: []byte(`{}`)}, time.Time{}); !errors.Is(err, errKilled) {
		t.Errorf("Create after the kill: %v, want errKilled", err)
	}
	if _, err := kl.Claim(ctx, eventlog.NewID(), "x", time.Minute); !errors.Is(err, errKilled) {
		t.Errorf("Claim after the kill: %v, want errKilled", err)
	}
	done := make(chan struct{})
	go func() { kl.drain(); close(done) }()
	if err := kl.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	<-done
	if _, held, err := store.Holder(ctx, id); err != nil || held {
		t.Errorf("the lease is still held in the store (%v, %v)", held, err)
	}
}
