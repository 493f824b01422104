package pebblestore

import (
	"encoding/binary"
	"testing"
)

// syncChunk returns a valid walSync chunk of log num saying the log was
// synced to byte synced, with payload.
func syncChunk(num uint32, synced uint64, payload []byte) []byte {
	c := make([]byte, walSyncHeaderSize+len(payload))
	binary.LittleEndian.PutUint16(c[4:6], uint16(len(payload)))
	c[6] = walSyncLastEnc
	binary.LittleEndian.PutUint32(c[7:11], num)
	binary.LittleEndian.PutUint64(c[11:19], synced)
	copy(c[walSyncHeaderSize:], payload)
	binary.LittleEndian.PutUint32(c[0:4], walChecksum(c[6:]))
	return c
}

// TestSyncedPastNeedsOffsetPastDamage: a valid sync chunk after a damaged
// record proves that record durable only when the offset it says the log
// was synced to lies past the record's start; a chunk that says the log
// was synced to an earlier byte proves nothing (the damage may be a torn
// write), nor does a chunk of another log or one whose checksum fails.
func TestSyncedPastNeedsOffsetPastDamage(t *testing.T) {
	const num, damage = 7, 100
	data := make([]byte, 200)
	at := len(data)
	data = append(data, syncChunk(num, damage, []byte("payload"))...) // synced exactly to the damage: not past it
	data = append(data, syncChunk(num, 40, []byte("older"))...)
	data = append(data, syncChunk(num+1, 5000, []byte("other log"))...)
	bad := syncChunk(num, 5000, []byte("bad sum"))
	bad[0] ^= 1
	data = append(data, bad...)
	if off, synced, found := syncedPast(data, num, damage); found {
		t.Fatalf("syncedPast found a proof at byte %d (synced to %d), want none: no chunk of log %d says it was synced past byte %d", off, synced, num, damage)
	}
	data = append(data, syncChunk(num, damage+1, []byte("past"))...)
	off, synced, found := syncedPast(data, num, damage)
	if !found || synced != damage+1 || off <= int64(at) {
		t.Fatalf("syncedPast = %d, %d, %v; want the last chunk, synced to %d", off, synced, found, damage+1)
	}
}
