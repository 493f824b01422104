package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/fork"
)

// fixture is a data folder whose log the test built: executions with known
// names, so that golden files can show <A> instead of a random ID.
type fixture struct {
	dir   string
	ids   map[string]eventlog.ID // A, B, … → ID
	names []string               // in creation order
}

// baseTime is the time of the fixture's first event; event k is k seconds later.
var baseTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// llmArgs is a recorded LLM request as sdk.Transport writes it.
func llmArgs(messages int) []byte {
	msgs := make([]map[string]string, messages)
	for i := range msgs {
		msgs[i] = map[string]string{"role": "user", "content": fmt.Sprintf("m%d", i)}
	}
	b, _ := json.Marshal(map[string]any{
		"method": "POST", "url": "http://127.0.0.1:9/v1/chat/completions",
		"body": map[string]any{"model": "test-model", "messages": msgs},
	})
	return b
}

// llmResult is a recorded LLM response as sdk.Transport writes it: the HTTP
// body base64-encoded in JSON.
func llmResult(toolName, path string) []byte {
	msg := map[string]any{"role": "assistant", "content": "All done."}
	if toolName != "" {
		args, _ := json.Marshal(map[string]string{"path": path})
		msg = map[string]any{"role": "assistant", "tool_calls": []map[string]any{{
			"id": "call_1", "type": "function", "function": map[string]any{"name": toolName, "arguments": string(args)},
		}}}
	}
	body, _ := json.Marshal(map[string]any{"choices": []map[string]any{{"index": 0, "message": msg}}})
	b, _ := json.Marshal(map[string]any{"status": 200, "body": base64.StdEncoding.EncodeToString(body)})
	return b
}

func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// newFixture builds the fixture's log in a new data folder:
//
//	A  coder: a workspace (every 2 steps) and, later, a db with coverage
//	   reuse; LLM calls, tool calls, an at_most_once local step that fails,
//	   a cancelled and a denied call, a failed capture; completed.
//	B  fork of A at 13 (covered): bound its own workspace, completed.
//	C  fork of A at 20 (uncovered): created only.
//	D  mailer: no resources; an indeterminate step; failed.
//	E  fork of B at 16: created only (a fork of a fork).
func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), ids: map[string]eventlog.ID{}}
	s, err := pebblestore.Open(logDir(f.dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	ctx := context.Background()
	at := func(seq uint64) time.Time { return baseTime.Add(time.Duration(seq) * time.Second) }
	add := func(name string, id eventlog.ID, payloads ...eventlog.Payload) {
		t.Helper()
		head, err := s.Head(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		evs := make([]eventlog.Event, len(payloads))
		for i, p := range payloads {
			evs[i] = eventlog.Event{Seq: head + uint64(i) + 1, Time: at(head + uint64(i) + 1), Data: p}
		}
		if _, err := s.Append(ctx, id, head, evs...); err != nil {
			t.Fatalf("%s: append at %d: %v", name, head, err)
		}
	}
	create := func(name, agent string, input any) eventlog.ID {
		t.Helper()
		id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: agent, Input: js(input)}, at(1))
		if err != nil {
			t.Fatal(err)
		}
		f.ids[name] = id
		f.names = append(f.names, name)
		return id
	}
	forkOf := func(name, parent string, seq uint64) eventlog.ID {
		t.Helper()
		id, _, err := fork.Create(ctx, s, f.ids[parent], seq, at(seq+1))
		if err != nil {
			t.Fatal(err)
		}
		f.ids[name] = id
		f.names = append(f.names, name)
		return id
	}
	started := func(id string, kind eventlog.StepKind, target string, args any, affects ...string) *eventlog.StepStarted {
		var a []byte
		switch v := args.(type) {
		case []byte:
			a = v
		case nil:
		default:
			a = js(v)
		}
		return &eventlog.StepStarted{StepID: id, StepKind: kind, Target: target, Args: a, Resources: affects,
			Idempotency: eventlog.SafeToRetry, Attempt: 1}
	}
	ok := func(id string, result any) *eventlog.StepSucceeded {
		if b, isBytes := result.([]byte); isBytes {
			return &eventlog.StepSucceeded{StepID: id, Result: b}
		}
		return &eventlog.StepSucceeded{StepID: id, Result: js(result)}
	}
	write := func(path, content string) map[string]string {
		return map[string]string{"path": path, "content": content}
	}
	const ws, db = "workspace", "db"

	a := create("A", "coder", map[string]string{"task": "write three files"})
	add("A", a,
		&eventlog.DispatchStarted{Dispatch: 1}, // 2
		&eventlog.ResourceBound{Key: ws, DriverID: "test.dir.v1", Configuration: js(map[string]string{"store": "/data"}),
			Binding: js(map[string]string{"workspace": "w1"}), EverySteps: 2, OnCompletion: true}, // 3
		&eventlog.ResourceCaptured{Key: ws, Ref: "ref-base", Generation: 1, Reason: eventlog.CaptureBaseline}, // 4
		started("llm1", eventlog.StepLLM, "test-model", llmArgs(1)),                                           // 5
		ok("llm1", llmResult("write_file", "a.txt")),                                                          // 6
		started("w1", eventlog.StepTool, "write_file", write("a.txt", "A\n"), ws),                             // 7
		ok("w1", "wrote a.txt"), // 8
		started("r1", eventlog.StepTool, "read_file", map[string]string{"path": "a.txt"}), // 9
		ok("r1", "A\n"), // 10
		started("w2", eventlog.StepTool, "write_file", write("b.txt", "B\n"), ws), // 11
	)
	add("A", a,
		ok("w2", "wrote b.txt"), // 12
		&eventlog.ResourceCaptured{Key: ws, Ref: "ref-two", Generation: 5, Reason: eventlog.CaptureSteps}, // 13
	)
	add("A", a,
		&eventlog.ResourceBound{Key: db, DriverID: "test.db.v1", Binding: js(map[string]string{"db": "d1"}),
			EverySteps: 1, OnCompletion: true, CoverageReuse: true}, // 14
		&eventlog.ResourceCaptured{Key: db, Ref: "ref-db0", Generation: 1, Reason: eventlog.CaptureBaseline}, // 15
	)
	mig := started("mig", eventlog.StepLocal, "migrate", map[string]int{"version": 2}, db)
	mig.Idempotency = eventlog.AtMostOnce
	add("A", a, mig) // 16
	add("A", a,
		&eventlog.StepFailed{StepID: "mig", Error: "table exists"},                                        // 17
		&eventlog.ResourceCaptured{Key: db, Ref: "ref-db1", Generation: 2, Reason: eventlog.CaptureSteps}, // 18
	)
	add("A", a,
		started("w3", eventlog.StepTool, "write_file", write("c.txt", "C\n"), ws), // 19
		&eventlog.StepCancelled{StepID: "w3"},                                     // 20
		started("w4", eventlog.StepTool, "write_file", write("d.txt", "D\n"), ws), // 21
	)
	add("A", a,
		ok("w4", "wrote d.txt"), // 22
		&eventlog.ResourceCaptureFailed{Key: ws, Reason: eventlog.CaptureSteps, Error: "disk full"},             // 23
		&eventlog.StepDenied{StepID: "rm", StepKind: eventlog.StepTool, Target: "rm_rf", Reason: "not allowed"}, // 24
		started("llm2", eventlog.StepLLM, "test-model", llmArgs(7)),                                             // 25
		ok("llm2", llmResult("", "")), // 26
	)
	add("A", a,
		&eventlog.ResourceCaptured{Key: ws, Ref: "ref-done", Generation: 9, Reason: eventlog.CaptureCompletion}, // 27
		&eventlog.ExecutionCompleted{Output: js(map[string]string{"answer": "wrote a, b and d"})},               // 28
	)

	b := forkOf("B", "A", 13) // 14: fork.created
	add("B", b,
		&eventlog.DispatchStarted{Dispatch: 2}, // 15
		&eventlog.ResourceBound{Key: ws, DriverID: "test.dir.v1", Configuration: js(map[string]string{"store": "/data"}),
			Binding: js(map[string]string{"workspace": "w2"}), From: "ref-two", EverySteps: 2, OnCompletion: true}, // 16
		&eventlog.ExecutionCompleted{Output: js(map[string]string{"answer": "forked"})}, // 17
	)
	forkOf("C", "A", 20)

	d := create("D", "mailer", map[string]string{"to": "ops@example.com"})
	send := started("send", eventlog.StepTool, "send_mail", map[string]string{"subject": "hi"})
	send.Idempotency = eventlog.AtMostOnce
	add("D", d, &eventlog.DispatchStarted{Dispatch: 1}, send) // 2, 3
	add("D", d,
		&eventlog.DispatchStarted{Dispatch: 2},                                                   // 4
		&eventlog.StepFailed{StepID: "send", Error: "orphaned", Indeterminate: true},             // 5
		&eventlog.ExecutionFailed{Error: "send_mail: indeterminate", Code: eventlog.FailHandler}, // 6
	)
	forkOf("E", "B", 16)
	return f
}

// expand replaces {A}, {A:nodash} and {A:prefix} in args with the fixture's
// IDs: the whole ID, the ID without dashes, and its shortest unique prefix
// of at least 8 hex digits.
func (f *fixture) expand(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, n := range f.names {
			id := f.ids[n].String()
			a = strings.ReplaceAll(a, "{"+n+":nodash}", strings.ReplaceAll(id, "-", ""))
			a = strings.ReplaceAll(a, "{"+n+":prefix}", f.prefix(n))
			a = strings.ReplaceAll(a, "{"+n+"}", id)
		}
		a = strings.ReplaceAll(a, "{dir}", f.dir)
		out[i] = a
	}
	return out
}

// prefix is the shortest prefix of n's ID, 8 hex digits or more, that no
// other execution shares.
func (f *fixture) prefix(n string) string {
	hexOf := func(id eventlog.ID) string { return strings.ReplaceAll(id.String(), "-", "") }
	mine := hexOf(f.ids[n])
	for l := 8; l < 32; l++ {
		unique := true
		for _, o := range f.names {
			if o != n && strings.HasPrefix(hexOf(f.ids[o]), mine[:l]) {
				unique = false
			}
		}
		if unique {
			return mine[:l]
		}
	}
	return mine
}

// mask replaces the fixture's IDs with same-width names (A's is
// AAAAAAAA-AAAA-AAAA-AAAA-AAAAAAAAAAAA), so that tables keep their
// alignment, any other ID with new1, new2, … in the same shape, and the
// data folder with <dir>.
func (f *fixture) mask(s string) string {
	for _, n := range f.names {
		id := f.ids[n].String()
		s = strings.ReplaceAll(s, id, idShaped(n))
		s = strings.ReplaceAll(s, strings.ReplaceAll(id, "-", ""), strings.ReplaceAll(idShaped(n), "-", ""))
	}
	s = maskIDs(s)
	return strings.ReplaceAll(s, f.dir, "<dir>")
}

// idShaped repeats name in the shape of an ID.
func idShaped(name string) string {
	r := strings.Repeat(name, 32/len(name)+1)[:32]
	return r[:8] + "-" + r[8:12] + "-" + r[12:16] + "-" + r[16:20] + "-" + r[20:]
}

// fingerprint is everything the log of data folder dir holds, and the files
// of the folder outside the log: equal fingerprints mean nothing was written.
func fingerprint(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "log" {
			return filepath.SkipDir // Pebble may rotate its own files on open
		}
		fmt.Fprintf(&b, "file %s %v\n", rel, d.IsDir())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logDir(dir)); err != nil {
		fmt.Fprintf(&b, "no log: %v\n", os.IsNotExist(err))
		return b.String()
	}
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b.WriteString(logFingerprint(t, s))
	return b.String()
}

// logFingerprint is every execution of log with every event.
func logFingerprint(t testing.TB, log eventlog.Log) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for info, err := range log.List(ctx, eventlog.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "execution %s %s parent=%s@%d head=%d\n", info.ID, info.Agent, info.Parent, info.ForkSeq, info.Head)
		for ev, err := range log.Events(ctx, info.ID, 1) {
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(eventlog.PayloadFields(ev.Data))
			fmt.Fprintf(&b, "  %d %s %s %s\n", ev.Seq, ev.Time.UTC().Format(time.RFC3339Nano), ev.Kind(), data)
		}
	}
	return b.String()
}
