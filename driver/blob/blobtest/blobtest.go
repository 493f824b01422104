package blobtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/forkline/forkline/driver/blob"
)

// Kit says how to make and damage stores of one implementation.
type Kit struct {
	// New returns an empty store; each call a new namespace.
	New func(t testing.TB) blob.Store
	// Reopen returns another value of the store s (a new connection, the
	// same directory): what one puts, the other reads.
	Reopen func(t testing.TB, s blob.Store) blob.Store
	// Corrupt replaces the stored content of the blob h of s with content,
	// behind the store's back (as a disk fault or a hand edit would).
	Corrupt func(t testing.TB, s blob.Store, h blob.Hash, content []byte)
	// Large is the size of the large blob the suite stores (several of an
	// implementation's chunks, say). Default 3 MiB + 17 bytes.
	Large int
}

// Run runs the suite.
func Run(t *testing.T, k Kit) {
	if k.Large == 0 {
		k.Large = 3<<20 + 17
	}
	t.Run("PutGetHas", func(t *testing.T) { putGetHas(t, k) })
	t.Run("PutWrongContent", func(t *testing.T) { putWrong(t, k) })
	t.Run("Corrupt", func(t *testing.T) { corrupt(t, k) })
	t.Run("DeleteList", func(t *testing.T) { deleteList(t, k) })
	t.Run("Namespaces", func(t *testing.T) { namespaces(t, k) })
	t.Run("ConcurrentPut", func(t *testing.T) { concurrentPut(t, k) })
}

func content(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func mustGet(t testing.TB, s blob.Store, h blob.Hash) []byte {
	t.Helper()
	b, err := blob.ReadAll(context.Background(), s, h)
	if err != nil {
		t.Fatalf("Get %s: %v", h, err)
	}
	return b
}

func putGetHas(t *testing.T, k Kit) {
	ctx := context.Background()
	s := k.New(t)
	for _, data := range [][]byte{{}, []byte("hello"), content(k.Large, 1)} {
		h := blob.Sum(data)
		if ok, err := s.Has(ctx, h); err != nil || ok {
			t.Fatalf("Has before Put = %v, %v", ok, err)
		}
		if _, err := s.Get(ctx, h); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Get before Put = %v, want ErrNotFound", err)
		}
		if err := s.Put(ctx, h, bytes.NewReader(data)); err != nil {
			t.Fatalf("Put %d bytes: %v", len(data), err)
		}
		// Again: idempotent.
		if err := s.Put(ctx, h, bytes.NewReader(data)); err != nil {
			t.Fatalf("Put again: %v", err)
		}
		if ok, err := s.Has(ctx, h); err != nil || !ok {
			t.Fatalf("Has after Put = %v, %v", ok, err)
		}
		if got := mustGet(t, s, h); !bytes.Equal(got, data) {
			t.Fatalf("Get returned %d bytes, want the %d put", len(got), len(data))
		}
		if k.Reopen != nil {
			if got := mustGet(t, k.Reopen(t, s), h); !bytes.Equal(got, data) {
				t.Fatalf("Get through another value returned %d bytes, want the %d put", len(got), len(data))
			}
		}
	}
}

func putWrong(t *testing.T, k Kit) {
	ctx := context.Background()
	s := k.New(t)
	h := blob.Sum([]byte("right"))
	err := s.Put(ctx, h, strings.NewReader("wrong"))
	if !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
		t.Fatalf("Put of content that does not hash to its name = %v, want ErrCorrupt naming %s", err, h)
	}
	if ok, err := s.Has(ctx, h); err != nil || ok {
		t.Fatalf("Has after a refused Put = %v, %v; want nothing stored", ok, err)
	}
	for h, err := range s.List(ctx) {
		t.Fatalf("List after a refused Put yields %s, %v", h, err)
	}
	// A reader that fails stores nothing either.
	big := content(k.Large, 2)
	err = s.Put(ctx, blob.Sum(big), io.MultiReader(bytes.NewReader(big[:k.Large/2]), errReader{}))
	if err == nil {
		t.Fatal("Put from a failing reader succeeded")
	}
	if ok, _ := s.Has(ctx, blob.Sum(big)); ok {
		t.Fatal("Put from a failing reader stored the blob")
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("read failed") }

func corrupt(t *testing.T, k Kit) {
	ctx := context.Background()
	for name, c := range map[string]func([]byte) []byte{
		"flipped":   func(b []byte) []byte { b = bytes.Clone(b); b[len(b)/2] ^= 1; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-1] },
		"longer":    func(b []byte) []byte { return append(bytes.Clone(b), 'x') },
	} {
		for _, size := range []int{10, k.Large} {
			s := k.New(t)
			data := content(size, 3)
			h, err := blob.PutBytes(ctx, s, data)
			if err != nil {
				t.Fatal(err)
			}
			k.Corrupt(t, s, h, c(data))
			r, err := s.Get(ctx, h)
			if err == nil {
				_, err = io.ReadAll(r)
				_ = r.Close()
			}
			if !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
				t.Errorf("%s blob of %d bytes: Get = %v, want ErrCorrupt naming %s", name, size, err, h)
			}
		}
	}
}

func deleteList(t *testing.T, k Kit) {
	ctx := context.Background()
	s := k.New(t)
	var want []blob.Hash
	for i := range 5 {
		h, err := blob.PutBytes(ctx, s, content(100+i, byte(i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, h)
	}
	list := func() []blob.Hash {
		var got []blob.Hash
		for h, err := range s.List(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, h)
		}
		return got
	}
	got := list()
	if len(got) != len(want) {
		t.Fatalf("List = %d hashes, want %d", len(got), len(want))
	}
	for i := 1; i < len(got); i++ {
		if bytes.Compare(got[i-1][:], got[i][:]) >= 0 {
			t.Fatalf("List not in increasing order: %s before %s", got[i-1], got[i])
		}
	}
	if err := s.Delete(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, want[0]); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Delete twice = %v, want ErrNotFound", err)
	}
	if ok, _ := s.Has(ctx, want[0]); ok {
		t.Fatal("Has after Delete = true")
	}
	if _, err := s.Get(ctx, want[0]); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if got := list(); len(got) != len(want)-1 {
		t.Fatalf("List after Delete = %d hashes, want %d", len(got), len(want)-1)
	}
	// Breaking out of List early is fine.
	for range s.List(ctx) {
		break
	}
}

func namespaces(t *testing.T, k Kit) {
	ctx := context.Background()
	a, b := k.New(t), k.New(t)
	h, err := blob.PutBytes(ctx, a, []byte("only in a"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Has(ctx, h); err != nil || ok {
		t.Fatalf("another namespace has the blob: %v, %v", ok, err)
	}
}

func concurrentPut(t *testing.T, k Kit) {
	ctx := context.Background()
	s := k.New(t)
	data := content(k.Large, 4)
	h := blob.Sum(data)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.Put(ctx, h, bytes.NewReader(data)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Put: %v", err)
		}
	}
	if got := mustGet(t, s, h); !bytes.Equal(got, data) {
		t.Fatal("concurrent Puts stored other content")
	}
}
