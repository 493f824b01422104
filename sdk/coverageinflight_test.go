package sdk_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestCoverageInFlight: Kernel.Coverage lists the at_most_once call in
// flight between its step.started and its step.succeeded — a fork there
// sees it as indeterminate — and none elsewhere (issue 38 item 3, DESIGN
// §4); a fork at the step.started does get ErrIndeterminate.
func TestCoverageInFlight(t *testing.T) {
	ctx := context.Background()
	var bodies atomic.Int64
	k := newKernel(t, newStore(t), approvalAgent(&bodies))
	id, err := k.Start(ctx, "a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	var started, ended uint64
	var stepID string
	for _, ev := range events(t, k, id) {
		switch p := ev.Data.(type) {
		case *eventlog.StepStarted:
			if p.Idempotency == eventlog.AtMostOnce {
				started, stepID = ev.Seq, p.StepID
			}
		case *eventlog.StepSucceeded:
			if p.StepID == stepID {
				ended = ev.Seq
			}
		}
	}
	if started == 0 || ended <= started {
		t.Fatalf("pay started at %d, ended at %d", started, ended)
	}
	head := uint64(len(events(t, k, id)))
	for seq := uint64(1); seq <= head; seq++ {
		p, err := k.Coverage(ctx, id, seq)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if seq >= started && seq < ended {
			want = 1
		}
		if len(p.InFlight) != want {
			t.Fatalf("seq %d: in flight %+v; want %d call", seq, p.InFlight, want)
		}
		if want == 1 {
			f := p.InFlight[0]
			if f.StepID != stepID || f.Kind != eventlog.StepTool || f.Target != "pay" || f.StartedAt != started {
				t.Fatalf("seq %d: in flight %+v; want pay started at %d", seq, f, started)
			}
		}
	}
	if _, err := k.Coverage(ctx, id, head+1); !errors.Is(err, eventlog.ErrInvalid) && !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("Coverage past the head = %v; want an error", err)
	}
	fid, err := k.Fork(ctx, id, started)
	if err != nil {
		t.Fatal(err)
	}
	before := bodies.Load()
	if _, err := k.Run(ctx, fid); !errors.Is(err, sdk.ErrIndeterminate) {
		t.Fatalf("fork at the in-flight call: %v; want ErrIndeterminate", err)
	}
	if bodies.Load() != before {
		t.Fatal("the fork ran the at_most_once body again")
	}
}
