package pebblestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/forkline/forkline/eventlog"
)

// markerName is forkline's own file in a log folder, written once the log's
// format key is durable. A folder that has it holds a log that was created:
// whatever else is missing is damage, never a reason to create a new log.
const markerName = "FORKLINE"

// markerText is the content of markerName.
const markerText = "forkline event log (pebblestore); do not delete\n"

// pebbleFormat is the Pebble format of new logs, to which Open also upgrades
// older ones: from FormatWALSyncChunks on, Pebble's write-ahead log records
// how far it was synced, so that recovery tells a torn tail (tolerated) from
// damage before a synced record (an error); FormatTableFormatV6 adds a
// checksum to every table's footer.
const pebbleFormat = pebble.FormatTableFormatV6

// Open opens (creating it if needed) the log in dir, or an in-memory log when
// dir is "". A folder that holds other files is refused with ErrNotALog; a
// log opened elsewhere gives ErrLocked; a folder whose log was created once
// and lost files (its MANIFEST) gives an error wrapping eventlog.ErrCorrupt
// and is left as it is. On disk, Open refuses (eventlog.ErrDiskFull) when
// the free space is under the reserve (see WithDiskReserve).
//
// A writable open of a folder gives it its identity (ReadIdentity) when it
// has none yet: a random ID, written synced beside the log, that names the
// folder wherever it is moved on its host (DESIGN §15½.2).
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{reserve: DefaultDiskReserve, ballast: DefaultBallast}
	for _, opt := range opts {
		opt(&o)
	}
	f := &faults{}
	s := &Store{dir: dir, write: pebble.Sync, readOnly: o.readOnly, faults: f, release: func() {}, chunkAbove: DefaultChunkAbove,
		acceptWALLoss: o.acceptWALLoss}
	if o.chunkSet {
		s.chunkAbove = o.chunkAbove
	}
	if o.noSync {
		s.write = pebble.NoSync
	}
	s.mu.execs = make(map[eventlog.ID]*execution)
	popts := &pebble.Options{
		Logger:             pebbleLogger{f},
		EventListener:      f.listener(),
		FormatMajorVersion: pebbleFormat,
		// Table stats would compare table sizes with the MANIFEST's in the
		// background and call Fatalf; checkTables does it at Open instead.
		DisableTableStats: true,
	}
	name := dir
	var wals *walRecorder
	existing := false // dir held a log before this open
	if dir == "" {
		if o.readOnly {
			return nil, fmt.Errorf("%w: ReadOnly needs a folder: an in-memory log starts empty", eventlog.ErrInvalid)
		}
		popts.FS, name = vfs.NewMem(), "mem"
		if o.mem != nil { // a Clone: the checkpoint in its source's memory
			popts.FS, name = o.mem, o.memName
			s.release = func() { _ = o.mem.RemoveAll(o.memName) }
		}
		s.mem = popts.FS
	} else {
		wals = &walRecorder{}
		var err error
		existing, err = checkFolder(dir, o.readOnly)
		if err != nil {
			return nil, err
		}
		if s.release, err = claimDir(dir, o.readOnly); err != nil {
			return nil, err
		}
		if o.readOnly {
			popts.ReadOnly = true
			popts.ErrorIfNotExists = true
			popts.FormatMajorVersion = pebble.FormatDefault // never upgraded: that writes
			popts.FS = readOnlyFS{FS: vfs.Default, wals: wals}
		} else {
			popts.ErrorIfNotExists = existing
			s.space = diskSpace{fs: vfs.Default, dir: dir, reserve: uint64(o.reserve), ballast: uint64(o.ballast)}
			f.noSpace = s.space.dropBallast
			if existing {
				// Check the files as a read-only open sees them, then
				// drop the clean-close record: from here on Pebble may
				// change the tables.
				if err := s.verifyFolder(); err != nil {
					s.release()
					return nil, err
				}
				if err := removeClosed(dir); err != nil {
					s.release()
					return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
				}
				s.space.releaseBallast()
			}
			if err := s.space.check(0); err != nil {
				s.release()
				return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
			}
			mark, err := newWALMark(dir, o.acceptWALLoss)
			if err != nil {
				s.release()
				return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
			}
			s.mark = mark
			rel := s.release
			s.release = func() { mark.close(); rel() }
			popts.FS = walMarkFS{FS: vfs.Default, m: mark}
		}
	}
	var db *pebble.DB
	err := s.guard(func() (err error) {
		db, err = pebble.Open(name, popts)
		return err
	})
	if err != nil {
		s.release()
		return nil, s.openErr(err)
	}
	s.db = db
	if o.readOnly {
		err := checkTables(db, dir)
		if err == nil {
			err = wals.check()
		}
		if err == nil && !o.acceptWALLoss {
			err = checkWALMark(dir)
		}
		if err != nil {
			_ = s.guard(db.Close)
			s.release()
			return nil, err
		}
	}
	if err := s.checkFormat(); err != nil {
		_ = s.guard(db.Close)
		s.release()
		return nil, err
	}
	if !o.readOnly {
		// The write-ahead log Pebble opened with was created before Open
		// raised the format to pebbleFormat (a new log starts at Pebble's
		// oldest): a flush rotates it, so that every record written from
		// now on carries its synced offset.
		if err := s.guard(db.Flush); err != nil {
			_ = s.guard(db.Close)
			s.release()
			return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
		}
	}
	if dir != "" && !o.readOnly {
		err := ensureIdentity(dir, existing)
		if err == nil {
			err = writeMarker(dir)
		}
		if err != nil {
			_ = s.guard(db.Close)
			s.release()
			return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
		}
		s.space.ensureBallast()
	}
	return s, nil
}

// checkFolder reports whether dir holds a log (its marker or Pebble's files).
// It refuses a folder that exists, is not empty and has neither: opening it
// would scatter a database among someone else's files. A read-only open
// also refuses a missing or empty folder.
func checkFolder(dir string, readOnly bool) (existing bool, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if readOnly {
			return false, fmt.Errorf("%w: %s does not exist", ErrNotALog, dir)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	if len(entries) == 0 {
		if readOnly {
			return false, fmt.Errorf("%w: %s is empty", ErrNotALog, dir)
		}
		return false, nil
	}
	var ours, pebbles int
	for _, e := range entries {
		switch n := e.Name(); {
		case n == markerName:
			ours++
		case strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "OPTIONS-") || strings.HasPrefix(n, "marker."):
			pebbles++
		}
	}
	if ours == 0 && pebbles == 0 {
		return false, fmt.Errorf("%w: %s holds %d files and no log", ErrNotALog, dir, len(entries))
	}
	return true, nil
}

// verifyFolder opens the existing log of s read-only and checks its tables
// (checkTables), before a read-write open.
func (s *Store) verifyFolder() error {
	var db *pebble.DB
	wals := &walRecorder{}
	err := s.guard(func() (err error) {
		db, err = pebble.Open(s.dir, &pebble.Options{
			ReadOnly: true, ErrorIfNotExists: true, FS: readOnlyFS{FS: vfs.Default, wals: wals},
			Logger: pebbleLogger{s.faults}, EventListener: s.faults.listener(), DisableTableStats: true,
		})
		return err
	})
	if err != nil {
		return s.openErr(err)
	}
	err = checkTables(db, s.dir)
	if err == nil {
		err = wals.check()
	}
	if err == nil && !s.acceptWALLoss {
		err = checkWALMark(s.dir)
	}
	if err == nil {
		// Before Pebble writes anything: a foreign database, a log that
		// lost its data, a table whose first block is damaged. (An empty
		// database, a log whose creation crashed, is made a log.)
		_, err = s.checkFormatOf(db, false)
	}
	if cerr := s.guard(db.Close); err == nil && cerr != nil {
		err = fmt.Errorf("pebblestore: open %s: %w", s.dir, cerr)
	}
	return err
}

// isLockError reports whether err is Pebble's (or sharedLock's) report of a
// lock held elsewhere. A failure to open the lock file itself (permission
// denied, a read-only filesystem) is not one: fcntl's own errors come bare,
// the open's come in an *fs.PathError.
func isLockError(err error) bool {
	if strings.Contains(err.Error(), "lock held by current process") {
		return true
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EACCES)
}

// openErr classifies an error of pebble.Open.
func (s *Store) openErr(err error) error {
	switch {
	case isLockError(err):
		return fmt.Errorf("%w: %s: %v", ErrLocked, s.dir, err)
	case errors.Is(err, pebble.ErrDBDoesNotExist):
		// checkFolder saw the marker or Pebble's files: the log was created.
		return &eventlog.CorruptionError{What: "log " + s.dir, Err: fmt.Errorf(
			"its MANIFEST is missing (the log was created before: its files are left as they are): %w", err)}
	case strings.Contains(err.Error(), "object size mismatch") || strings.Contains(err.Error(), "unknown to the objstorage provider"):
		// Pebble checks its tables' sizes at Open, without marking the
		// error as corruption.
		return &eventlog.CorruptionError{What: "log " + s.dir + ": " + tableProblem(err.Error()), Err: err}
	case pebble.IsCorruptionError(err):
		return &eventlog.CorruptionError{What: "log " + s.dir + ": " + s.damaged(err), Err: err}
	case errors.Is(err, errWriteRefused):
		return fmt.Errorf("pebblestore: open %s read-only: the log needs a repair that writes (open it once for writing): %w", s.dir, err)
	}
	return fmt.Errorf("pebblestore: open %s: %w", s.dir, err)
}

var (
	sizeMismatch = regexp.MustCompile(`(\d+): object size mismatch \(.*\): (\d+) \(disk\) != (\d+) \(MANIFEST\)`)
	tableUnknown = regexp.MustCompile(`file (\d+) \(type sstable\) unknown`)
)

// tableProblem says which table Pebble's Open found missing or cut short.
func tableProblem(msg string) string {
	if m := sizeMismatch.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("table %s.sst has %s bytes, the MANIFEST says %s", m[1], m[2], m[3])
	}
	if m := tableUnknown.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("table %s.sst is missing (the MANIFEST lists it)", m[1])
	}
	return "damaged table"
}

// damaged names the files a corruption error of Pebble is about.
func (s *Store) damaged(err error) string {
	if files := s.faults.corruptFiles(); len(files) > 0 {
		return "damaged file " + strings.Join(files, ", ")
	}
	msg := err.Error()
	var suffix, kind string
	switch {
	case strings.Contains(msg, "WAL") || strings.Contains(msg, "wal"):
		suffix, kind = ".log", "write-ahead log"
	case strings.Contains(msg, "MANIFEST") || strings.Contains(msg, "manifest"):
		suffix, kind = "MANIFEST-", "MANIFEST"
	default:
		return "damaged files"
	}
	var names []string
	if entries, err := os.ReadDir(s.dir); err == nil {
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), suffix) || strings.HasPrefix(e.Name(), suffix) {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return "damaged " + kind + " " + strings.Join(names, ", ")
}

// hasFile reports whether dir holds a file name.
func hasFile(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// writeMarker writes the folder's marker once, durably.
func writeMarker(dir string) error {
	if b, err := os.ReadFile(filepath.Join(dir, markerName)); err == nil && string(b) == markerText {
		return nil
	}
	return writeFileSync(dir, markerName, []byte(markerText))
}

// checkFormat checks the format key, writing it in a new log.
func (s *Store) checkFormat() error {
	missing, err := s.checkFormatOf(s.db, s.readOnly)
	if err != nil {
		return err
	}
	if s.migrate {
		return s.migrateFormat1()
	}
	if !missing && !s.upgrade {
		return nil
	}
	if err := s.commitFormat(); err != nil {
		return fmt.Errorf("pebblestore: write format: %w", err)
	}
	return nil
}

// checkFormatOf checks the format key of db. It reports missing for an
// empty database that may become a new log (only when readOnly is false).
func (s *Store) checkFormatOf(db *pebble.DB, readOnly bool) (missing bool, err error) {
	var v []byte
	err = s.guard(func() error {
		val, closer, err := db.Get(metaFormatKey)
		if err == nil {
			v = slices.Clone(val)
			return closer.Close()
		}
		return err
	})
	if err != nil && !errors.Is(err, pebble.ErrNotFound) {
		return false, s.readErr(eventlog.ID{}, "format key", err)
	}
	if err == nil {
		if len(v) == 1 && v[0] == 1 {
			// Format 1: migrated by a read-write open (checkFormat).
			if readOnly {
				return false, fmt.Errorf("pebblestore: %s: store format 1: open it read-write once to migrate it to format %d", s.dir, storeFormat)
			}
			s.migrate = true
			return false, nil
		}
		if len(v) == 1 && v[0] == 2 && storeFormat == 3 {
			// Format 3 only adds tables (tombstones) to format 2: a
			// read-write open writes the new format byte, a read-only one
			// reads it as it is.
			s.upgrade = !readOnly
			return false, nil
		}
		if len(v) != 1 || v[0] != storeFormat {
			return false, fmt.Errorf("pebblestore: %s: store format %v, this build reads [1], [2] and [%d]", s.dir, v, storeFormat)
		}
		return false, nil
	}
	// A new log, a log that lost its data, or a Pebble database not ours.
	it, err := db.NewIter(nil)
	if err != nil {
		return false, s.readErr(eventlog.ID{}, "log", err)
	}
	nonEmpty := it.First()
	ierr := it.Error()
	_ = it.Close()
	switch {
	case ierr != nil:
		return false, s.readErr(eventlog.ID{}, "log", ierr)
	case s.dir != "" && hasFile(s.dir, markerName):
		return false, &eventlog.CorruptionError{What: "log " + s.dir, Err: errors.New("its format key is missing: the log was created before and lost its data")}
	case nonEmpty:
		return false, fmt.Errorf("%w: %s is a Pebble database without forkline's format key", ErrNotALog, s.dir)
	case readOnly:
		return false, fmt.Errorf("%w: %s holds an empty Pebble database", ErrNotALog, s.dir)
	}
	return true, nil
}

// commitFormat writes the format key of a new log, synced.
func (s *Store) commitFormat() error {
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(metaFormatKey, []byte{storeFormat}, nil)
	return s.commit(b, pebble.Sync)
}

// closeTimeout bounds the wait for Pebble's Close of a failed store, whose
// background goroutine may be parked by Fatalf.
const closeTimeout = 5 * time.Second

// Close closes the log. Operations still running finish first; operations
// started after Close began fail with an error wrapping eventlog.ErrClosed.
// Close must not be called from inside a loop over Events, List or
// ResourceHistory of the same store: it would wait for that loop.
//
// A store opened for writing flushes its memtable to a table first, so that
// after a clean Close the write-ahead log holds nothing a reopen needs.
func (s *Store) Close() error {
	s.life.Lock()
	if s.life.closing {
		s.life.Unlock()
		return eventlog.ErrClosed
	}
	s.life.closing = true
	s.life.Unlock()
	s.life.active.Wait()
	defer s.release()
	if ferr := s.faults.err(); ferr != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = s.guard(s.db.Close)
		}()
		select {
		case <-done:
		case <-time.After(closeTimeout):
		}
		return fmt.Errorf("pebblestore: close: %w", ferr)
	}
	var ferr error
	if !s.readOnly {
		s.space.releaseBallast()
		ferr = s.guard(func() error { return s.db.Flush() })
	}
	if err := s.guard(s.db.Close); err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	if ferr != nil {
		return fmt.Errorf("pebblestore: close: flush: %w", ferr)
	}
	if s.mark != nil {
		// Everything is in tables: no write-ahead log is needed any more.
		if err := s.mark.clear(); err != nil {
			return fmt.Errorf("pebblestore: close: write %s: %w", walMarkName, err)
		}
	}
	if !s.readOnly && s.dir != "" {
		if err := writeClosed(s.dir); err != nil {
			return fmt.Errorf("pebblestore: close: write %s: %w", closedName, err)
		}
	}
	return nil
}
