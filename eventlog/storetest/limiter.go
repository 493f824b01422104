package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestLimiter checks the eventlog.Limiter contract (DESIGN §17) of a store
// that implements it (found with eventlog.As): bad input is ErrInvalid and
// writes nothing; a key admits max calls in a window and refuses the next
// with the time its oldest call leaves the window; keys do not share
// calls; a refused key admits again once that time has passed; and
// concurrent takes from many goroutines never admit more than max calls in
// any span of one window.
func TestLimiter(t *testing.T, open func(t *testing.T) eventlog.Log) {
	s := open(t)
	var lim eventlog.Limiter
	if !eventlog.As(s, &lim) {
		t.Skip("the store has no limiter")
	}
	t.Run("BadInput", func(t *testing.T) { testLimiterBadInput(t, lim) })
	t.Run("Window", func(t *testing.T) { testLimiterWindow(t, lim) })
	t.Run("Expiry", func(t *testing.T) { testLimiterExpiry(t, lim) })
	t.Run("Concurrent", func(t *testing.T) { testLimiterConcurrent(t, lim) })
}

// take calls TakeLimit, failing the test on an error.
func take(t *testing.T, lim eventlog.Limiter, key string, max int, window time.Duration) (bool, time.Time) {
	t.Helper()
	ok, retryAt, err := lim.TakeLimit(t.Context(), key, max, window)
	if err != nil {
		t.Fatalf("TakeLimit(%q, %d, %v): %v", key, max, window, err)
	}
	if ok && !retryAt.IsZero() {
		t.Fatalf("TakeLimit(%q, %d, %v) admitted with retryAt %v; want zero", key, max, window, retryAt)
	}
	return ok, retryAt
}

func testLimiterBadInput(t *testing.T, lim eventlog.Limiter) {
	for _, c := range []struct {
		key    string
		max    int
		window time.Duration
	}{
		{"", 1, time.Hour},
		{"bad", 0, time.Hour},
		{"bad", -1, time.Hour},
		{"bad", eventlog.MaxLimiterCalls + 1, time.Hour},
		{"bad", 1, 0},
		{"bad", 1, -time.Second},
	} {
		ok, retryAt, err := lim.TakeLimit(t.Context(), c.key, c.max, c.window)
		if !errors.Is(err, eventlog.ErrInvalid) || ok || !retryAt.IsZero() {
			t.Errorf("TakeLimit(%q, %d, %v) = %v, %v, %v; want ErrInvalid", c.key, c.max, c.window, ok, retryAt, err)
		}
	}
	// Nothing was written: a limit of one call an hour still admits one.
	if ok, _ := take(t, lim, "bad", 1, time.Hour); !ok {
		t.Fatal("after refused bad input, a first take of the key was refused: the bad input wrote a call")
	}
}

func testLimiterWindow(t *testing.T, lim eventlog.Limiter) {
	const window = time.Hour
	before := time.Now()
	for i := range 3 {
		if ok, _ := take(t, lim, "w/a", 3, window); !ok {
			t.Fatalf("take %d of 3 refused", i+1)
		}
	}
	after := time.Now()
	ok, retryAt := take(t, lim, "w/a", 3, window)
	if ok {
		t.Fatal("a fourth take in the window of a limit of 3 was admitted")
	}
	// retryAt is when the first call leaves the window: its time + window.
	const skew = time.Second // the store's clock may be the database's
	if retryAt.Before(before.Add(window-skew)) || retryAt.After(after.Add(window+skew)) {
		t.Fatalf("retryAt %v; want the first take's time + %v, in [%v, %v]", retryAt, window, before.Add(window), after.Add(window))
	}
	// A refusal takes nothing, and a smaller max is judged on the same calls.
	if ok, _ := take(t, lim, "w/a", 3, window); ok {
		t.Fatal("a take after a refusal was admitted")
	}
	if ok, _ := take(t, lim, "w/a", 4, window); !ok {
		t.Fatal("a take with max 4 after 3 admitted calls was refused")
	}
	if ok, _ := take(t, lim, "w/a", 2, window); ok {
		t.Fatal("a take with max 2 after 4 admitted calls was admitted")
	}
	// Another key has its own window.
	for i := range 2 {
		if ok, _ := take(t, lim, "w/b", 2, window); !ok {
			t.Fatalf("take %d of key w/b refused: keys share calls", i+1)
		}
	}
	if ok, _ := take(t, lim, "w/b", 2, window); ok {
		t.Fatal("a third take of key w/b with max 2 was admitted")
	}
}

func testLimiterExpiry(t *testing.T, lim eventlog.Limiter) {
	const window = 300 * time.Millisecond
	for i := range 2 {
		if ok, _ := take(t, lim, "exp", 2, window); !ok {
			t.Fatalf("take %d of 2 refused", i+1)
		}
	}
	ok, retryAt := take(t, lim, "exp", 2, window)
	if ok {
		t.Fatal("a third take in the window was admitted")
	}
	if wait := time.Until(retryAt); wait > window+time.Second {
		t.Fatalf("retryAt %v is %v away; want within the window %v", retryAt, wait, window)
	}
	time.Sleep(time.Until(retryAt) + 20*time.Millisecond)
	if ok, _ := take(t, lim, "exp", 2, window); !ok {
		t.Fatal("a take after retryAt was refused: the window did not slide")
	}
}

// admission is one admitted take, seen by the caller: it was taken at a
// store time in [start, end].
type admission struct{ start, end time.Time }

func testLimiterConcurrent(t *testing.T, lim eventlog.Limiter) {
	const (
		workers = 12
		max     = 4
		window  = 250 * time.Millisecond
		run     = 1500 * time.Millisecond
	)
	var (
		mu   sync.Mutex
		oks  []admission
		errs []error
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(run)
	for w := range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				start := time.Now()
				ok, retryAt, err := lim.TakeLimit(t.Context(), "conc", max, window)
				end := time.Now()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("worker %d: %w", w, err))
				} else if ok {
					oks = append(oks, admission{start, end})
				} else if retryAt.IsZero() {
					errs = append(errs, fmt.Errorf("worker %d: refused without retryAt", w))
				}
				mu.Unlock()
				if err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	if len(oks) <= max {
		t.Fatalf("%d admissions over %v with a limit of %d per %v: the window did not slide", len(oks), run, max, window)
	}
	slices.SortFunc(oks, func(a, b admission) int { return a.start.Compare(b.start) })
	// Admissions made wholly within [a.start, a.start+window) were taken
	// within one window: at most max of them.
	for i, a := range oks {
		n := 0
		for _, b := range oks[i:] {
			if b.end.Before(a.start.Add(window)) {
				n++
			}
		}
		if n > max {
			t.Fatalf("%d admissions within %v of %v; the limit is %d", n, window, a.start, max)
		}
	}
	// No more than max per window over the whole run.
	span := oks[len(oks)-1].end.Sub(oks[0].start)
	if limit := max * (int(span/window) + 2); len(oks) > limit {
		t.Fatalf("%d admissions over %v; want at most %d", len(oks), span, limit)
	}
}
