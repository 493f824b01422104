package pebblestore

import (
	"encoding/binary"
	"math"

	"github.com/forkline/forkline/eventlog"
)

// The key layout. Every key starts with a one-byte table tag.
//
//	'm' "format"                         store format version (one byte)
//	'x' id[16]                           execution header (immutable)
//	's' id[16]                           execution state (mutable, store format 2):
//	                                     head, eventlog.StatusState after it, and
//	                                     the newest lease claim's epoch
//	'e' id[16] seq[8]                    event record (eventlog.AppendRecord)
//	'i' id[16] len[2] key seq[8]         checkpoint index: eventlog.ResourceState
//	                                     of resource key after event seq
//	'k' key                              idempotency key (execution.created Key,
//	                                     store format 2) → id[16]
//	'q' id[16] n[8]                      inbox request n (store format 2): its time
//	                                     and payload as an eventlog.AppendRecord
//	'n' id[16] message-id                a MessageID sent to the execution
//	                                     (eventlog.MessageInbox) → its
//	                                     eventlog.MessageDigest (32 bytes)
//	't' id[16]                           tombstone of a deleted execution (store
//	                                     format 3): the prefix it keeps for forks
//	'c' hash[16]                         a chunk of long event records (store
//	                                     format 3, chunks.go), by content
//	'l' key                              a rate limiter's window (limiter.go):
//	                                     the times of the calls it admitted
//	'h' name                             a schedule's record (schedule.go,
//	                                     eventlog.Scheduler)
//	'z' id[16]                           quarantine (eventlog.Quarantiner): the
//	                                     error of the run that found the
//	                                     execution's history damaged
//
// Integers are big-endian so that byte order is numeric order. An
// execution's events and index entries are contiguous and ordered by seq, so
// "the newest state at or before seq" is one SeekLT and a lineage read is one
// range scan per ancestor.
const (
	tagMeta       = 'm'
	tagHeader     = 'x'
	tagEvent      = 'e'
	tagIndex      = 'i'
	tagState      = 's'
	tagKey        = 'k'
	tagInbox      = 'q'
	tagMessage    = 'n'
	tagTombstone  = 't'
	tagChunk      = 'c'
	tagQuarantine = 'z'
	tagLimit      = 'l'
	tagSchedule   = 'h'
	tagQueue      = 'u'
)

// quarantineKey is the key of id's quarantine.
func quarantineKey(id eventlog.ID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, tagQuarantine)
	return append(k, id[:]...)
}

var metaFormatKey = []byte{tagMeta, 'f', 'o', 'r', 'm', 'a', 't'}

// idemKey is the key of an idempotency key's entry.
func idemKey(key string) []byte {
	k := make([]byte, 0, 1+len(key))
	k = append(k, tagKey)
	return append(k, key...)
}

// requestKey is the key of request n of execution id's inbox.
func requestKey(id eventlog.ID, n uint64) []byte {
	k := make([]byte, 0, 25)
	k = append(k, tagInbox)
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint64(k, n)
}

// messageKey is the key of MessageID mid's record in execution id's
// inbox.
func messageKey(id eventlog.ID, mid string) []byte {
	k := make([]byte, 0, 17+len(mid))
	k = append(k, tagMessage)
	k = append(k, id[:]...)
	return append(k, mid...)
}

func headerKey(id eventlog.ID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, tagHeader)
	return append(k, id[:]...)
}

// stateKey is the key of id's state record: its head and status, rewritten
// in the batch of every event of its own.
func stateKey(id eventlog.ID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, tagState)
	return append(k, id[:]...)
}

func eventKey(id eventlog.ID, seq uint64) []byte {
	k := make([]byte, 0, 25)
	k = append(k, tagEvent)
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// eventSeq returns the seq of an event key.
func eventSeq(k []byte) uint64 { return binary.BigEndian.Uint64(k[17:25]) }

// indexPrefix is the prefix of id's index entries for resource key.
func indexPrefix(id eventlog.ID, key string) []byte {
	k := make([]byte, 0, 19+len(key)+8)
	k = append(k, tagIndex)
	k = append(k, id[:]...)
	k = binary.BigEndian.AppendUint16(k, uint16(len(key)))
	return append(k, key...)
}

func indexKey(id eventlog.ID, key string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(indexPrefix(id, key), seq)
}

// parseIndexKey splits an index key of execution id into resource key and seq.
func parseIndexKey(k []byte) (key string, seq uint64, ok bool) {
	if len(k) < 19+8 || k[0] != tagIndex {
		return "", 0, false
	}
	n := int(binary.BigEndian.Uint16(k[17:19]))
	if len(k) != 19+n+8 {
		return "", 0, false
	}
	return string(k[19 : 19+n]), binary.BigEndian.Uint64(k[19+n:]), true
}

// executionPrefix returns the first key of id's part of a table.
func executionPrefix(tag byte, id eventlog.ID) []byte {
	k := make([]byte, 0, 17)
	k = append(k, tag)
	return append(k, id[:]...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// seqEnd is the exclusive upper bound seq for an inclusive bound hi.
func seqEnd(hi uint64) uint64 {
	if hi == math.MaxUint64 {
		return hi
	}
	return hi + 1
}
