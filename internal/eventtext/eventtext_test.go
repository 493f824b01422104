package eventtext

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// equateEmpty treats nil and empty byte slices, JSON values and lists as
// equal, as Format documents.
var equateEmpty = cmpopts.EquateEmpty()

func ev(seq uint64, p eventlog.Payload) eventlog.Event { return eventlog.Event{Seq: seq, Data: p} }

func TestParseFormatRoundTrip(t *testing.T) {
	parent := eventlog.ID{0x01, 0x92, 0x3c, 0x70, 0x11, 0x22, 0x73, 0x44, 0x85, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc}
	tests := []struct {
		name   string
		text   string // canonical: Format(Parse(text)) == text
		events []eventlog.Event
	}{
		{
			name: "every kind with defaults",
			text: `created agent=coder
dispatch 1
started s1 tool write_file affects=ws
succeeded s1
bound ws driver=dirfs
captured ws ref=r1 gen=2 reason=steps
capture_failed ws reason=steps
failed s2
cancelled s3
denied s4 tool rm
completed
execution_failed code=handler
fork parent=P at=12
`,
			events: []eventlog.Event{
				ev(1, &eventlog.ExecutionCreated{Agent: "coder"}),
				ev(2, &eventlog.DispatchStarted{Dispatch: 1}),
				ev(3, &eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepTool, Target: "write_file",
					Resources: []string{"ws"}, Idempotency: eventlog.SafeToRetry, Attempt: 1}),
				ev(4, &eventlog.StepSucceeded{StepID: "s1"}),
				ev(5, &eventlog.ResourceBound{Key: "ws", DriverID: "dirfs", Binding: json.RawMessage(`{}`),
					EverySteps: 1, OnCompletion: true}),
				ev(6, &eventlog.ResourceCaptured{Key: "ws", Ref: "r1", Generation: 2, Reason: eventlog.CaptureSteps}),
				ev(7, &eventlog.ResourceCaptureFailed{Key: "ws", Reason: eventlog.CaptureSteps}),
				ev(8, &eventlog.StepFailed{StepID: "s2"}),
				ev(9, &eventlog.StepCancelled{StepID: "s3"}),
				ev(10, &eventlog.StepDenied{StepID: "s4", StepKind: eventlog.StepTool, Target: "rm"}),
				ev(11, &eventlog.ExecutionCompleted{}),
				ev(12, &eventlog.ExecutionFailed{Code: eventlog.FailHandler}),
				ev(13, &eventlog.ForkCreated{Parent: eventlog.ID{'P'}, At: 12}),
			},
		},
		{
			name: "format version 2",
			text: `created agent=coder deadline=2025-01-02T03:04:05.000000006Z key=k1
dispatch 2 owner=host-a epoch=7
failed s2 err=x retry_at=2025-01-02T03:04:05Z
cancel_requested reason="user asked" by=alice
execution_cancelled reason=r
parked timer wake=2025-01-02T03:04:05Z
parked approval
timer_started t1 wake=2025-01-02T03:04:05Z
timer_fired t1
approval_requested s5 child reviewer args=x reason=fork
granted s5 by=bob note=ok
rejected s6
marker v2
abandoned s7
diverged unconsumed=s8,s9
fork parent=P at=15 input=new override=s1:edited override=` + "`" + `"a:b":1` + "`" + ` deadline=2025-01-02T03:04:05Z
`,
			events: []eventlog.Event{
				ev(1, &eventlog.ExecutionCreated{Agent: "coder", Key: "k1", Deadline: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)}),
				ev(2, &eventlog.DispatchStarted{Dispatch: 2, Owner: "host-a", Epoch: 7}),
				ev(3, &eventlog.StepFailed{StepID: "s2", Error: "x", RetryAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}),
				ev(4, &eventlog.CancelRequested{Reason: "user asked", By: "alice"}),
				ev(5, &eventlog.ExecutionCancelled{Reason: "r"}),
				ev(6, &eventlog.DispatchParked{Reason: eventlog.ParkTimer, WakeAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}),
				ev(7, &eventlog.DispatchParked{Reason: eventlog.ParkApproval}),
				ev(8, &eventlog.TimerStarted{TimerID: "t1", WakeAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}),
				ev(9, &eventlog.TimerFired{TimerID: "t1"}),
				ev(10, &eventlog.ApprovalRequested{StepID: "s5", StepKind: eventlog.StepChild, Target: "reviewer", Args: []byte("x"), Reason: "fork"}),
				ev(11, &eventlog.ApprovalGranted{StepID: "s5", By: "bob", Note: "ok"}),
				ev(12, &eventlog.ApprovalRejected{StepID: "s6"}),
				ev(13, &eventlog.MarkerRecorded{Name: "v2"}),
				ev(14, &eventlog.StepAbandoned{StepID: "s7"}),
				ev(15, &eventlog.ForkDiverged{Unconsumed: []string{"s8", "s9"}}),
				ev(16, &eventlog.ForkCreated{Parent: eventlog.ID{'P'}, At: 15, Input: []byte("new"),
					Overrides: []eventlog.StepOverride{{StepID: "s1", Result: []byte("edited")}, {StepID: "a:b", Result: []byte("1")}},
					Deadline:  time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}),
			},
		},
		{
			name: "every field set",
			text: "created agent=coder input=`{\"task\":\"fix it\"}`\n" +
				"started s1 local \"build all\" args=\"a b\" affects=ws,db attempt=2 idem=at_most_once\n" +
				"succeeded s1 result=\"line\\nbreak\"\n" +
				"bound ws driver=dirfs config=`{\"root\":\"/x\"}` binding=`{\"id\":1}` from=sha256:ab every=5 completion=false reuse=true\n" +
				"capture_failed ws reason=completion err=\"disk full\"\n" +
				"failed s2 err=boom indeterminate\n" +
				"denied s4 llm api.example.com/v1 reason=\"not in forks\"\n" +
				"completed output=done\n" +
				"execution_failed code=checkpoint_unavailable err=\"ref r1 expired\"\n" +
				"fork parent=01923c70-1122-7344-8566-778899aabbcc at=9 select=db:@0/g1 select=ws:r1@7/g3/covered\n",
			events: []eventlog.Event{
				ev(1, &eventlog.ExecutionCreated{Agent: "coder", Input: []byte(`{"task":"fix it"}`)}),
				ev(2, &eventlog.StepStarted{StepID: "s1", StepKind: eventlog.StepLocal, Target: "build all",
					Args: []byte("a b"), Resources: []string{"ws", "db"}, Idempotency: eventlog.AtMostOnce, Attempt: 2}),
				ev(3, &eventlog.StepSucceeded{StepID: "s1", Result: []byte("line\nbreak")}),
				ev(4, &eventlog.ResourceBound{Key: "ws", DriverID: "dirfs", Configuration: json.RawMessage(`{"root":"/x"}`),
					Binding: json.RawMessage(`{"id":1}`), From: "sha256:ab", EverySteps: 5, CoverageReuse: true}),
				ev(5, &eventlog.ResourceCaptureFailed{Key: "ws", Reason: eventlog.CaptureCompletion, Error: "disk full"}),
				ev(6, &eventlog.StepFailed{StepID: "s2", Error: "boom", Indeterminate: true}),
				ev(7, &eventlog.StepDenied{StepID: "s4", StepKind: eventlog.StepLLM, Target: "api.example.com/v1", Reason: "not in forks"}),
				ev(8, &eventlog.ExecutionCompleted{Output: []byte("done")}),
				ev(9, &eventlog.ExecutionFailed{Code: eventlog.FailCheckpointUnavailable, Error: "ref r1 expired"}),
				ev(10, &eventlog.ForkCreated{Parent: parent, At: 9, Selections: []eventlog.ForkSelection{
					{Key: "db", Generation: 1},
					{Key: "ws", Ref: "r1", CapturedAt: 7, Generation: 3, Covered: true},
				}}),
			},
		},
		{
			name: "seq prefixes where seqs jump",
			text: "@3 dispatch 2\ndispatch 3\n@3 dispatch 4\n@0 dispatch 5\n",
			events: []eventlog.Event{
				ev(3, &eventlog.DispatchStarted{Dispatch: 2}),
				ev(4, &eventlog.DispatchStarted{Dispatch: 3}),
				ev(3, &eventlog.DispatchStarted{Dispatch: 4}),
				ev(0, &eventlog.DispatchStarted{Dispatch: 5}),
			},
		},
		{
			name: "awkward strings are quoted",
			text: "started \"a=b\" \"\" \"#x\" affects=\"a,b\" affects=\"\" affects=\"c d\" attempt=0 idem=\"\"\n" +
				"bound \"@k\" driver=\"\" binding=\"\" every=-1\n" +
				"captured `\"q` ref=\"\" gen=0 reason=\"\"\n" +
				"failed indeterminate err=\"\\xff\\x00\" indeterminate\n" +
				"fork parent=00000000-0000-0000-0000-000000000000 at=0 select=`\"a:b\":r:1@x@2/g3` select=`\"\":@0/g0` select=k:r/covered@1/g2\n",
			events: []eventlog.Event{
				ev(1, &eventlog.StepStarted{StepID: "a=b", StepKind: "", Target: "#x", Resources: []string{"a,b", "", "c d"}}),
				ev(2, &eventlog.ResourceBound{Key: "@k", Binding: json.RawMessage{}, EverySteps: -1, OnCompletion: true}),
				ev(3, &eventlog.ResourceCaptured{Key: `"q`}),
				ev(4, &eventlog.StepFailed{StepID: "indeterminate", Error: "\xff\x00", Indeterminate: true}),
				ev(5, &eventlog.ForkCreated{Selections: []eventlog.ForkSelection{
					{Key: "a:b", Ref: "r:1@x", CapturedAt: 2, Generation: 3},
					{Key: ""},
					{Key: "k", Ref: "r/covered", CapturedAt: 1, Generation: 2},
				}}),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.events, got, equateEmpty); d != "" {
				t.Errorf("Parse (-want +got):\n%s", d)
			}
			if out := Format(tc.events); out != tc.text {
				t.Errorf("Format:\n%s\nwant:\n%s", out, tc.text)
			}
		})
	}
}

func TestParseIgnoresCommentsAndBlankLines(t *testing.T) {
	got, err := Parse("# a case\n\n  created agent=a  \r\n   # indented comment\n\tdispatch 1\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []eventlog.Event{ev(1, &eventlog.ExecutionCreated{Agent: "a"}), ev(2, &eventlog.DispatchStarted{Dispatch: 1})}
	if d := cmp.Diff(want, got, equateEmpty); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ text, want string }{
		{"created", "line 1: created: missing agent="},
		{"\n\nbogus x", "line 3: unknown event \"bogus\""},
		{"dispatch", "line 1: dispatch: missing dispatch count"},
		{"dispatch x", `line 1: dispatch: "x" is not a 64-bit unsigned number`},
		{"dispatch 1 2", `line 1: dispatch: unexpected word "2"`},
		{"succeeded s1 colour=red", "line 1: succeeded: unknown field colour="},
		{"created agent=a agent=b", "line 1: created: agent= given 2 times"},
		{"started s1 tool", "line 1: started: missing target"},
		{"started s1 tool t attempt=-1", `line 1: started: "-1" is not a 32-bit unsigned number`},
		{"bound ws driver=d reuse=yes", `line 1: bound: "yes" is not true or false`},
		{"bound ws driver=d every=x", `line 1: bound: "x" is not a number`},
		{"captured ws ref=r reason=steps", "line 1: captured: missing gen="},
		{"succeeded \"s1", "line 1: column 11: bad quoted string"},
		{"succeeded \"s1\"x", "line 1: column 15: want a space after a quoted string"},
		{"@x dispatch 1", `line 1: bad seq prefix "@x"`},
		{"@4", "line 1: no event after the seq prefix"},
		{"\"created\" agent=a", "line 1: line does not start with an event name"},
		{"fork parent=P", "line 1: fork: missing at="},
		{"fork parent=!! at=1", `line 1: eventtext: id "!!" is neither an ID nor a short name`},
		{"fork parent=P at=1 select=ws", `line 1: fork: select="ws": no colon after the key`},
		{"fork parent=P at=1 select=ws:r@1", `line 1: fork: select="ws:r@1": no /gGEN`},
		{"fork parent=P at=1 select=ws:r/g1", `line 1: fork: select="ws:r/g1": no @AT`},
		{"fork parent=P at=1 select=ws:r@x/g1", `line 1: fork: select="ws:r@x/g1": bad captured-at seq`},
		{"fork parent=P at=1 select=ws:r@1/gx", `line 1: fork: select="ws:r@1/gx": bad generation`},
		{"fork parent=P at=1 select=`\"ws`", `line 1: fork: select="\"ws": bad quoted key`},
		{"fork parent=P at=1 select=`\"ws\"r`", `line 1: fork: select="\"ws\"r": no colon after the key`},
		{"failed s1 indeterminate indeterminate", `line 1: failed: unexpected word "indeterminate"`},
	}
	for _, tc := range tests {
		_, err := Parse(tc.text)
		if err == nil {
			t.Errorf("Parse(%q): no error, want %q", tc.text, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): %v, want it to contain %q", tc.text, err, tc.want)
		}
		if !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Parse(%q): %v does not wrap eventlog.ErrInvalid", tc.text, err)
		}
	}
}

func TestFormatInvalidEvent(t *testing.T) {
	for _, e := range []eventlog.Event{{Seq: 1}, {Seq: 1, Data: (*eventlog.StepStarted)(nil)}} {
		out := Format([]eventlog.Event{e})
		if out != "invalid\n" {
			t.Errorf("Format(%#v) = %q, want %q", e, out, "invalid\n")
		}
		if _, err := Parse(out); err == nil {
			t.Errorf("Parse(%q) accepted an invalid event", out)
		}
	}
}

func TestIDs(t *testing.T) {
	tests := []struct {
		id   eventlog.ID
		text string
	}{
		{eventlog.ID{'P'}, "P"},
		{eventlog.ID{'f', 'o', 'r', 'k', '-', '1', '.', '2', '_', 'x'}, "fork-1.2_x"},
		{eventlog.ID{'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'}, "0123456789abcdef"},
		{eventlog.ID{'P', 0, 'Q'}, "50005100-0000-0000-0000-000000000000"},
		{eventlog.ID{'!'}, "21000000-0000-0000-0000-000000000000"},
		{eventlog.ID{}, "00000000-0000-0000-0000-000000000000"},
	}
	for _, tc := range tests {
		if got := FormatID(tc.id); got != tc.text {
			t.Errorf("FormatID(%v) = %q, want %q", tc.id, got, tc.text)
		}
		got, err := ParseID(tc.text)
		if err != nil || got != tc.id {
			t.Errorf("ParseID(%q) = %v, %v, want %v", tc.text, got, err, tc.id)
		}
	}
	for _, bad := range []string{"", "a b", "01234567890123456", "ab\x00"} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) accepted it", bad)
		}
	}
}

// TestRoundTripProperty checks Parse(Format(evs)) == evs for arbitrary
// payloads, whatever bytes their strings hold.
func TestRoundTripProperty(t *testing.T) {
	str := rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z0-9:@/,="#`+"`"+` ]{0,8}`), rapid.SampledFrom([]string{"", "indeterminate", "@1", "#", "a,b", "x=y", "\"", "`"}))
	bytesGen := rapid.Map(str, func(s string) []byte { return []byte(s) })
	tm := rapid.Custom(func(t *rapid.T) time.Time {
		if rapid.Bool().Draw(t, "zero") {
			return time.Time{}
		}
		return time.Unix(0, rapid.Int64().Draw(t, "nanos")).UTC()
	})
	payload := rapid.Custom(func(t *rapid.T) eventlog.Payload {
		switch rapid.IntRange(0, 23).Draw(t, "kind") {
		case 0:
			return &eventlog.ExecutionCreated{Agent: str.Draw(t, "agent"), Input: bytesGen.Draw(t, "input"),
				Deadline: tm.Draw(t, "deadline"), Key: str.Draw(t, "key")}
		case 1:
			return &eventlog.DispatchStarted{Dispatch: rapid.Uint64().Draw(t, "dispatch"),
				Owner: str.Draw(t, "owner"), Epoch: rapid.Uint64().Draw(t, "epoch")}
		case 2:
			return &eventlog.StepStarted{StepID: str.Draw(t, "id"), StepKind: eventlog.StepKind(str.Draw(t, "kind")),
				Target: str.Draw(t, "target"), Args: bytesGen.Draw(t, "args"),
				Resources:   rapid.SliceOfN(str, 0, 3).Draw(t, "resources"),
				Idempotency: eventlog.Idempotency(str.Draw(t, "idem")), Attempt: rapid.Uint32().Draw(t, "attempt")}
		case 3:
			return &eventlog.StepSucceeded{StepID: str.Draw(t, "id"), Result: bytesGen.Draw(t, "result")}
		case 4:
			return &eventlog.StepFailed{StepID: str.Draw(t, "id"), Error: str.Draw(t, "err"), Indeterminate: rapid.Bool().Draw(t, "ind"),
				RetryAt: tm.Draw(t, "retryAt")}
		case 5:
			return &eventlog.StepCancelled{StepID: str.Draw(t, "id")}
		case 6:
			return &eventlog.StepDenied{StepID: str.Draw(t, "id"), StepKind: eventlog.StepKind(str.Draw(t, "kind")),
				Target: str.Draw(t, "target"), Reason: str.Draw(t, "reason")}
		case 7:
			return &eventlog.ResourceBound{Key: str.Draw(t, "key"), DriverID: str.Draw(t, "driver"),
				Configuration: bytesGen.Draw(t, "config"), Binding: bytesGen.Draw(t, "binding"), From: str.Draw(t, "from"),
				EverySteps: rapid.Int().Draw(t, "every"), OnCompletion: rapid.Bool().Draw(t, "completion"),
				CoverageReuse: rapid.Bool().Draw(t, "reuse")}
		case 8:
			return &eventlog.ResourceCaptured{Key: str.Draw(t, "key"), Ref: str.Draw(t, "ref"),
				Generation: rapid.Uint64().Draw(t, "gen"), Reason: eventlog.CaptureReason(str.Draw(t, "reason"))}
		case 9:
			return &eventlog.ResourceCaptureFailed{Key: str.Draw(t, "key"), Reason: eventlog.CaptureReason(str.Draw(t, "reason")),
				Error: str.Draw(t, "err")}
		case 10:
			return &eventlog.ExecutionCompleted{Output: bytesGen.Draw(t, "output")}
		case 11:
			return &eventlog.ExecutionFailed{Error: str.Draw(t, "err"), Code: eventlog.FailureCode(str.Draw(t, "code"))}
		case 13:
			return &eventlog.CancelRequested{Reason: str.Draw(t, "reason"), By: str.Draw(t, "by")}
		case 14:
			return &eventlog.ExecutionCancelled{Reason: str.Draw(t, "reason")}
		case 15:
			return &eventlog.DispatchParked{Reason: eventlog.ParkReason(str.Draw(t, "reason")), WakeAt: tm.Draw(t, "wake")}
		case 16:
			return &eventlog.TimerStarted{TimerID: str.Draw(t, "id"), WakeAt: tm.Draw(t, "wake")}
		case 17:
			return &eventlog.TimerFired{TimerID: str.Draw(t, "id")}
		case 18:
			return &eventlog.ApprovalRequested{StepID: str.Draw(t, "id"), StepKind: eventlog.StepKind(str.Draw(t, "kind")),
				Target: str.Draw(t, "target"), Args: bytesGen.Draw(t, "args"), Reason: str.Draw(t, "reason")}
		case 19:
			return &eventlog.ApprovalGranted{StepID: str.Draw(t, "id"), By: str.Draw(t, "by"), Note: str.Draw(t, "note")}
		case 20:
			return &eventlog.ApprovalRejected{StepID: str.Draw(t, "id"), By: str.Draw(t, "by"), Note: str.Draw(t, "note")}
		case 21:
			return &eventlog.MarkerRecorded{Name: str.Draw(t, "name")}
		case 22:
			return &eventlog.StepAbandoned{StepID: str.Draw(t, "id")}
		case 23:
			return &eventlog.ForkDiverged{Unconsumed: rapid.SliceOfN(str, 0, 3).Draw(t, "unconsumed")}
		default:
			var id eventlog.ID
			copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "parent"))
			sels := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) eventlog.ForkSelection {
				return eventlog.ForkSelection{Key: str.Draw(t, "key"), Ref: str.Draw(t, "ref"),
					CapturedAt: rapid.Uint64().Draw(t, "capturedAt"), Generation: rapid.Uint64().Draw(t, "gen"),
					Covered: rapid.Bool().Draw(t, "covered")}
			}), 0, 3).Draw(t, "selections")
			overrides := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) eventlog.StepOverride {
				return eventlog.StepOverride{StepID: str.Draw(t, "id"), Result: bytesGen.Draw(t, "result")}
			}), 0, 3).Draw(t, "overrides")
			return &eventlog.ForkCreated{Parent: id, At: rapid.Uint64().Draw(t, "at"), Selections: sels,
				Input: bytesGen.Draw(t, "input"), Overrides: overrides, Deadline: tm.Draw(t, "deadline")}
		}
	})
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 5).Draw(t, "n")
		var evs []eventlog.Event
		for i := range n {
			seq := uint64(i + 1)
			if rapid.IntRange(0, 4).Draw(t, "jump") == 0 {
				seq = rapid.Uint64().Draw(t, "seq")
			}
			evs = append(evs, eventlog.Event{Seq: seq, Data: payload.Draw(t, "payload")})
		}
		text := Format(evs)
		got, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(Format(evs)): %v\n%s", err, text)
		}
		if d := cmp.Diff(evs, got, equateEmpty); d != "" {
			t.Fatalf("Parse(Format(evs)) (-want +got):\n%s\ntext:\n%s", d, text)
		}
		if again := Format(got); again != text {
			t.Fatalf("Format is not stable:\n%s\nthen:\n%s", text, again)
		}
	})
}
