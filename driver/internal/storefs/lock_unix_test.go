//go:build unix

package storefs

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestLockExcludes: an exclusive lock waits for shared ones, in one process.
func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlockShared, err := Lock(path, false)
	if err != nil {
		t.Fatal(err)
	}
	unlockShared2, err := Lock(path, false) // shared locks coexist
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	released := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		unlock, err := Lock(path, true)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		if !released {
			t.Error("exclusive lock granted while shared locks were held")
		}
		mu.Unlock()
		unlock()
	}()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	released = true
	mu.Unlock()
	unlockShared()
	unlockShared2()
	<-done
}
