package eventlog

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"math/big"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"pgregory.net/rapid"
)

// These tests use the package's internals (newIDAt, successor) and the
// process-wide idClock; none of them runs in parallel, and none moves the
// clock into the future (that would make every later NewID a successor).

func checkV7(t interface {
	Helper()
	Errorf(string, ...any)
}, id ID) {
	t.Helper()
	if id[6]>>4 != 7 {
		t.Errorf("%s: version nibble %x, want 7", id, id[6]>>4)
	}
	if id[8]>>6 != 2 {
		t.Errorf("%s: variant bits %b, want 10", id, id[8]>>6)
	}
}

func checkIncreasing(t *testing.T, ids []ID) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if bytes.Compare(ids[i-1][:], ids[i][:]) >= 0 {
			t.Fatalf("id %d %s is not after id %d %s (bytes)", i, ids[i], i-1, ids[i-1])
		}
		if ids[i-1].String() >= ids[i].String() {
			t.Fatalf("id %d %s is not after id %d %s (text)", i, ids[i], i-1, ids[i-1])
		}
	}
}

// IDs made in sequence sort by creation, as bytes and as text (DESIGN §7:
// ID is time-ordered), and are valid UUIDv7.
func TestNewIDOrdered(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	ids := make([]ID, 10000)
	for i := range ids {
		ids[i] = NewID()
		checkV7(t, ids[i])
	}
	after := time.Now()
	checkIncreasing(t, ids)
	for _, id := range []ID{ids[0], ids[len(ids)-1]} {
		if tm := id.Time(); tm.Before(before) || tm.After(after) {
			t.Errorf("%s: Time() = %v, made between %v and %v", id, tm, before, after)
		}
	}
}

// Within one millisecond IDs still increase, and keep that millisecond.
func TestNewIDSameMillisecond(t *testing.T) {
	now := time.Now()
	ms := now.Truncate(time.Millisecond)
	ids := make([]ID, 5000)
	for i := range ids {
		ids[i] = newIDAt(now)
		checkV7(t, ids[i])
	}
	checkIncreasing(t, ids)
	if got := ids[len(ids)-1].Time(); !got.Equal(ms) {
		t.Errorf("last id of the millisecond has time %v, want %v", got, ms)
	}
}

// A clock that steps back does not break the order.
func TestNewIDClockStepBack(t *testing.T) {
	a := NewID()
	b := newIDAt(time.Now().Add(-time.Hour))
	c := newIDAt(time.Unix(0, 0))
	checkIncreasing(t, []ID{a, b, c})
	checkV7(t, b)
	checkV7(t, c)
}

func mustHexID(s string) ID {
	var id ID
	if _, err := hex.Decode(id[:], []byte(strings.ReplaceAll(s, "-", ""))); err != nil {
		panic(err)
	}
	return id
}

// successor increments the 74 random bits as one number: the version and
// variant bits never change, and a carry skips over them.
func TestIDSuccessor(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"last byte", "01900000-0000-7000-8000-000000000000", "01900000-0000-7000-8000-000000000001"},
		{"carry in random tail", "01900000-0000-7000-8000-0000000000ff", "01900000-0000-7000-8000-000000000100"},
		{"carry into variant byte", "01900000-0000-7000-80ff-ffffffffffff", "01900000-0000-7000-8100-000000000000"},
		{"variant byte full: carry into byte 7", "01900000-0000-7012-bfff-ffffffffffff", "01900000-0000-7013-8000-000000000000"},
		{"byte 7 full: carry into version byte", "01900000-0000-73ff-bfff-ffffffffffff", "01900000-0000-7400-8000-000000000000"},
		{"random bits full: carry into the time", "01900000-0000-7fff-bfff-ffffffffffff", "01900000-0001-7000-8000-000000000000"},
		{"carry into the first byte", "00ffffff-ffff-7fff-bfff-ffffffffffff", "01000000-0000-7000-8000-000000000000"},
	} {
		in := mustHexID(c.in)
		got := in.successor()
		if want := mustHexID(c.want); got != want {
			t.Errorf("%s: successor(%s) = %s, want %s", c.name, c.in, got, want)
		}
		checkV7(t, got)
		if bytes.Compare(got[:], in[:]) <= 0 {
			t.Errorf("%s: successor not after its input", c.name)
		}
	}
}

// idNumber is the 122-bit number a UUIDv7 holds without its version and
// variant bits: 48 bits of time, then 74 random bits.
func idNumber(id ID) *big.Int {
	n := new(big.Int)
	push := func(v uint64, bits uint) { n.Lsh(n, bits).Or(n, new(big.Int).SetUint64(v)) }
	for _, b := range id[0:6] {
		push(uint64(b), 8)
	}
	push(uint64(id[6]&0x0f), 4)
	push(uint64(id[7]), 8)
	push(uint64(id[8]&0x3f), 6)
	for _, b := range id[9:16] {
		push(uint64(b), 8)
	}
	return n
}

// successor is the very next valid UUIDv7: its number is one more.
func TestIDSuccessorIsNext(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var id ID
		copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "bytes"))
		// Bias towards carries: fill a random number of trailing bytes with ones.
		for i := 15; i > 15-rapid.IntRange(0, 10).Draw(t, "ones"); i-- {
			id[i] = 0xff
		}
		id[0] = 0x01 // keep the time far from overflow
		id[6] = 0x70 | id[6]&0x0f
		id[8] = 0x80 | id[8]&0x3f
		next := id.successor()
		checkV7(t, next)
		want := new(big.Int).Add(idNumber(id), big.NewInt(1))
		if idNumber(next).Cmp(want) != 0 {
			t.Fatalf("successor(%s) = %s: number %x, want %x", id, next, idNumber(next), want)
		}
	})
}

func TestIDText(t *testing.T) {
	id := mustHexID("0192f0c4-7b1a-7c3d-8e4f-0123456789ab")
	if got := id.String(); got != "0192f0c4-7b1a-7c3d-8e4f-0123456789ab" {
		t.Errorf("String() = %q", got)
	}
	for _, s := range []string{
		"0192f0c4-7b1a-7c3d-8e4f-0123456789ab",
		"0192f0c47b1a7c3d8e4f0123456789ab",
		"0192F0C4-7B1A-7C3D-8E4F-0123456789AB",
	} {
		got, err := ParseID(s)
		if err != nil || got != id {
			t.Errorf("ParseID(%q) = %s, %v; want %s", s, got, err, id)
		}
	}
	text, err := id.MarshalText()
	if err != nil || string(text) != id.String() {
		t.Errorf("MarshalText = %q, %v", text, err)
	}
	var back ID
	if err := back.UnmarshalText(text); err != nil || back != id {
		t.Errorf("UnmarshalText(%q) = %s, %v", text, back, err)
	}
	if err := back.UnmarshalText([]byte("nope")); err == nil {
		t.Error("UnmarshalText accepted garbage")
	}
	if !(ID{}).IsZero() || id.IsZero() {
		t.Error("IsZero is wrong")
	}
	if got, want := id.Time(), time.UnixMilli(0x0192f0c47b1a).UTC(); !got.Equal(want) {
		t.Errorf("Time() = %v, want %v", got, want)
	}
	for range 100 {
		id := NewID()
		if back, err := ParseID(id.String()); err != nil || back != id {
			t.Fatalf("ParseID(String(%x)) = %s, %v", id[:], back, err)
		}
	}
}

func TestParseIDErrors(t *testing.T) {
	for _, s := range []string{
		"",
		"0192f0c4",
		"0192f0c4-7b1a-7c3d-8e4f-0123456789a",    // 31 digits
		"0192f0c4-7b1a-7c3d-8e4f-0123456789abc",  // 33 digits
		"0192f0c4-7b1a-7c3d-8e4f-0123456789ag",   // not hex
		"0192f0c47b1a-7c3d-8e4f-0123456789ab",    // one dash missing
		"0192f0c-47b1a-7c3d-8e4f-0123456789ab",   // dash misplaced
		"0192f0c4-7b1a-7c3d-8e4f-01234567-89ab",  // extra dash
		"0192f0c4-7b1a-7c3d-8e4f-0123456789ab ",  // trailing space
		"0192f0c4_7b1a_7c3d_8e4f_0123456789ab",   // wrong separator
		"{0192f0c4-7b1a-7c3d-8e4f-0123456789ab}", // braces
		"0192f0c4-7b1a-7c3d-8e4f-0123456789ab\x00",
		"0192f0c4-7b1a-7c3d-8e4f-0123456789éa",
	} {
		if id, err := ParseID(s); err == nil {
			t.Errorf("ParseID(%q) = %s, want an error", s, id)
		} else if !strings.HasPrefix(err.Error(), "eventlog: ") {
			t.Errorf("ParseID(%q) error %q lacks the package prefix", s, err)
		}
	}
}

// FuzzParseID: no input panics, and an accepted one is 32 hex digits (with
// the dashes of the canonical form or none) that round-trip through String.
func FuzzParseID(f *testing.F) {
	f.Add("0192f0c4-7b1a-7c3d-8e4f-0123456789ab")
	f.Add("0192f0c47b1a7c3d8e4f0123456789ab")
	f.Add("0192f0c4-7b1a-7c3d-8e4f-0123456789a-")
	f.Add("------------------------------------")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		if got := id.String(); !strings.EqualFold(got, s) && !strings.EqualFold(strings.ReplaceAll(got, "-", ""), s) {
			t.Fatalf("ParseID(%q) = %s: not the same text", s, got)
		}
		back, err := ParseID(id.String())
		if err != nil || back != id {
			t.Fatalf("ParseID(%q) does not round-trip: %s, %v", id.String(), back, err)
		}
	})
}

// withIDClock runs f with the process-wide idClock reset to last, then
// leaves the clock at the newer of its old value and what f left, so that
// later IDs still follow every ID made before.
func withIDClock(last ID, f func()) {
	idClock.Lock()
	saved := idClock.last
	idClock.last = last
	idClock.Unlock()
	f()
	idClock.Lock()
	if saved.compare(idClock.last) > 0 {
		idClock.last = saved
	}
	idClock.Unlock()
}

// The 74 bits after the time are crypto/rand's bytes (with the version and
// variant bits set over them), not anything derived from the clock.
func TestNewIDRandomBits(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 1)
	var r [10]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatal(err)
	}
	cryptotest.SetGlobalRandom(t, 1) // newIDAt reads the same bytes again
	var id ID
	withIDClock(ID{}, func() { id = newIDAt(time.Now()) })
	checkV7(t, id)
	got := []byte{id[6] & 0x0f, id[7], id[8] & 0x3f}
	got = append(got, id[9:16]...)
	want := []byte{r[0] & 0x0f, r[1], r[2] & 0x3f}
	want = append(want, r[3:10]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("random bits of %s = % x, want crypto/rand's % x", id, got, want)
	}
}

// When the random source repeats itself within a millisecond, the second ID
// is still new: the successor of the first.
func TestNewIDRandomRepeats(t *testing.T) {
	now := time.Now()
	var a, b ID
	withIDClock(ID{}, func() {
		cryptotest.SetGlobalRandom(t, 7)
		a = newIDAt(now)
		cryptotest.SetGlobalRandom(t, 7)
		b = newIDAt(now)
	})
	if b != a.successor() {
		t.Fatalf("same instant, same random bytes: second ID %s, want %s (the successor of %s)", b, a.successor(), a)
	}
}
