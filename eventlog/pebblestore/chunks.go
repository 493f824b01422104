package pebblestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
	"github.com/restic/chunker"
)

// Chunked values (store format 3, DESIGN §14). An LLM call's request holds
// the whole conversation, so a conversation of n turns would store O(n²)
// bytes. An event record longer than the chunking threshold (ChunkAbove,
// default DefaultChunkAbove) is split into content-defined chunks with a
// Rabin fingerprint (restic/chunker: 512 B to 8 KiB, 1 KiB on average),
// and each chunk is stored once per store under its hash, in the same
// batch as the event. Two requests that share a conversation prefix share
// every chunk of it but the first and the one where they part.
//
// The event's own value is then a manifest:
//
//	[0]    chunkMarker (0xC5: never a record format version)
//	[1:5]  CRC-32C of the rest
//	       uvarint total length of the record
//	       uvarint length of the head, then the head: the record's first
//	       chunkHead bytes, kept inline, since they differ from call to
//	       call (time, checksum) while what follows (an LLM call's
//	       arguments, first in the record) is what calls share
//	       uvarint number of groups, then per group: hash[16], uvarint length
//	       of the group chunk (a group chunk is a list of hash[16], uvarint
//	       length of a data chunk)
//
// The chunk references are themselves grouped, content-defined (a group
// ends after a reference whose hash's first byte has its low four bits
// zero: 16 references on average), and each group is stored as a chunk
// too, so that a long value's manifest stays small and two manifests of a
// growing conversation share their groups but the last. A chunk's value
// is [CRC-32C of the data][data]; its key is 'c' + the first 16 bytes of
// the data's SHA-256.
//
// Reading resolves a manifest into the whole record: nothing above Log
// sees chunks, and StepIDs and MaxValueSize are unchanged. Delete removes
// manifests, not chunks (another record may share them); Sweep removes
// every chunk no manifest references.

// DefaultChunkAbove is the length above which an event record is stored
// as chunks.
const DefaultChunkAbove = 4 << 10

// ChunkAbove stores event records longer than n bytes as content-defined
// chunks, each once per store (n ≤ 0: never). The default is
// DefaultChunkAbove. A store reads chunked records whatever this says.
func ChunkAbove(n int) Option { return func(o *options) { o.chunkAbove = n; o.chunkSet = true } }

// maxRecordLen bounds the length a manifest may claim: more than any
// record the codec writes.
const maxRecordLen = 1 << 30

const (
	chunkMarker  byte = 0xC5
	chunkMin          = 512
	chunkMax          = 8 << 10
	chunkAvgBits      = 10 // 1 KiB on average
	groupMask         = 0x0F
	chunkHashLen      = 16
	chunkHead         = 64
)

// chunkPol is the irreducible polynomial of the Rabin fingerprint. It is
// part of the store format: another one cuts other chunks (which would
// still read, but share nothing with the old ones).
const chunkPol = chunker.Pol(0x3DA3358B4DC173)

type chunkHash [chunkHashLen]byte

func hashChunk(data []byte) chunkHash {
	sum := sha256.Sum256(data)
	return chunkHash(sum[:chunkHashLen])
}

// chunkKey is the key of a chunk.
func chunkKey(h chunkHash) []byte {
	k := make([]byte, 0, 1+chunkHashLen)
	k = append(k, tagChunk)
	return append(k, h[:]...)
}

// chunkers holds chunkers for reuse: each has a 512 KiB read buffer, which
// ResetWithBoundaries keeps.
var chunkers = sync.Pool{New: func() any {
	return chunker.NewWithBoundaries(bytes.NewReader(nil), chunkPol, chunkMin, chunkMax)
}}

// chunkRef names one chunk and its length.
type chunkRef struct {
	hash chunkHash
	n    int
}

func appendRefs(dst []byte, refs []chunkRef) []byte {
	for _, r := range refs {
		dst = append(dst, r.hash[:]...)
		dst = binary.AppendUvarint(dst, uint64(r.n))
	}
	return dst
}

// parseRefs reads n references (n < 0: as many as there are) from b.
func parseRefs(b []byte, n int) ([]chunkRef, []byte, error) {
	var out []chunkRef
	for i := 0; n < 0 && len(b) > 0 || i < n; i++ {
		if len(b) < chunkHashLen {
			return nil, nil, errors.New("chunk reference cut short")
		}
		var r chunkRef
		copy(r.hash[:], b)
		l, k := binary.Uvarint(b[chunkHashLen:])
		if k <= 0 || l == 0 || l > maxRecordLen {
			return nil, nil, errors.New("bad chunk length")
		}
		r.n = int(l)
		out = append(out, r)
		b = b[chunkHashLen+k:]
	}
	return out, b, nil
}

// split cuts rec into chunks and returns its manifest and the chunks to
// store (data chunks and group chunks), by hash.
func split(rec []byte) ([]byte, map[chunkHash][]byte, error) {
	head := rec[:min(chunkHead, len(rec))]
	body := rec[len(head):]
	c := chunkers.Get().(*chunker.Chunker)
	defer chunkers.Put(c)
	c.ResetWithBoundaries(bytes.NewReader(body), chunkPol, chunkMin, chunkMax)
	c.SetAverageBits(chunkAvgBits)
	chunks := map[chunkHash][]byte{}
	var groups, group []chunkRef
	endGroup := func() {
		data := appendRefs(nil, group)
		h := hashChunk(data)
		chunks[h] = data
		groups = append(groups, chunkRef{hash: h, n: len(data)})
		group = nil
	}
	buf := make([]byte, chunkMax)
	off := 0
	for {
		ch, err := c.Next(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		data := body[off : off+int(ch.Length)]
		off += int(ch.Length)
		h := hashChunk(data)
		chunks[h] = data
		group = append(group, chunkRef{hash: h, n: len(data)})
		if h[0]&groupMask == 0 {
			endGroup()
		}
	}
	if off != len(body) {
		return nil, nil, fmt.Errorf("chunker covered %d of %d bytes", off, len(body))
	}
	if len(group) > 0 {
		endGroup()
	}
	m := []byte{chunkMarker, 0, 0, 0, 0}
	m = binary.AppendUvarint(m, uint64(len(rec)))
	m = binary.AppendUvarint(m, uint64(len(head)))
	m = append(m, head...)
	m = binary.AppendUvarint(m, uint64(len(groups)))
	m = appendRefs(m, groups)
	binary.BigEndian.PutUint32(m[1:5], crc32.Checksum(m[5:], castagnoli))
	return m, chunks, nil
}

// chunkValue is a chunk's stored value: its CRC-32C and its data.
func chunkValue(data []byte) []byte {
	v := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(data)), crc32.Checksum(data, castagnoli))
	return append(v, data...)
}

// knownChunks is how many chunk hashes a store remembers as present, so
// that a conversation's next call does not look up the chunks its last
// call wrote. Past it the memory starts over.
const knownChunks = 1 << 18

// chunkRecords replaces, in records, every record longer than the
// store's threshold by its manifest, and adds to b the chunks the store
// does not hold yet. It returns the hashes of the chunks b writes, for
// s.remember once b is committed. The caller holds s.chunks for reading
// until then, so that Sweep cannot remove a chunk this batch relies on.
func (s *Store) chunkRecords(b *pebble.Batch, records [][]byte) ([]chunkHash, error) {
	if s.chunkAbove <= 0 {
		return nil, nil
	}
	var written []chunkHash
	for i, rec := range records {
		if len(rec) <= s.chunkAbove {
			continue
		}
		m, chunks, err := split(rec)
		if err != nil {
			return nil, fmt.Errorf("pebblestore: chunk a record of %d bytes: %w", len(rec), err)
		}
		for h, data := range chunks {
			if s.knows(h) || slices.Contains(written, h) {
				continue
			}
			k := chunkKey(h)
			_, closer, err := s.db.Get(k)
			if err == nil {
				closer.Close()
				s.remember(h)
				continue
			}
			if !errors.Is(err, pebble.ErrNotFound) {
				return nil, s.readErr(eventlog.ID{}, "chunk", err)
			}
			_ = b.Set(k, chunkValue(data), nil)
			written = append(written, h)
		}
		records[i] = m
	}
	return written, nil
}

// knows reports whether h is a chunk the store is known to hold.
func (s *Store) knows(h chunkHash) bool {
	s.known.Lock()
	defer s.known.Unlock()
	_, ok := s.known.set[h]
	return ok
}

// remember notes chunks the store holds (committed, or found).
func (s *Store) remember(hs ...chunkHash) {
	s.known.Lock()
	defer s.known.Unlock()
	if s.known.set == nil || len(s.known.set)+len(hs) > knownChunks {
		s.known.set = make(map[chunkHash]struct{}, len(hs))
	}
	for _, h := range hs {
		s.known.set[h] = struct{}{}
	}
}

// isChunked reports whether an event value is a manifest.
func isChunked(v []byte) bool { return len(v) > 0 && v[0] == chunkMarker }

// readChunk reads and checks one chunk, appending its data to dst.
func (s *Store) readChunk(dst []byte, r chunkRef) ([]byte, error) {
	v, closer, err := s.db.Get(chunkKey(r.hash))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("chunk %x is missing", r.hash)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	if len(v) != 4+r.n {
		return nil, fmt.Errorf("chunk %x holds %d bytes, want %d", r.hash, len(v)-4, r.n)
	}
	if crc32.Checksum(v[4:], castagnoli) != binary.BigEndian.Uint32(v) {
		return nil, fmt.Errorf("chunk %x fails its checksum", r.hash)
	}
	return append(dst, v[4:]...), nil
}

// parseManifest checks a manifest and returns the record's length, its
// inline head and its groups.
func parseManifest(m []byte) (int, []byte, []chunkRef, error) {
	if len(m) < 5 || crc32.Checksum(m[5:], castagnoli) != binary.BigEndian.Uint32(m[1:5]) {
		return 0, nil, nil, errors.New("chunk manifest fails its checksum")
	}
	b := m[5:]
	total, k := binary.Uvarint(b)
	if k <= 0 || total > maxRecordLen {
		return 0, nil, nil, errors.New("chunk manifest: bad length")
	}
	b = b[k:]
	hl, k := binary.Uvarint(b)
	if k <= 0 || hl > total || hl > uint64(len(b)-k) {
		return 0, nil, nil, errors.New("chunk manifest: bad head")
	}
	head := b[k : k+int(hl)]
	b = b[k+int(hl):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > total {
		return 0, nil, nil, errors.New("chunk manifest: bad group count")
	}
	groups, rest, err := parseRefs(b[k:], int(n))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("chunk manifest: %w", err)
	}
	if len(rest) != 0 {
		return 0, nil, nil, errors.New("chunk manifest: trailing bytes")
	}
	return int(total), head, groups, nil
}

// resolve returns the record an event value holds: v itself, or the
// record its manifest's chunks make up.
func (s *Store) resolve(v []byte) ([]byte, error) {
	if !isChunked(v) {
		return v, nil
	}
	total, head, groups, err := parseManifest(v)
	if err != nil {
		return nil, err
	}
	rec := append(make([]byte, 0, total), head...)
	var gbuf []byte
	for _, g := range groups {
		if gbuf, err = s.readChunk(gbuf[:0], g); err != nil {
			return nil, err
		}
		refs, _, err := parseRefs(gbuf, -1)
		if err != nil {
			return nil, fmt.Errorf("chunk group %x: %w", g.hash, err)
		}
		for _, r := range refs {
			if len(rec)+r.n > total {
				return nil, fmt.Errorf("chunks make more than %d bytes", total)
			}
			if rec, err = s.readChunk(rec, r); err != nil {
				return nil, err
			}
		}
	}
	if len(rec) != total {
		return nil, fmt.Errorf("chunks make %d bytes, want %d", len(rec), total)
	}
	return rec, nil
}

// decodeEvent decodes the event value v of seq of execution id, resolving
// chunks.
func (s *Store) decodeEvent(id eventlog.ID, seq uint64, v []byte) (eventlog.Event, error) {
	rec, err := s.resolve(v)
	if err != nil {
		return eventlog.Event{}, err
	}
	return eventlog.DecodeRecord(id, seq, rec)
}

// SweepStats is what Sweep found and removed.
type SweepStats struct {
	Kept, Removed int   // chunks
	BytesFreed    int64 // of the removed chunks' data
}

// Sweep removes every chunk that no event's manifest references any more
// (after Delete): it marks what every stored manifest names, then deletes
// the rest in one synced batch. Appends that write chunks wait for it.
func (s *Store) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	if err := s.writable(); err != nil {
		return st, err
	}
	if err := s.enter(ctx); err != nil {
		return st, err
	}
	defer s.leave()
	s.chunks.Lock()
	defer s.chunks.Unlock()
	s.known.Lock()
	s.known.set = nil // what the sweep removes must be looked up again
	s.known.Unlock()
	live := map[chunkHash]bool{}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagEvent}, UpperBound: []byte{tagEvent + 1}})
	if err != nil {
		return st, fmt.Errorf("pebblestore: sweep: %w", err)
	}
	var gbuf []byte
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			it.Close()
			return st, err
		}
		v := it.Value()
		if !isChunked(v) {
			continue
		}
		_, _, groups, err := parseManifest(v)
		if err != nil {
			it.Close()
			return st, &eventlog.CorruptionError{What: fmt.Sprintf("event key %x", it.Key()), Err: err}
		}
		for _, g := range groups {
			if live[g.hash] {
				continue
			}
			live[g.hash] = true
			if gbuf, err = s.readChunk(gbuf[:0], g); err != nil {
				it.Close()
				return st, &eventlog.CorruptionError{What: "chunk group", Err: err}
			}
			refs, _, err := parseRefs(gbuf, -1)
			if err != nil {
				it.Close()
				return st, &eventlog.CorruptionError{What: "chunk group", Err: err}
			}
			for _, r := range refs {
				live[r.hash] = true
			}
		}
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return st, fmt.Errorf("pebblestore: sweep: %w", err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagChunk}, UpperBound: []byte{tagChunk + 1}})
	if err != nil {
		return st, fmt.Errorf("pebblestore: sweep: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 1+chunkHashLen {
			continue
		}
		if live[chunkHash(k[1:])] {
			st.Kept++
			continue
		}
		_ = b.Delete(k, nil)
		st.Removed++
		st.BytesFreed += int64(max(len(it.Value())-4, 0))
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return st, fmt.Errorf("pebblestore: sweep: %w", err)
	}
	if st.Removed == 0 {
		return st, nil
	}
	if err := s.commit(b, pebble.Sync); err != nil {
		return SweepStats{}, fmt.Errorf("pebblestore: sweep: %w", err)
	}
	return st, nil
}

// ChunkUsage counts the chunks the store holds and the bytes of their
// data: the part of long records that executions share.
func (s *Store) ChunkUsage(ctx context.Context) (chunks int, bytes int64, err error) {
	if err := s.enter(ctx); err != nil {
		return 0, 0, err
	}
	defer s.leave()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagChunk}, UpperBound: []byte{tagChunk + 1}})
	if err != nil {
		return 0, 0, fmt.Errorf("pebblestore: chunk usage: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		chunks++
		bytes += int64(len(it.Key()) + len(it.Value()))
	}
	if err := it.Error(); err != nil {
		return 0, 0, fmt.Errorf("pebblestore: chunk usage: %w", err)
	}
	return chunks, bytes, nil
}
