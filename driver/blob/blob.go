package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"strconv"
)

// Hash is the SHA-256 of a blob's content: its name.
type Hash [sha256.Size]byte

// Sum returns the Hash of data.
func Sum(data []byte) Hash { return sha256.Sum256(data) }

// String returns the hash as 64 lower-case hex digits.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses 64 lower-case hex digits. Anything else is an error
// wrapping [ErrInvalid].
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("%w: hash %s: want 64 lower-case hex digits", ErrInvalid, strconv.Quote(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, fmt.Errorf("%w: hash %s: want 64 lower-case hex digits", ErrInvalid, strconv.Quote(s))
		}
	}
	_, _ = hex.Decode(h[:], []byte(s))
	return h, nil
}

// ErrNotFound is wrapped by the error of Get and Delete for a blob the
// store does not hold.
var ErrNotFound = errors.New("blob: not found")

// ErrCorrupt is wrapped by the error for content that does not hash to the
// name it is stored or put under. The error names the hash.
var ErrCorrupt = errors.New("blob: content does not match its hash")

// ErrInvalid is wrapped by the error for bad input, such as a malformed
// hash or an unusable configuration; nothing is written.
var ErrInvalid = errors.New("blob: invalid")

// Store is a content-addressed blob store; see the package documentation.
// Its methods are safe for concurrent use, also by several processes (and,
// for a shared implementation, several hosts) at once.
type Store interface {
	// Put stores the content r yields, read to io.EOF, as the blob h. If
	// what was read does not hash to h, nothing is stored and the error
	// wraps ErrCorrupt. Putting a blob the store already holds stores
	// nothing and may return without reading r. A blob is visible to Has
	// and Get only once complete and durable.
	Put(ctx context.Context, h Hash, r io.Reader) error
	// Get returns a reader of the blob h, to be closed by the caller. A
	// missing blob is an error wrapping ErrNotFound. The reader returns
	// io.EOF only after content that hashes to h; otherwise its last Read
	// returns an error wrapping ErrCorrupt that names h.
	Get(ctx context.Context, h Hash) (io.ReadCloser, error)
	// Has reports whether the store holds the blob h. It does not read or
	// check the content.
	Has(ctx context.Context, h Hash) (bool, error)
	// Delete removes the blob h. A missing blob is an error wrapping
	// ErrNotFound. Readers already open may fail.
	Delete(ctx context.Context, h Hash) error
	// List yields the hash of every blob in the store, in increasing
	// order. The error, if any, is yielded once and last; breaking out of
	// the loop releases what the listing holds.
	List(ctx context.Context) iter.Seq2[Hash, error]
}

// ReadAll returns the content of the blob h of s, checked against h.
func ReadAll(ctx context.Context, s Store, h Hash) ([]byte, error) {
	r, err := s.Get(ctx, h)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// PutBytes stores data as the blob named by its hash, and returns the hash.
func PutBytes(ctx context.Context, s Store, data []byte) (Hash, error) {
	h := Sum(data)
	return h, s.Put(ctx, h, bytes.NewReader(data))
}

// corruptError is the error for a blob whose content does not match h.
func corruptError(h Hash, detail string) error {
	return fmt.Errorf("%w: blob %s: %s", ErrCorrupt, h, detail)
}

// Verifier wraps the content reader of the blob h (of size bytes, or -1
// when unknown) so that it yields io.EOF only after content that hashes to
// h, and otherwise an error wrapping ErrCorrupt naming h. Implementations
// of Store use it for Get.
func Verifier(h Hash, size int64, r io.Reader) io.Reader {
	return &verifier{want: h, size: size, r: r, h: sha256.New()}
}

type verifier struct {
	want Hash
	size int64
	n    int64
	r    io.Reader
	h    hash.Hash
	err  error
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.size >= 0 && v.n > v.size {
		v.err = corruptError(v.want, fmt.Sprintf("holds more than its %d bytes", v.size))
		return 0, v.err
	}
	if err == io.EOF {
		var got Hash
		copy(got[:], v.h.Sum(nil))
		switch {
		case v.size >= 0 && v.n != v.size:
			v.err = corruptError(v.want, fmt.Sprintf("holds %d bytes, want %d", v.n, v.size))
		case got != v.want:
			v.err = corruptError(v.want, "content hashes to "+got.String())
		default:
			v.err = io.EOF
		}
		return n, v.err
	}
	if err != nil {
		v.err = err
	}
	return n, err
}

// hashingReader hashes what it reads.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func newHashingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r, h: sha256.New()}
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	hr.n += int64(n)
	return n, err
}

func (hr *hashingReader) sum() Hash {
	var h Hash
	copy(h[:], hr.h.Sum(nil))
	return h
}

// CheckPut returns nil when got, the hash of what Put read, is want, the
// name it was put under; otherwise an error wrapping ErrCorrupt naming
// want. Implementations of Store use it for Put.
func CheckPut(want, got Hash) error {
	if got != want {
		return corruptError(want, "content put under it hashes to "+got.String())
	}
	return nil
}
