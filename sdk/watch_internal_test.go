package sdk

import "testing"

// TestAppendSignal: a channel from wait is closed by the next append, and
// only by it; watchers that waited before the same append share one
// channel, and a wait after it gets a new, open one.
func TestAppendSignal(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	var s appendSignal
	s.appended() // no watcher: nothing to wake
	a, b := s.wait(), s.wait()
	if a == nil || a != b || closed(a) {
		t.Fatalf("two waits before an append: %v, %v (closed %v); want one open channel", a, b, closed(a))
	}
	s.appended()
	if !closed(a) {
		t.Fatal("the append did not close the waiters' channel")
	}
	c := s.wait()
	if c == nil || closed(c) {
		t.Fatal("a wait after the append got no open channel")
	}
	s.appended()
	if !closed(c) {
		t.Fatal("the second append did not close the second channel")
	}
}
