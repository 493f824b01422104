package eventlog

import (
	"strings"
	"testing"
)

// TestCheckSizesExact walks one msgpack value of every form checkSizes
// knows: each is accepted whole and refused when its last byte is missing,
// so that the walk skips exactly the bytes each form takes (too few, and a
// lying length would slip through; too many, and a good record would be
// refused).
func TestCheckSizesExact(t *testing.T) {
	for _, c := range []struct {
		name string
		v    []byte
	}{
		{"fixstr", []byte{0xa2, 'h', 'i'}},
		{"fixarray", []byte{0x92, 0x01, 0xc3}},
		{"fixmap", []byte{0x81, 0xa1, 'k', 0x02}},
		{"bin8", []byte{0xc4, 2, 'a', 'b'}},
		{"str8", []byte{0xd9, 1, 'a'}},
		{"bin16", []byte{0xc5, 0, 2, 'a', 'b'}},
		{"str16", []byte{0xda, 0, 1, 'a'}},
		{"bin32", []byte{0xc6, 0, 0, 0, 2, 'a', 'b'}},
		{"str32", []byte{0xdb, 0, 0, 0, 1, 'a'}},
		{"ext8", []byte{0xc7, 3, 0xff, 1, 2, 3}},
		{"ext16", []byte{0xc8, 0, 3, 0xff, 1, 2, 3}},
		{"ext32", []byte{0xc9, 0, 0, 0, 3, 0xff, 1, 2, 3}},
		{"float32", []byte{0xca, 1, 2, 3, 4}},
		{"float64", []byte{0xcb, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"uint8", []byte{0xcc, 1}},
		{"uint16", []byte{0xcd, 1, 2}},
		{"uint32", []byte{0xce, 1, 2, 3, 4}},
		{"uint64", []byte{0xcf, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"int8", []byte{0xd0, 1}},
		{"int16", []byte{0xd1, 1, 2}},
		{"int32", []byte{0xd2, 1, 2, 3, 4}},
		{"int64", []byte{0xd3, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"fixext1", []byte{0xd4, 0xff, 1}},
		{"fixext2", []byte{0xd5, 0xff, 1, 2}},
		{"fixext4", []byte{0xd6, 0xff, 1, 2, 3, 4}},
		{"fixext8", []byte{0xd7, 0xff, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"fixext16", []byte{0xd8, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{"array16", []byte{0xdc, 0, 2, 0x01, 0x02}},
		{"array32", []byte{0xdd, 0, 0, 0, 2, 0x01, 0x02}},
		{"map16", []byte{0xde, 0, 1, 0x01, 0x02}},
		{"map32", []byte{0xdf, 0, 0, 0, 1, 0x01, 0x02}},
		// The first and last code of every range: a one-byte value, or a
		// fix form holding the fewest and the most it can.
		{"positive fixint 0", []byte{0x00}},
		{"positive fixint 0x7f", []byte{0x7f}},
		{"negative fixint 0xe0", []byte{0xe0}},
		{"negative fixint 0xff", []byte{0xff}},
		{"nil", []byte{0xc0}},
		{"false", []byte{0xc2}},
		{"true", []byte{0xc3}},
		{"empty fixmap", []byte{0x80}},
		{"fixmap of 15", append([]byte{0x8f}, make([]byte, 30)...)},
		{"empty fixarray", []byte{0x90}},
		{"fixarray of 15", append([]byte{0x9f}, make([]byte, 15)...)},
		{"empty fixstr", []byte{0xa0}},
		{"fixstr of 31", append([]byte{0xbf}, make([]byte, 31)...)},
	} {
		if err := checkSizes(c.v); err != nil {
			t.Errorf("%s % x: %v", c.name, c.v, err)
		}
		if err := checkSizes(c.v[:len(c.v)-1]); err == nil {
			t.Errorf("%s % x without its last byte: accepted", c.name, c.v)
		}
	}
}

// TestCheckSizesUnusedCode checks that the one code msgpack never uses is
// refused, and the error names its byte.
func TestCheckSizesUnusedCode(t *testing.T) {
	err := checkSizes([]byte{0x91, 0xc1})
	if err == nil || !strings.Contains(err.Error(), "msgpack code 0xc1 at byte 1 is not used") {
		t.Fatalf("checkSizes(91 c1) = %v, want the unused code at byte 1", err)
	}
}
