package proptest

import (
	"fmt"
	"slices"

	"github.com/forkline/forkline/eventlog"
)

// captureOf returns the key and reason of a resource.captured or
// resource.capture_failed event.
func captureOf(ev eventlog.Event) (key string, reason eventlog.CaptureReason, ok bool) {
	switch p := ev.Data.(type) {
	case *eventlog.ResourceCaptured:
		return p.Key, p.Reason, true
	case *eventlog.ResourceCaptureFailed:
		return p.Key, p.Reason, true
	}
	return "", "", false
}

// capturesFollowPolicy checks DESIGN §8.4 on the events of a lineage from
// index at (a fork's own events): every counted call that makes a capture
// due is followed by it (unless a step in flight blocks it), every binding
// from the initial environment by its baseline, every completion by the
// captures of the resources uncovered then, and every capture belongs to
// the run its reason says. It returns the seq of the first event that
// breaks the policy and why.
func capturesFollowPolicy(events []eventlog.Event, at int) (uint64, error) {
	var failed error
	var failedAt uint64
	fail := func(format string, args ...any) {
		if failed == nil {
			failed = fmt.Errorf(format, args...)
		}
	}
	// group returns the keys captured (or failed) with reason after event
	// n, in the run of capture events that directly follows it.
	group := func(n uint64, reason eventlog.CaptureReason) []string {
		var keys []string
		for _, ev := range events[n:] {
			key, r, ok := captureOf(ev)
			if !ok {
				break
			}
			if r == reason {
				keys = append(keys, key)
			}
		}
		return keys
	}
	for i := at; i < len(events) && failed == nil; i++ {
		n := uint64(i + 1)
		ev := events[i]
		failedAt = n

		// Every counted call that makes a capture due is followed by one,
		// unless another step in flight blocks it.
		var want []string
		for _, key := range CountedFor(events, n) {
			if Due(events, n, key) && len(InFlight(events[:n], key)) == 0 {
				want = append(want, key)
			}
		}
		if _, ok := terminalStep(ev); ok {
			if got := group(n, eventlog.CaptureSteps); !slices.Equal(got, want) {
				fail("seq %d (%s): steps captures of %v follow it, the policy says %v", n, ev.Kind(), got, want)
			}
		}

		switch p := ev.Data.(type) {
		case *eventlog.ResourceBound:
			got := group(n, eventlog.CaptureBaseline)
			if p.From == "" && !slices.Equal(got, []string{p.Key}) {
				fail("seq %d binds %s from the initial environment; baseline captures of %v follow", n, p.Key, got)
			}
			if p.From != "" && len(got) > 0 {
				fail("seq %d binds %s from %s; baseline captures of %v follow", n, p.Key, p.From, got)
			}
		case *eventlog.ExecutionCompleted:
			start := i // the completion captures of the same append precede it
			for start > 0 {
				if _, r, ok := captureOf(events[start-1]); !ok || r != eventlog.CaptureCompletion {
					break
				}
				start--
			}
			var got []string
			for _, cev := range events[start:i] {
				key, _, _ := captureOf(cev)
				got = append(got, key)
			}
			before := uint64(start)
			pt := PhysicalPointAt(events[:before], before) // coverage as the handler returned
			var want []string
			for _, s := range pt.Resources {
				if !s.Covered && Binding(events[:before], s.Key).OnCompletion && len(InFlight(events[:before], s.Key)) == 0 {
					want = append(want, s.Key)
				}
			}
			if !slices.Equal(got, want) {
				fail("execution.completed at seq %d: completion captures of %v, want %v", n, got, want)
			}
		}

		// Each capture event belongs to the run that its reason says.
		if key, reason, ok := captureOf(ev); ok {
			j := i
			for j > 0 {
				if _, _, ok := captureOf(events[j-1]); !ok {
					break
				}
				j--
			}
			switch reason {
			case eventlog.CaptureSteps:
				if j == 0 || !slices.Contains(CountedFor(events, uint64(j)), key) {
					fail("seq %d: steps capture of %s does not follow a counted call of it", n, key)
				}
			case eventlog.CaptureBaseline:
				b, ok := events[i-1].Data.(*eventlog.ResourceBound)
				if !ok || b.Key != key || b.From != "" {
					fail("seq %d: baseline capture of %s does not follow its binding from the initial environment", n, key)
				}
			case eventlog.CaptureCompletion:
				k := i
				for k < len(events) && events[k].Kind() != eventlog.KindExecutionCompleted {
					if _, _, ok := captureOf(events[k]); !ok {
						break
					}
					k++
				}
				if k == len(events) || events[k].Kind() != eventlog.KindExecutionCompleted {
					fail("seq %d: completion capture of %s is not followed by execution.completed", n, key)
				}
			case eventlog.CapturePark:
				k := i
				for k < len(events) {
					if _, _, ok := captureOf(events[k]); !ok {
						break
					}
					k++
				}
				if k == len(events) || events[k].Kind() != eventlog.KindDispatchParked {
					fail("seq %d: park capture of %s is not followed by dispatch.parked", n, key)
				}
			}
		}
	}
	if failed != nil {
		return failedAt, failed
	}
	return 0, nil
}
