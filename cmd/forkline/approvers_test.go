package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// parkClock is a stillClock whose waits of an hour or more never end: a
// dispatch waiting for an approval parks at once (ParkAfter is shorter)
// and never sees the approval's expiry, two hours away.
type parkClock struct{ stillClock }

func (c parkClock) After(d time.Duration) <-chan time.Time {
	if d >= time.Hour {
		return nil
	}
	return c.stillClock.After(d)
}

// TestApprovalsShowApprovers (DESIGN §17): forkline approvals shows who
// may decide a bundle's approval and when it expires — in the table and
// in --json as rule_id, message, approvers and expires_at — and approve
// by a decider not listed is bad input (exit 2) that appends nothing,
// while a listed approver's decision is recorded.
func TestApprovalsShowApprovers(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.ParseBundle([]byte(`default: allow
rules:
  - id: big-pay
    priority: 1
    when: {target: pay}
    then:
      decision: approve
      reason: a payment
      approval: {approvers: [alice, carol], timeout: 2h, message: "pay it?"}
`))
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s, sdk.WithBundle(b), sdk.WithClock(parkClock{stillClock{baseTime}}))
	if err != nil {
		t.Fatal(err)
	}
	pay := sdk.DefineTool("pay", func(_ context.Context, n int) (int, error) { return n, nil }, sdk.AtMostOnce())
	_, _ = sdk.Register(k, "payer", func(ctx context.Context, n int) (int, error) { return pay.Call(ctx, n) })
	id, err := k.Start(context.Background(), "payer", 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(context.Background(), id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	expires := timeText(baseTime.Add(2 * time.Hour))

	stdout, stderr, code := runCLI(t, "--dir", dir, "approvals")
	if code != 0 || !strings.Contains(stdout, "a payment; approvers: alice, carol; expires "+expires) {
		t.Fatalf("approvals: exit %d: %s%s\nwant the approvers and the expiry %s", code, stdout, stderr, expires)
	}
	stdout, stderr, code = runCLI(t, "--dir", dir, "--json", "approvals")
	var listed struct{ Approvals []approvalRow }
	if code != 0 || json.Unmarshal([]byte(stdout), &listed) != nil || len(listed.Approvals) != 1 {
		t.Fatalf("approvals --json: exit %d: %s%s", code, stdout, stderr)
	}
	got := listed.Approvals[0]
	want := approvalRow{Execution: id.String(), Agent: "payer", Step: got.Step, Kind: "tool", Target: "pay", Args: json.RawMessage("7"),
		Reason: "a payment", RuleID: "big-pay", Message: "pay it?", Approvers: []string{"alice", "carol"}, ExpiresAt: expires,
		Seq: 3, RequestedAt: timeText(baseTime)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("approvals --json (-want +got):\n%s", diff)
	}

	count := func() []string {
		s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return kinds(t, s, id)
	}
	before := count()
	if _, stderr, code := runCLI(t, "--dir", dir, "approve", id.String(), got.Step, "--by", "mallory"); code != exitInput ||
		!strings.Contains(stderr, "may not decide") {
		t.Fatalf("approve by mallory: exit %d: %s; want exit 2 saying mallory may not decide", code, stderr)
	}
	if after := count(); !cmp.Equal(before, after) {
		t.Fatalf("approve by mallory appended: %v, was %v", after, before)
	}
	if stdout, stderr, code := runCLI(t, "--dir", dir, "approve", id.String(), got.Step, "--by", "carol"); code != 0 ||
		!strings.Contains(stdout, "approved by carol") {
		t.Fatalf("approve by carol: exit %d: %s%s", code, stdout, stderr)
	}
	if diff := cmp.Diff(append(before, eventlog.KindApprovalGranted.String()), count()); diff != "" {
		t.Fatalf("after carol's approval (-want +got):\n%s", diff)
	}
}
