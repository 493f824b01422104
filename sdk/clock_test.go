package sdk_test

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when the test advances it. Every
// After registers a waiter; waiters says how long each pending one has
// left, so a test checks what a dispatch waits for without wall time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	afters  int // After calls so far
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.afters++
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock by d and wakes every waiter whose time came.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// Afters returns how many times After was called.
func (c *fakeClock) Afters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.afters
}

// waitWaiter blocks until some goroutine waits on the clock and returns
// how long it has left. It gives up (the test fails) after a generous
// wall-time bound: a dispatch that never waits is the bug it reports.
func (c *fakeClock) waitWaiter(t *testing.T) time.Duration {
	t.Helper()
	for range 2000 {
		c.mu.Lock()
		if len(c.waiters) > 0 {
			left := c.waiters[0].at.Sub(c.now)
			c.mu.Unlock()
			return left
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("nothing waits on the clock")
	return 0
}

// forget drops every pending waiter: those of a dispatch that was killed.
func (c *fakeClock) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters = nil
}
