package sdk

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// BenchmarkStreamRead is the cost of one 64-byte read of a streamed model
// reply through the Transport's stream (kept for the record, offered to
// WatchDeltas with no watcher) and directly, from an upstream in memory:
// the per-chunk overhead of benchmarks row 11b without the network.
func BenchmarkStreamRead(b *testing.B) {
	event := "data: " + strings.Repeat("x", 56) + "\n\n"
	const events = 256
	body := []byte(strings.Repeat(event, events))
	buf := make([]byte, len(event))
	for _, via := range []bool{false, true} {
		name := "direct"
		if via {
			name = "transport"
		}
		b.Run("via="+name, func(b *testing.B) {
			d := &dispatch{k: &Kernel{}}
			b.SetBytes(int64(len(event)))
			n := 0
			var r io.Reader
			for b.Loop() {
				if n%events == 0 {
					up := io.NopCloser(bytes.NewReader(body))
					r = up
					if via {
						r = &liveStream{d: d, ctx: context.Background(), body: up}
					}
				}
				if _, err := io.ReadFull(r, buf); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}
