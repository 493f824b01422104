package pebblestore

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/ instead of comparing with them")

var (
	pinID     = mustID("0192f0c4-7b1a-7c3d-8e4f-0123456789ab")
	pinParent = mustID("0192f0c4-0000-7000-8000-000000000001")
)

func mustID(s string) eventlog.ID {
	id, err := eventlog.ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// TestFormatPinned fails on any change to the store's persisted format: the
// store format byte, the key layout, the value envelope, the msgpack fields
// of headers, index entries and state records, and the exact bytes of one
// of each and of one inbox request (golden).
// A failure means: a new storeFormat (and a way to read the old one), or
// undo the change.
func TestFormatPinned(t *testing.T) {
	t.Run("versions", func(t *testing.T) {
		if storeFormat != 3 {
			t.Errorf("storeFormat = %d, pinned 3", storeFormat)
		}
		if valueVersion != 1 {
			t.Errorf("valueVersion = %d, pinned 1", valueVersion)
		}
	})

	t.Run("keys", func(t *testing.T) {
		for _, c := range []struct {
			name      string
			got, want []byte
		}{
			{"meta format", metaFormatKey, []byte("mformat")},
			{"header", headerKey(pinID), cat([]byte{'x'}, pinID[:])},
			{"state", stateKey(pinID), cat([]byte{'s'}, pinID[:])},
			{"tombstone", tombstoneKey(pinID), cat([]byte{'t'}, pinID[:])},
			{"chunk", chunkKey(chunkHash{1, 2, 3}), cat([]byte{'c', 1, 2, 3}, make([]byte, 13))},
			{"idempotency key", idemKey("order-7"), cat([]byte{'k'}, []byte("order-7"))},
			{"request", requestKey(pinID, 0x0102030405060708), cat([]byte{'q'}, pinID[:], []byte{1, 2, 3, 4, 5, 6, 7, 8})},
			{"inbox prefix", executionPrefix(tagInbox, pinID), cat([]byte{'q'}, pinID[:])},
			{"message id", messageKey(pinID, "m-1"), cat([]byte{'n'}, pinID[:], []byte("m-1"))},
			{"event", eventKey(pinID, 0x0102030405060708), cat([]byte{'e'}, pinID[:], []byte{1, 2, 3, 4, 5, 6, 7, 8})},
			{"index", indexKey(pinID, "workspace", 300), cat([]byte{'i'}, pinID[:], []byte{0, 9}, []byte("workspace"), be64(300))},
			{"index prefix", indexPrefix(pinID, "w"), cat([]byte{'i'}, pinID[:], []byte{0, 1, 'w'})},
			{"execution prefix", executionPrefix('e', pinID), cat([]byte{'e'}, pinID[:])},
		} {
			if !bytes.Equal(c.got, c.want) {
				t.Errorf("%s key = %x, pinned %x", c.name, c.got, c.want)
			}
		}
	})

	t.Run("key order", func(t *testing.T) {
		// Seqs sort numerically; an execution's events and index entries
		// are contiguous; tables do not interleave.
		ordered := [][]byte{
			eventKey(pinParent, math.MaxUint64),
			eventKey(pinID, 1),
			eventKey(pinID, 255),
			eventKey(pinID, 256),
			eventKey(pinID, 1<<40),
			indexKey(pinID, "b", 1),
			indexKey(pinID, "b", 2),
			indexKey(pinID, "ab", 7), // longer keys after shorter ones: the length comes first
			indexKey(pinID, "a\xff", 0),
			idemKey(""),
			idemKey("\xff\xff"),
			metaFormatKey,
			requestKey(pinParent, math.MaxUint64),
			requestKey(pinID, 1),
			requestKey(pinID, 256),
			requestKey(pinID, 1<<40),
			stateKey(pinParent),
			stateKey(pinID),
			headerKey(pinParent),
			headerKey(pinID),
		}
		for i := 1; i < len(ordered); i++ {
			if bytes.Compare(ordered[i-1], ordered[i]) >= 0 {
				t.Errorf("key %x sorts before %x", ordered[i], ordered[i-1])
			}
		}
		if eventSeq(eventKey(pinID, 1<<40)) != 1<<40 {
			t.Error("eventSeq does not read back the seq")
		}
	})

	t.Run("value envelope", func(t *testing.T) {
		v, err := encodeValue(&header{Agent: "a"})
		if err != nil {
			t.Fatal(err)
		}
		if v[0] != 1 {
			t.Errorf("value byte 0 = %d, want the value version 1", v[0])
		}
		if got, want := binary.BigEndian.Uint32(v[1:5]), crc32.Checksum(v[5:], crc32.MakeTable(crc32.Castagnoli)); got != want {
			t.Errorf("value bytes 1:5 = %08x, want CRC-32C of [5:] %08x", got, want)
		}
	})

	t.Run("fields", func(t *testing.T) {
		for typ, want := range map[reflect.Type][]string{
			reflect.TypeFor[header](): {"Agent string agent", "Parent eventlog.ID parent", "At uint64 at,omitempty", "Created int64 created", "Caller eventlog.ID caller,omitempty",
				"Key string key,omitempty", "CallerStep string caller_step,omitempty",
				"Version string version,omitempty",                                 // DESIGN §19; absent in older headers, read as ""
				"Queue string queue,omitempty", "Priority int priority,omitempty"}, // DESIGN §19 queues; absent in older headers: in no queue
			reflect.TypeFor[indexValue](): {"Generation uint64 generation", "InFlight []string in_flight,omitempty",
				"CoverageReuse bool coverage_reuse,omitempty", "Bound uint64 bound", "Ref string ref,omitempty",
				"RefAt uint64 ref_at,omitempty", "RefGeneration uint64 ref_generation,omitempty",
				"Diverged uint64 diverged,omitempty"},
			reflect.TypeFor[stateValue](): {"Head uint64 head", "Status uint8 status", "Updated time.Time updated,omitempty",
				"WakeAt time.Time wake_at,omitempty", "Deadline time.Time deadline,omitempty",
				"Dispatched bool dispatched,omitempty", "Parked bool parked,omitempty", "Approvals []string approvals,omitempty",
				"Requests uint64 requests,omitempty",
				"Epoch uint64 epoch,omitempty",                                                  // DESIGN §15½.5; absent in older records, read as 0
				"TokensIn uint64 tokens_in,omitempty", "TokensOut uint64 tokens_out,omitempty"}, // DESIGN §16; likewise
			reflect.TypeFor[tombstoneValue](): {"Kept uint64 kept", "Deleted int64 deleted"},
		} {
			var got []string
			for f := range typ.Fields() {
				got = append(got, fmt.Sprintf("%s %s %s", f.Name, f.Type, f.Tag.Get("msgpack")))
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s fields (-pinned +now):\n%s", typ, d)
			}
		}
		for _, c := range []struct {
			v    any
			keys []string
		}{
			{&header{Agent: "a", Parent: pinParent, At: 3, Created: 9}, []string{"agent", "at", "created", "parent"}},
			{&header{Agent: "a"}, []string{"agent", "created", "parent"}},
			{goldenIndexValue(), []string{"bound", "coverage_reuse", "generation", "in_flight", "ref", "ref_at", "ref_generation"}},
			{&indexValue{}, []string{"bound", "generation"}},
			{&indexValue{Diverged: 9}, []string{"bound", "diverged", "generation"}},
			{goldenStateValue(), []string{"approvals", "deadline", "dispatched", "head", "parked", "requests", "status", "updated", "wake_at"}},
			{&stateValue{}, []string{"head", "status"}},
		} {
			v, err := encodeValue(c.v)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := msgpack.Unmarshal(v[5:], &m); err != nil {
				t.Fatal(err)
			}
			var got []string
			for k := range m {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.keys) {
				t.Errorf("%T keys %v, pinned %v", c.v, got, c.keys)
			}
		}
	})

	t.Run("golden values", func(t *testing.T) {
		h, err := encodeValue(&header{Agent: "coder", Parent: pinParent, At: 17, Created: 1767225600123456789})
		if err != nil {
			t.Fatal(err)
		}
		st := eventlog.ResourceState{Key: "workspace", Seq: 40, Generation: 7, InFlight: []string{"s1", "s2"},
			CoverageReuse: true, Bound: 3, Latest: eventlog.Checkpoint{Ref: "snap-9", At: 38, Generation: 6}}
		iv, err := encodeIndexValue(st)
		if err != nil {
			t.Fatal(err)
		}
		sv, err := encodeStateValue(goldenStatus(), goldenRequests, 0)
		if err != nil {
			t.Fatal(err)
		}
		rq, err := eventlog.AppendRequest(nil, pinParent, 3, goldenRequest())
		if err != nil {
			t.Fatal(err)
		}
		ts, err := encodeValue(&tombstoneValue{Kept: 12, Deleted: 1767225600123456789})
		if err != nil {
			t.Fatal(err)
		}
		// A long record's manifest: the chunk boundaries (polynomial, sizes)
		// and the manifest layout are the format.
		long := make([]byte, 0, 40<<10)
		for i := 0; len(long) < 40<<10; i++ {
			long = fmt.Appendf(long, "line %d of a long record whose chunks are pinned\n", i*i%977)
		}
		manifest, chunks, err := split(long)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		b.WriteString("# The exact bytes of one header, one index value, one state value, one\n# inbox request, one tombstone and one chunk manifest (format_test.go).\n")
		b.WriteString("# Any change here is a change to the store format: bump storeFormat.\n")
		b.WriteString("# Regenerate with: go test ./eventlog/pebblestore -run TestFormatPinned -rewrite\n")
		fmt.Fprintf(&b, "header %s\n", hex.EncodeToString(h))
		fmt.Fprintf(&b, "index %s\n", hex.EncodeToString(iv))
		fmt.Fprintf(&b, "state %s\n", hex.EncodeToString(sv))
		fmt.Fprintf(&b, "request %s\n", hex.EncodeToString(rq))
		fmt.Fprintf(&b, "tombstone %s\n", hex.EncodeToString(ts))
		fmt.Fprintf(&b, "manifest %s (%d chunks and groups)\n", hex.EncodeToString(manifest), len(chunks))
		path := filepath.Join("testdata", "values.golden")
		if *rewrite {
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -rewrite to create it)", err)
		}
		if d := cmp.Diff(string(want), b.String()); d != "" {
			t.Errorf("%s differs (-file +now):\n%s", path, d)
		}
		back, err := decodeIndexValue("workspace", 40, iv)
		if err != nil || cmp.Diff(st, back) != "" {
			t.Errorf("index value round trip: %v\n%s", err, cmp.Diff(st, back))
		}
		if back, requests, epoch, err := decodeStateValue(sv); err != nil || cmp.Diff(goldenStatus(), back) != "" || requests != goldenRequests || epoch != 0 {
			t.Errorf("state value round trip: %v, requests %d\n%s", err, requests, cmp.Diff(goldenStatus(), back))
		}
		if back, err := eventlog.DecodeRequest(pinParent, 3, rq); err != nil || cmp.Diff(goldenRequest().Data, back.Data) != "" || !back.Time.Equal(goldenRequest().Time) {
			t.Errorf("request round trip: %v\n%s", err, cmp.Diff(goldenRequest().Data, back.Data))
		}
		var hb header
		if err := decodeValue(h, &hb); err != nil || hb != (header{Agent: "coder", Parent: pinParent, At: 17, Created: 1767225600123456789}) {
			t.Errorf("header round trip: %+v, %v", hb, err)
		}
	})
}

func goldenStatus() eventlog.StatusState {
	return eventlog.StatusState{Head: 42, Status: eventlog.StatusWaiting,
		Updated:    time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC),
		WakeAt:     time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC),
		Deadline:   time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
		Dispatched: true, Parked: true, Approvals: []string{"s1", "s2"}}
}

const goldenRequests = 9

func goldenStateValue() *stateValue {
	st := goldenStatus()
	return &stateValue{Head: st.Head, Status: uint8(st.Status), Updated: st.Updated, WakeAt: st.WakeAt,
		Deadline: st.Deadline, Dispatched: true, Parked: true, Approvals: st.Approvals, Requests: goldenRequests}
}

// goldenRequest is the value of an inbox request as Request writes it.
func goldenRequest() eventlog.Event {
	return eventlog.Event{Time: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC),
		Data: &eventlog.CancelRequested{Reason: "user", By: "ops"}}
}

func goldenIndexValue() *indexValue {
	return &indexValue{Generation: 7, InFlight: []string{"s1"}, CoverageReuse: true, Bound: 3, Ref: "r", RefAt: 2, RefGeneration: 6}
}

func TestParseIndexKey(t *testing.T) {
	for _, key := range []string{"w", "workspace", strings.Repeat("k", math.MaxUint16), "a\x00b"} {
		for _, seq := range []uint64{0, 1, math.MaxUint64} {
			k, s, ok := parseIndexKey(indexKey(pinID, key, seq))
			if !ok || k != key || s != seq {
				t.Errorf("parseIndexKey(indexKey(%.10q, %d)) = %.10q, %d, %v", key, seq, k, s, ok)
			}
		}
	}
	good := indexKey(pinID, "w", 5)
	for _, bad := range [][]byte{
		nil,
		good[:len(good)-1],
		append(slices.Clone(good), 0),
		cat([]byte{'e'}, good[1:]),
		cat(good[:17], []byte{0, 2}, good[19:]),
	} {
		if k, s, ok := parseIndexKey(bad); ok {
			t.Errorf("parseIndexKey(%x) = %q, %d, true", bad, k, s)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
		{[]byte{'e', 0xff, 0xff, 0x05, 0xff}, []byte{'e', 0xff, 0xff, 0x06}},
	} {
		if got := prefixEnd(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("prefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
	p := []byte{7, 0xff}
	prefixEnd(p)
	if !bytes.Equal(p, []byte{7, 0xff}) {
		t.Error("prefixEnd changed its argument")
	}
	if seqEnd(4) != 5 || seqEnd(math.MaxUint64) != math.MaxUint64 {
		t.Error("seqEnd is wrong")
	}
}

// A stored value that was damaged in any bit, cut short, extended or
// written by another version does not decode.
func TestDecodeValueRejects(t *testing.T) {
	good, err := encodeValue(goldenIndexValue())
	if err != nil {
		t.Fatal(err)
	}
	var iv indexValue
	if err := decodeValue(good, &iv); err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for bit := range 8 {
			bad := slices.Clone(good)
			bad[i] ^= 1 << bit
			var v indexValue
			if err := decodeValue(bad, &v); err == nil {
				t.Errorf("byte %d bit %d flipped: decoded %+v", i, bit, v)
			}
		}
	}
	for n := range len(good) {
		var v indexValue
		if err := decodeValue(good[:n], &v); err == nil {
			t.Errorf("cut to %d bytes: decoded %+v", n, v)
		}
	}
	reseal := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[1:5], crc32.Checksum(b[5:], castagnoli))
		return b
	}
	var v indexValue
	if err := decodeValue(reseal(append(slices.Clone(good), 0xc0)), &v); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("trailing byte: %v", err)
	}
	extra, _ := msgpack.Marshal(map[string]any{"generation": 1, "later": 2})
	if err := decodeValue(reseal(cat([]byte{1, 0, 0, 0, 0}, extra)), &v); err == nil {
		t.Error("unknown field decoded")
	}
	var h header
	if err := decodeValue(reseal(cat([]byte{1, 0, 0, 0, 0}, []byte{0x81, 0xa5, 'a', 'g', 'e', 'n', 't', 0xdb, 0xff, 0xff, 0xff, 0xff})), &h); err == nil {
		t.Error("a header claiming a 4 GiB agent decoded")
	}
}
