package coverage

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// TestChunkedNeverCopies checks what chunked is for: past the first chunk,
// every chunk is allocated at its full size once, so an append never copies
// the entries already held (their addresses stay put), and every entry reads
// back by index.
func TestChunkedNeverCopies(t *testing.T) {
	const size = 1 << chunkBits
	var c chunked[int]
	var first [4]*int // address of the first entry of chunks 1..3
	for i := range 3*size + 2 {
		c.append(i)
		k := i >> chunkBits
		if k > 0 && i&(size-1) == 0 {
			first[k] = &c.chunks[k][0]
		}
		if k > 0 && cap(c.chunks[k]) != size {
			t.Fatalf("after %d appends: chunk %d has capacity %d, want %d", i+1, k, cap(c.chunks[k]), size)
		}
	}
	for k := 1; k <= 3; k++ {
		if &c.chunks[k][0] != first[k] {
			t.Errorf("chunk %d moved: its entries were copied by a later append", k)
		}
	}
	if c.len() != 3*size+2 {
		t.Fatalf("len = %d, want %d", c.len(), 3*size+2)
	}
	for i := range c.len() {
		if got := c.at(i); got != i {
			t.Fatalf("at(%d) = %d", i, got)
		}
	}
	c.set(size+1, -1)
	if got := c.at(size + 1); got != -1 {
		t.Fatalf("after set(%d, -1): at = %d", size+1, got)
	}
}

// TestFoldLimit checks the limit of Apply: once a resource changed
// math.MaxInt32-1 times, the next event still folds (the mark indexes fit
// an int32); at math.MaxInt32 changes the event is refused with ErrInvalid
// and the Fold is unchanged. The count is set directly: reaching it by
// folding would take tens of gigabytes.
func TestFoldLimit(t *testing.T) {
	f := New()
	if err := f.Apply(eventlog.Event{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "a"}}); err != nil {
		t.Fatal(err)
	}
	f.most = math.MaxInt32 - 1
	if err := f.Apply(eventlog.Event{Seq: 2, Data: &eventlog.DispatchStarted{Dispatch: 1}}); err != nil {
		t.Fatalf("at %d changes: %v", f.most, err)
	}
	f.most = math.MaxInt32
	err := f.Apply(eventlog.Event{Seq: 3, Data: &eventlog.DispatchStarted{Dispatch: 2}})
	if !errors.Is(err, eventlog.ErrInvalid) {
		t.Fatalf("at %d changes: err = %v, want ErrInvalid", f.most, err)
	}
	if f.Head() != 2 {
		t.Fatalf("refused event was folded: head %d, want 2", f.Head())
	}
}

// TestApplyOutOfOrder checks that an event whose seq is not Head()+1 is
// refused with ErrInvalid, the error names the seq the fold expects, and
// the Fold is unchanged.
func TestApplyOutOfOrder(t *testing.T) {
	f := New()
	if err := f.Apply(eventlog.Event{Seq: 1, Data: &eventlog.ExecutionCreated{Agent: "a"}}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 3} {
		err := f.Apply(eventlog.Event{Seq: seq, Data: &eventlog.DispatchStarted{Dispatch: 1}})
		if !errors.Is(err, eventlog.ErrInvalid) || !strings.Contains(err.Error(), "the fold expects 2") {
			t.Fatalf("seq %d after seq 1: err = %v, want ErrInvalid naming seq 2", seq, err)
		}
		if f.Head() != 1 {
			t.Fatalf("seq %d after seq 1: head %d, want 1", seq, f.Head())
		}
	}
}
