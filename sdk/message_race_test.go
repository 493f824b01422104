package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/sdk"
)

// TestMessagesRacingCompletion: messages sent concurrently to an execution
// whose two Recv of one topic take the first two and end it (DESIGN §18,
// §21½.16). The two Recv consume the two messages received first, in
// arrival order (the lineage's message.received order); every other
// message is never lost silently: a Send that returned nil was received
// (in the lineage, listed unconsumed by Info), and one that returned
// ErrEnded is either dropped — pending in the inbox, counted by Info — or
// was refused before anything was written. No message is both received
// and pending, and none is received twice.
func TestMessagesRacingCompletion(t *testing.T) {
	const rounds, senders = 40, 6
	for round := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		store := newStore(t)
		k := newKernel(t, store, echoAgent(2, time.Minute), sdk.ParkAfter(time.Minute))
		id, err := k.Start(ctx, "a", none{})
		if err != nil {
			t.Fatal(err)
		}
		done := runAsync(ctx, k, id)
		sent := make([]error, senders)
		var wg sync.WaitGroup
		for i := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent[i] = k.Send(ctx, id, "in", fmt.Sprintf("m%d", i), sdk.MessageID(fmt.Sprintf("m%d", i)))
			}()
		}
		wg.Wait()
		if err := awaitRun(t, done, 15*time.Second); err != nil {
			t.Fatalf("round %d: Run = %v", round, err)
		}
		cancel()
		checkRace(t, round, k, id, sent)
	}
}

// checkRace checks one round of TestMessagesRacingCompletion by the
// lineage's events and Info.
func checkRace(t *testing.T, round int, k *sdk.Kernel, id eventlog.ID, sent []error) {
	t.Helper()
	ctx := context.Background()
	evs := events(t, k, id)
	var received []string      // MessageIDs in arrival order
	var consumed []string      // recv results in order
	recvs := map[string]bool{} // recv step IDs
	seen := map[string]int{}   // MessageID → times received
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *eventlog.MessageReceived:
			received = append(received, p.MessageID)
			seen[p.MessageID]++
			var v string
			if err := json.Unmarshal(p.Value, &v); err != nil || v != p.MessageID {
				t.Fatalf("round %d: message %s holds %s", round, p.MessageID, p.Value)
			}
		case *eventlog.StepStarted:
			if p.StepKind == eventlog.StepRecv {
				recvs[p.StepID] = true
			}
		case *eventlog.StepSucceeded:
			if recvs[p.StepID] {
				var v string
				if err := json.Unmarshal(p.Result, &v); err != nil {
					t.Fatalf("round %d: recv result %s: %v", round, p.Result, err)
				}
				consumed = append(consumed, v)
			}
		}
	}
	if last := evs[len(evs)-1].Kind(); last != eventlog.KindExecutionCompleted {
		t.Fatalf("round %d: last event %s", round, last)
	}
	if len(received) < 2 || len(consumed) != 2 || consumed[0] != received[0] || consumed[1] != received[1] {
		t.Fatalf("round %d: received %v, the two Recv returned %v: want the first two in arrival order", round, received, consumed)
	}
	for mid, n := range seen {
		if n != 1 {
			t.Fatalf("round %d: message %s received %d times", round, mid, n)
		}
	}
	info, err := k.Info(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]bool{}
	for _, m := range info.Pending {
		pending[m.MessageID] = true
	}
	if info.Dropped != len(info.Pending) {
		t.Fatalf("round %d: Info counts %d dropped of %d pending", round, info.Dropped, len(info.Pending))
	}
	if len(info.Messages) != len(received) {
		t.Fatalf("round %d: Info lists %d messages, the lineage received %d", round, len(info.Messages), len(received))
	}
	for i, m := range info.Messages {
		if m.MessageID != received[i] || m.Consumed() != (i < 2) {
			t.Fatalf("round %d: Info message %d = %+v, want %s consumed=%v", round, i, m, received[i], i < 2)
		}
	}
	for i, err := range sent {
		mid := fmt.Sprintf("m%d", i)
		switch {
		case seen[mid] == 1 && pending[mid]:
			t.Fatalf("round %d: %s both received and pending", round, mid)
		case err == nil && seen[mid] == 0:
			t.Fatalf("round %d: Send of %s returned nil but it was not received (pending %v): lost", round, mid, pending[mid])
		case err != nil && !errors.Is(err, sdk.ErrEnded):
			t.Fatalf("round %d: Send of %s: %v", round, mid, err)
		case err != nil && seen[mid] == 1:
			t.Fatalf("round %d: Send of %s said %v, yet it was received", round, mid, err)
		}
	}
}
