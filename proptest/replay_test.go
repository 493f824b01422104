package proptest

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/internal/testdriver"
	"github.com/forkline/forkline/sdk"
)

// greeter writes one file per name through a resource; version 2 changes
// the file names.
func greeter(drv *testdriver.Driver, version int) NewKernel {
	return func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
		k, err := sdk.New(log, opts...)
		if err != nil {
			return nil, err
		}
		_, err = sdk.Register(k, "greeter", func(ctx context.Context, names []string) (string, error) {
			ws, err := sdk.Resource(ctx, "ws", drv)
			if err != nil {
				return "", err
			}
			greet := sdk.DefineTool("greet", func(ctx context.Context, file string) (string, error) {
				return file, ws.WriteFile(file, []byte("hello"))
			}, sdk.Affects("ws"))
			out := ""
			for _, n := range names {
				file := n + ".txt"
				if version == 2 {
					file = "hello-" + n + ".txt"
				}
				r, err := greet.Call(ctx, file)
				if err != nil {
					return "", err
				}
				out += r + " "
			}
			return out, nil
		})
		return k, err
	}
}

// heads returns the head of every execution of log.
func heads(t *testing.T, log eventlog.Log) map[eventlog.ID]uint64 {
	out := map[eventlog.ID]uint64{}
	for info, err := range log.List(context.Background(), eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		out[info.ID] = info.Head
	}
	return out
}

// DESIGN §15: Replay runs every recorded execution against the current
// handlers, never appending to the log, and lists the divergences.
func TestReplay(t *testing.T) {
	ctx := context.Background()
	drv := testdriver.New()
	store, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	k, err := greeter(drv, 1)(store)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := k.Start(ctx, "greeter", []string{"ann", "bob"})
	if _, err := k.Run(ctx, done); err != nil {
		t.Fatal(err)
	}
	fork, err := k.Fork(ctx, done, 6) // after ann's greeting
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, fork); err != nil {
		t.Fatal(err)
	}
	// A run killed after its first greeting: its history ends there.
	kl := newKillLog(store, 5) // dispatch, bound+baseline, started, succeeded
	kk, _ := greeter(drv, 1)(kl)
	running, _ := kk.Start(ctx, "greeter", []string{"cy", "di"})
	if _, err := kk.Run(ctx, running); !errors.Is(err, errKilled) {
		t.Fatalf("killed run = %v", err)
	}
	// An execution of an agent the replaying kernel does not register.
	other, _ := sdk.New(store)
	_, _ = sdk.Register(other, "other", func(ctx context.Context, _ struct{}) (string, error) { return "x", nil })
	oid, _ := other.Start(ctx, "other", struct{}{})
	if _, err := other.Run(ctx, oid); err != nil {
		t.Fatal(err)
	}
	before := heads(t, store)

	rep, err := ReplayLog(ctx, store, greeter(drv, 1))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 3 || len(rep.Divergences) != 0 || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "agent not registered") {
		t.Fatalf("unchanged handlers: %+v, want 3 replayed, none diverging, the other agent skipped", rep)
	}

	q := &quietT{}
	divs := Replay(q, store, greeter(drv, 2))
	if len(divs) != 3 || len(q.errs) != 3 {
		t.Fatalf("changed handlers: %d divergences, want 3: %v", len(divs), divs)
	}
	for _, d := range divs {
		if !strings.Contains(d.Reason, `the handler called tool "greet" "hello-ann.txt" #0 where the lineage recorded tool "greet" "ann.txt" #0`) &&
			!strings.Contains(d.Reason, `"hello-cy.txt" #0 where the lineage recorded tool "greet" "cy.txt" #0`) {
			t.Errorf("divergence %v does not name the calls", d)
		}
		if d.Seq != 5 {
			t.Errorf("divergence %v at seq %d, want 5 (the recorded greet)", d, d.Seq)
		}
	}
	if after := heads(t, store); !maps.Equal(before, after) {
		t.Errorf("Replay changed the log: heads %v, then %v", before, after)
	}
}

// quietT collects what Replay reports.
type quietT struct{ errs []string }

func (q *quietT) Helper()                           {}
func (q *quietT) Errorf(format string, args ...any) { q.errs = append(q.errs, format) }
func (q *quietT) Fatalf(format string, args ...any) { panic("fatal: " + format) }
