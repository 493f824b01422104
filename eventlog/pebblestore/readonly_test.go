package pebblestore_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/eventlog/pebblestore"
)

// A read-only store reads everything, refuses every write with
// ErrReadOnly, and changes no file of the folder, Close included.
func TestReadOnly(t *testing.T) {
	base, img := cleanLog(t)
	dir := filepath.Join(t.TempDir(), "log")
	base.write(t, dir)
	before := readFolder(t, dir)
	s, err := pebblestore.Open(dir, pebblestore.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	var id eventlog.ID
	for x := range img {
		id = x
		if got := events(t, s, x, 1); !eventsEqual(got, img[x]) {
			t.Errorf("execution %s: %s", x, diff(img[x], got))
		}
	}
	head := uint64(len(img[id]))
	writes := map[string]error{}
	_, writes["Create"] = s.Create(t.Context(), &eventlog.ExecutionCreated{Agent: "a"}, t0)
	_, writes["Append"] = s.Append(t.Context(), id, head, dispatch(1))
	_, writes["AppendUnsynced"] = s.AppendUnsynced(t.Context(), id, head, dispatch(1))
	_, writes["Fork"] = s.Fork(t.Context(), id, 1, nil, t0)
	for name, err := range writes {
		if !errors.Is(err, pebblestore.ErrReadOnly) {
			t.Errorf("%s on a read-only store = %v, want ErrReadOnly", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := sameFolder(t, dir, before); d != "" {
		t.Errorf("a read-only store changed the folder: %s", d)
	}
	// No folder, an empty one: not a log, and nothing is created.
	for _, d := range []string{filepath.Join(t.TempDir(), "none"), t.TempDir()} {
		if s, err := pebblestore.Open(d, pebblestore.ReadOnly()); !errors.Is(err, pebblestore.ErrNotALog) {
			if s != nil {
				s.Close()
			}
			t.Errorf("read-only Open(%s) = %v, want ErrNotALog", d, err)
		}
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("read-only Open created %d files in %s", len(entries), d)
		}
	}
}

// Readers share a log; a writer and a reader exclude each other, in one
// process or two.
func TestReadOnlyLocking(t *testing.T) {
	base, _ := cleanLog(t)
	dir := filepath.Join(t.TempDir(), "log")
	base.write(t, dir)
	r1, err := pebblestore.Open(dir, pebblestore.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := pebblestore.Open(dir, pebblestore.ReadOnly())
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if s, err := pebblestore.Open(dir); !errors.Is(err, pebblestore.ErrLocked) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("writer while readers hold the log = %v, want ErrLocked", err)
	}
	r1.Close()
	// r2 still holds it (closing r1 must not drop the process's lock).
	if out := holdInChild(t, dir, false); !strings.Contains(out, "in use") {
		t.Errorf("writer in another process while a reader holds the log: %q, want in use", out)
	}
	r2.Close()
	w, err := pebblestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := pebblestore.Open(dir, pebblestore.ReadOnly()); !errors.Is(err, pebblestore.ErrLocked) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("reader while a writer holds the log = %v, want ErrLocked", err)
	}
	w.Close()
	if out := holdInChild(t, dir, true); !strings.Contains(out, "ready") {
		t.Errorf("reader in another process with the log free: %q", out)
	}
}

// holdInChild opens dir in a child process (the test binary, see
// TestMain) and returns what it printed first.
func holdInChild(t *testing.T, dir string, readOnly bool) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	cmd.Env = append(os.Environ(), "PEBBLESTORE_TEST_OPEN="+mode+":"+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	_ = stdin.Close()
	_ = cmd.Wait()
	return line
}

// TestMain lets the test binary open a log in another process: with
// PEBBLESTORE_TEST_OPEN=rw:DIR or ro:DIR it opens DIR, prints "ready" or
// the error, and holds the log until its stdin closes.
func TestMain(m *testing.M) {
	if v := os.Getenv("PEBBLESTORE_TEST_OPEN"); v != "" {
		mode, dir, _ := strings.Cut(v, ":")
		var opts []pebblestore.Option
		if mode == "ro" {
			opts = append(opts, pebblestore.ReadOnly())
		}
		s, err := pebblestore.Open(dir, opts...)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A Fatalf of Pebble's on the caller's goroutine (a failed commit) does
// not exit the process: the call returns an error wrapping ErrFailed (and
// ErrDiskFull for a full disk), and the store refuses every write after.
func TestPebbleFatalDoesNotExit(t *testing.T) {
	s := openDir(t, filepath.Join(t.TempDir(), "log"))
	id := create(t, s, "a")
	err := pebblestore.PebbleFatal(s, fmt.Errorf("write 000004.log: %w", syscall.ENOSPC))
	if !errors.Is(err, pebblestore.ErrFailed) || !errors.Is(err, eventlog.ErrDiskFull) {
		t.Fatalf("Fatalf under guard = %v, want ErrFailed and ErrDiskFull", err)
	}
	if _, err := s.Append(t.Context(), id, 1, dispatch(1)); !errors.Is(err, pebblestore.ErrFailed) {
		t.Fatalf("Append after a fatal error = %v, want ErrFailed", err)
	}
	if got := events(t, s, id, 1); len(got) != 1 {
		t.Fatalf("%d events, want the 1 written before", len(got))
	}
}
