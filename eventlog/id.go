package eventlog

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// ID identifies an execution. It is a UUIDv7: the first 48 bits are the Unix
// time in milliseconds, so IDs sort by creation time, byte-wise and as text.
// IDs made by one process are strictly increasing even within one millisecond.
type ID [16]byte

// idClock keeps IDs made by this process strictly increasing.
var idClock struct {
	sync.Mutex
	last ID
}

// NewID returns a new time-ordered ID for the current time.
func NewID() ID { return newIDAt(time.Now()) }

func newIDAt(now time.Time) ID {
	var id ID
	ms := uint64(now.UnixMilli())
	var r [10]byte
	if _, err := rand.Read(r[:]); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+ documents it
		// as crashing the program instead); keep the IDs unique regardless.
		binary.BigEndian.PutUint64(r[2:], uint64(now.UnixNano()))
	}
	binary.BigEndian.PutUint64(id[0:8], ms<<16)
	copy(id[6:], r[:])
	id[6] = 0x70 | (id[6] & 0x0f) // version 7
	id[8] = 0x80 | (id[8] & 0x3f) // RFC 9562 variant

	idClock.Lock()
	defer idClock.Unlock()
	if id.compare(idClock.last) <= 0 {
		// Same millisecond (or a clock step back): continue from the last ID.
		id = idClock.last.successor()
	}
	idClock.last = id
	return id
}

// successor returns the next ID in byte order that is still a valid UUIDv7:
// the random bits after the version and variant are incremented as one number.
func (id ID) successor() ID {
	next := id
	for i := 15; i >= 0; i-- {
		switch i {
		case 8: // two variant bits stay 10
			low := next[i] & 0x3f
			if low < 0x3f {
				next[i] = 0x80 | (low + 1)
				return next
			}
			next[i] = 0x80
		case 6: // four version bits stay 0111
			low := next[i] & 0x0f
			if low < 0x0f {
				next[i] = 0x70 | (low + 1)
				return next
			}
			next[i] = 0x70
		default:
			next[i]++
			if next[i] != 0 {
				return next
			}
		}
	}
	return next
}

func (id ID) compare(o ID) int {
	for i := range id {
		if id[i] != o[i] {
			if id[i] < o[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// IsZero reports whether id is the zero ID, which names no execution.
func (id ID) IsZero() bool { return id == ID{} }

// String returns the canonical text form, 8-4-4-4-12 lower-case hex digits.
func (id ID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return string(b[:])
}

// Time returns the creation time encoded in the ID, to the millisecond.
func (id ID) Time() time.Time {
	ms := binary.BigEndian.Uint64(id[0:8]) >> 16
	return time.UnixMilli(int64(ms)).UTC()
}

// MarshalText implements encoding.TextMarshaler with the form of String.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what ParseID accepts.
func (id *ID) UnmarshalText(b []byte) error {
	p, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// ParseID parses the text form of an ID: 32 hex digits, with or without the
// four dashes of the canonical form.
func ParseID(s string) (ID, error) {
	var id ID
	clean := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		if s[i] == '-' && (i == 8 || i == 13 || i == 18 || i == 23) && len(s) == 36 {
			continue
		}
		clean = append(clean, s[i])
	}
	if len(clean) != 32 {
		return ID{}, fmt.Errorf("eventlog: parse id %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(id[:], clean); err != nil {
		return ID{}, fmt.Errorf("eventlog: parse id %q: %w", s, err)
	}
	return id, nil
}
