package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/forkline/forkline/eventlog"
)

// Pebble replays a write-ahead log up to its first bad record and takes
// what follows for the torn tail of a crash. Its chunks record how far the
// log was synced when they were written (FormatWALSyncChunks), but Pebble
// looks for such a chunk past a bad one only from the next 32 KiB block
// on, so damage in the last block — the whole log, for a small one — cuts
// it off without a word. checkWAL does the same check over the whole rest
// of the file: a valid chunk of this log, past the bad record, that says
// the log was synced beyond the bad record's start proves the bad record
// was durable, so it is damage, not a torn write.

// walSync chunk layout (pebble/record): checksum uint32, length uint16,
// encoding byte, log number uint32, synced offset uint64, then the payload.
const (
	walBlockSize      = 32 << 10
	walSyncHeaderSize = 19
	walSyncFirstEnc   = 9  // walSyncFullChunkEncoding
	walSyncLastEnc    = 12 // walSyncLastChunkEncoding
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// walChecksum is Pebble's masked CRC-32C of a chunk.
func walChecksum(b []byte) uint32 {
	c := crc32.Update(0, walCRC, b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// walNum parses the log number of a write-ahead log's file name.
func walNum(name string) (uint64, bool) {
	base := strings.TrimSuffix(filepath.Base(name), ".log")
	if i := strings.IndexByte(base, '-'); i >= 0 {
		base = base[:i]
	}
	n, err := strconv.ParseUint(base, 10, 64)
	return n, err == nil
}

// newRecordReader calls record.NewReader, whose log number type is
// internal to Pebble, with n converted to it.
func newRecordReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, n uint64) *record.Reader {
	return newReader(r, N(n))
}

// checkWAL reads the write-ahead log path as Pebble's recovery does and, if
// it stops before the end, looks for proof that the part it drops had been
// synced. It returns a *eventlog.CorruptionError naming the file and byte.
func checkWAL(path string) error {
	num, ok := walNum(path)
	if !ok {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("pebblestore: read %s: %w", path, err)
	}
	r := newRecordReader(record.NewReader, bytes.NewReader(data), num)
	var start int64
	for {
		start = r.Offset()
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			break
		}
	}
	if off, synced, found := syncedPast(data, uint32(num), start); found {
		return &eventlog.CorruptionError{
			What: "write-ahead log " + filepath.Base(path),
			Err: fmt.Errorf("record at byte %d is damaged, and a later record (at byte %d) says the log was synced to byte %d: synced records would be lost",
				start, off, synced),
		}
	}
	return nil
}

// syncedPast looks in data, from byte from on, for a valid walSync chunk of
// log num whose synced offset is past from.
func syncedPast(data []byte, num uint32, from int64) (off int64, synced uint64, found bool) {
	for pos := max(from, 0); pos+walSyncHeaderSize <= int64(len(data)); pos++ {
		h := data[pos:]
		enc := h[6]
		if enc < walSyncFirstEnc || enc > walSyncLastEnc || binary.LittleEndian.Uint32(h[7:11]) != num {
			continue
		}
		length := int64(binary.LittleEndian.Uint16(h[4:6]))
		end := pos + walSyncHeaderSize + length
		if end > int64(len(data)) || pos%walBlockSize+walSyncHeaderSize+length > walBlockSize {
			continue
		}
		if binary.LittleEndian.Uint32(h[0:4]) != walChecksum(data[pos+6:end]) {
			continue
		}
		if s := binary.LittleEndian.Uint64(h[11:19]); s > uint64(from) {
			return pos, s, true
		}
	}
	return 0, 0, false
}

// walRecorder collects the write-ahead logs Pebble opens during a
// read-only Open: exactly those it replays.
type walRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (w *walRecorder) add(name string) {
	if w == nil || !strings.HasSuffix(name, ".log") {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.paths, name) {
		w.paths = append(w.paths, name)
	}
}

// check runs checkWAL on every recorded log.
func (w *walRecorder) check() error {
	w.mu.Lock()
	paths := slices.Clone(w.paths)
	w.mu.Unlock()
	slices.Sort(paths)
	for _, p := range paths {
		if err := checkWAL(p); err != nil {
			return err
		}
	}
	return nil
}
