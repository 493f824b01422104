package sdk_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestMessagesOnPostgres: messages through the Postgres inbox between two
// hosts (DESIGN §18). Host B sends to the Recv that host A's running
// dispatch waits in: A's owner appends message.received and the Recv
// returns, within 100 ms of the Send (DESIGN §8½). Then A parks a second
// execution's Recv past ParkAfter; B's Send, with no live owner, is
// appended by B under a fresh claim, which wakes the execution, and B's
// Serve runs it to completion; B reads its published event with GetEvent.
func TestMessagesOnPostgres(t *testing.T) {
	ctx := t.Context()
	stores := openPG(t, 2)
	register := func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (string, error) {
			s, err := sdk.Recv[string](ctx, "in", time.Hour)
			if err != nil {
				return "", err
			}
			return s, sdk.SetEvent(ctx, "reply", "re: "+s)
		})
	}
	kA := newKernel(t, stores[0], register, sdk.WithOwner("A"), sdk.ParkAfter(time.Hour))
	kB := newKernel(t, stores[1], register, sdk.WithOwner("B"))

	live, err := kA.Start(ctx, "a", none{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := kA.Run(ctx, live); done <- err }()
	waitFor(t, func() bool { return len(events(t, kB, live)) == 3 }) // the recv started
	sent := time.Now()
	if err := kB.Send(ctx, live, "in", "hi", sdk.MessageID("m1")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	evs := mwant(t, kB, live, []string{"created a", "dispatch 1", "started recv in", `message in="hi"`,
		`succeeded "hi"`, `event reply="re: hi"`, "completed"})
	if d := evs[4].Time.Sub(sent); d > 100*time.Millisecond {
		t.Errorf("the recv returned %v after the Send, want < 100 ms", d)
	}

	kPark := newKernel(t, stores[0], register, sdk.WithOwner("A2"), sdk.ParkAfter(10*time.Millisecond))
	parked, _ := kPark.Start(ctx, "a", none{})
	if _, err := kPark.Run(ctx, parked); !errors.Is(err, sdk.ErrWaiting) {
		t.Fatalf("Run = %v, want ErrWaiting", err)
	}
	if err := kB.Send(ctx, parked, "in", "later", sdk.MessageID("m2")); err != nil {
		t.Fatal(err)
	}
	if err := kB.Send(ctx, parked, "in", "later", sdk.MessageID("m2")); err != nil {
		t.Fatalf("the same message again: %v", err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- kB.Serve(sctx, sdk.PollEvery(10*time.Millisecond)) }()
	v, err := kB.GetEvent(ctx, parked, "reply", time.Minute)
	if err != nil || string(v) != `"re: later"` {
		t.Fatalf("GetEvent = %s, %v", v, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute) // a hang guard
	_, err = kB.Wait(wctx, parked)
	cancel()
	stop()
	<-served
	if err != nil {
		t.Fatal(err)
	}
	evs = mwant(t, kA, parked, []string{"created a", "dispatch 1", "started recv in", "parked message",
		`message in="later"`, "dispatch 2", `succeeded "later"`, `event reply="re: later"`, "completed"})
	if ds := evs[5].Data.(*eventlog.DispatchStarted); ds.Owner != "B" {
		t.Errorf("dispatch 2 by %q, want B", ds.Owner)
	}
}
