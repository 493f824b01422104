package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/policy"
	"github.com/forkline/forkline/sdk"
)

// mdescribe renders messages, published events and recv outcomes with
// their values, and every other event as rdescribe does.
func mdescribe(ev eventlog.Event) string {
	switch p := ev.Data.(type) {
	case *eventlog.MessageReceived:
		return "message " + p.Topic + "=" + string(p.Value)
	case *eventlog.EventSet:
		return "event " + p.Key + "=" + string(p.Value)
	case *eventlog.StepSucceeded:
		return "succeeded " + string(p.Result)
	case *eventlog.ForkCreated:
		s := describe(ev)
		for _, m := range p.Messages {
			s += " +" + m.Topic + "=" + string(m.Value)
		}
		return s
	}
	return rdescribe(ev)
}

// mwant checks id's lineage, rendered by mdescribe, against want.
func mwant(t *testing.T, k *sdk.Kernel, id eventlog.ID, want []string) []eventlog.Event {
	t.Helper()
	evs := events(t, k, id)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = mdescribe(ev)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events of %s (-want +got):\n%s", id, diff)
	}
	return evs
}

// echoAgent receives n messages on "in" and returns them.
func echoAgent(n int, timeout time.Duration) func(*sdk.Kernel) {
	return func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) ([]string, error) {
			var got []string
			for range n {
				s, err := sdk.Recv[string](ctx, "in", timeout)
				if err != nil {
					return nil, err
				}
				got = append(got, s)
			}
			return got, nil
		})
	}
}

// TestSendBeforeRunRecv: messages sent to a pending execution are appended
// by the sender under a claim (no owner runs it), in order; two Recv of
// the topic in one dispatch consume them in arrival order, each recorded
// as a recv step whose result is the message.
func TestSendBeforeRunRecv(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), echoAgent(2, time.Minute), sdk.WithClock(newFakeClock()))
	id, _ := k.Start(ctx, "a", none{})
	if err := k.Send(ctx, id, "in", "first", sdk.MessageID("m1")); err != nil {
		t.Fatal(err)
	}
	if err := k.Send(ctx, id, "in", "second", sdk.MessageID("m2")); err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `["first","second"]` {
		t.Fatalf("output %s", res.Output)
	}
	evs := mwant(t, k, id, []string{"created a", `message in="first"`, `message in="second"`, "dispatch 1",
		"started recv in", `succeeded "first"`, "started recv in", `succeeded "second"`, "completed"})
	st := evs[4].Data.(*eventlog.StepStarted)
	if !st.WakeAt.Equal(evs[4].Time.Add(time.Minute)) {
		t.Fatalf("recv WakeAt %v, started at %v: want start + timeout", st.WakeAt, evs[4].Time)
	}
	info, err := k.Info(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Messages) != 2 || !info.Messages[0].Consumed() || !info.Messages[1].Consumed() ||
		info.Messages[0].ConsumedAt != 6 || info.Messages[1].ConsumedAt != 8 || len(info.Pending) != 0 {
		t.Fatalf("info messages %+v pending %+v", info.Messages, info.Pending)
	}
}

// TestSendIdempotent: the same MessageID with the same value is one
// message; with another value ErrConflict; neither writes anything, in the
// lineage or the inbox.
func TestSendIdempotent(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, echoAgent(1, time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	if err := k.Send(ctx, id, "in", "hi", sdk.MessageID("m")); err != nil {
		t.Fatal(err)
	}
	if err := k.Send(ctx, id, "in", "hi", sdk.MessageID("m")); err != nil {
		t.Fatalf("the same message again: %v", err)
	}
	if err := k.Send(ctx, id, "in", "other", sdk.MessageID("m")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("reused MessageID with another value: %v, want ErrConflict", err)
	}
	if err := k.Send(ctx, id, "other", "hi", sdk.MessageID("m")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("reused MessageID on another topic: %v, want ErrConflict", err)
	}
	mwant(t, k, id, []string{"created a", `message in="hi"`})
	reqs, err := store.Requests(ctx, id)
	if err != nil || len(reqs) != 0 {
		t.Fatalf("inbox %v %v, want empty", reqs, err)
	}
}

// TestSendPendingIdempotent: while a message waits in the inbox (a live
// owner holds the execution), the same MessageID is checked against it.
func TestSendPendingIdempotent(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, echoAgent(1, time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	// Hold the claim as a live owner would: Send cannot settle.
	lease, err := store.Claim(ctx, id, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Send(ctx, id, "in", "hi", sdk.MessageID("m")); err != nil {
		t.Fatal(err)
	}
	if err := k.Send(ctx, id, "in", "hi", sdk.MessageID("m")); err != nil {
		t.Fatal(err)
	}
	if err := k.Send(ctx, id, "in", "bye", sdk.MessageID("m")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("reused pending MessageID with another value: %v, want ErrConflict", err)
	}
	reqs, err := store.Requests(ctx, id)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("inbox %v %v, want one request", reqs, err)
	}
	mwant(t, k, id, []string{"created a"})
	info, err := k.Info(ctx, id)
	if err != nil || len(info.Pending) != 1 || info.Dropped != 0 {
		t.Fatalf("info pending %+v dropped %d (%v)", info.Pending, info.Dropped, err)
	}
	if err := store.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
}

// TestSendBadInput: an unknown or ended execution, an empty topic, a value
// that is not JSON, a bad MessageID: an error, and nothing written.
func TestSendBadInput(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, echoAgent(0, 0))
	done, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, done); err != nil {
		t.Fatal(err)
	}
	live, _ := k.Start(ctx, "a", none{})
	for _, c := range []struct {
		name  string
		id    eventlog.ID
		topic string
		value any
		opts  []sdk.SendOption
		want  error
	}{
		{"unknown", eventlog.NewID(), "in", "x", nil, eventlog.ErrNotFound},
		{"ended", done, "in", "x", nil, sdk.ErrEnded},
		{"empty topic", live, "", "x", nil, sdk.ErrInvalid},
		{"not JSON", live, "in", math.Inf(1), nil, sdk.ErrInvalid},
		{"channel", live, "in", make(chan int), nil, sdk.ErrInvalid},
		{"empty id", live, "in", "x", []sdk.SendOption{sdk.MessageID("")}, sdk.ErrInvalid},
		{"NUL id", live, "in", "x", []sdk.SendOption{sdk.MessageID("a\x00b")}, sdk.ErrInvalid},
	} {
		if err := k.Send(ctx, c.id, c.topic, c.value, c.opts...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	mwant(t, k, done, []string{"created a", "dispatch 1", "completed"})
	mwant(t, k, live, []string{"created a"})
	for _, id := range []eventlog.ID{done, live} {
		if reqs, err := store.Requests(ctx, id); err != nil || len(reqs) != 0 {
			t.Fatalf("inbox of %s: %v %v", id, reqs, err)
		}
	}
}

// TestRecvWaitsForSend: a running Recv waits; a Send from outside reaches
// it through the owner's inbox (message.received appended by the owner)
// and the recv step records it.
func TestRecvWaitsForSend(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), echoAgent(1, time.Minute), sdk.ParkAfter(time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	done := runAsync(ctx, k, id)
	waitFor(t, func() bool { return len(events(t, k, id)) == 3 }) // the recv started
	start := time.Now()
	if err := k.Send(ctx, id, "in", "hello", sdk.MessageID("m1")); err != nil {
		t.Fatal(err)
	}
	if err := awaitRun(t, done, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Recv returned %v after Send", d)
	}
	mwant(t, k, id, []string{"created a", "dispatch 1", "started recv in", `message in="hello"`,
		`succeeded "hello"`, "completed"})
}

// TestRecvParksServeWakes: past ParkAfter the Recv parks the dispatch
// (reason message, WakeAt the recv's timeout), nothing else recorded;
// a Send to the parked execution is appended by the sender, which wakes
// it, and Serve runs it to completion: the replayed recv step takes the
// message.
func TestRecvParksServeWakes(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), echoAgent(1, time.Hour), sdk.ParkAfter(20*time.Millisecond))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	evs := mwant(t, k, id, []string{"created a", "dispatch 1", "started recv in", "parked message"})
	if got, want := evs[3].Data.(*eventlog.DispatchParked).WakeAt, evs[2].Data.(*eventlog.StepStarted).WakeAt; !got.Equal(want) {
		t.Fatalf("parked until %v, want the recv's WakeAt %v", got, want)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- k.Serve(sctx, sdk.PollEvery(5*time.Millisecond)) }()
	if err := k.Send(ctx, id, "in", "late", sdk.MessageID("m1")); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := k.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `["late"]` {
		t.Fatalf("output %s", res.Output)
	}
	stop()
	<-served
	mwant(t, k, id, []string{"created a", "dispatch 1", "started recv in", "parked message",
		`message in="late"`, "dispatch 2", `succeeded "late"`, "completed"})
}

// TestRecvTimeout: no message within the timeout is step.failed
// (ErrTimeout), and a fork that replays the step gets ErrTimeout again
// without a new recv step; a negative timeout is ErrInvalid, recording
// nothing.
func TestRecvTimeout(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			if _, err := sdk.Recv[string](ctx, "in", -time.Second); !errors.Is(err, sdk.ErrInvalid) {
				return "", err
			}
			_, err := sdk.Recv[string](ctx, "in", 10*time.Millisecond)
			if errors.Is(err, sdk.ErrTimeout) {
				return "timed out", nil
			}
			return "", err
		})
	})
	id, _ := k.Start(ctx, "a", none{})
	res, err := k.Run(ctx, id)
	if err != nil || string(res.Output) != `"timed out"` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	mwant(t, k, id, []string{"created a", "dispatch 1", "started recv in",
		`failed no message on topic "in" within 10ms`, "completed"})
	fid, err := k.Fork(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := k.Run(ctx, fid); err != nil || string(res.Output) != `"timed out"` {
		t.Fatalf("fork Run = %v, %v", res, err)
	}
	mwant(t, k, fid, []string{"created a", "dispatch 1", "started recv in",
		`failed no message on topic "in" within 10ms`, "fork at=4", "dispatch 2", "completed"})
}

// TestSetEventReplays: SetEvent appends event.set; the dispatch that
// replays it after a park appends nothing for it; GetEvent returns the
// newest value and waits for the first; Info lists the keys.
func TestSetEventReplays(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			if err := sdk.SetEvent(ctx, "status", "waiting"); err != nil {
				return "", err
			}
			s, err := sdk.Recv[string](ctx, "in", time.Hour)
			if err != nil {
				return "", err
			}
			if err := sdk.SetEvent(ctx, "status", "got "+s); err != nil {
				return "", err
			}
			return s, sdk.SetEvent(ctx, "done", true)
		})
	}, sdk.ParkAfter(20*time.Millisecond))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.GetEvent(ctx, id, "status", 0); !errors.Is(err, sdk.ErrTimeout) {
		t.Fatalf("GetEvent before any: %v, want ErrTimeout", err)
	}
	got := make(chan string, 1)
	go func() {
		v, err := k.GetEvent(ctx, id, "done", 10*time.Second)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(v)
	}()
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if v, err := k.GetEvent(ctx, id, "status", time.Second); err != nil || string(v) != `"waiting"` {
		t.Fatalf("GetEvent = %s, %v", v, err)
	}
	if err := k.Send(ctx, id, "in", "x", sdk.MessageID("m")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	mwant(t, k, id, []string{"created a", "dispatch 1", `event status="waiting"`, "started recv in", "parked message",
		`message in="x"`, "dispatch 2", `succeeded "x"`, `event status="got x"`, "event done=true", "completed"})
	if v := <-got; v != "true" {
		t.Fatalf("waiting GetEvent = %s", v)
	}
	if v, err := k.GetEvent(ctx, id, "status", 0); err != nil || string(v) != `"got x"` {
		t.Fatalf("GetEvent newest = %s, %v", v, err)
	}
	if _, err := k.GetEvent(ctx, id, "never", time.Second); !errors.Is(err, sdk.ErrEnded) {
		t.Fatalf("GetEvent of a key never published by an ended execution: %v, want ErrEnded", err)
	}
	info, err := k.Info(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"done", "status"}, info.EventKeys); diff != "" {
		t.Fatalf("event keys (-want +got):\n%s", diff)
	}
}

// TestSetEventStrict: under Strict, a replayed SetEvent with another value
// than recorded fails the execution ErrNonDeterministic; without Strict
// the recorded value stays and nothing is appended.
func TestSetEventStrict(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	value := "one"
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			if err := sdk.SetEvent(ctx, "v", value); err != nil {
				return "", err
			}
			return sdk.Recv[string](ctx, "in", time.Hour)
		})
	}
	k := newKernel(t, store, register, sdk.ParkAfter(20*time.Millisecond))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v", err)
	}
	value = "two"
	lax := newKernel(t, store, register, sdk.ParkAfter(20*time.Millisecond))
	if _, err := lax.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("non-strict Run = %v", err)
	}
	mwant(t, k, id, []string{"created a", "dispatch 1", `event v="one"`, "started recv in", "parked message",
		"dispatch 2", "parked message"})
	strict := newKernel(t, store, register, sdk.Strict(), sdk.ParkAfter(20*time.Millisecond))
	if _, err := strict.Run(ctx, id); !errors.Is(err, sdk.ErrNonDeterministic) {
		t.Fatalf("strict Run = %v, want ErrNonDeterministic", err)
	}
	mwant(t, k, id, []string{"created a", "dispatch 1", `event v="one"`, "started recv in", "parked message",
		"dispatch 2", "parked message", "dispatch 3", "execution_failed nondeterministic"})
}

// TestMessageDroppedAtEnd: a message request still in the inbox when the
// execution ended (it raced the end) is not received: Info counts it as
// dropped, and a Send after the end is ErrEnded.
func TestMessageDroppedAtEnd(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, echoAgent(0, 0))
	id, _ := k.Start(ctx, "a", none{})
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The request that lost the race: written after the owner's last take.
	if _, err := store.Request(ctx, id, &eventlog.MessageReceived{MessageID: "late", Topic: "in", Value: []byte(`1`)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	info, err := k.Info(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Dropped != 1 || len(info.Pending) != 1 || info.Pending[0].MessageID != "late" {
		t.Fatalf("dropped %d pending %+v, want the late message dropped", info.Dropped, info.Pending)
	}
	if err := k.Send(ctx, id, "in", 2); !errors.Is(err, sdk.ErrEnded) {
		t.Fatalf("Send after the end: %v", err)
	}
	mwant(t, k, id, []string{"created a", "dispatch 1", "completed"})
}

// TestForkMessages: a fork at N owns the messages received at seq ≤ N
// only — one its parent received later is not the fork's — and
// WithMessages injects messages received at fork.created, which the
// fork's waiting Recv returns; the parent's consumed message replays.
func TestForkMessages(t *testing.T) {
	ctx := context.Background()
	k := newKernel(t, newStore(t), echoAgent(2, time.Hour), sdk.ParkAfter(20*time.Millisecond))
	id, _ := k.Start(ctx, "a", none{})
	if err := k.Send(ctx, id, "in", "one", sdk.MessageID("m1")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v", err)
	}
	if err := k.Send(ctx, id, "in", "two", sdk.MessageID("m2")); err != nil {
		t.Fatal(err)
	}
	parent := []string{"created a", `message in="one"`, "dispatch 1", "started recv in", `succeeded "one"`,
		"started recv in", "parked message", `message in="two"`}
	mwant(t, k, id, parent)

	// At 7 the parent had not received "two": the fork does not own it.
	plain, err := k.Fork(ctx, id, 7)
	if err != nil {
		t.Fatal(err)
	}
	info, err := k.Info(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Messages) != 1 || info.Messages[0].MessageID != "m1" {
		t.Fatalf("fork at 7 holds messages %+v, want m1 only", info.Messages)
	}
	if _, err := k.Run(ctx, plain); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("fork without the message: Run = %v, want ErrWaiting", err)
	}
	mwant(t, k, plain, append(parent[:7:7], "fork at=7", "dispatch 2", "parked message"))

	edited, err := k.Fork(ctx, id, 7, sdk.WithMessages(sdk.Message{ID: "e2", Topic: "in", Value: "edited"}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, edited)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `["one","edited"]` {
		t.Fatalf("edited fork output %s", res.Output)
	}
	mwant(t, k, edited, append(parent[:7:7], `fork at=7 +in="edited"`, "dispatch 2", `succeeded "edited"`, "completed"))

	// m2 arrived after the fork point: not the fork's, so its ID is free
	// for the fork.
	again, err := k.Fork(ctx, id, 7, sdk.WithMessages(sdk.Message{ID: "m2", Topic: "in", Value: "two again"}))
	if err != nil {
		t.Fatalf("fork at 7 with the parent's later message id: %v", err)
	}
	if res, err := k.Run(ctx, again); err != nil || string(res.Output) != `["one","two again"]` {
		t.Fatalf("fork with m2 again: %v, %v", res, err)
	}

	// A message of the prefix cannot be injected again; bad ones write nothing.
	for _, m := range []sdk.Message{{ID: "m1", Topic: "in", Value: "x"}, {Topic: "", Value: "x"}, {Topic: "in", Value: math.NaN()}} {
		if _, err := k.Fork(ctx, id, 7, sdk.WithMessages(m)); !errors.Is(err, sdk.ErrInvalid) {
			t.Fatalf("fork with message %+v: %v, want ErrInvalid", m, err)
		}
	}
}

// TestSendForkMessageID: a fork's store keeps only the MessageIDs sent to
// the fork itself; those of its prefix and those WithMessages injected are
// checked against its lineage: the same message again writes nothing,
// another value under their ID is ErrConflict.
func TestSendForkMessageID(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, echoAgent(2, time.Hour), sdk.ParkAfter(20*time.Millisecond))
	id, _ := k.Start(ctx, "a", none{})
	if err := k.Send(ctx, id, "in", "one", sdk.MessageID("m1")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Run(ctx, id); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v", err)
	}
	fork, err := k.Fork(ctx, id, 5, sdk.WithMessages(sdk.Message{ID: "e2", Topic: "in", Value: "edited"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mid, value string
		conflict   bool
	}{{"m1", "one", false}, {"m1", "other", true}, {"e2", "edited", false}, {"e2", "other", true}} {
		err := k.Send(ctx, fork, "in", c.value, sdk.MessageID(c.mid))
		if c.conflict != errors.Is(err, eventlog.ErrConflict) || (!c.conflict && err != nil) {
			t.Fatalf("send %s=%q to the fork: %v, want conflict %v", c.mid, c.value, err, c.conflict)
		}
	}
	want := []string{"created a", `message in="one"`, "dispatch 1", "started recv in", `succeeded "one"`, `fork at=5 +in="edited"`}
	mwant(t, k, fork, want)
	if reqs, err := store.Requests(ctx, fork); err != nil || len(reqs) != 0 {
		t.Fatalf("fork inbox %v %v, want empty", reqs, err)
	}
	// Its own MessageIDs are its store's: once sent, again is nothing.
	if err := k.Send(ctx, fork, "in", "three", sdk.MessageID("m3")); err != nil {
		t.Fatal(err)
	}
	if err := k.Send(ctx, fork, "in", "four", sdk.MessageID("m3")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("m3 again with another value: %v, want ErrConflict", err)
	}
	mwant(t, k, fork, append(want, `message in="three"`))
}

// TestSendRacingMessageID: Sends of one MessageID racing each other, half
// with one value and half with another, append one message.received;
// those with its value return nil, the others ErrConflict.
func TestSendRacingMessageID(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	k := newKernel(t, store, echoAgent(1, time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	const n = 8
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = k.Send(ctx, id, "in", fmt.Sprintf("v%d", i%2), sdk.MessageID("m"))
		})
	}
	close(start)
	wg.Wait()
	evs := events(t, k, id)
	var got []*eventlog.MessageReceived
	for _, ev := range evs {
		if m, ok := ev.Data.(*eventlog.MessageReceived); ok {
			got = append(got, m)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d message.received appended, want 1: %v", len(got), evs)
	}
	for i := range n {
		same := fmt.Sprintf("%q", fmt.Sprintf("v%d", i%2)) == string(got[0].Value)
		if same && errs[i] != nil || !same && !errors.Is(errs[i], eventlog.ErrConflict) {
			t.Fatalf("send %d of v%d (received %s): %v", i, i%2, got[0].Value, errs[i])
		}
	}
	if reqs, err := store.Requests(ctx, id); err != nil || len(reqs) != 0 {
		t.Fatalf("inbox %v %v, want empty", reqs, err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// awaitRun returns what the Run behind done returned, failing t when it
// has not returned within d: a Recv that misses its answer would wait out
// its timeout (a minute) instead of failing the test.
func awaitRun(t *testing.T, done <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Run has not returned %v after the Send: the Recv missed its message", d)
		return nil
	}
}

// TestRecvNotGated: a recv step has no body (DESIGN §21½.1): a gate that
// denies every call is never asked about it, in a root or in a fork.
func TestRecvNotGated(t *testing.T) {
	ctx := context.Background()
	var asked []string
	gate := func(_ context.Context, c policy.Call) policy.Decision {
		asked = append(asked, c.Kind+" "+c.Target)
		return policy.Decision{Allow: false, Reason: "no"}
	}
	k := newKernel(t, newStore(t), echoAgent(1, time.Minute), sdk.WithGate(gate))
	id, _ := k.Start(ctx, "a", none{})
	if err := k.Send(ctx, id, "in", "x", sdk.MessageID("m")); err != nil {
		t.Fatal(err)
	}
	if res, err := k.Run(ctx, id); err != nil || string(res.Output) != `["x"]` {
		t.Fatalf("Run = %v, %v", res, err)
	}
	fid, err := k.Fork(ctx, id, 2, sdk.WithMessages(sdk.Message{ID: "f", Topic: "in", Value: "y"}))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := k.Run(ctx, fid); err != nil || string(res.Output) != `["x"]` {
		t.Fatalf("fork Run = %v, %v", res, err)
	}
	if len(asked) != 0 {
		t.Fatalf("the gate was asked about %v", asked)
	}
	mwant(t, k, fid, []string{"created a", `message in="x"`, `fork at=2 +in="y"`, "dispatch 1",
		"started recv in", `succeeded "x"`, "completed"})
}

// takeRecorder records the kinds of the events each Take appends.
type takeRecorder struct {
	*pebblestore.Store
	mu    sync.Mutex
	takes [][]eventlog.Kind
}

func (s *takeRecorder) Take(ctx context.Context, id eventlog.ID, head uint64, ns []uint64, evs ...eventlog.Event) (uint64, error) {
	kinds := make([]eventlog.Kind, len(evs))
	for i, ev := range evs {
		kinds[i] = ev.Kind()
	}
	s.mu.Lock()
	s.takes = append(s.takes, kinds)
	s.mu.Unlock()
	return s.Store.Take(ctx, id, head, ns, evs...)
}

// TestRecvAnsweredInTheTake: a message sent to a Recv waiting live is
// taken into the lineage with the recv's step.succeeded in the same
// synced write (one Take appending both), and the Recv returns it.
func TestRecvAnsweredInTheTake(t *testing.T) {
	ctx := context.Background()
	store := &takeRecorder{Store: newStore(t)}
	k := newKernel(t, store, echoAgent(1, time.Minute), sdk.ParkAfter(time.Minute))
	id, _ := k.Start(ctx, "a", none{})
	done := runAsync(ctx, k, id)
	waitFor(t, func() bool { return len(events(t, k, id)) == 3 }) // the recv started
	if err := k.Send(ctx, id, "in", "hello", sdk.MessageID("m1")); err != nil {
		t.Fatal(err)
	}
	if err := awaitRun(t, done, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	mwant(t, k, id, []string{"created a", "dispatch 1", "started recv in", `message in="hello"`,
		`succeeded "hello"`, "completed"})
	store.mu.Lock()
	defer store.mu.Unlock()
	want := [][]eventlog.Kind{{eventlog.KindMessageReceived, eventlog.KindStepSucceeded}}
	if diff := cmp.Diff(want, store.takes); diff != "" {
		t.Fatalf("takes (-want +got):\n%s", diff)
	}
}
