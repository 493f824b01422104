package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// errCrash is what a crashLog returns once its budget is spent: the dispatch
// "dies" at that event, as if the process had been killed before the append.
var errCrash = errors.New("test: simulated crash")

// crashLog lets budget more events be appended, then fails every append, as
// a process killed before writing event k.
type crashLog struct {
	eventlog.IndexedLog
	budget atomic.Int64
}

func (c *crashLog) take(n int) bool { return c.budget.Add(-int64(n)) >= 0 }

func (c *crashLog) Append(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if !c.take(len(evs)) {
		return 0, errCrash
	}
	return c.IndexedLog.Append(ctx, id, head, evs...)
}

func (c *crashLog) AppendUnsynced(ctx context.Context, id eventlog.ID, head uint64, evs ...eventlog.Event) (uint64, error) {
	if !c.take(len(evs)) {
		return 0, errCrash
	}
	return c.IndexedLog.AppendUnsynced(ctx, id, head, evs...)
}

// newStore returns an in-memory store closed at cleanup.
func newStore(t testing.TB) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newKernel returns a kernel on log; register adds the agents.
func newKernel(t testing.TB, log eventlog.IndexedLog, register func(*sdk.Kernel), opts ...sdk.Option) *sdk.Kernel {
	t.Helper()
	k, err := sdk.New(log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	register(k)
	return k
}

// events returns id's lineage.
func events(t testing.TB, k *sdk.Kernel, id eventlog.ID) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	for ev, err := range k.Events(context.Background(), id) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// describe renders an event compactly for exact-sequence assertions.
func describe(ev eventlog.Event) string {
	switch p := ev.Data.(type) {
	case *eventlog.StepStarted:
		s := fmt.Sprintf("started %s %s", p.StepKind, p.Target)
		if len(p.Resources) > 0 {
			s += " affects=" + strings.Join(p.Resources, ",")
		}
		if p.Attempt > 1 {
			s += fmt.Sprintf(" attempt=%d", p.Attempt)
		}
		if p.Idempotency == eventlog.AtMostOnce {
			s += " at_most_once"
		}
		return s
	case *eventlog.StepSucceeded:
		return "succeeded"
	case *eventlog.StepFailed:
		if p.Indeterminate {
			return "failed indeterminate"
		}
		return "failed " + p.Error
	case *eventlog.StepCancelled:
		return "cancelled"
	case *eventlog.StepDenied:
		return fmt.Sprintf("denied %s %s: %s", p.StepKind, p.Target, p.Reason)
	case *eventlog.ResourceBound:
		if p.From != "" {
			return fmt.Sprintf("bound %s from=%s every=%d", p.Key, p.From, p.EverySteps)
		}
		return fmt.Sprintf("bound %s every=%d", p.Key, p.EverySteps)
	case *eventlog.ResourceCaptured:
		return fmt.Sprintf("captured %s %s gen=%d", p.Key, p.Reason, p.Generation)
	case *eventlog.ResourceCaptureFailed:
		return fmt.Sprintf("capture_failed %s %s", p.Key, p.Reason)
	case *eventlog.DispatchStarted:
		return fmt.Sprintf("dispatch %d", p.Dispatch)
	case *eventlog.ExecutionCreated:
		return "created " + p.Agent
	case *eventlog.ExecutionCompleted:
		return "completed"
	case *eventlog.ExecutionFailed:
		return "execution_failed " + string(p.Code)
	case *eventlog.ForkCreated:
		return fmt.Sprintf("fork at=%d", p.At)
	}
	return ev.Kind().String()
}

func describeAll(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = describe(ev)
	}
	return out
}

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }
