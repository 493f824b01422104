package eventlog_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/vmihailenco/msgpack/v5"
)

// The record layout, restated here so that the tests check the code against
// the documented format rather than against itself:
//
//	[0] version  [1] kind  [2:6] CRC-32C of [0:2], the place and [6:]  [6:14] nanos  [14:] msgpack
//
// where the place, from format version 3 on, is 'e' (an event; 'r' a
// request), the execution ID and the seq (request number), big-endian.
const testHeaderLen = 14

var testCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealSeq is the seq of testID's log that reseal and sealRecord seal a
// record for, and wantCorrupt decodes it at.
const sealSeq = 9

// recordChecksum is the checksum a record with these bytes must carry at
// the place (where, id, n).
func recordChecksum(rec []byte, where byte, id eventlog.ID, n uint64) uint32 {
	sum := crc32.Checksum(rec[0:2], testCastagnoli)
	if rec[0] >= 3 {
		place := append([]byte{where}, id[:]...)
		place = binary.BigEndian.AppendUint64(place, n)
		sum = crc32.Update(sum, testCastagnoli, place)
	}
	return crc32.Update(sum, testCastagnoli, rec[6:])
}

// reseal makes rec's checksum match its bytes as the event at sealSeq of
// testID, so that a test reaches the checks behind the checksum.
func reseal(rec []byte) []byte {
	if len(rec) >= testHeaderLen {
		binary.BigEndian.PutUint32(rec[2:6], recordChecksum(rec, 'e', testID, sealSeq))
	}
	return rec
}

// sealRecord builds a record from its parts.
func sealRecord(version byte, kind eventlog.Kind, nanos int64, payload []byte) []byte {
	rec := []byte{version, byte(kind), 0, 0, 0, 0}
	rec = binary.BigEndian.AppendUint64(rec, uint64(nanos))
	rec = append(rec, payload...)
	return reseal(rec)
}

func TestRecordRoundTrip(t *testing.T) {
	for _, set := range []struct {
		name string
		evs  []eventlog.Event
	}{{"full", fullEvents()}, {"minimal", minimalEvents()}} {
		for _, ev := range set.evs {
			t.Run(set.name+"/"+ev.Kind().String(), func(t *testing.T) {
				prefix := []byte("prefix")
				rec, err := eventlog.AppendRecord(bytes.Clone(prefix), testID, ev)
				if err != nil {
					t.Fatalf("AppendRecord: %v", err)
				}
				if !bytes.Equal(rec[:len(prefix)], prefix) {
					t.Fatalf("AppendRecord changed dst: % x", rec[:len(prefix)])
				}
				got, err := eventlog.DecodeRecord(testID, ev.Seq, rec[len(prefix):])
				if err != nil {
					t.Fatalf("DecodeRecord: %v", err)
				}
				if d := eventDiff(ev, got); d != "" {
					t.Errorf("round trip (-want +got):\n%s", d)
				}
				if got.Kind() != ev.Kind() {
					t.Errorf("Kind = %s, want %s", got.Kind(), ev.Kind())
				}
			})
		}
	}
}

func TestRecordTime(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	for _, tm := range []time.Time{
		{},
		sampleTime,
		sampleTime.In(paris),
		time.Unix(0, 1),
		time.Unix(-1, 0), // before 1970
		time.Date(2200, 1, 1, 0, 0, 0, 999, time.UTC),
	} {
		ev := eventlog.Event{Seq: 4, Time: tm, Data: &eventlog.DispatchStarted{Dispatch: 1}}
		got, err := eventlog.DecodeRecord(testID, 4, mustRecord(ev))
		if err != nil {
			t.Fatalf("%v: %v", tm, err)
		}
		if !got.Time.Equal(tm) || got.Time.IsZero() != tm.IsZero() {
			t.Errorf("time %v decoded as %v", tm, got.Time)
		}
	}
}

// A time the record cannot hold (outside int64 Unix nanoseconds, or the one
// instant whose nanoseconds mean "zero time") is refused rather than stored
// as another time.
func TestAppendRecordRejectsUnrepresentableTime(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
	} {
		ev := eventlog.Event{Seq: 1, Time: tm, Data: &eventlog.DispatchStarted{Dispatch: 1}}
		rec, err := eventlog.AppendRecord(nil, testID, ev)
		if !errors.Is(err, eventlog.ErrInvalid) {
			got, derr := eventlog.DecodeRecord(testID, ev.Seq, rec)
			t.Errorf("AppendRecord(time %v) = %v, want ErrInvalid (decodes as %v, %v)", tm, err, got.Time, derr)
		}
	}
}

// The decoded event owns its memory: reusing the record's buffer (as a
// Pebble iterator does) does not change it.
func TestDecodeRecordCopies(t *testing.T) {
	for _, ev := range fullEvents() {
		rec := mustRecord(ev)
		got, err := eventlog.DecodeRecord(testID, ev.Seq, rec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rec {
			rec[i] = 0xAA
		}
		if d := eventDiff(ev, got); d != "" {
			t.Errorf("%s changed with its record (-want +got):\n%s", ev.Kind(), d)
		}
	}
}

// invalidPayloads break one invariant each (payload.go's validate).
func invalidPayloads() map[string]eventlog.Payload {
	okBinding := json.RawMessage(`{}`)
	return map[string]eventlog.Payload{
		"created/no agent":            &eventlog.ExecutionCreated{},
		"created/bad traceparent":     &eventlog.ExecutionCreated{Agent: "a", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331"},
		"created/zero trace id":       &eventlog.ExecutionCreated{Agent: "a", TraceParent: "00-00000000000000000000000000000000-b7ad6b7169203331-01"},
		"fork/upper-case traceparent": &eventlog.ForkCreated{Parent: sampleParent, At: 1, TraceParent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-b7ad6b7169203331-01"},
		"dispatch/0":                  &eventlog.DispatchStarted{},
		"started/no id":               &eventlog.StepStarted{StepKind: eventlog.StepTool, Idempotency: eventlog.SafeToRetry, Attempt: 1},
		"started/bad kind":            &eventlog.StepStarted{StepID: "s", StepKind: "shell", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		"started/no kind":             &eventlog.StepStarted{StepID: "s", Idempotency: eventlog.SafeToRetry, Attempt: 1},
		"started/bad idempotency":     &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Idempotency: "maybe", Attempt: 1},
		"started/attempt 0":           &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Idempotency: eventlog.SafeToRetry},
		"started/empty resource":      &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Idempotency: eventlog.SafeToRetry, Attempt: 1, Resources: []string{"a", ""}},
		"succeeded/no id":             &eventlog.StepSucceeded{Result: []byte("1")},
		"failed/no id":                &eventlog.StepFailed{Error: "x"},
		"cancelled/no id":             &eventlog.StepCancelled{},
		"denied/no id":                &eventlog.StepDenied{StepKind: eventlog.StepTool},
		"denied/bad kind":             &eventlog.StepDenied{StepID: "s", StepKind: "x"},
		"bound/no key":                &eventlog.ResourceBound{DriverID: "d", Binding: okBinding, EverySteps: 1},
		"bound/no driver":             &eventlog.ResourceBound{Key: "k", Binding: okBinding, EverySteps: 1},
		"bound/every 0":               &eventlog.ResourceBound{Key: "k", DriverID: "d", Binding: okBinding},
		"bound/every -1":              &eventlog.ResourceBound{Key: "k", DriverID: "d", Binding: okBinding, EverySteps: -1},
		"bound/config not JSON":       &eventlog.ResourceBound{Key: "k", DriverID: "d", Configuration: json.RawMessage(`{`), Binding: okBinding, EverySteps: 1},
		"bound/binding not JSON":      &eventlog.ResourceBound{Key: "k", DriverID: "d", Binding: json.RawMessage(`nope`), EverySteps: 1},
		"bound/binding empty":         &eventlog.ResourceBound{Key: "k", DriverID: "d", EverySteps: 1},
		"captured/no key":             &eventlog.ResourceCaptured{Ref: "r", Reason: eventlog.CaptureSteps},
		"captured/no ref":             &eventlog.ResourceCaptured{Key: "k", Reason: eventlog.CaptureSteps},
		"captured/bad reason":         &eventlog.ResourceCaptured{Key: "k", Ref: "r", Reason: "whim"},
		"capture_failed/no key":       &eventlog.ResourceCaptureFailed{Reason: eventlog.CaptureSteps},
		"capture_failed/bad reason":   &eventlog.ResourceCaptureFailed{Key: "k"},
		"failed/no code":              &eventlog.ExecutionFailed{Error: "x"},
		"fork/no parent":              &eventlog.ForkCreated{At: 1},
		"fork/at 0":                   &eventlog.ForkCreated{Parent: sampleParent},
		"fork/empty key":              &eventlog.ForkCreated{Parent: sampleParent, At: 1, Selections: []eventlog.ForkSelection{{}}},
		"fork/unsorted": &eventlog.ForkCreated{Parent: sampleParent, At: 1, Selections: []eventlog.ForkSelection{
			{Key: "b"}, {Key: "a"},
		}},
		"fork/duplicate": &eventlog.ForkCreated{Parent: sampleParent, At: 1, Selections: []eventlog.ForkSelection{
			{Key: "a"}, {Key: "a"},
		}},
		"fork/covered without ref": &eventlog.ForkCreated{Parent: sampleParent, At: 1, Selections: []eventlog.ForkSelection{
			{Key: "a", Covered: true, Generation: 1},
		}},
		"fork/override no id": &eventlog.ForkCreated{Parent: sampleParent, At: 1, Overrides: []eventlog.StepOverride{{Result: []byte("1")}}},
		"fork/overrides unsorted": &eventlog.ForkCreated{Parent: sampleParent, At: 1, Overrides: []eventlog.StepOverride{
			{StepID: "b"}, {StepID: "a"},
		}},
		"fork/overrides duplicate": &eventlog.ForkCreated{Parent: sampleParent, At: 1, Overrides: []eventlog.StepOverride{
			{StepID: "a"}, {StepID: "a"},
		}},
		"dispatch/epoch without owner":      &eventlog.DispatchStarted{Dispatch: 1, Epoch: 3},
		"failed/indeterminate with retry":   &eventlog.StepFailed{StepID: "s", Indeterminate: true, RetryAt: sampleWake},
		"parked/bad reason":                 &eventlog.DispatchParked{WakeAt: sampleWake, Reason: "bored"},
		"parked/no reason":                  &eventlog.DispatchParked{WakeAt: sampleWake},
		"parked/timer without wake":         &eventlog.DispatchParked{Reason: eventlog.ParkTimer},
		"parked/retry without wake":         &eventlog.DispatchParked{Reason: eventlog.ParkRetry},
		"timer_started/no id":               &eventlog.TimerStarted{WakeAt: sampleWake},
		"timer_started/zero wake":           &eventlog.TimerStarted{TimerID: "t"},
		"timer_fired/no id":                 &eventlog.TimerFired{},
		"approval_requested/no id":          &eventlog.ApprovalRequested{StepKind: eventlog.StepTool},
		"approval_requested/bad kind":       &eventlog.ApprovalRequested{StepID: "s", StepKind: "shell"},
		"approval_granted/no id":            &eventlog.ApprovalGranted{By: "bob"},
		"approval_rejected/no id":           &eventlog.ApprovalRejected{Note: "no"},
		"marker/no name":                    &eventlog.MarkerRecorded{},
		"abandoned/no id":                   &eventlog.StepAbandoned{},
		"diverged/none":                     &eventlog.ForkDiverged{},
		"diverged/empty id":                 &eventlog.ForkDiverged{Unconsumed: []string{"s", ""}},
		"denied/unknown code":               &eventlog.StepDenied{StepID: "s", StepKind: eventlog.StepTool, Code: "whim"},
		"started/recv affects":              &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepRecv, Resources: []string{"ws"}, Idempotency: eventlog.SafeToRetry, Attempt: 1},
		"started/tool with wake":            &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Idempotency: eventlog.SafeToRetry, Attempt: 1, WakeAt: sampleWake},
		"created/priority without queue":    &eventlog.ExecutionCreated{Agent: "a", Priority: 3},
		"approval_requested/empty approver": &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool, Approvers: []string{"bob", ""}},
		"fork/message without id":           &eventlog.ForkCreated{Parent: sampleParent, At: 1, Messages: []eventlog.Message{{Topic: "t"}}},
		"fork/message without topic":        &eventlog.ForkCreated{Parent: sampleParent, At: 1, Messages: []eventlog.Message{{MessageID: "m"}}},
		"fork/message twice":                &eventlog.ForkCreated{Parent: sampleParent, At: 1, Messages: []eventlog.Message{{MessageID: "m", Topic: "t"}, {MessageID: "m", Topic: "u"}}},
		"message/no id":                     &eventlog.MessageReceived{Topic: "t"},
		"message/no topic":                  &eventlog.MessageReceived{MessageID: "m"},
		"event_set/no key":                  &eventlog.EventSet{Value: []byte("1")},
		"parked/rate_limit without wake":    &eventlog.DispatchParked{Reason: eventlog.ParkRateLimit},
	}
}

// A version 1 record holds only what format version 1 had: a kind or a
// field (or the step kind child) of version 2 in it is corrupt, while the
// same payload under version 2 decodes.
func TestDecodeRecordVersion1HoldsOnlyVersion1(t *testing.T) {
	v1 := func(ev eventlog.Event) []byte {
		rec := mustRecord(ev)
		rec[0] = 1
		return reseal(rec)
	}
	for _, ev := range fullEvents() {
		if ev.Kind().Since() == 2 {
			wantCorrupt(t, ev.Kind().String()+" as version 1", v1(ev), "version 2 kind")
		}
	}
	for _, ev := range fullEventsV1() {
		if _, err := eventlog.DecodeRecord(testID, ev.Seq, v1(ev)); err != nil {
			t.Errorf("%s as version 1: %v", ev.Kind(), err)
		}
	}
	for _, c := range []struct {
		field string
		p     eventlog.Payload
	}{
		{"deadline", &eventlog.ExecutionCreated{Agent: "a", Deadline: sampleWake}},
		{"key", &eventlog.ExecutionCreated{Agent: "a", Key: "k"}},
		{"owner", &eventlog.DispatchStarted{Dispatch: 1, Owner: "o"}},
		{"retry_at", &eventlog.StepFailed{StepID: "s", RetryAt: sampleWake}},
		{"input", &eventlog.ForkCreated{Parent: sampleParent, At: 1, Input: []byte("1")}},
		{"overrides", &eventlog.ForkCreated{Parent: sampleParent, At: 1, Overrides: []eventlog.StepOverride{{StepID: "s"}}}},
		{"deadline", &eventlog.ForkCreated{Parent: sampleParent, At: 1, Deadline: sampleWake}},
		{"step_kind child", &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepChild, Idempotency: eventlog.SafeToRetry, Attempt: 1}},
		{"step_kind child", &eventlog.StepDenied{StepID: "s", StepKind: eventlog.StepChild}},
		{"reason park", &eventlog.ResourceCaptured{Key: "k", Ref: "r", Generation: 1, Reason: eventlog.CapturePark}},
		{"reason shutdown", &eventlog.ResourceCaptured{Key: "k", Ref: "r", Generation: 1, Reason: eventlog.CaptureShutdown}},
		{"reason park", &eventlog.ResourceCaptureFailed{Key: "k", Reason: eventlog.CapturePark, Error: "e"}},
		{"reason shutdown", &eventlog.ResourceCaptureFailed{Key: "k", Reason: eventlog.CaptureShutdown, Error: "e"}},
	} {
		ev := eventlog.Event{Seq: 3, Data: c.p}
		if _, err := eventlog.DecodeRecord(testID, 3, mustRecord(ev)); err != nil {
			t.Errorf("%s with %s as version 2: %v", ev.Kind(), c.field, err)
		}
		wantCorrupt(t, ev.Kind().String()+" with "+c.field+" as version 1", v1(ev), c.field, "version 2 field")
	}
}

// A version 1 or 2 record holds only what format versions 1 and 2 had: a
// kind, a field or a value (step kind recv, park reasons rate_limit and
// message) of version 3 in it is corrupt, while the same payload under
// version 3 decodes; version 2 records of every version 2 kind and field
// still decode.
func TestDecodeRecordVersion2HoldsOnlyVersion2(t *testing.T) {
	as := func(v byte, ev eventlog.Event) []byte {
		rec := mustRecord(ev)
		rec[0] = v
		return reseal(rec)
	}
	for _, ev := range fullEvents() {
		if ev.Kind().Since() == 3 {
			wantCorrupt(t, ev.Kind().String()+" as version 2", as(2, ev), "version 3 kind")
		}
	}
	for _, ev := range fullEventsV2() {
		if _, err := eventlog.DecodeRecord(testID, ev.Seq, as(2, ev)); err != nil {
			t.Errorf("%s as version 2: %v", ev.Kind(), err)
		}
	}
	recv := &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepRecv, Idempotency: eventlog.SafeToRetry, Attempt: 1}
	for _, c := range []struct {
		field string
		p     eventlog.Payload
	}{
		{"version", &eventlog.ExecutionCreated{Agent: "a", Version: "v1"}},
		{"queue", &eventlog.ExecutionCreated{Agent: "a", Queue: "q"}},
		{"budget", &eventlog.ExecutionCreated{Agent: "a", Budget: eventlog.Limits{MaxToolCalls: 1}}},
		{"traceparent", &eventlog.ExecutionCreated{Agent: "a", TraceParent: sampleTraceParent}},
		{"traceparent", &eventlog.ForkCreated{Parent: sampleParent, At: 1, TraceParent: sampleTraceParent}},
		{"step_kind recv", recv},
		{"wake_at", &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepRecv, Idempotency: eventlog.SafeToRetry, Attempt: 1, WakeAt: sampleWake}},
		{"tokens", &eventlog.StepSucceeded{StepID: "s", Tokens: eventlog.Tokens{Output: 1}}},
		{"truncated", &eventlog.StepSucceeded{StepID: "s", Truncated: true}},
		{"tokens", &eventlog.StepFailed{StepID: "s", Error: "e", Tokens: eventlog.Tokens{Input: 1}}},
		{"rule_id", &eventlog.StepDenied{StepID: "s", StepKind: eventlog.StepTool, RuleID: "r"}},
		{"code", &eventlog.StepDenied{StepID: "s", StepKind: eventlog.StepTool, Code: eventlog.DenyPolicy}},
		{"step_kind recv", &eventlog.StepDenied{StepID: "s", StepKind: eventlog.StepRecv}},
		{"portable", &eventlog.ResourceBound{Key: "k", DriverID: "d", Binding: []byte(`{}`), EverySteps: 1, Portable: true}},
		{"version", &eventlog.ForkCreated{Parent: sampleParent, At: 1, Version: "v"}},
		{"budget", &eventlog.ForkCreated{Parent: sampleParent, At: 1, Budget: eventlog.Limits{MaxTokens: 1}}},
		{"messages", &eventlog.ForkCreated{Parent: sampleParent, At: 1, Messages: []eventlog.Message{{MessageID: "m", Topic: "t"}}}},
		{"rule_id", &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool, RuleID: "r"}},
		{"expires_at", &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool, ExpiresAt: sampleWake}},
		{"approvers", &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool, Approvers: []string{"b"}}},
		{"message", &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepTool, Message: "m"}},
		{"step_kind recv", &eventlog.ApprovalRequested{StepID: "s", StepKind: eventlog.StepRecv}},
		{"reason rate_limit", &eventlog.DispatchParked{Reason: eventlog.ParkRateLimit, WakeAt: sampleWake}},
		{"reason message", &eventlog.DispatchParked{Reason: eventlog.ParkMessage}},
	} {
		ev := eventlog.Event{Seq: 3, Data: c.p}
		if _, err := eventlog.DecodeRecord(testID, 3, mustRecord(ev)); err != nil {
			t.Errorf("%s with %s as version 3: %v", ev.Kind(), c.field, err)
		}
		for _, v := range []byte{1, 2} {
			if v < ev.Kind().Since() {
				continue // the kind itself is newer (checked above)
			}
			wantCorrupt(t, ev.Kind().String()+" with "+c.field+" as version "+strconv.Itoa(int(v)), as(v, ev), c.field, "version 3 field")
		}
	}
}

// MustSync follows the format table: only a safe_to_retry step.started may
// ride on a later sync, and an append is synced when any of its events
// must be.
func TestMustSync(t *testing.T) {
	safe := eventlog.Event{Data: &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Idempotency: eventlog.SafeToRetry, Attempt: 1}}
	once := eventlog.Event{Data: &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool, Idempotency: eventlog.AtMostOnce, Attempt: 1}}
	if eventlog.MustSync(safe) {
		t.Error("a safe_to_retry step.started must be synced")
	}
	if !eventlog.MustSync(once) {
		t.Error("an at_most_once step.started need not be synced")
	}
	if !eventlog.MustSync(safe, eventlog.Event{Data: &eventlog.StepSucceeded{StepID: "s"}}) {
		t.Error("a group with a terminal event need not be synced")
	}
	for _, ev := range fullEvents() {
		if ev.Kind() == eventlog.KindStepStarted {
			continue
		}
		if !eventlog.MustSync(ev) {
			t.Errorf("%s need not be synced", ev.Kind())
		}
	}
}

func TestAppendRecordRejectsInvalid(t *testing.T) {
	for name, p := range invalidPayloads() {
		dst := []byte("keep")
		out, err := eventlog.AppendRecord(dst, testID, eventlog.Event{Seq: 1, Data: p})
		if !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("%s: AppendRecord = %v, want ErrInvalid", name, err)
		}
		if string(out) != "keep" {
			t.Errorf("%s: AppendRecord returned dst %q, want it unchanged", name, out)
		}
		if err := (eventlog.Event{Data: p}).Validate(); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := eventlog.AppendRecord(nil, testID, eventlog.Event{Seq: 1}); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("AppendRecord(no payload) = %v, want ErrInvalid", err)
	}
}

// wantCorrupt fails unless DecodeRecord rejects rec with an error wrapping
// ErrCorrupt whose message contains every word of want.
func wantCorrupt(t *testing.T, what string, rec []byte, want ...string) {
	t.Helper()
	ev, err := eventlog.DecodeRecord(testID, sealSeq, rec)
	if err == nil {
		t.Errorf("%s: DecodeRecord succeeded: %s %+v", what, ev.Kind(), ev.Data)
		return
	}
	if !errors.Is(err, eventlog.ErrCorrupt) {
		t.Errorf("%s: DecodeRecord error %v does not wrap ErrCorrupt", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: DecodeRecord error %q does not mention %q", what, err, w)
		}
	}
}

func TestDecodeRecordRejectsVersion(t *testing.T) {
	for _, v := range []byte{0, eventlog.FormatVersion + 1, 0xff} {
		rec := mustRecord(fullEvents()[0])
		rec[0] = v
		wantCorrupt(t, "version", reseal(rec), "version")
	}
}

func TestDecodeRecordRejectsUnknownKind(t *testing.T) {
	for _, k := range []byte{0, byte(len(eventlog.Kinds()) + 1), 0x7f, 0xff} {
		rec := mustRecord(fullEvents()[0])
		rec[1] = k
		wantCorrupt(t, "kind", reseal(rec), "kind")
	}
}

func TestDecodeRecordRejectsChecksum(t *testing.T) {
	rec := mustRecord(fullEvents()[0])
	rec[5] ^= 1
	wantCorrupt(t, "checksum", rec, "checksum")
}

// Every change of one bit, and every byte flipped whole, of every record is
// an error wrapping ErrCorrupt: never a panic, never another event.
// DESIGN §3: a corrupt record is an error.
func TestDecodeRecordRejectsEveryFlip(t *testing.T) {
	for _, ev := range append(fullEvents(), minimalEvents()...) {
		rec := mustRecord(ev)
		for i := range rec {
			for _, mask := range []byte{1, 2, 4, 8, 16, 32, 64, 128, 0xff} {
				bad := bytes.Clone(rec)
				bad[i] ^= mask
				if got, err := eventlog.DecodeRecord(testID, ev.Seq, bad); err == nil {
					t.Errorf("%s: byte %d ^ %#02x: decoded as %s %+v", ev.Kind(), i, mask, got.Kind(), got.Data)
				} else if !errors.Is(err, eventlog.ErrCorrupt) {
					t.Errorf("%s: byte %d ^ %#02x: %v does not wrap ErrCorrupt", ev.Kind(), i, mask, err)
				}
			}
		}
	}
}

func TestDecodeRecordRejectsTruncated(t *testing.T) {
	for _, ev := range append(fullEvents(), minimalEvents()...) {
		rec := mustRecord(ev)
		for n := range len(rec) {
			wantCorrupt(t, ev.Kind().String()+" truncated", rec[:n])
			if n >= testHeaderLen {
				// Truncated and resealed: only the payload decoder can tell.
				wantCorrupt(t, ev.Kind().String()+" truncated+resealed", reseal(bytes.Clone(rec[:n])))
			}
		}
	}
}

func TestDecodeRecordRejectsTrailingBytes(t *testing.T) {
	for _, ev := range fullEvents() {
		for _, extra := range [][]byte{{0}, {0xc0}, {0x81, 0xa1, 'x', 0x01}} {
			rec := append(mustRecord(ev), extra...)
			wantCorrupt(t, ev.Kind().String()+" trailing", reseal(rec), "trailing")
		}
	}
}

// payloadMap decodes the payload part of a record into a generic map.
func payloadMap(t *testing.T, rec []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := msgpack.Unmarshal(rec[testHeaderLen:], &m); err != nil {
		t.Fatalf("payload is not a msgpack map: %v", err)
	}
	return m
}

func TestDecodeRecordRejectsUnknownFields(t *testing.T) {
	for _, ev := range fullEvents() {
		rec := mustRecord(ev)
		m := payloadMap(t, rec)
		m["later_field"] = 1
		payload, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, ev.Kind().String()+" unknown field", sealRecord(rec[0], ev.Kind(), 1, payload), "later_field")
	}
	// An unknown field inside a fork selection.
	rec := mustRecord(fullEvents()[12])
	m := payloadMap(t, rec)
	m["selections"].([]any)[0].(map[string]any)["later_field"] = true
	payload, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, "selection unknown field", sealRecord(rec[0], eventlog.KindForkCreated, 1, payload), "later_field")
}

// A payload that decodes but breaks its kind's invariants is corrupt: the
// store never hands out an event that it would have refused to write.
func TestDecodeRecordRejectsInvalidPayloads(t *testing.T) {
	for name, p := range invalidPayloads() {
		payload, err := msgpack.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, name, sealRecord(eventlog.FormatVersion, p.Kind(), 1, payload))
	}
}

func TestDecodeRecordRejectsMalformedPayloads(t *testing.T) {
	mp := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name    string
		kind    eventlog.Kind
		payload []byte
	}{
		{"empty", eventlog.KindDispatchStarted, nil},
		{"int", eventlog.KindDispatchStarted, mp(7)},
		{"string", eventlog.KindExecutionCreated, mp("coder")},
		{"wrong field type", eventlog.KindDispatchStarted, mp(map[string]any{"dispatch": "three"})},
		{"wrong nested type", eventlog.KindForkCreated, mp(map[string]any{"parent": sampleParent.String(), "at": 1, "selections": "all"})},
		{"bad parent", eventlog.KindForkCreated, mp(map[string]any{"parent": "not-an-id", "at": 1})},
		{"map with unterminated string", eventlog.KindExecutionCreated, []byte{0x81, 0xa5, 'a', 'g', 'e', 'n', 't', 0xa5, 'c'}},
		{"huge declared length", eventlog.KindExecutionCreated, []byte{0x81, 0xa5, 'a', 'g', 'e', 'n', 't', 0xdb, 0xff, 0xff, 0xff, 0xff}},
		{"huge map", eventlog.KindExecutionCreated, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}},
		{"huge selections", eventlog.KindForkCreated, hugeSelections(0xffffffff)},
		{"huge bin", eventlog.KindExecutionCompleted, []byte{0x81, 0xa6, 'o', 'u', 't', 'p', 'u', 't', 0xc6, 0xff, 0xff, 0xff, 0xff}},
		{"huge ext", eventlog.KindExecutionCompleted, []byte{0x81, 0xa6, 'o', 'u', 't', 'p', 'u', 't', 0xc9, 0xff, 0xff, 0xff, 0xff, 1}},
		{"unused code", eventlog.KindExecutionCompleted, []byte{0x81, 0xa6, 'o', 'u', 't', 'p', 'u', 't', 0xc1}},
		{"ext value", eventlog.KindExecutionCompleted, []byte{0x81, 0xa6, 'o', 'u', 't', 'p', 'u', 't', 0xd4, 1, 0}},
		{"deep nesting", eventlog.KindExecutionCreated, append(bytes.Repeat([]byte{0x91}, 1<<20), 0)},
		{"map missing its values", eventlog.KindExecutionCreated, []byte{0x82, 0xa5, 'a', 'g', 'e', 'n', 't', 0xa1, 'c'}},
	} {
		wantCorrupt(t, c.name, sealRecord(eventlog.FormatVersion, c.kind, 1, c.payload))
	}
}

// hugeSelections is a fork.created payload whose selections array declares n
// elements and holds none.
func hugeSelections(n uint32) []byte {
	p := []byte{0x81, 0xaa, 's', 'e', 'l', 'e', 'c', 't', 'i', 'o', 'n', 's', 0xdd}
	return binary.BigEndian.AppendUint32(p, n)
}

// A record's declared sizes do not make the decoder allocate beyond what the
// record holds: a 17-byte payload that claims a million selections must not
// cost megabytes (and one that claims four billion must not crash).
func TestDecodeRecordBoundsAllocation(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  []byte
	}{
		{"a million selections", sealRecord(eventlog.FormatVersion, eventlog.KindForkCreated, 1, hugeSelections(1<<20))},
		{"a 1 GiB output", sealRecord(eventlog.FormatVersion, eventlog.KindExecutionCompleted, 1,
			[]byte{0x81, 0xa6, 'o', 'u', 't', 'p', 'u', 't', 0xc6, 0x40, 0, 0, 0, 'x'})},
		{"a million resources", sealRecord(eventlog.FormatVersion, eventlog.KindStepStarted, 1,
			[]byte{0x81, 0xa9, 'r', 'e', 's', 'o', 'u', 'r', 'c', 'e', 's', 0xdd, 0, 0x10, 0, 0, 0xa1, 'k'})},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := eventlog.DecodeRecord(testID, sealSeq, c.rec)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, eventlog.ErrCorrupt) {
			t.Errorf("%s: DecodeRecord = %v, want ErrCorrupt", c.name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: decoding a %d-byte record allocated %d bytes", c.name, len(c.rec), n)
		}
	}
}

// FuzzDecodeRecord checks that no input makes DecodeRecord panic, that every
// rejection wraps ErrCorrupt, and that whatever it accepts survives
// AppendRecord and decodes to the same event again. With reseal set the
// checksum is fixed up first, so the fuzzer reaches the payload decoder.
func FuzzDecodeRecord(f *testing.F) {
	for _, ev := range append(fullEvents(), minimalEvents()...) {
		rec := mustRecord(ev)
		f.Add(rec, false)
		f.Add(rec, true)
		f.Add(rec[:len(rec)/2], true)
		bad := bytes.Clone(rec)
		bad[len(bad)-1] ^= 0x10
		f.Add(bad, false)
		f.Add(append(bytes.Clone(rec), 0xc0), true)
	}
	// Version 1 records: the golden ones, as the version 1 encoder wrote them.
	for _, ev := range fullEventsV1() {
		rec := mustRecord(ev)
		rec[0] = 1
		f.Add(reseal(rec), false)
	}
	f.Add([]byte{}, false)
	f.Add([]byte{eventlog.FormatVersion, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, true)
	f.Add(sealRecord(eventlog.FormatVersion, eventlog.KindExecutionCompleted, 0, []byte{0xc0}), true)
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = reseal(bytes.Clone(b))
		}
		ev, err := eventlog.DecodeRecord(testID, sealSeq, b)
		if err != nil {
			if !errors.Is(err, eventlog.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if ev.Seq != sealSeq || ev.Kind() != eventlog.Kind(b[1]) {
			t.Fatalf("decoded seq %d kind %s from a %s record", ev.Seq, ev.Kind(), eventlog.Kind(b[1]))
		}
		rec, err := eventlog.AppendRecord(nil, testID, ev)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		again, err := eventlog.DecodeRecord(testID, sealSeq, rec)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if d := eventDiff(ev, again); d != "" {
			t.Fatalf("re-encoded event differs (-first +second):\n%s", d)
		}
	})
}

// TestDecodeRecordNamesOverrun checks the error of a payload whose declared
// length runs past the record: it wraps ErrCorrupt and says how many bytes
// were left, so that a corrupt record can be told from a truncated one.
func TestDecodeRecordNamesOverrun(t *testing.T) {
	// {"output": bin32 of 1 GiB} followed by one byte.
	rec := sealRecord(eventlog.FormatVersion, eventlog.KindExecutionCompleted, 1,
		[]byte{0x81, 0xa6, 'o', 'u', 't', 'p', 'u', 't', 0xc6, 0x40, 0, 0, 0, 'x'})
	_, err := eventlog.DecodeRecord(testID, sealSeq, rec)
	if !errors.Is(err, eventlog.ErrCorrupt) || !strings.Contains(err.Error(), "length 1073741824 at byte 13 runs past the end (1 bytes left)") {
		t.Fatalf("DecodeRecord = %v, want ErrCorrupt naming the 1 byte left after byte 13", err)
	}
}

// TestDecodeRecordHeaderOnly checks that a record of exactly the header's
// length is not called short: it has a whole header and an empty payload,
// and the payload is what is refused.
func TestDecodeRecordHeaderOnly(t *testing.T) {
	rec := sealRecord(eventlog.FormatVersion, eventlog.KindExecutionCompleted, 1, nil)
	_, err := eventlog.DecodeRecord(testID, sealSeq, rec)
	if !errors.Is(err, eventlog.ErrCorrupt) || strings.Contains(err.Error(), "shorter than its header") {
		t.Fatalf("DecodeRecord(header only) = %v, want ErrCorrupt about the payload", err)
	}
}

// otherID is an execution other than testID.
var otherID = eventlog.ID{0x01, 0x8f, 0x3a, 0x5c, 0x00, 0x00, 0x70, 0x01, 0x80, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x09}

// A format version 3 record binds its place: the same bytes read at
// another seq, in another execution, or as a request (and a request as an
// event or at another number) fail the checksum with ErrCorrupt, and
// CheckRecord says the same without decoding the payload.
func TestRecordBindsPlace(t *testing.T) {
	for _, ev := range fullEvents() {
		rec := mustRecord(ev)
		if err := eventlog.CheckRecord(testID, ev.Seq, rec); err != nil {
			t.Errorf("%s: CheckRecord at its place: %v", ev.Kind(), err)
		}
		for _, c := range []struct {
			name string
			id   eventlog.ID
			seq  uint64
		}{
			{"next seq", testID, ev.Seq + 1},
			{"previous seq", testID, ev.Seq - 1},
			{"seq + 2^32", testID, ev.Seq + 1<<32},
			{"other execution", otherID, ev.Seq},
			{"zero execution", eventlog.ID{}, ev.Seq},
		} {
			if got, err := eventlog.DecodeRecord(c.id, c.seq, rec); !errors.Is(err, eventlog.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
				t.Errorf("%s: DecodeRecord at %s = %s, %v; want ErrCorrupt naming the checksum", ev.Kind(), c.name, got.Kind(), err)
			}
			if err := eventlog.CheckRecord(c.id, c.seq, rec); !errors.Is(err, eventlog.ErrCorrupt) {
				t.Errorf("%s: CheckRecord at %s = %v, want ErrCorrupt", ev.Kind(), c.name, err)
			}
		}
		if _, err := eventlog.DecodeRequest(testID, ev.Seq, rec); !errors.Is(err, eventlog.ErrCorrupt) {
			t.Errorf("%s: an event record decoded as request %d: %v", ev.Kind(), ev.Seq, err)
		}
	}
	req := eventlog.Event{Time: sampleTime, Data: &eventlog.CancelRequested{Reason: "stop"}}
	rec, err := eventlog.AppendRequest(nil, testID, 4, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := eventlog.DecodeRequest(testID, 4, rec)
	if err != nil {
		t.Fatalf("DecodeRequest at its place: %v", err)
	}
	if want := (eventlog.Event{Seq: 4, Time: sampleTime, Data: req.Data}); eventDiff(want, got) != "" {
		t.Errorf("DecodeRequest (-want +got):\n%s", eventDiff(want, got))
	}
	for name, decode := range map[string]func() (eventlog.Event, error){
		"request 5":             func() (eventlog.Event, error) { return eventlog.DecodeRequest(testID, 5, rec) },
		"another execution's 4": func() (eventlog.Event, error) { return eventlog.DecodeRequest(otherID, 4, rec) },
		"event 4":               func() (eventlog.Event, error) { return eventlog.DecodeRecord(testID, 4, rec) },
	} {
		if _, err := decode(); !errors.Is(err, eventlog.ErrCorrupt) {
			t.Errorf("request 4 read as %s: %v, want ErrCorrupt", name, err)
		}
	}
}

// A version 1 or 2 record binds no place (they were written before
// records were bound): it reads at any seq of any execution, as before.
func TestOldRecordsBindNoPlace(t *testing.T) {
	for _, v := range []byte{1, 2} {
		ev := fullEventsV1()[1]
		rec := mustRecord(ev)
		rec[0] = v
		binary.BigEndian.PutUint32(rec[2:6], recordChecksum(rec, 'e', eventlog.ID{}, 0))
		for _, id := range []eventlog.ID{testID, otherID} {
			if _, err := eventlog.DecodeRecord(id, ev.Seq+7, rec); err != nil {
				t.Errorf("version %d record at another place: %v", v, err)
			}
		}
	}
}
