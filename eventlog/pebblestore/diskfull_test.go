package pebblestore_test

import (
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// smallDisk mounts a tmpfs of size bytes and returns its folder. It needs
// root; without it the test is skipped.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (mount -t tmpfs)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill writes a file of zeros that leaves about leave bytes free.
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for freeBytes(t, dir) > leave+int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
	return path
}

// A disk that fills up refuses appends with ErrDiskFull before Pebble
// meets the full disk (before, Pebble's "fatal commit error" exited the
// process): nothing acknowledged is lost, the store stays usable, a
// read-only Open works on the full disk, and once space is freed appends go
// on.
func TestDiskFull(t *testing.T) {
	const reserve, ballast = 16 << 20, 4 << 20
	mnt := smallDisk(t, "64m")
	dir := filepath.Join(mnt, "log")
	opt := pebblestore.WithDiskReserve(reserve, ballast)
	s, err := pebblestore.Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }() // a failed test must not leave the mount busy
	if fi, err := os.Stat(filepath.Join(dir, "FORKLINE-BALLAST")); err != nil || fi.Size() != ballast {
		t.Fatalf("ballast: %v, %v", fi, err)
	}
	filler := fill(t, mnt, reserve+6<<20)

	// Executions with a 64 KiB input, each with three more events, until
	// the disk is full.
	input := make([]byte, 64<<10)
	acked := map[eventlog.ID]uint64{}
	var full error
	for i := 0; i < 2000 && full == nil; i++ {
		_, _ = rand.Read(input) // incompressible: Pebble compresses its tables
		id, err := s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: "filler", Input: input}, t0)
		if err != nil {
			full = err
			break
		}
		acked[id] = 1
		for seq := uint64(1); seq < 4; seq++ {
			if _, err := s.Append(t.Context(), id, seq, dispatch(seq)); err != nil {
				full = err
				break
			}
			acked[id] = seq + 1
		}
	}
	if !errors.Is(full, eventlog.ErrDiskFull) {
		t.Fatalf("the disk did not fill, or the error is not ErrDiskFull: %v", full)
	}
	t.Logf("full after %d executions: %v", len(acked), full)

	// The store still answers, and refuses again.
	for id, head := range acked {
		if got, err := s.Head(t.Context(), id); err != nil || got != head {
			t.Fatalf("Head(%s) = %d, %v; want %d", id, got, err, head)
		}
		if _, err := s.Append(t.Context(), id, head, dispatch(head)); !errors.Is(err, eventlog.ErrDiskFull) {
			t.Fatalf("Append on the full disk = %v, want ErrDiskFull", err)
		}
		break
	}
	// Close has room to flush: it drops the ballast.
	if err := s.Close(); err != nil {
		t.Fatalf("Close on the full disk: %v", err)
	}
	// A read-only Open writes nothing: it works on the full disk.
	ro, err := pebblestore.Open(dir, pebblestore.ReadOnly())
	if err != nil {
		t.Fatalf("read-only Open on the full disk: %v", err)
	}
	checkAcked(t, ro, acked)
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(dir, opt)
	if err != nil {
		t.Fatalf("Open after freeing space: %v", err)
	}
	checkAcked(t, s, acked)
	for id, head := range acked {
		if _, err := s.Append(t.Context(), id, head, dispatch(head)); err != nil {
			t.Fatalf("Append after freeing space: %v", err)
		}
		acked[id] = head + 1
	}
	checkAcked(t, s, acked)
}

// checkAcked checks that every execution holds its acknowledged events.
func checkAcked(t *testing.T, s *pebblestore.Store, acked map[eventlog.ID]uint64) {
	t.Helper()
	for id, head := range acked {
		evs := events(t, s, id, 1)
		if uint64(len(evs)) != head {
			t.Fatalf("execution %s: %d events, %d acknowledged", id, len(evs), head)
		}
		if _, ok := evs[0].Data.(*eventlog.ExecutionCreated); !ok {
			t.Fatalf("execution %s: first event %s", id, evs[0].Kind())
		}
		for i, ev := range evs[1:] {
			if d, ok := ev.Data.(*eventlog.DispatchStarted); !ok || d.Dispatch != uint64(i+1) {
				t.Fatalf("execution %s seq %d: %s %+v", id, ev.Seq, ev.Kind(), ev.Data)
			}
		}
	}
}
