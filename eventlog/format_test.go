package eventlog_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/ instead of comparing with them")

// pinnedKinds is the kind table of the on-disk format: code and wire name.
var pinnedKinds = []struct {
	code byte
	name string
}{
	{1, "execution.created"},
	{2, "dispatch.started"},
	{3, "step.started"},
	{4, "step.succeeded"},
	{5, "step.failed"},
	{6, "step.cancelled"},
	{7, "step.denied"},
	{8, "resource.bound"},
	{9, "resource.captured"},
	{10, "resource.capture_failed"},
	{11, "execution.completed"},
	{12, "execution.failed"},
	{13, "fork.created"},
	{14, "execution.cancel_requested"},
	{15, "execution.cancelled"},
	{16, "dispatch.parked"},
	{17, "timer.started"},
	{18, "timer.fired"},
	{19, "approval.requested"},
	{20, "approval.granted"},
	{21, "approval.rejected"},
	{22, "marker.recorded"},
	{23, "step.abandoned"},
	{24, "fork.diverged"},
	{25, "message.received"},
	{26, "event.set"},
	{27, "child.ended"},
}

// pinnedSince is the format version that introduced each kind, and
// pinnedSync its sync class (1 = synced before the caller sees the effect,
// 2 = synced only for an at_most_once step), by code.
var (
	pinnedSince = []byte{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3}
	pinnedSync  = []eventlog.Sync{0, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
)

// pinnedFields lists, per payload struct, every field as "Name GoType tag".
// The Go type is pinned too: it decides the msgpack encoding (an int field
// turned into a string would still carry the same tag).
var pinnedFields = map[reflect.Type][]string{
	reflect.TypeFor[eventlog.ExecutionCreated](): {
		"Agent string agent", "Input []uint8 input,omitempty",
		"Deadline time.Time deadline,omitempty", "Key string key,omitempty",
		"Version string version,omitempty", "Queue string queue,omitempty", "Priority int priority,omitempty",
		"Budget eventlog.Limits budget,omitempty", "TraceParent string traceparent,omitempty",
	},
	reflect.TypeFor[eventlog.DispatchStarted](): {
		"Dispatch uint64 dispatch", "Owner string owner,omitempty", "Epoch uint64 epoch,omitempty",
	},
	reflect.TypeFor[eventlog.StepStarted](): {
		"StepID string step_id", "StepKind eventlog.StepKind step_kind", "Target string target",
		"Args []uint8 args,omitempty", "Resources []string resources,omitempty",
		"Idempotency eventlog.Idempotency idempotency", "Attempt uint32 attempt",
		"WakeAt time.Time wake_at,omitempty",
	},
	reflect.TypeFor[eventlog.StepSucceeded](): {
		"StepID string step_id", "Result []uint8 result,omitempty",
		"Tokens eventlog.Tokens tokens,omitempty", "Truncated bool truncated,omitempty",
	},
	reflect.TypeFor[eventlog.Tokens](): {"Input uint64 input,omitempty", "Output uint64 output,omitempty"},
	reflect.TypeFor[eventlog.Limits](): {
		"MaxTokens uint64 max_tokens,omitempty", "MaxLLMCalls uint64 max_llm_calls,omitempty",
		"MaxToolCalls uint64 max_tool_calls,omitempty",
	},
	reflect.TypeFor[eventlog.Message](): {
		"MessageID string message_id", "Topic string topic", "Value []uint8 value,omitempty", "From string from,omitempty",
	},
	reflect.TypeFor[eventlog.MessageReceived](): {
		"MessageID string message_id", "Topic string topic", "Value []uint8 value,omitempty", "From string from,omitempty",
	},
	reflect.TypeFor[eventlog.EventSet]():   {"Key string key", "Value []uint8 value,omitempty"},
	reflect.TypeFor[eventlog.ChildEnded](): {"StepID string step_id,omitempty"},
	reflect.TypeFor[eventlog.StepFailed](): {
		"StepID string step_id", "Error string error", "Indeterminate bool indeterminate,omitempty",
		"RetryAt time.Time retry_at,omitempty", "Tokens eventlog.Tokens tokens,omitempty",
	},
	reflect.TypeFor[eventlog.StepCancelled](): {"StepID string step_id"},
	reflect.TypeFor[eventlog.StepDenied](): {
		"StepID string step_id", "StepKind eventlog.StepKind step_kind", "Target string target", "Reason string reason",
		"RuleID string rule_id,omitempty", "Code eventlog.DenialCode code,omitempty",
	},
	reflect.TypeFor[eventlog.ResourceBound](): {
		"Key string key", "DriverID string driver_id", "Configuration json.RawMessage configuration,omitempty",
		"Binding json.RawMessage binding", "From string from,omitempty", "EverySteps int every_steps",
		"OnCompletion bool on_completion", "CoverageReuse bool coverage_reuse,omitempty",
		"Portable bool portable,omitempty",
	},
	reflect.TypeFor[eventlog.ResourceCaptured](): {
		"Key string key", "Ref string ref", "Generation uint64 generation", "Reason eventlog.CaptureReason reason",
	},
	reflect.TypeFor[eventlog.ResourceCaptureFailed](): {
		"Key string key", "Reason eventlog.CaptureReason reason", "Error string error",
	},
	reflect.TypeFor[eventlog.ExecutionCompleted](): {"Output []uint8 output,omitempty"},
	reflect.TypeFor[eventlog.ExecutionFailed]():    {"Error string error", "Code eventlog.FailureCode code"},
	reflect.TypeFor[eventlog.ForkCreated](): {
		"Parent eventlog.ID parent", "At uint64 at", "Selections []eventlog.ForkSelection selections,omitempty",
		"Input []uint8 input,omitempty", "Overrides []eventlog.StepOverride overrides,omitempty",
		"Deadline time.Time deadline,omitempty", "Version string version,omitempty",
		"Budget eventlog.Limits budget,omitempty", "Messages []eventlog.Message messages,omitempty",
		"TraceParent string traceparent,omitempty",
	},
	reflect.TypeFor[eventlog.ForkSelection](): {
		"Key string key", "Ref string ref,omitempty", "CapturedAt uint64 captured_at,omitempty",
		"Generation uint64 generation", "Covered bool covered,omitempty",
	},
	reflect.TypeFor[eventlog.StepOverride]():       {"StepID string step_id", "Result []uint8 result,omitempty"},
	reflect.TypeFor[eventlog.CancelRequested]():    {"Reason string reason,omitempty", "By string by,omitempty"},
	reflect.TypeFor[eventlog.ExecutionCancelled](): {"Reason string reason,omitempty"},
	reflect.TypeFor[eventlog.DispatchParked]():     {"WakeAt time.Time wake_at,omitempty", "Reason eventlog.ParkReason reason"},
	reflect.TypeFor[eventlog.TimerStarted]():       {"TimerID string timer_id", "WakeAt time.Time wake_at"},
	reflect.TypeFor[eventlog.TimerFired]():         {"TimerID string timer_id"},
	reflect.TypeFor[eventlog.ApprovalRequested](): {
		"StepID string step_id", "StepKind eventlog.StepKind step_kind", "Target string target",
		"Args []uint8 args,omitempty", "Reason string reason,omitempty",
		"RuleID string rule_id,omitempty", "ExpiresAt time.Time expires_at,omitempty",
		"Approvers []string approvers,omitempty", "Message string message,omitempty",
	},
	reflect.TypeFor[eventlog.ApprovalGranted]():  {"StepID string step_id", "By string by,omitempty", "Note string note,omitempty"},
	reflect.TypeFor[eventlog.ApprovalRejected](): {"StepID string step_id", "By string by,omitempty", "Note string note,omitempty"},
	reflect.TypeFor[eventlog.MarkerRecorded]():   {"Name string name"},
	reflect.TypeFor[eventlog.StepAbandoned]():    {"StepID string step_id"},
	reflect.TypeFor[eventlog.ForkDiverged]():     {"Unconsumed []string unconsumed"},
}

// pinnedKeys is the set of map keys each kind's payload is encoded with:
// all of them for fullEvents, the ones without omitempty for minimalEvents.
var pinnedKeys = map[eventlog.Kind][2][]string{
	eventlog.KindExecutionCreated:      {{"agent", "budget", "deadline", "input", "key", "priority", "queue", "traceparent", "version"}, {"agent"}},
	eventlog.KindDispatchStarted:       {{"dispatch", "epoch", "owner"}, {"dispatch"}},
	eventlog.KindStepStarted:           {{"args", "attempt", "idempotency", "step_id", "step_kind", "target", "wake_at"}, {"attempt", "idempotency", "step_id", "step_kind", "target"}},
	eventlog.KindStepSucceeded:         {{"result", "step_id", "tokens", "truncated"}, {"step_id"}},
	eventlog.KindStepFailed:            {{"error", "retry_at", "step_id", "tokens"}, {"error", "step_id"}},
	eventlog.KindStepCancelled:         {{"step_id"}, {"step_id"}},
	eventlog.KindStepDenied:            {{"code", "reason", "rule_id", "step_id", "step_kind", "target"}, {"reason", "step_id", "step_kind", "target"}},
	eventlog.KindResourceBound:         {{"binding", "configuration", "coverage_reuse", "driver_id", "every_steps", "from", "key", "on_completion", "portable"}, {"binding", "driver_id", "every_steps", "key", "on_completion"}},
	eventlog.KindResourceCaptured:      {{"generation", "key", "reason", "ref"}, {"generation", "key", "reason", "ref"}},
	eventlog.KindResourceCaptureFailed: {{"error", "key", "reason"}, {"error", "key", "reason"}},
	eventlog.KindExecutionCompleted:    {{"output"}, {}},
	eventlog.KindExecutionFailed:       {{"code", "error"}, {"code", "error"}},
	eventlog.KindForkCreated:           {{"at", "budget", "deadline", "input", "messages", "overrides", "parent", "selections", "traceparent", "version"}, {"at", "parent"}},
	eventlog.KindCancelRequested:       {{"by", "reason"}, {}},
	eventlog.KindExecutionCancelled:    {{"reason"}, {}},
	eventlog.KindDispatchParked:        {{"reason", "wake_at"}, {"reason"}},
	eventlog.KindTimerStarted:          {{"timer_id", "wake_at"}, {"timer_id", "wake_at"}},
	eventlog.KindTimerFired:            {{"timer_id"}, {"timer_id"}},
	eventlog.KindApprovalRequested:     {{"approvers", "args", "expires_at", "message", "reason", "rule_id", "step_id", "step_kind", "target"}, {"step_id", "step_kind", "target"}},
	eventlog.KindApprovalGranted:       {{"by", "note", "step_id"}, {"step_id"}},
	eventlog.KindApprovalRejected:      {{"by", "note", "step_id"}, {"step_id"}},
	eventlog.KindMarkerRecorded:        {{"name"}, {"name"}},
	eventlog.KindStepAbandoned:         {{"step_id"}, {"step_id"}},
	eventlog.KindForkDiverged:          {{"unconsumed"}, {"unconsumed"}},
	eventlog.KindMessageReceived:       {{"from", "message_id", "topic", "value"}, {"message_id", "topic"}},
	eventlog.KindEventSet:              {{"key", "value"}, {"key"}},
	eventlog.KindChildEnded:            {{"step_id"}, {}},
}

// TestFormatPinned fails on any change to the persisted event format: kind
// codes and names, the version byte, the record header, field tags and
// types, enum values, and the exact bytes of one record per kind (golden).
// A failure here means: bump FormatVersion and keep a decoder for the old
// one, or undo the change.
func TestFormatPinned(t *testing.T) {
	t.Run("version", func(t *testing.T) {
		if eventlog.FormatVersion != 3 || eventlog.MinFormatVersion != 1 {
			t.Errorf("FormatVersion = %d, MinFormatVersion = %d, pinned 3 and 1", eventlog.FormatVersion, eventlog.MinFormatVersion)
		}
		want := map[eventlog.Kind][]string{
			eventlog.KindExecutionCreated: {"deadline", "key"},
			eventlog.KindDispatchStarted:  {"owner", "epoch"},
			eventlog.KindStepFailed:       {"retry_at"},
			eventlog.KindForkCreated:      {"input", "overrides", "deadline"},
		}
		if d := cmp.Diff(want, eventlog.V2Fields); d != "" {
			t.Errorf("V2Fields (-pinned +now):\n%s", d)
		}
		want3 := map[eventlog.Kind][]string{
			eventlog.KindExecutionCreated:  {"version", "queue", "priority", "budget", "traceparent"},
			eventlog.KindStepStarted:       {"wake_at"},
			eventlog.KindStepSucceeded:     {"tokens", "truncated"},
			eventlog.KindStepFailed:        {"tokens"},
			eventlog.KindStepDenied:        {"rule_id", "code"},
			eventlog.KindResourceBound:     {"portable"},
			eventlog.KindForkCreated:       {"version", "budget", "messages", "traceparent"},
			eventlog.KindApprovalRequested: {"rule_id", "expires_at", "approvers", "message"},
		}
		if d := cmp.Diff(want3, eventlog.V3Fields); d != "" {
			t.Errorf("V3Fields (-pinned +now):\n%s", d)
		}
	})

	t.Run("kinds", func(t *testing.T) {
		kinds := eventlog.Kinds()
		if len(kinds) != len(pinnedKinds) {
			t.Fatalf("Kinds() has %d kinds, pinned %d", len(kinds), len(pinnedKinds))
		}
		for i, pk := range pinnedKinds {
			k := kinds[i]
			if byte(k) != pk.code || k.String() != pk.name {
				t.Errorf("kind %d: code %d name %q, pinned %d %q", i, byte(k), k, pk.code, pk.name)
			}
			if !k.Valid() {
				t.Errorf("%s: not Valid", k)
			}
			if p, err := eventlog.ParseKind(pk.name); err != nil || p != k {
				t.Errorf("ParseKind(%q) = %v, %v", pk.name, p, err)
			}
			if k.Since() != pinnedSince[pk.code] || k.Sync() != pinnedSync[pk.code] {
				t.Errorf("%s: Since %d Sync %d, pinned %d %d", k, k.Since(), k.Sync(), pinnedSince[pk.code], pinnedSync[pk.code])
			}
		}
		for _, code := range []byte{0, 28, 255} {
			k := eventlog.Kind(code)
			if k.Valid() || k.String() != fmt.Sprintf("kind(%d)", code) {
				t.Errorf("Kind(%d): Valid %v String %q", code, k.Valid(), k)
			}
		}
		if _, err := eventlog.ParseKind("step.exploded"); err == nil {
			t.Error("ParseKind accepted an unknown name")
		}
	})

	t.Run("payload types", func(t *testing.T) {
		for _, ev := range fullEvents() {
			typ := reflect.TypeOf(ev.Data).Elem()
			if _, ok := pinnedFields[typ]; !ok {
				t.Errorf("%s: payload type %s is not pinned", ev.Kind(), typ)
			}
			if ev.Data.Kind() != ev.Kind() {
				t.Errorf("%s: Data.Kind() = %s", ev.Kind(), ev.Data.Kind())
			}
		}
	})

	t.Run("field tags", func(t *testing.T) {
		for typ, want := range pinnedFields {
			var got []string
			for f := range typ.Fields() {
				got = append(got, fmt.Sprintf("%s %s %s", f.Name, f.Type, f.Tag.Get("msgpack")))
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s fields (-pinned +now):\n%s", typ, d)
			}
		}
	})

	t.Run("enum values", func(t *testing.T) {
		got := []string{
			string(eventlog.StepTool), string(eventlog.StepLocal), string(eventlog.StepLLM),
			string(eventlog.SafeToRetry), string(eventlog.AtMostOnce),
			string(eventlog.CaptureBaseline), string(eventlog.CaptureSteps), string(eventlog.CaptureCompletion),
			string(eventlog.FailHandler), string(eventlog.FailPanic), string(eventlog.FailCheckpointUnavailable),
			string(eventlog.FailResourceMismatch), string(eventlog.FailResource),
			string(eventlog.StepChild), string(eventlog.FailDeadline), string(eventlog.FailResourceUnavailable),
			string(eventlog.ParkTimer), string(eventlog.ParkRetry), string(eventlog.ParkApproval), string(eventlog.ParkChild),
			string(eventlog.FailNondeterministic),
			string(eventlog.CapturePark), string(eventlog.CaptureShutdown),
			string(eventlog.StepRecv), string(eventlog.ParkRateLimit), string(eventlog.ParkMessage),
			string(eventlog.DenyPolicy), string(eventlog.DenyRateLimited), string(eventlog.DenyBudget),
			string(eventlog.DenyApprovalExpired), string(eventlog.DenyApprovalRejected),
		}
		want := []string{
			"tool", "local", "llm",
			"safe_to_retry", "at_most_once",
			"baseline", "steps", "completion",
			"handler", "panic", "checkpoint_unavailable", "resource_mismatch", "resource",
			"child", "deadline", "resource_unavailable",
			"timer", "retry", "approval", "child",
			"nondeterministic",
			"park", "shutdown",
			"recv", "rate_limit", "message",
			"policy", "rate_limited", "budget", "approval_expired", "approval_rejected",
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("enum values (-pinned +now):\n%s", d)
		}
	})

	t.Run("header layout", func(t *testing.T) {
		for _, ev := range fullEvents() {
			rec := mustRecord(ev)
			if rec[0] != 3 {
				t.Errorf("%s: byte 0 = %d, want the format version 3", ev.Kind(), rec[0])
			}
			if rec[1] != byte(ev.Kind()) {
				t.Errorf("%s: byte 1 = %d, want the kind code %d", ev.Kind(), rec[1], byte(ev.Kind()))
			}
			if got, want := binary.BigEndian.Uint32(rec[2:6]), recordChecksum(rec, 'e', testID, ev.Seq); got != want {
				t.Errorf("%s: bytes 2:6 = %08x, want CRC-32C of [0:2]+place+[6:] %08x", ev.Kind(), got, want)
			}
			if got := int64(binary.BigEndian.Uint64(rec[6:14])); got != ev.Time.UnixNano() {
				t.Errorf("%s: bytes 6:14 = %d, want Unix nanoseconds %d", ev.Kind(), got, ev.Time.UnixNano())
			}
		}
		ev := minimalEvents()[0]
		if rec := mustRecord(ev); binary.BigEndian.Uint64(rec[6:14]) != 0 {
			t.Errorf("zero time encoded as %x, want 0", rec[6:14])
		}
	})

	t.Run("encoded keys", func(t *testing.T) {
		for i, set := range [][]eventlog.Event{fullEvents(), minimalEvents()} {
			for _, ev := range set {
				m := payloadMap(t, mustRecord(ev))
				got := slices.Sorted(mapKeys(m))
				if d := cmp.Diff(pinnedKeys[ev.Kind()][i], got, cmpEmpty); d != "" {
					t.Errorf("%s (set %d) keys (-pinned +now):\n%s", ev.Kind(), i, d)
				}
			}
		}
		// The parent ID is stored as msgpack bin holding its text form (ID
		// is an encoding.TextMarshaler); selections as maps.
		m := payloadMap(t, mustRecord(fullEvents()[12]))
		if p, ok := m["parent"].([]byte); !ok || string(p) != sampleParent.String() {
			t.Errorf("parent encoded as %#v, want bin %q", m["parent"], sampleParent.String())
		}
		sel := m["selections"].([]any)[0].(map[string]any)
		want := []string{"captured_at", "covered", "generation", "key", "ref"}
		if got := slices.Sorted(mapKeys(sel)); !slices.Equal(got, want) {
			t.Errorf("selection keys %v, pinned %v", got, want)
		}
	})

	t.Run("times", func(t *testing.T) {
		// A payload time is a msgpack timestamp (extension -1), decoded in UTC.
		m := payloadMap(t, mustRecord(fullEvents()[16]))
		if _, ok := m["wake_at"].(time.Time); !ok {
			t.Errorf("wake_at encoded as %#v, want a msgpack timestamp", m["wake_at"])
		}
		ev, err := eventlog.DecodeRecord(testID, 17, mustRecord(fullEvents()[16]))
		if err != nil {
			t.Fatal(err)
		}
		if w := ev.Data.(*eventlog.TimerStarted).WakeAt; w.Location() != time.UTC || !w.Equal(sampleWake) {
			t.Errorf("wake_at decoded as %v, want %v in UTC", w, sampleWake)
		}
	})

	t.Run("golden records", func(t *testing.T) {
		checkGolden(t, filepath.Join("testdata", "records_v3.golden"), goldenRecords())
	})

	t.Run("golden version 2 records", func(t *testing.T) {
		checkGoldenOld(t, filepath.Join("testdata", "records_v2.golden"), 2, fullEventsV2())
	})

	t.Run("golden version 1 records", func(t *testing.T) {
		checkGoldenOld(t, filepath.Join("testdata", "records.golden"), 1, fullEventsV1())
	})
}

// checkGoldenOld checks that the records of an older format version,
// written by that version's encoder (testdata/records.golden for version
// 1, records_v2.golden for version 2, never rewritten), still decode to
// their sample events evs, and that later versions changed nothing in how
// those events are encoded but the version byte.
func checkGoldenOld(t *testing.T, path string, version byte, evs []eventlog.Event) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	sc := bufio.NewScanner(strings.NewReader(string(want)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hx, ok := strings.Cut(line, " ")
		if !ok || i >= len(evs) {
			t.Fatalf("%s: unexpected line %q", path, line)
		}
		rec, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		if rec[0] != version {
			t.Errorf("%s: %s: version %d, want %d", path, name, rec[0], version)
		}
		ev, err := eventlog.DecodeRecord(testID, evs[i].Seq, rec)
		if err != nil {
			t.Errorf("%s: %s: %v", path, name, err)
		} else if d := eventDiff(evs[i], ev); d != "" || ev.Kind().String() != name {
			t.Errorf("%s: %s decodes as %s (-want +got):\n%s", path, name, ev.Kind(), d)
		}
		now := mustRecord(evs[i])
		now[0] = version
		if got := reseal(now); !bytes.Equal(got, rec) {
			t.Errorf("%s: %s: the version %d encoding with version byte %d is\n%x, the version %d record is\n%x",
				path, name, eventlog.FormatVersion, version, got, version, rec)
		}
		i++
	}
	if i != len(evs) {
		t.Errorf("%s holds %d records, want %d", path, i, len(evs))
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// goldenRecords is the text of testdata/records.golden.
func goldenRecords() string {
	var b strings.Builder
	b.WriteString("# The exact format version 3 record of each sample event (fullEvents in\n# sample_test.go), as the event at its seq of execution testID (" + testID.String() + "),\n")
	b.WriteString("# one line per kind: wire name, then the record in hex. Any change here is\n")
	b.WriteString("# a change to the on-disk format. Regenerate with\n")
	b.WriteString("#   go test ./eventlog -run TestFormatPinned -rewrite\n")
	b.WriteString("# only together with a new FormatVersion.\n")
	for _, ev := range fullEvents() {
		fmt.Fprintf(&b, "%s %s\n", ev.Kind(), hex.EncodeToString(mustRecord(ev)))
	}
	return b.String()
}

// checkGolden compares got with the file, or rewrites the file with -rewrite.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-file +now):\n%s", path, d)
	}
	// Every golden record also decodes to its sample event: the file is read
	// back by this build, not only written by it.
	sc := bufio.NewScanner(strings.NewReader(string(want)))
	sc.Buffer(nil, 1<<20)
	evs := fullEvents()
	i := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hx, ok := strings.Cut(line, " ")
		if !ok || i >= len(evs) {
			t.Fatalf("%s: unexpected line %q", path, line)
		}
		rec, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		ev, err := eventlog.DecodeRecord(testID, evs[i].Seq, rec)
		if err != nil {
			t.Errorf("%s: %s: %v", path, name, err)
		} else if d := eventDiff(evs[i], ev); d != "" || ev.Kind().String() != name {
			t.Errorf("%s: %s decodes as %s (-want +got):\n%s", path, name, ev.Kind(), d)
		}
		i++
	}
	if i != len(evs) {
		t.Errorf("%s holds %d records, want %d", path, i, len(evs))
	}
}
