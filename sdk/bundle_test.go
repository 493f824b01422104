package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// Policy bundles installed with WithBundle (DESIGN §17, §21½.11).

// payBundle denies payments of 5 or 6, asks approval of payments of 7 and
// allows every other call.
const payBundle = `default: allow
rules:
  - id: no-fives
    priority: 10
    when:
      kind: tool
      target: pay
      args: {Amount: {one_of: [5, 6]}}
    then: {decision: deny, reason: "fives are not paid"}
  - id: big-pay
    priority: 20
    when: {kind: tool, target: pay, at_most_once: true, args: {Amount: {equals: 7}}}
    then:
      decision: approve
      approval: {message: "seven is a lot"}
`

// mustBundle parses a bundle or fails the test.
func mustBundle(t *testing.T, text string) *policy.Bundle {
	t.Helper()
	b, err := policy.ParseBundle([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deniedAgent registers agent "a": it calls the pay tool (at_most_once)
// and returns "paid N", or, for a denied call, what the *DeniedError says:
// "denied CODE RULE: REASON" and whether it is ErrDenied.
func deniedAgent(bodies *atomic.Int64) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		pay := sdk.DefineTool("pay", func(_ context.Context, a payArgs) (int, error) {
			bodies.Add(1)
			return a.Amount, nil
		}, sdk.AtMostOnce())
		_, _ = sdk.Register(k, "a", func(ctx context.Context, amount int) (string, error) {
			n, err := pay.Call(ctx, payArgs{Amount: amount})
			var de *sdk.DeniedError
			if errors.As(err, &de) {
				return fmt.Sprintf("denied %s %s: %s (ErrDenied %t)", de.Code, de.RuleID, de.Reason, errors.Is(err, sdk.ErrDenied)), nil
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("paid %d", n), nil
		})
	}
}

// runOut starts agent "a" with amount and runs it to its end, returning
// its output.
func runOut(t *testing.T, k *sdk.Kernel, amount int) (eventlog.ID, string) {
	t.Helper()
	id, err := k.Start(t.Context(), "a", amount)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return id, out
}

// TestBundleAllowAndDeny: a call the bundle allows runs with no event of
// the policy's; a call a rule denies is step.denied{Code: policy, RuleID,
// Reason} and never runs, and the call returns a *DeniedError with the
// same Code and RuleID that is ErrDenied. A fork past the denial replays it
// — the same *DeniedError — without asking: its kernel's bundle now allows
// every call, and its body never runs.
func TestBundleAllowAndDeny(t *testing.T) {
	store := newStore(t)
	var bodies atomic.Int64
	k := newKernel(t, store, deniedAgent(&bodies), sdk.WithBundle(mustBundle(t, payBundle)))

	id, out := runOut(t, k, 3)
	if out != "paid 3" || bodies.Load() != 1 {
		t.Fatalf("allowed call: output %q, body ran %d times", out, bodies.Load())
	}
	want := []string{"created a", "dispatch 1", "started tool pay at_most_once", "succeeded", "completed"}
	if diff := cmp.Diff(want, describeAll(events(t, k, id))); diff != "" {
		t.Fatalf("allowed call's events (-want +got):\n%s", diff)
	}

	id, out = runOut(t, k, 5)
	const wantOut = "denied policy no-fives: fives are not paid (ErrDenied true)"
	if out != wantOut || bodies.Load() != 1 {
		t.Fatalf("denied call: output %q, body ran %d times", out, bodies.Load())
	}
	evs := events(t, k, id)
	want = []string{"created a", "dispatch 1", "denied tool pay: fives are not paid", "completed"}
	if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
		t.Fatalf("denied call's events (-want +got):\n%s", diff)
	}
	den := evs[2].Data.(*eventlog.StepDenied)
	if den.Code != eventlog.DenyPolicy || den.RuleID != "no-fives" || den.StepKind != eventlog.StepTool || den.Target != "pay" {
		t.Fatalf("step.denied = %+v", den)
	}

	// Replay: another kernel on the store whose bundle allows everything.
	k2 := newKernel(t, store, deniedAgent(&bodies), sdk.WithBundle(mustBundle(t, "default: allow\n")))
	f, err := k2.Fork(t.Context(), id, 3)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k2.Run(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Decode(&out); err != nil || out != wantOut {
		t.Fatalf("fork's output %q, %v; want %q", out, err, wantOut)
	}
	if diff := cmp.Diff(append(want[:3:3], "fork at=3", "dispatch 2", "completed"), describeAll(events(t, k2, f))); diff != "" {
		t.Fatalf("fork's events (-want +got):\n%s", diff)
	}
	if bodies.Load() != 1 {
		t.Fatalf("the body ran %d times, want 1", bodies.Load())
	}

	// The bundle's default denies with no rule id.
	k3 := newKernel(t, newStore(t), deniedAgent(&bodies), sdk.WithBundle(mustBundle(t, "default: deny\n")))
	id, out = runOut(t, k3, 3)
	if out != "denied policy : denied by the bundle's default (ErrDenied true)" {
		t.Fatalf("default denial: output %q", out)
	}
	if den := events(t, k3, id)[2].Data.(*eventlog.StepDenied); den.Code != eventlog.DenyPolicy || den.RuleID != "" {
		t.Fatalf("default's step.denied = %+v", den)
	}
}

// TestBundleApprove: a rule that approves records approval.requested with
// its RuleID, reason and approval message, and the call waits; granted,
// the body runs once. A rejection is step.denied{Code:
// approval_rejected} naming the rule.
func TestBundleApprove(t *testing.T) {
	ctx := t.Context()
	for _, grant := range []bool{true, false} {
		store := newStore(t)
		var bodies atomic.Int64
		k := newKernel(t, store, deniedAgent(&bodies), sdk.WithBundle(mustBundle(t, payBundle)))
		id, err := k.Start(ctx, "a", 7)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		var res *sdk.Result
		go func() {
			var err error
			res, err = k.Run(ctx, id)
			done <- err
		}()
		awaitStatus(t, store, id, eventlog.StatusWaiting)
		p := pendingStep(t, k, id)
		if grant {
			err = k.Approve(ctx, id, p.StepID)
		} else {
			err = k.Reject(ctx, id, p.StepID, sdk.Note("no"))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var out string
		if err := res.Decode(&out); err != nil {
			t.Fatal(err)
		}
		evs := events(t, k, id)
		wantReq := &eventlog.ApprovalRequested{StepID: p.StepID, StepKind: eventlog.StepTool, Target: "pay",
			Args: []byte(`{"Amount":7}`), Reason: "approval asked by rule big-pay", RuleID: "big-pay", Message: "seven is a lot"}
		if diff := cmp.Diff(wantReq, evs[2].Data); diff != "" {
			t.Fatalf("approval.requested (-want +got):\n%s", diff)
		}
		want := []string{"created a", "dispatch 1", "approval.requested", "approval.granted",
			"started tool pay at_most_once", "succeeded", "completed"}
		wantOut, wantBodies := "paid 7", int64(1)
		if !grant {
			want = []string{"created a", "dispatch 1", "approval.requested", "approval.rejected",
				"denied tool pay: approval rejected: no", "completed"}
			wantOut, wantBodies = "denied approval_rejected big-pay: approval rejected: no (ErrDenied true)", 0
		}
		if diff := cmp.Diff(want, describeAll(evs)); diff != "" {
			t.Fatalf("grant %t: events (-want +got):\n%s", grant, diff)
		}
		if out != wantOut || bodies.Load() != wantBodies {
			t.Fatalf("grant %t: output %q, body ran %d times", grant, out, bodies.Load())
		}
		if !grant {
			if den := evs[4].Data.(*eventlog.StepDenied); den.Code != eventlog.DenyApprovalRejected || den.RuleID != "big-pay" {
				t.Fatalf("step.denied = %+v", den)
			}
		}
	}
}

// verdictGate returns a gate that decides v for every call, counting how
// often it is asked.
func verdictGate(v policy.Verdict, asked *atomic.Int64) policy.Gate {
	return func(context.Context, policy.Call) policy.Decision {
		asked.Add(1)
		return policy.Decision{Allow: v == policy.VerdictAllow, Approval: v == policy.VerdictApprove, Reason: "gate says " + string(v)}
	}
}

// TestBundleWithGate: with both a gate and a bundle, deny beats approve
// beats allow, one approval is asked (the bundle's when both ask), and the
// gate is not asked when the bundle denies. Each combination's appended
// events are checked.
func TestBundleWithGate(t *testing.T) {
	verdicts := []policy.Verdict{policy.VerdictAllow, policy.VerdictDeny, policy.VerdictApprove}
	for _, bv := range verdicts {
		for _, gv := range verdicts {
			t.Run(string(bv)+"+"+string(gv), func(t *testing.T) {
				bundle := mustBundle(t, fmt.Sprintf(`default: allow
rules:
  - id: r-%[1]s
    priority: 1
    when: {target: pay}
    then: {decision: %[1]s, reason: "bundle says %[1]s"}
`, bv))
				var bodies, asked atomic.Int64
				k := newKernel(t, newStore(t), deniedAgent(&bodies), sdk.WithBundle(bundle),
					sdk.WithGate(verdictGate(gv, &asked)), sdk.ParkAfter(time.Nanosecond))
				id, err := k.Start(t.Context(), "a", 3)
				if err != nil {
					t.Fatal(err)
				}
				res, err := k.Run(t.Context(), id)
				evs := events(t, k, id)
				var tail []string
				for _, ev := range evs[2:] {
					switch p := ev.Data.(type) {
					case *eventlog.StepDenied:
						tail = append(tail, fmt.Sprintf("denied %s %q %s", p.Code, p.RuleID, p.Reason))
					case *eventlog.ApprovalRequested:
						tail = append(tail, fmt.Sprintf("approval %q %s", p.RuleID, p.Reason))
					default:
						tail = append(tail, describe(ev))
					}
				}
				var want []string
				wantAsked := int64(1)
				switch {
				case bv == policy.VerdictDeny:
					want, wantAsked = []string{`denied policy "r-deny" bundle says deny`, "completed"}, 0
				case gv == policy.VerdictDeny:
					want = []string{`denied policy "" gate says deny`, "completed"}
				case bv == policy.VerdictApprove:
					want = []string{`approval "r-approve" bundle says approve`, "dispatch.parked"}
				case gv == policy.VerdictApprove:
					want = []string{`approval "" gate says approve`, "dispatch.parked"}
				default:
					want = []string{"started tool pay at_most_once", "succeeded", "completed"}
				}
				if diff := cmp.Diff(want, tail); diff != "" {
					t.Fatalf("events after dispatch (-want +got):\n%s", diff)
				}
				if want[len(want)-1] == "dispatch.parked" {
					if !errors.Is(err, sdk.ErrWaiting) {
						t.Fatalf("Run = %v, want ErrWaiting", err)
					}
				} else if err != nil {
					t.Fatal(err)
				} else if strings.HasPrefix(want[0], "denied") {
					var out string
					if err := res.Decode(&out); err != nil || !strings.HasPrefix(out, "denied policy") {
						t.Fatalf("output %q, %v", out, err)
					}
				}
				if asked.Load() != wantAsked {
					t.Fatalf("gate asked %d times, want %d", asked.Load(), wantAsked)
				}
			})
		}
	}
}

// TestWithBundleRefuses: a nil bundle, and a bundle with a rate limit on
// a log that keeps no limits (eventlog.Limiter; here hidden by a wrapper
// without Unwrap), are ErrInvalid naming the rule; New makes no kernel.
func TestWithBundleRefuses(t *testing.T) {
	rule := func(then string) string {
		return "default: allow\nrules:\n  - id: r1\n    priority: 1\n    then: " + then + "\n"
	}
	for _, c := range []struct {
		name   string
		bundle *policy.Bundle
		hide   bool // the log is a wrapper that hides the store's Limiter
		says   string
	}{
		{"nil", nil, false, "nil bundle"},
		{"rate limit without a limiter", mustBundle(t, rule("{decision: allow, rate_limit: {max_calls: 1, window: 1m}}")), true,
			`"r1" (line 3): then.rate_limit needs a log that keeps rate limits`},
	} {
		var log eventlog.IndexedLog = newStore(t)
		if c.hide {
			log = hiddenLeaser{log}
		}
		k, err := sdk.New(log, sdk.WithBundle(c.bundle))
		if !errors.Is(err, sdk.ErrInvalid) || k != nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: New = %v, %v; want ErrInvalid saying %q", c.name, k, err, c.says)
		}
	}
}

// TestSetAgentBundle: an agent's bundle decides that agent's calls in
// place of the kernel's own, and not another agent's; removed, the
// kernel's decides again. A bundle with a rate limit on a log that keeps
// none, or an empty agent name, is ErrInvalid and changes nothing.
func TestSetAgentBundle(t *testing.T) {
	var bodies atomic.Int64
	store := newStore(t)
	k := newKernel(t, store, func(k *sdk.Kernel) {
		deniedAgent(&bodies)(k)
		pay := sdk.DefineTool("pay", func(_ context.Context, a payArgs) (int, error) { return a.Amount, nil }, sdk.AtMostOnce())
		_, _ = sdk.Register(k, "b", func(ctx context.Context, amount int) (string, error) {
			n, err := pay.Call(ctx, payArgs{Amount: amount})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("paid %d", n), nil
		})
	}, sdk.WithBundle(mustBundle(t, "default: deny\n")))
	if err := k.SetAgentBundle("a", mustBundle(t, payBundle)); err != nil {
		t.Fatal(err)
	}
	if _, out := runOut(t, k, 3); out != "paid 3" {
		t.Fatalf("agent a, allowed by its bundle: %q", out)
	}
	id, out := runOut(t, k, 5)
	if out != "denied policy no-fives: fives are not paid (ErrDenied true)" {
		t.Fatalf("agent a, denied by its bundle: %q", out)
	}
	if den := events(t, k, id)[2].Data.(*eventlog.StepDenied); den.Code != eventlog.DenyPolicy || den.RuleID != "no-fives" {
		t.Fatalf("step.denied = %+v", den)
	}
	// Agent b still has the kernel's bundle, which denies every call.
	idb, err := k.Start(t.Context(), "b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(t.Context(), idb); !errors.Is(err, sdk.ErrDenied) {
		t.Fatalf("agent b under the kernel's bundle: %v", err)
	}

	// Refused: nothing changes.
	limited := mustBundle(t, "default: deny\nrules:\n  - id: r1\n    priority: 1\n    then: {decision: allow, rate_limit: {max_calls: 1, window: 1m}}\n")
	k2 := newKernel(t, hiddenLeaser{newStore(t)}, deniedAgent(&bodies))
	if err := k2.SetAgentBundle("a", limited); !errors.Is(err, sdk.ErrInvalid) || k2.AgentBundle("a") != nil {
		t.Fatalf("rate limit without a limiter: %v", err)
	}
	before := k.AgentBundle("a")
	if err := k.SetAgentBundle("", limited); !errors.Is(err, sdk.ErrInvalid) || k.AgentBundle("a") != before {
		t.Fatalf("empty agent: %v", err)
	}

	// Removed: the kernel's bundle denies agent a's calls again.
	if err := k.SetAgentBundle("a", nil); err != nil || k.AgentBundle("a") != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, out := runOut(t, k, 3); out != "denied policy : denied by the bundle's default (ErrDenied true)" {
		t.Fatalf("agent a after removal: %q", out)
	}
}
