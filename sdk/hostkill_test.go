package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forkline/forkline/driver/blob/pgblob"
	"github.com/forkline/forkline/driver/dirfs"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/sdk"
)

// hostKillEnv carries a worker child's configuration (JSON).
const hostKillEnv = "FORKLINE_HOSTKILL_CHILD"

// hostKillConfig configures one worker: its own data folder (Store), the
// shared Postgres log and blob store, and whether the step it blocks in
// affects the workspace (then the head is uncovered when it is killed).
type hostKillConfig struct {
	URL, Schema, Store, Marker string
	Affects                    bool
}

// hostKillAgent registers agent "w": a dirfs workspace (CoverageReuse, so
// only declared steps advance it), two writes, then a step that, in the
// child (block), writes marker and blocks until killed.
func hostKillAgent(cfg hostKillConfig, shared *pgblob.Store, block bool) func(*sdk.Kernel) {
	drv := dirfs.New(dirfs.Config{Store: cfg.Store, Blobs: shared, CoverageReuse: true, NoSync: true})
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "w", func(ctx context.Context, _ none) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			for _, name := range []string{"a.txt", "b.txt"} {
				write := sdk.DefineTool("write", func(ctx context.Context, name string) (string, error) {
					return name, ws.WriteFile(name, []byte("written by "+name))
				}, sdk.Affects("ws"))
				if _, err := write.Call(ctx, name); err != nil {
					return "", err
				}
			}
			var opts []sdk.CallOption
			if cfg.Affects {
				opts = append(opts, sdk.Affects("ws"))
			}
			wait := sdk.DefineTool("wait", func(ctx context.Context, _ int) (string, error) {
				if block {
					if err := os.WriteFile(cfg.Marker, []byte("blocked"), 0o644); err != nil {
						return "", err
					}
					select {} // until SIGKILL
				}
				return "waited", nil
			}, opts...)
			return wait.Call(ctx, 0)
		})
	}
}

// TestHostKillChild is the worker of TestHostKill when run as its child;
// otherwise it does nothing.
func TestHostKillChild(t *testing.T) {
	raw := os.Getenv(hostKillEnv)
	if raw == "" {
		t.Skip("only runs as the child of TestHostKill")
	}
	var cfg hostKillConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := pgstore.Open(ctx, cfg.URL, pgstore.WithSchema(cfg.Schema))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := pgblob.Open(ctx, cfg.URL, pgblob.Options{Schema: cfg.Schema, Namespace: cfg.Schema})
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(store, sdk.WithOwner("host-a"), sdk.WithLeaseTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hostKillAgent(cfg, shared, true)(k)
	id, err := k.Start(ctx, "w", none{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Marker+".id", []byte(id.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = k.Run(ctx, id)
	t.Fatalf("the worker was to block until killed; Run = %v", err)
}

// fileState is what a workspace holds: per path, content and mtime.
func fileState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var content []byte
		if fi.Mode().IsRegular() {
			if content, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out[p] = fi.ModTime().String() + " " + fi.Mode().String() + " " + string(content)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHostKill: DESIGN §11, the test of the issue. Worker A (host-a, data
// folder A) runs a dirfs agent on a shared Postgres log and blob store and
// is killed with SIGKILL inside a step. Worker B (host-b, data folder B)
// takes over: with the head covered it binds anew from the covering
// checkpoint (fetched from the shared blob store) and completes; with it
// uncovered (the killed step affects the workspace, so its step.started
// is in the log before its body runs) B appends nothing and
// leaves the execution to A (DESIGN §15½.4: ErrResourceUnavailable
// naming host A's owner). Either way B never opens A's workspace: A's data
// folder is unchanged, to the mtime.
func TestHostKill(t *testing.T) {
	for _, c := range []struct {
		name    string
		affects bool
	}{{"covered", false}, {"uncovered", true}} {
		t.Run(c.name, func(t *testing.T) {
			url, schema := pgtest.Schema(t)
			root := t.TempDir()
			cfgA := hostKillConfig{URL: url, Schema: schema, Store: filepath.Join(root, "hostA", "dirfs"),
				Marker: filepath.Join(root, "marker"), Affects: c.affects}
			raw, _ := json.Marshal(cfgA)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHostKillChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), hostKillEnv+"="+string(raw))
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var idText []byte
			for idText == nil {
				select {
				case err := <-exited:
					t.Fatalf("worker A exited before blocking: %v\n%s", err, out.String())
				case <-time.After(10 * time.Millisecond):
				}
				if _, err := os.Stat(cfgA.Marker); err == nil {
					if idText, err = os.ReadFile(cfgA.Marker + ".id"); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-exited
			id, err := eventlog.ParseID(string(idText))
			if err != nil {
				t.Fatal(err)
			}

			ctx := context.Background()
			store, err := pgstore.Open(ctx, url, pgstore.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			shared, err := pgblob.Open(ctx, url, pgblob.Options{Schema: schema, Namespace: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer shared.Close()
			cfgB := cfgA
			cfgB.Store = filepath.Join(root, "hostB", "dirfs")
			kB := newKernel(t, store, hostKillAgent(cfgB, shared, false), sdk.WithOwner("host-b"))
			before := events(t, kB, id)
			var bA dirfs.Binding
			for _, ev := range before {
				if b, ok := ev.Data.(*eventlog.ResourceBound); ok {
					if err := json.Unmarshal(b.Binding, &bA); err != nil {
						t.Fatal(err)
					}
				}
			}
			wsA := filepath.Join(cfgA.Store, "workspaces", bA.Workspace)
			stateA := fileState(t, filepath.Join(root, "hostA"))
			if _, ok := stateA[filepath.Join(wsA, "b.txt")]; !ok {
				t.Fatalf("worker A's workspace %s lacks b.txt: %v", wsA, stateA)
			}

			// A's lease (1 s) must expire before B may claim.
			var runErr error
			for range 600 {
				_, runErr = kB.Run(ctx, id)
				if !errors.Is(runErr, sdk.ErrBusy) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			after := events(t, kB, id)
			got := describeAll(after[len(before):])
			if c.affects {
				var ae *sdk.AwaitingOwnerError
				if !errors.Is(runErr, sdk.ErrResourceUnavailable) || !errors.As(runErr, &ae) || ae.Owner == "" {
					t.Fatalf("worker B: Run = %v, want ErrResourceUnavailable awaiting worker A's owner", runErr)
				}
				if len(got) != 0 {
					t.Fatalf("worker B appended %v, want nothing", got)
				}
			} else {
				if runErr != nil {
					t.Fatalf("worker B: %v", runErr)
				}
				var ref string
				for _, ev := range before {
					if cp, ok := ev.Data.(*eventlog.ResourceCaptured); ok {
						ref = cp.Ref
					}
				}
				// The killed attempt of the safe_to_retry wait, which
				// affects nothing, left no step.started: on Postgres its
				// start rides its outcome's commit (DESIGN §21), so B's
				// is the first attempt the log records.
				want := []string{"dispatch 2", "bound ws from=" + ref + " every=1", "started tool wait", "succeeded", "completed"}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("worker B appended %v, want %v", got, want)
				}
				// B's workspace, in B's data folder, holds what A wrote.
				var bB dirfs.Binding
				if err := json.Unmarshal(after[len(before)+1].Data.(*eventlog.ResourceBound).Binding, &bB); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(cfgB.Store, "workspaces", bB.Workspace, "b.txt"))
				if err != nil || string(b) != "written by b.txt" {
					t.Fatalf("worker B's workspace b.txt = %q, %v", b, err)
				}
			}
			stateAfter := fileState(t, filepath.Join(root, "hostA"))
			for p, s := range stateA {
				if stateAfter[p] != s {
					t.Errorf("worker A's data folder changed at %s: %q → %q", p, s, stateAfter[p])
				}
			}
			if len(stateAfter) != len(stateA) {
				t.Errorf("worker A's data folder had %d entries, now %d", len(stateA), len(stateAfter))
			}
		})
	}
}
