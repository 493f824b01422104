package pebblestore

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

// Test hooks: the tests in package pebblestore_test corrupt a store through
// its own database and keys, the way a torn disk or an operator would.

// DB returns the store's Pebble database.
func DB(s *Store) *pebble.DB { return s.db }

// EventKey is the key of event seq of execution id.
func EventKey(id eventlog.ID, seq uint64) []byte { return eventKey(id, seq) }

// HeaderKey is the key of execution id's header.
func HeaderKey(id eventlog.ID) []byte { return headerKey(id) }

// IndexKey is the key of the index entry of resource key after event seq.
func IndexKey(id eventlog.ID, key string, seq uint64) []byte { return indexKey(id, key, seq) }

// MetaFormatKey is the key of the store format byte.
var MetaFormatKey = metaFormatKey

// EncodeHeader encodes a header value as the store writes it.
func EncodeHeader(agent string, parent eventlog.ID, at uint64, created int64) ([]byte, error) {
	return encodeValue(&header{Agent: agent, Parent: parent, At: at, Created: created})
}

// ForgetCache drops the store's cached executions, as a reopen would.
func ForgetCache(s *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.execs = make(map[eventlog.ID]*execution)
}

// StateKey is the key of execution id's state record.
func StateKey(id eventlog.ID) []byte { return stateKey(id) }

// RequestKey is the key of request n of execution id's inbox.
func RequestKey(id eventlog.ID, n uint64) []byte { return requestKey(id, n) }

// PebbleFatal calls the store's Pebble logger's Fatalf as Pebble would on
// the calling goroutine (a failed commit), under the store's guard.
func PebbleFatal(s *Store, cause error) error {
	return s.guard(func() error {
		pebbleLogger{s.faults}.Fatalf("pebble: fatal commit error: %v", cause)
		return nil
	})
}

// ChunkPol is the store's Rabin polynomial.
const ChunkPol = chunkPol

// SyncProves reports whether the undamaged write-ahead log data of file
// name holds a valid chunk past byte off that says the log was synced
// beyond off: what checkWAL needs to tell damage at off from a torn write.
func SyncProves(data []byte, name string, off int64) bool {
	num, ok := walNum(name)
	if !ok {
		return false
	}
	_, _, found := syncedPast(data, uint32(num), off)
	return found
}

// WALMark reads the side record of dir's write-ahead log: the log number
// and the offset it was synced to.
func WALMark(dir string) (log, off uint64, ok bool, err error) {
	_, p, ok, err := readWALMark(dir)
	return p.log, p.off, ok, err
}

// WALMarkEvery is how often at most the side record is rewritten.
var WALMarkEvery = walMarkEvery

// SetWALMarkEvery sets how often at most the side record of the stores
// opened from now on is rewritten, until the test ends.
func SetWALMarkEvery(t interface{ Cleanup(func()) }, d time.Duration) {
	old := walMarkEvery
	walMarkEvery = d
	t.Cleanup(func() { walMarkEvery = old })
}

// LimitKey exposes limitKey.
func LimitKey(key string) []byte { return limitKey(key) }
