package pebblestore

import (
	"crypto/rand"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/forkline/forkline/eventlog"
)

// fakeFree is a file system whose free space the test sets.
type fakeFree struct {
	vfs.FS
	avail atomic.Uint64
}

func (f *fakeFree) GetDiskUsage(string) (vfs.DiskUsage, error) {
	a := f.avail.Load()
	return vfs.DiskUsage{AvailBytes: a, TotalBytes: a + 1<<30, UsedBytes: 1 << 30}, nil
}

// TestDiskReserveBoundary: a write of n bytes is allowed while the free
// space is at least the reserve plus twice n, and refused with ErrDiskFull
// one byte below that; a reserve of 0 checks nothing.
func TestDiskReserveBoundary(t *testing.T) {
	const reserve = 1 << 20
	fs := &fakeFree{FS: vfs.NewMem()}
	d := diskSpace{fs: fs, dir: "log", reserve: reserve}
	for _, n := range []uint64{0, 1, 4096, 3 << 20} {
		fs.avail.Store(reserve + 2*n)
		if err := d.check(n); err != nil {
			t.Errorf("write of %d with exactly reserve+2×%d free = %v, want allowed", n, n, err)
		}
		fs.avail.Store(reserve + 2*n - 1)
		if err := d.check(n); !errors.Is(err, eventlog.ErrDiskFull) {
			t.Errorf("write of %d one byte short of reserve+2×%d = %v, want ErrDiskFull", n, n, err)
		}
	}
	fs.avail.Store(0)
	if err := (&diskSpace{fs: fs, dir: "log"}).check(1 << 30); err != nil {
		t.Errorf("check with no reserve = %v, want nil", err)
	}
}

// TestDiskReserveCountsTheBatch: the store's appends are checked with the
// size of what they write: an append of a 64 KiB input is refused, and
// writes nothing, while the free space is above the reserve by less than
// twice its size, and goes through once there is room for it.
func TestDiskReserveCountsTheBatch(t *testing.T) {
	const reserve = 1 << 20
	s, err := Open(t.TempDir(), WithDiskReserve(reserve, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs := &fakeFree{FS: vfs.Default}
	fs.avail.Store(1 << 40)
	s.space.fs = fs
	ctx := t.Context()
	id, err := s.Create(ctx, &eventlog.ExecutionCreated{Agent: "a"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	input := make([]byte, 64<<10)
	_, _ = rand.Read(input)          // no two chunks alike: the batch holds all of it
	fs.avail.Store(reserve + 64<<10) // room for one copy of it, not two
	_, err = s.Create(ctx, &eventlog.ExecutionCreated{Agent: "a", Input: input}, time.Now())
	if !errors.Is(err, eventlog.ErrDiskFull) {
		t.Fatalf("Create of a 64 KiB input with 64 KiB above the reserve = %v, want ErrDiskFull", err)
	}
	created := &eventlog.ExecutionCreated{Agent: "a", Input: input}
	if _, err := s.Append(ctx, id, 1, eventlog.Event{Time: time.Now(), Data: &eventlog.StepStarted{StepID: "s", StepKind: eventlog.StepTool,
		Target: "t", Args: input, Idempotency: eventlog.SafeToRetry, Attempt: 1}}); !errors.Is(err, eventlog.ErrDiskFull) {
		t.Fatalf("Append of 64 KiB args with 64 KiB above the reserve = %v, want ErrDiskFull", err)
	}
	if h, err := s.Head(ctx, id); err != nil || h != 1 {
		t.Fatalf("Head after the refused append = %d, %v; want 1", h, err)
	}
	fs.avail.Store(reserve + 4*64<<10)
	if _, err := s.Create(ctx, created, time.Now()); err != nil {
		t.Fatalf("Create with room for it = %v", err)
	}
}
