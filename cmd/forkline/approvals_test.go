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
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// stillClock is a kernel clock that stands at one time and whose waits
// end at once: a dispatch waiting for an approval parks without delay,
// and every event it appends has the same Time.
type stillClock struct{ t time.Time }

func (c stillClock) Now() time.Time { return c.t }

func (c stillClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.t
	return ch
}

// parkApprovals starts two executions of agent "payer" on log, each
// parked waiting for the approval of its pay call (at_most_once), and
// returns their IDs.
func parkApprovals(t *testing.T, log eventlog.IndexedLog) [2]eventlog.ID {
	t.Helper()
	ctx := context.Background()
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		return policy.Decision{Approval: c.Target == "pay", Allow: true, Reason: "payments need a person"}
	}
	k, err := sdk.New(log, sdk.WithGate(gate), sdk.WithClock(stillClock{baseTime}), sdk.WithOwner("setup"))
	if err != nil {
		t.Fatal(err)
	}
	pay := sdk.DefineTool("pay", func(_ context.Context, n int) (int, error) { return n, nil }, sdk.AtMostOnce())
	_, _ = sdk.Register(k, "payer", func(ctx context.Context, n int) (int, error) { return pay.Call(ctx, n) })
	var ids [2]eventlog.ID
	for i, amount := range []int{3, 7} {
		if ids[i], err = k.Start(ctx, "payer", amount); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Run(ctx, ids[i]); !errors.Is(err, sdk.ErrWaiting) {
			t.Fatalf("Run = %v, want ErrWaiting", err)
		}
	}
	return ids
}

// kinds lists the kinds of id's events.
func kinds(t *testing.T, log eventlog.Log, id eventlog.ID) []string {
	t.Helper()
	evs, err := collectEvents(log, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Kind().String())
	}
	return out
}

// checkApprovalCommands runs approvals, approve and reject with base
// (--dir or --db) against a log holding parkApprovals' executions; reopen
// opens that log to read what the commands wrote (and closes it).
func checkApprovalCommands(t *testing.T, base []string, ids [2]eventlog.ID, reopen func(func(eventlog.Log))) {
	t.Helper()
	cli := func(args ...string) (string, string, int) {
		return runCLI(t, append(base[:len(base):len(base)], args...)...)
	}
	parked := []string{"execution.created", "dispatch.started", "approval.requested", "dispatch.parked"}

	stdout, stderr, code := cli("approvals", "--json")
	if code != 0 {
		t.Fatalf("approvals --json: exit %d: %s", code, stderr)
	}
	var listed struct{ Approvals []approvalRow }
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Approvals) != 2 {
		t.Fatalf("approvals lists %d, want 2:\n%s", len(listed.Approvals), stdout)
	}
	step := listed.Approvals[0].Step
	want := approvalRow{Execution: ids[0].String(), Agent: "payer", Step: step, Kind: "tool", Target: "pay", Args: json.RawMessage("3"),
		Reason: "payments need a person", Seq: 3, RequestedAt: timeText(baseTime)}
	if diff := cmp.Diff(want, listed.Approvals[0]); diff != "" {
		t.Fatalf("approvals --json (-want +got):\n%s", diff)
	}
	if second := listed.Approvals[1]; second.Execution != ids[1].String() || string(second.Args) != "7" || second.Step == step {
		t.Fatalf("second approval %+v", second)
	}

	// A unique prefix of the step will do; no owner runs it, so the
	// command records the decision itself.
	stdout, stderr, code = cli("approve", ids[0].String(), step[:6], "--note", "ok by me", "--by", "alice")
	if code != 0 || !strings.Contains(stdout, "step "+step+" approved by alice (recorded at seq 5)") {
		t.Fatalf("approve: exit %d: %s%s", code, stdout, stderr)
	}
	// Deciding twice, an unknown step, or another execution's step: exit
	// 2, nothing written.
	for _, args := range [][]string{
		{"approve", ids[0].String(), step},
		{"reject", ids[0].String(), step},
		{"approve", ids[1].String(), "ffff"},
		{"approve", ids[1].String(), step},
	} {
		if _, stderr, code := cli(args...); code != exitInput || !strings.Contains(stderr, "awaits") && !strings.Contains(stderr, "already") {
			t.Errorf("%v: exit %d: %s; want exit 2 saying why", args, code, stderr)
		}
	}
	stdout, stderr, code = cli("--json", "reject", ids[1].String(), listed.Approvals[1].Step, "--note", "too much")
	var decided map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &decided) != nil || decided["decision"] != "rejected" || decided["recorded"] != true {
		t.Fatalf("reject --json: exit %d: %s%s", code, stdout, stderr)
	}
	if stdout, _, code = cli("approvals"); code != 0 || !strings.Contains(stdout, "no call in") {
		t.Fatalf("approvals after the decisions: exit %d: %s", code, stdout)
	}
	reopen(func(log eventlog.Log) {
		if diff := cmp.Diff(append(parked, "approval.granted"), kinds(t, log, ids[0])); diff != "" {
			t.Errorf("approved execution (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(append(parked, "approval.rejected"), kinds(t, log, ids[1])); diff != "" {
			t.Errorf("rejected execution (-want +got):\n%s", diff)
		}
		evs, _ := collectEvents(log, ids[1])
		// Without --by the decider is the OS user.
		if r := evs[4].Data.(*eventlog.ApprovalRejected); r.Note != "too much" || r.StepID != listed.Approvals[1].Step || r.By != osUser() {
			t.Errorf("approval.rejected %+v, want By %q", r, osUser())
		}
		evs, _ = collectEvents(log, ids[0])
		if g := evs[4].Data.(*eventlog.ApprovalGranted); g.Note != "ok by me" || g.By != "alice" {
			t.Errorf("approval.granted %+v", g)
		}
		for _, id := range ids {
			info, err := log.Info(context.Background(), id)
			if err != nil || info.Status != eventlog.StatusWaiting || info.WakeAt.IsZero() {
				t.Errorf("%s after the decision: %+v, %v; want waiting, woken at the decision", id, info, err)
			}
			if reqs, err := log.(eventlog.Inbox).Requests(context.Background(), id); err != nil || len(reqs) != 0 {
				t.Errorf("%s keeps %d requests (%v)", id, len(reqs), err)
			}
		}
	})
}

// TestApprovalCommands: forkline approvals, approve and reject on a data
// folder's Pebble log (DESIGN §12). The table is pinned by a golden file.
func TestApprovalCommands(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	ids := parkApprovals(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	args := []string{"--dir", dir, "approvals"}
	stdout, stderr, code := runCLI(t, args...)
	checkGolden(t, "approvals", maskIDs(transcript(args[2:], stdout, stderr, code)))
	checkApprovalCommands(t, []string{"--dir", dir}, ids, func(f func(eventlog.Log)) {
		s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(s)
	})
}

// TestApprovalCommandsOnPostgres: the same commands with --db.
func TestApprovalCommandsOnPostgres(t *testing.T) {
	url := pgtest.SchemaURL(t)
	s, err := pgstore.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := parkApprovals(t, s)
	checkApprovalCommands(t, []string{"--dir", t.TempDir(), "--db", url}, ids, func(f func(eventlog.Log)) { f(s) })
}

// TestBulkApprove: approve --all --agent A [--step-prefix P] decides every
// approval awaited by A's executions whose call's target starts with P,
// one approval.granted each; without --agent, or with <id> <step>, it is
// refused with nothing written; a prefix or agent matching nothing writes
// nothing.
func TestBulkApprove(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	ids := parkApprovals(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string, int) {
		return runCLI(t, append([]string{"--dir", dir}, args...)...)
	}
	parked := []string{"execution.created", "dispatch.started", "approval.requested", "dispatch.parked"}
	check := func(want []string, by string) {
		t.Helper()
		s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, id := range ids {
			if diff := cmp.Diff(want, kinds(t, s, id)); diff != "" {
				t.Fatalf("%s (-want +got):\n%s", id, diff)
			}
			if by != "" {
				evs, _ := collectEvents(s, id)
				if g := evs[len(evs)-1].Data.(*eventlog.ApprovalGranted); g.By != by || g.Note != "ship it" {
					t.Fatalf("approval.granted %+v, want by %s", g, by)
				}
			}
		}
	}
	for _, args := range [][]string{
		{"approve", "--all"},
		{"reject", "--all", "--step-prefix", "pay"},
		{"approve", "--all", "--agent", "payer", ids[0].String(), "x"},
		{"approve", "--agent", "payer"},
	} {
		if _, stderr, code := cli(args...); code != exitInput {
			t.Errorf("%v: exit %d: %s; want exit 2", args, code, stderr)
		}
	}
	for _, args := range [][]string{
		{"approve", "--all", "--agent", "payer", "--step-prefix", "refund"},
		{"reject", "--all", "--agent", "mailer"},
	} {
		if stdout, stderr, code := cli(args...); code != 0 || !strings.Contains(stdout, "no call of agent") {
			t.Errorf("%v: exit %d: %s%s; want no call", args, code, stdout, stderr)
		}
	}
	check(parked, "")
	stdout, stderr, code := cli("--json", "approve", "--all", "--agent", "payer", "--step-prefix", "pa", "--by", "bob", "--note", "ship it")
	var out struct{ Decisions []bulkRow }
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || len(out.Decisions) != 2 {
		t.Fatalf("approve --all: exit %d: %s%s; want two decisions", code, stdout, stderr)
	}
	for i, d := range out.Decisions {
		if d.Execution != ids[i].String() || d.Decision != "approved" || d.Target != "pay" || d.Error != "" {
			t.Errorf("decision %d: %+v", i, d)
		}
	}
	check(append(parked, "approval.granted"), "bob")
	if stdout, _, code := cli("reject", "--all", "--agent", "payer"); code != 0 || !strings.Contains(stdout, "no call of agent") {
		t.Fatalf("reject --all after the approvals: exit %d: %s", code, stdout)
	}
	check(append(parked, "approval.granted"), "bob")
}
