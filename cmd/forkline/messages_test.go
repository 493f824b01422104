package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// TestSendCommand: send appends the message to a parked execution that
// nobody runs (the command claims it), one MessageID twice is one
// message, bad input exits 2 writing nothing; events --kind message lists
// the message only, and events shows what the execution received and
// published; show of the message says it waits for a Recv.
func TestSendCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s, sdk.WithClock(stillClock{baseTime}), sdk.WithOwner("setup"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sdk.Register(k, "chat", func(ctx context.Context, _ struct{}) (string, error) {
		if err := sdk.SetEvent(ctx, "status", "listening"); err != nil {
			return "", err
		}
		return sdk.Recv[string](ctx, "user", time.Hour)
	})
	id, _ := k.Start(ctx, "chat", struct{}{})
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string, int) {
		return runCLI(t, append([]string{"--dir", dir}, args...)...)
	}

	for _, args := range [][]string{
		{"send", id.String(), "user", "not json"},
		{"send", id.String(), "", `"x"`},
		{"send", id.String(), "user", `"x"`, "--id", "a\x00"},
	} {
		if _, stderr, code := cli(args...); code != exitInput {
			t.Errorf("%q: exit %d, want 2: %s", args, code, stderr)
		}
	}
	for range 2 {
		if stdout, stderr, code := cli("send", id.String(), "user", `"hello"`, "--id", "m1"); code != 0 || !strings.Contains(stdout, `sent on "user"`) {
			t.Fatalf("send: exit %d: %s%s", code, stdout, stderr)
		}
	}
	if _, stderr, code := cli("send", id.String(), "user", `"other"`, "--id", "m1"); code != exitInput || !strings.Contains(stderr, "conflict") {
		t.Fatalf("send of a used id with another value: exit %d: %s", code, stderr)
	}
	if _, stderr, code := cli("events", id.String(), "--kind", "nothing"); code != exitInput {
		t.Fatalf("events --kind nothing: exit %d: %s", code, stderr)
	}

	stdout, stderr, code := cli("--json", "events", id.String(), "--kind", "message")
	if code != 0 {
		t.Fatalf("events --kind message: exit %d: %s", code, stderr)
	}
	var doc struct {
		Events []struct {
			Seq  uint64
			Kind string
		}
		Messages  []messageJSON
		Published []publishedJSON
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Events) != 1 || doc.Events[0].Kind != "message.received" || doc.Events[0].Seq != 6 {
		t.Fatalf("events --kind message: %+v", doc.Events)
	}
	wantMsgs := []messageJSON{{MessageID: "m1", Topic: "user", Value: json.RawMessage(`"hello"`), From: doc.Messages[0].From, ReceivedAt: 6}}
	if diff := cmp.Diff(wantMsgs, doc.Messages); diff != "" {
		t.Fatalf("messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]publishedJSON{{Key: "status", Value: json.RawMessage(`"listening"`), Seq: 3}}, doc.Published); diff != "" {
		t.Fatalf("published (-want +got):\n%s", diff)
	}
	stdout, _, code = cli("events", id.String())
	if code != 0 || !strings.Contains(stdout, "messages:") || !strings.Contains(stdout, `"hello"`) ||
		!strings.Contains(stdout, "waiting") || !strings.Contains(stdout, "published events") {
		t.Fatalf("events: exit %d:\n%s", code, stdout)
	}
	stdout, _, code = cli("show", id.String(), "6")
	if code != 0 || !strings.Contains(stdout, "consumed") || !strings.Contains(stdout, "waits for a Recv") {
		t.Fatalf("show of the message: exit %d:\n%s", code, stdout)
	}

	s, err = pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if diff := cmp.Diff([]string{"execution.created", "dispatch.started", "event.set", "step.started", "dispatch.parked", "message.received"},
		kinds(t, s, id)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}
