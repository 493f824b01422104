package chat_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/eventlog/pgstore"
	"github.com/forkline/forkline/examples/chat"
	"github.com/forkline/forkline/internal/pgtest"
	"github.com/forkline/forkline/proptest"
	"github.com/forkline/forkline/sdk"
)

// countingModel answers "turn N: LINE" and records every call.
type countingModel struct {
	mu    sync.Mutex
	lines []string
}

func (m *countingModel) answer(_ context.Context, p chat.Prompt) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lines = append(m.lines, p.Line)
	return fmt.Sprintf("turn %d: %s", len(p.History)+1, p.Line), nil
}

func (m *countingModel) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lines)
}

// TestChatCheckAgent: DESIGN §8's invariants on a three-turn chat — the
// run killed after every event and resumed ends with the same
// conversation, replaying the model calls it recorded, and every fork, given the lines its prefix did not
// receive (sdk.WithMessages), ends as its parent did.
func TestChatCheckAgent(t *testing.T) {
	var m countingModel
	newKernel := func(log eventlog.IndexedLog, opts ...sdk.Option) (*sdk.Kernel, error) {
		k, err := sdk.New(log, opts...)
		if err != nil {
			return nil, err
		}
		_, err = chat.Register(k, m.answer)
		return k, err
	}
	proptest.CheckAgent(t, newKernel, chat.Agent, chat.Input{Wait: time.Hour},
		proptest.WithSent(
			sdk.Message{Topic: chat.Topic, Value: "hello"},
			sdk.Message{Topic: chat.Topic, Value: "what is forkline?"},
			sdk.Message{Topic: chat.Topic, Value: "thanks"},
			sdk.Message{Topic: chat.Topic, Value: chat.Bye},
		))
}

// describe renders the chat's events compactly.
func describe(evs []eventlog.Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Kind().String()
		switch p := ev.Data.(type) {
		case *eventlog.MessageReceived:
			s += " " + string(p.Value)
		case *eventlog.StepStarted:
			s += " " + string(p.StepKind)
		case *eventlog.EventSet:
			if p.Key != chat.ReplyKey(1) && p.Key != chat.ReplyKey(2) && p.Key != chat.ReplyKey(3) {
				continue
			}
			s += " " + p.Key
		}
		out = append(out, s)
	}
	return out
}

// turn is the events of one turn after its line arrived: the recv step
// returns it, the model answers, three events are published (the
// per-turn reply shown, "reply" and "turns" left out by describe).
func turn(n int) []string {
	return []string{"step.succeeded", "step.started tool", "step.succeeded", "event.set " + chat.ReplyKey(n)}
}

// TestChatDrivenAcrossKernels: one kernel serves the chat, another drives
// it with Send and GetEvent; after the first turn the serving kernel is
// stopped (its process gone) and a new one serves the rest. The
// conversation completes, each turn's model call ran once, and the
// events are those of a conversation: recv waits, messages, replies.
func TestChatDrivenAcrossKernels(t *testing.T) {
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	driveChat(t, s, s)
}

// TestChatDrivenOnPostgres: the same with each kernel on its own
// connection (two processes).
func TestChatDrivenOnPostgres(t *testing.T) {
	url, schema := pgtest.Schema(t)
	var stores []eventlog.IndexedLog
	for range 2 {
		s, err := pgstore.Open(t.Context(), url, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	driveChat(t, stores[0], stores[1])
}

func driveChat(t *testing.T, serveLog, driveLog eventlog.IndexedLog) {
	ctx := t.Context()
	var m countingModel
	serve := func(owner string) (stop func()) {
		k, err := sdk.New(serveLog, sdk.WithOwner(owner), sdk.ParkAfter(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chat.Register(k, m.answer); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- k.Serve(sctx, sdk.PollEvery(10*time.Millisecond)) }()
		return func() { cancel(); <-done }
	}
	driver, err := sdk.New(driveLog, sdk.WithOwner("driver"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Register(driver, func(context.Context, chat.Prompt) (string, error) {
		t.Error("the driving kernel ran the model")
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	id, err := driver.Start(ctx, chat.Agent, chat.Input{Wait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stop := serve("first")
	r1, err := chat.Say(ctx, driver, id, 1, "hello", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stop() // the serving process is gone between turns
	stop = serve("second")
	defer stop()
	replies, err := chat.Converse(ctx, driver, id, []string{"hello", "what is forkline?", "thanks"}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := driver.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"turn 1: hello", "turn 2: what is forkline?", "turn 3: thanks"}
	if diff := cmp.Diff(want, append([]string{r1}, replies[1:]...)); diff != "" || replies[0] != r1 {
		t.Fatalf("replies (-want +got):\n%s (the first turn said again: %q)", diff, replies[0])
	}
	if diff := cmp.Diff([]string{"hello", "what is forkline?", "thanks"}, m.calls()); diff != "" {
		t.Fatalf("model calls (-want +got):\n%s", diff)
	}
	var out chat.Output
	if err := res.Decode(&out); err != nil || out.Ended != "bye" || len(out.Turns) != 3 {
		t.Fatalf("output %+v (%v)", out, err)
	}
	// The recv steps and messages interleave as timing has it; the turns'
	// own events follow each message in order.
	var evs []eventlog.Event
	for ev, err := range driver.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	got := describe(evs)
	var msgs []string
	for _, g := range got {
		if len(g) > 16 && g[:16] == "message.received" {
			msgs = append(msgs, g)
		}
	}
	wantMsgs := []string{`message.received "hello"`, `message.received "what is forkline?"`,
		`message.received "thanks"`, `message.received "/bye"`}
	if diff := cmp.Diff(wantMsgs, msgs); diff != "" {
		t.Fatalf("messages (-want +got), one per turn though turn 1 was said twice:\n%s", diff)
	}
	for n := 1; n <= 3; n++ {
		if !containsRun(got, turn(n)) {
			t.Fatalf("turn %d's events %v not in order in\n%v", n, turn(n), got)
		}
	}
	if got[len(got)-1] != "execution.completed" {
		t.Fatalf("last event %s", got[len(got)-1])
	}
}

// containsRun reports whether want appears in got as consecutive elements.
func containsRun(got, want []string) bool {
	for i := 0; i+len(want) <= len(got); i++ {
		if slices.Equal(got[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// TestChatForkEditedTurn: a conversation replayed with its second line
// edited — a fork just before the second line was received, the edited
// lines injected (sdk.WithMessages). The fork replays the first turn's
// recorded model call and asks the model only for the new line; the
// parent is unchanged.
func TestChatForkEditedTurn(t *testing.T) {
	ctx := t.Context()
	s, err := pebblestore.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var m countingModel
	k, err := sdk.New(s, sdk.ParkAfter(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Register(k, m.answer); err != nil {
		t.Fatal(err)
	}
	id, _ := k.Start(ctx, chat.Agent, chat.Input{Wait: time.Hour})
	// One line at a time: the chat parks waiting for each next one.
	var second uint64 // the seq of the second line's message.received
	for i, line := range []string{"hello", "tell me a joke", chat.Bye} {
		if err := k.Send(ctx, id, chat.Topic, line, sdk.MessageID(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			info, err := k.Info(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			second = info.Messages[1].ReceivedAt
		}
		if _, err := k.Run(ctx, id); err != nil && !errors.Is(err, sdk.ErrWaiting) {
			t.Fatal(err)
		}
	}
	parent := describe(events(t, k, id))
	fid, err := k.Fork(ctx, id, second-1, sdk.WithMessages(
		sdk.Message{Topic: chat.Topic, Value: "tell me a poem"},
		sdk.Message{Topic: chat.Topic, Value: chat.Bye}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, fid)
	if err != nil {
		t.Fatal(err)
	}
	var out chat.Output
	if err := res.Decode(&out); err != nil {
		t.Fatal(err)
	}
	want := []chat.Turn{{User: "hello", Reply: "turn 1: hello"}, {User: "tell me a poem", Reply: "turn 2: tell me a poem"}}
	if diff := cmp.Diff(want, out.Turns); diff != "" {
		t.Fatalf("fork's conversation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hello", "tell me a joke", "tell me a poem"}, m.calls()); diff != "" {
		t.Fatalf("model calls (-want +got): the fork replays turn 1\n%s", diff)
	}
	if diff := cmp.Diff(parent, describe(events(t, k, id))); diff != "" {
		t.Fatalf("the parent changed (-before +after):\n%s", diff)
	}
	// The fork's own events: it takes the injected line from the Recv its
	// prefix left waiting, asks the model once, and says goodbye.
	own := describe(events(t, k, fid)[second-1:])
	wantOwn := []string{"fork.created", "dispatch.started", "step.succeeded", "step.started tool", "step.succeeded",
		"event.set " + chat.ReplyKey(2), "step.started recv", "step.succeeded", "execution.completed"}
	if diff := cmp.Diff(wantOwn, own); diff != "" {
		t.Fatalf("the fork's own events (-want +got):\n%s", diff)
	}
}

func events(t *testing.T, k *sdk.Kernel, id eventlog.ID) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	for ev, err := range k.Events(t.Context(), id) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}
