package sdk_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestApproveRejectRacePebble and TestApproveRejectRacePostgres (issue 30
// item 5): an Approve and a Reject of one parked approval, sent at once
// from two kernels (two hosts on Postgres), never both succeed: exactly
// one returns nil, the other ErrNoPendingApproval; the lineage records
// the winner's decision, by the winner, once; and the run that follows
// does what was reported — pays after a grant, refuses after a rejection.
func TestApproveRejectRacePebble(t *testing.T) {
	s := newStore(t)
	raceDecisions(t, s, s, 30)
}

func TestApproveRejectRacePostgres(t *testing.T) {
	stores := openPG(t, 2)
	raceDecisions(t, stores[0], stores[1], 8)
}

// raceDecisions runs rounds Approve ‖ Reject races, from a kernel on logA
// and one on logB.
func raceDecisions(t *testing.T, logA, logB eventlog.IndexedLog, rounds int) {
	ctx := t.Context()
	var bodies, asked atomic.Int64
	register := approvalAgent(&bodies)
	gate := sdk.WithGate(countingGate(&asked))
	kA := newKernel(t, logA, register, sdk.WithOwner("A"), gate, sdk.ParkAfter(time.Millisecond))
	kB := newKernel(t, logB, register, sdk.WithOwner("B"), gate)
	for round := range rounds {
		id, err := kA.Start(ctx, "a", 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kA.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
			t.Fatalf("round %d: Run = %v, want ErrWaiting", round, err)
		}
		stepID := pendingStep(t, kB, id).StepID
		errs := make([]error, 2)
		var start, wg sync.WaitGroup
		start.Add(1)
		wg.Add(2)
		go func() {
			defer wg.Done()
			start.Wait()
			errs[0] = kA.Approve(ctx, id, stepID, sdk.By("alice"))
		}()
		go func() {
			defer wg.Done()
			start.Wait()
			errs[1] = kB.Reject(ctx, id, stepID, sdk.By("bob"))
		}()
		start.Done()
		wg.Wait()
		var winner int
		switch {
		case errs[0] == nil && errs[1] == nil:
			t.Fatalf("round %d: Approve and Reject both succeeded", round)
		case errs[0] == nil && errors.Is(errs[1], sdk.ErrNoPendingApproval):
			winner = 0
		case errs[1] == nil && errors.Is(errs[0], sdk.ErrNoPendingApproval):
			winner = 1
		default:
			t.Fatalf("round %d: Approve = %v, Reject = %v; want one nil, one ErrNoPendingApproval", round, errs[0], errs[1])
		}
		decided, by := []string{"approval.granted", "approval.rejected"}[winner], []string{"alice", "bob"}[winner]
		want := []string{"created a", "dispatch 1", "approval.requested", "dispatch.parked", decided}
		evs := events(t, kB, id)
		if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
			t.Fatalf("round %d: lineage after the race (-want +got):\n%s", round, diff)
		}
		var gotBy string
		switch p := evs[4].Data.(type) {
		case *eventlog.ApprovalGranted:
			gotBy = p.By
		case *eventlog.ApprovalRejected:
			gotBy = p.By
		}
		if gotBy != by {
			t.Fatalf("round %d: the decision was recorded by %q, the one reported stored was %q's", round, gotBy, by)
		}
		before := bodies.Load()
		res, err := kB.Run(ctx, id)
		if err != nil {
			t.Fatalf("round %d: Run after the decision: %v", round, err)
		}
		var out string
		if err := res.Decode(&out); err != nil {
			t.Fatal(err)
		}
		paid := bodies.Load() - before
		if winner == 0 && (out != "paid $" || paid != 1) || winner == 1 && (!strings.HasPrefix(out, "refused") || paid != 0) {
			t.Fatalf("round %d: %s won, and the run returned %q with %d payments", round, decided, out, paid)
		}
	}
}
