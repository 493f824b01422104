package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

var errDied = errors.New("the worker died")

// dyingStore is a Pebble store whose appends fail once budget events were
// written: the kernel on it dies inside a step.
type dyingStore struct {
	*pebblestore.Store
	budget int
}

func (d *dyingStore) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if d.budget -= len(evs); d.budget < 0 {
		return 0, errDied
	}
	return d.Store.Append(ctx, id, head, evs...)
}

func (d *dyingStore) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	return d.Append(ctx, id, head, evs...)
}

// TestLsAwaitingOwner: DESIGN §15½.4. Worker a dies inside an at-most-once
// step that affects a resource that is not portable (the head uncovered);
// forkline ls shows the execution "running, awaiting owner a" and names
// the way out, and --json carries awaiting_owner.
func TestLsAwaitingOwner(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	drv := testdriver.New().WithoutPortable()
	k, err := sdk.New(&dyingStore{Store: s, budget: 5}, sdk.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Register(k, "w", func(ctx context.Context, _ struct{}) (string, error) {
		ws, err := sdk.Resource(ctx, "ws", drv)
		if err != nil {
			return "", err
		}
		return sdk.DefineTool("touch", func(ctx context.Context, n int) (string, error) {
			return "ok", ws.WriteFile("f", []byte("x"))
		}, sdk.Affects("ws"), sdk.AtMostOnce()).Call(ctx, 1)
	}); err != nil {
		t.Fatal(err)
	}
	id, err := k.Start(t.Context(), "w", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	// created, dispatch, bound+baseline, started touch: the outcome dies.
	if _, err := k.Run(t.Context(), id); !errors.Is(err, errDied) {
		t.Fatalf("Run = %v, want the worker's death", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "--dir", dir, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "running, awaiting owner a") || !strings.Contains(stdout, "--latest-covered") {
		t.Errorf("ls does not show the execution awaiting owner a and the way out:\n%s", stdout)
	}
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "ls")
	if code != 0 || !strings.Contains(stdout, `"awaiting_owner": "a"`) {
		t.Errorf("ls --json: exit %d, stderr %q, stdout:\n%s\nwant awaiting_owner a", code, stderr, stdout)
	}
}
