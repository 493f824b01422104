package pebblestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

// ErrFailed is returned by every operation of a store after Pebble reported
// a fault it cannot continue from (a failed commit, a failed MANIFEST
// write): the process goes on, the store must be closed and opened again.
var ErrFailed = errors.New("pebblestore: log failed")

// faults collects what Pebble reports through its logger and event
// listener, so that no report of Pebble exits the process.
type faults struct {
	mu         sync.Mutex
	failed     error    // set by Fatalf: the store refuses every operation
	corruption []string // files Pebble reported corrupt, newest last
	stderr     int      // background errors printed so far
	noSpace    func()   // called when Pebble's background work meets a full disk
}

// fail records the first fatal fault.
func (f *faults) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		f.failed = err
	}
}

// err returns the fatal fault, wrapping ErrFailed, or nil.
func (f *faults) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		return nil
	}
	if errors.Is(f.failed, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w: %w", ErrFailed, eventlog.ErrDiskFull, f.failed)
	}
	return fmt.Errorf("%w: %w", ErrFailed, f.failed)
}

// corruptFiles returns the base names of the files Pebble reported corrupt.
func (f *faults) corruptFiles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.corruption...)
}

// maxStderrLines bounds the background errors printed by one store: a
// fault that repeats (a full disk) must not flood the terminal.
const maxStderrLines = 20

// printf prints a line of Pebble's to standard error, up to maxStderrLines.
func (f *faults) printf(format string, args ...any) {
	f.mu.Lock()
	n := f.stderr
	f.stderr++
	f.mu.Unlock()
	switch {
	case n < maxStderrLines:
		fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
	case n == maxStderrLines:
		fmt.Fprintln(os.Stderr, "pebble: further errors of this log are not printed")
	}
}

// listener returns the event listener of the store: corruption is recorded
// (and returned by the read that met it) instead of Pebble's default, which
// calls Logger.Fatalf.
func (f *faults) listener() *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			f.mu.Lock()
			if name := filepath.Base(info.Path); !slices.Contains(f.corruption, name) {
				f.corruption = append(f.corruption, name)
			}
			f.mu.Unlock()
		},
		BackgroundError: func(err error) {
			if errors.Is(err, syscall.ENOSPC) && f.noSpace != nil {
				f.noSpace()
			}
			if pebble.IsCorruptionError(err) {
				return // DataCorruption recorded it: writes and reads report it
			}
			f.printf("background error: %v", err)
		},
	}
}

// pebbleLogger is the Logger given to Pebble. It never exits the process:
// Fatalf records the fault, then panics with a fatalPanic when it runs under
// Store.guard (which turns it into an error) and otherwise, on one of
// Pebble's background goroutines, parks that goroutine for good, because a
// panic there would end the process as surely as os.Exit.
type pebbleLogger struct{ f *faults }

func (pebbleLogger) Infof(string, ...any) {}

func (l pebbleLogger) Errorf(format string, args ...any) { l.f.printf(format, args...) }

func (l pebbleLogger) Fatalf(format string, args ...any) {
	err := fmt.Errorf("pebble: "+format, args...)
	for _, a := range args {
		if cause, ok := a.(error); ok {
			err = fmt.Errorf("%w (%w)", err, cause)
			break
		}
	}
	l.f.fail(err)
	if guarded() {
		panic(fatalPanic{err})
	}
	l.f.printf("%v; this log refuses every operation from now on", err)
	select {}
}

// fatalPanic carries a Fatalf of Pebble's up to Store.guard.
type fatalPanic struct{ err error }

// guardName is the name of Store.guard in stack traces.
const guardName = "eventlog/pebblestore.(*Store).guard"

// guarded reports whether the calling goroutine runs under Store.guard.
func guarded() bool {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		if strings.HasSuffix(fr.Function, guardName) {
			return true
		}
		if !more {
			return false
		}
	}
}

// guard runs fn, a call into Pebble that may end in Logger.Fatalf, and
// returns the fault as an error (wrapping ErrFailed) instead of dying.
func (s *Store) guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fp, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			err = s.faults.err()
			if err == nil { // not possible: Fatalf records before it panics
				err = fmt.Errorf("%w: %w", ErrFailed, fp.err)
			}
		}
	}()
	return fn()
}

// commit commits b under guard, after checking that the store has not
// failed and that the disk has room for it.
func (s *Store) commit(b *pebble.Batch, wo *pebble.WriteOptions) error {
	if err := s.faults.err(); err != nil {
		return err
	}
	if err := s.space.check(uint64(b.Len())); err != nil {
		return err
	}
	return s.guard(func() error { return b.Commit(wo) })
}

// writable returns the error of a write to a read-only or failed store, or
// to one Pebble found a damaged file in: its compactions fail on that file,
// and a log that is known to be damaged takes no more writes.
func (s *Store) writable() error {
	if s.readOnly {
		return fmt.Errorf("%w: %s was opened with ReadOnly", ErrReadOnly, s.dir)
	}
	if err := s.faults.err(); err != nil {
		return err
	}
	if files := s.faults.corruptFiles(); len(files) > 0 {
		return &eventlog.CorruptionError{What: "log " + s.dir + ": damaged file " + strings.Join(files, ", "),
			Err: errors.New("pebble found it damaged; the log takes no more writes")}
	}
	return nil
}

// readErr classifies an error of a read of Pebble: corruption becomes a
// *eventlog.CorruptionError naming the execution (zero for a store-wide
// read), what was being read and the damaged files Pebble named.
func (s *Store) readErr(id eventlog.ID, what string, err error) error {
	if pebble.IsCorruptionError(err) || errors.Is(err, eventlog.ErrCorrupt) {
		if files := s.faults.corruptFiles(); len(files) > 0 {
			what += " (damaged file " + strings.Join(files, ", ") + ")"
		}
		var ce *eventlog.CorruptionError
		if errors.As(err, &ce) {
			return err
		}
		return &eventlog.CorruptionError{Execution: id, What: what, Err: err}
	}
	if ferr := s.faults.err(); ferr != nil {
		return fmt.Errorf("%w (%v)", ferr, err)
	}
	if id.IsZero() {
		return fmt.Errorf("pebblestore: %s: %w", what, err)
	}
	return fmt.Errorf("pebblestore: execution %s: %s: %w", id, what, err)
}
