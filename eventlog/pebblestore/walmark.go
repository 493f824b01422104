package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/forkline/forkline/eventlog"
)

// The synced position of the write-ahead log (issue 30 item 8). Pebble
// replays a log up to its first bad record and takes the rest for a torn
// tail, and it replays whatever log files it finds: a log cut short inside
// its synced part, or deleted, after a crash gives a shorter history
// without a word. So the store keeps a side record, FORKLINE-WAL: the
// newest (log number, byte offset) it saw the log synced to. The store's
// filesystem (walMarkFS) counts the bytes written to each log file and
// learns the offset from each completed sync; the sync path wakes a
// goroutine that rewrites the record and fsyncs it, at most every
// walMarkEvery (the log's own sync never waits for it). So a synced
// position is recorded at most walMarkEvery plus one write of the record
// after its sync: only the appends acknowledged that recently before a
// crash can vanish unreported; everything before is checked.
//
// Open checks the record when the folder was not closed cleanly or
// anyway (the check is one read of one log): the log it names must exist
// and its records must read, as Pebble's recovery reads them, at least to
// the recorded offset. A log whose data Pebble flushed may be deleted or
// recycled: before the filesystem removes or reuses the log the record
// names, the record is rewritten to offset 0 (nothing to check), synced.
// A mismatch is an error wrapping eventlog.ErrCorrupt; AcceptWALLoss opens
// the log with what it holds.
//
// The file holds two 32-byte slots, written alternately, so a torn write
// of one leaves the other: magic "FLW1", a counter, the log number and the
// offset (little-endian uint64s), and a CRC-32C of the 28 bytes before it.
// The slot with the higher counter among the valid ones is the record.

// walLossHint says how to proceed when the check fails.
const walLossHint = "acknowledged appends were lost; to open the log with what it holds, accept the loss " +
	"(pebblestore.AcceptWALLoss; forkline --accept-wal-loss), or restore the folder from a copy"

// walMarkName is the side record's file in the log folder.
const walMarkName = "FORKLINE-WAL"

// walMarkEvery is how often at most the side record is rewritten (a
// variable for tests only).
var walMarkEvery = 100 * time.Millisecond

const (
	walMarkSlot  = 32
	walMarkMagic = "FLW1"
)

// AcceptWALLoss opens a log whose write-ahead log does not reach the
// position its side record (FORKLINE-WAL) says it was synced to — cut
// short or deleted after a crash — with what it holds: the acknowledged
// appends past the damage are lost for good. A writable open then starts a
// new record. Without it, such an Open fails with an error wrapping
// eventlog.ErrCorrupt that names the log and the offsets.
func AcceptWALLoss() Option { return func(o *options) { o.acceptWALLoss = true } }

// walPos is a position in the write-ahead log: a log number and a byte
// offset in it.
type walPos struct{ log, off uint64 }

// encodeWALMark encodes slot content for counter n and position p.
func encodeWALMark(n uint64, p walPos) []byte {
	b := make([]byte, 0, walMarkSlot)
	b = append(b, walMarkMagic...)
	b = binary.LittleEndian.AppendUint64(b, n)
	b = binary.LittleEndian.AppendUint64(b, p.log)
	b = binary.LittleEndian.AppendUint64(b, p.off)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, walCRC))
}

// decodeWALMark decodes one slot; ok is false for an empty or torn one.
func decodeWALMark(b []byte) (n uint64, p walPos, ok bool) {
	if len(b) != walMarkSlot || string(b[:4]) != walMarkMagic ||
		binary.LittleEndian.Uint32(b[28:]) != crc32.Checksum(b[:28], walCRC) {
		return 0, walPos{}, false
	}
	return binary.LittleEndian.Uint64(b[4:]), walPos{binary.LittleEndian.Uint64(b[12:]), binary.LittleEndian.Uint64(b[20:])}, true
}

// readWALMark reads dir's side record: ok is false when it has none (an
// older log, or one created before its first sync).
func readWALMark(dir string) (n uint64, p walPos, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, walMarkName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, walPos{}, false, nil
	}
	if err != nil {
		return 0, walPos{}, false, fmt.Errorf("pebblestore: read %s: %w", walMarkName, err)
	}
	for i := 0; i+walMarkSlot <= len(data) && i < 2*walMarkSlot; i += walMarkSlot {
		if sn, sp, valid := decodeWALMark(data[i : i+walMarkSlot]); valid && (!ok || sn > n) {
			n, p, ok = sn, sp, true
		}
	}
	return n, p, ok, nil
}

// checkWALMark checks that the write-ahead log named by dir's side record
// exists and reads to the recorded offset.
func checkWALMark(dir string) error {
	_, p, ok, err := readWALMark(dir)
	if err != nil || !ok || p.off == 0 {
		return err
	}
	name := fmt.Sprintf("%06d.log", p.log)
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return &eventlog.CorruptionError{What: "write-ahead log " + name, Err: fmt.Errorf(
			"it is missing, and %s says it was synced to byte %d: %s", walMarkName, p.off, walLossHint)}
	}
	if err != nil {
		return fmt.Errorf("pebblestore: read %s: %w", name, err)
	}
	if end := walReplayEnd(data, p.log); end < int64(p.off) {
		return &eventlog.CorruptionError{What: "write-ahead log " + name, Err: fmt.Errorf(
			"its records read to byte %d of %d, and %s says it was synced to byte %d: %s", end, len(data), walMarkName, p.off, walLossHint)}
	}
	return nil
}

// walReplayEnd returns where Pebble's recovery stops reading the log data
// of number num: its end when every record reads (the end-of-log trailer a
// closed log ends with included), else the start of the first bad record.
func walReplayEnd(data []byte, num uint64) int64 {
	r := newRecordReader(record.NewReader, bytes.NewReader(data), num)
	for {
		start := r.Offset()
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		if errors.Is(err, io.EOF) {
			return int64(len(data))
		}
		if err != nil {
			return start
		}
	}
}

// walMark keeps the side record of a writable store on disk. The sync
// path only notes the newest synced position (synced) and, at most every
// walMarkEvery, wakes a goroutine that writes and fsyncs the record: the
// write-ahead log never waits for the side file's fsync.
type walMark struct {
	dir   string
	every time.Duration // walMarkEvery when the store opened

	// wmu serializes the record's writes and guards what is on disk.
	wmu sync.Mutex
	f   *os.File // opened at the first write
	n   uint64   // the counter of the record on disk
	rec walPos   // the position on disk
	err error    // the first write error: the record stops moving

	// mu guards the newest synced position and the write's schedule.
	mu  sync.Mutex
	cur walPos // the newest synced position seen
	due bool   // a write is asked for (kick holds the ask)

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

// newWALMark loads dir's record and starts its writer; reset starts a new
// record (AcceptWALLoss).
func newWALMark(dir string, reset bool) (*walMark, error) {
	m := &walMark{dir: dir, every: walMarkEvery, kick: make(chan struct{}, 1), done: make(chan struct{})}
	n, p, ok, err := readWALMark(dir)
	if err != nil {
		return nil, err
	}
	if ok {
		m.n, m.rec, m.cur = n, p, p
	}
	if reset && ok && p.off != 0 {
		m.cur = walPos{}
		if err := m.writeLocked(m.cur); err != nil {
			_ = m.closeFile()
			return nil, err
		}
	}
	m.wg.Add(1)
	go m.loop()
	return m, nil
}

// synced notes, from the sync path, that log num was synced to off, and
// asks the writer for a write. It never waits for one.
func (m *walMark) synced(num, off uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if num < m.cur.log || num == m.cur.log && off <= m.cur.off {
		return
	}
	m.cur = walPos{num, off}
	if !m.due {
		m.due = true
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// loop writes the record when asked, at most every walMarkEvery, until
// close: a position synced while it waits is written when the wait ends.
func (m *walMark) loop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.kick:
		case <-m.done:
			return
		}
		m.write()
		t := time.NewTimer(m.every)
		select {
		case <-t.C:
		case <-m.done:
			t.Stop()
			return
		}
	}
}

// write writes the newest synced position. A sync noted after it took the
// position asks again.
func (m *walMark) write() {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	p := m.cur
	m.due = false
	m.mu.Unlock()
	if m.err == nil && p != m.rec {
		m.err = m.writeLocked(p)
	}
}

// retire is called before log num is removed or reused: its data is in
// tables, so the record must not ask for it any more. It writes the record
// at once when it names num.
func (m *walMark) retire(num uint64) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	if m.cur.log == num {
		m.cur.off = 0
	}
	p := m.cur
	m.mu.Unlock()
	if m.rec.log == num && m.rec.off != 0 && m.err == nil {
		m.err = m.writeLocked(p)
	}
}

// clear records that no log needs checking: Close calls it once every
// log's data is in tables.
func (m *walMark) clear() error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	m.cur = walPos{}
	m.mu.Unlock()
	if m.rec == (walPos{}) {
		return nil
	}
	return m.writeLocked(walPos{})
}

// writeLocked writes p into the slot after the current one and syncs it.
// m.wmu is held.
func (m *walMark) writeLocked(p walPos) error {
	if m.f == nil {
		f, err := os.OpenFile(filepath.Join(m.dir, walMarkName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if d, err := os.Open(m.dir); err == nil {
			_ = d.Sync() // the new file's name
			_ = d.Close()
		}
		m.f = f
	}
	n := m.n + 1
	if _, err := m.f.WriteAt(encodeWALMark(n, p), int64(n%2)*walMarkSlot); err != nil {
		return err
	}
	if err := m.f.Sync(); err != nil {
		return err
	}
	m.n, m.rec = n, p
	return nil
}

// close stops the writer and closes the record's file.
func (m *walMark) close() {
	select {
	case <-m.done:
		return
	default:
	}
	close(m.done)
	m.wg.Wait()
	m.wmu.Lock()
	defer m.wmu.Unlock()
	_ = m.closeFile()
}

// closeFile closes the record's file if it is open. m.wmu is held, or m
// is not shared yet.
func (m *walMark) closeFile() error {
	if m.f == nil {
		return nil
	}
	err := m.f.Close()
	m.f = nil
	return err
}

// walMarkFS is the filesystem of a writable store on disk: it tracks the
// write-ahead log files for m and retires a log before it is removed or
// reused.
type walMarkFS struct {
	vfs.FS
	m *walMark
}

func (f walMarkFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.track(name, file, err)
}

func (f walMarkFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if num, ok := walNum(oldname); ok && filepath.Ext(oldname) == ".log" {
		f.m.retire(num)
	}
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.track(newname, file, err)
}

func (f walMarkFS) Remove(name string) error {
	if num, ok := walNum(name); ok && filepath.Ext(name) == ".log" {
		f.m.retire(num)
	}
	return f.FS.Remove(name)
}

func (f walMarkFS) Rename(oldname, newname string) error {
	if num, ok := walNum(oldname); ok && filepath.Ext(oldname) == ".log" {
		f.m.retire(num)
	}
	return f.FS.Rename(oldname, newname)
}

// track wraps a newly created write-ahead log file.
func (f walMarkFS) track(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || filepath.Ext(name) != ".log" {
		return file, err
	}
	num, ok := walNum(name)
	if !ok {
		return file, nil
	}
	return &walFile{File: file, m: f.m, num: num}, nil
}

// walFile counts the bytes written to a write-ahead log file and reports
// each completed sync to its walMark.
type walFile struct {
	vfs.File
	m       *walMark
	num     uint64
	written atomic.Int64
}

func (w *walFile) Write(p []byte) (int, error) {
	n, err := w.File.Write(p)
	w.written.Add(int64(n))
	return n, err
}

func (w *walFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	for {
		old := w.written.Load()
		if off+int64(n) <= old || w.written.CompareAndSwap(old, off+int64(n)) {
			break
		}
	}
	return n, err
}

func (w *walFile) Sync() error {
	off := w.written.Load()
	if err := w.File.Sync(); err != nil {
		return err
	}
	w.m.synced(w.num, uint64(off))
	return nil
}

func (w *walFile) SyncData() error {
	off := w.written.Load()
	if err := w.File.SyncData(); err != nil {
		return err
	}
	w.m.synced(w.num, uint64(off))
	return nil
}

func (w *walFile) SyncTo(length int64) (bool, error) {
	off := w.written.Load()
	full, err := w.File.SyncTo(length)
	if err == nil && full {
		w.m.synced(w.num, uint64(off))
	}
	return full, err
}
