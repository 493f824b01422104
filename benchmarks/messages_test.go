package benchmarks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/forkline/forkline/sdk"
)

// BenchmarkSendRecv stands for a chat's person sending to a running agent
// (scenario 10a): Kernel.Send to the waiting sdk.Recv returning the
// message, one process, on sdk.Open's synced store.
func BenchmarkSendRecv(b *testing.B) {
	ctx := context.Background()
	b.Run("process=one", func(b *testing.B) {
		k, err := sdk.Open(b.TempDir(), sdk.ParkAfter(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		defer k.Close()
		got := make(chan time.Time, 1)
		if err := recvLoop(k, got); err != nil {
			b.Fatal(err)
		}
		id, err := k.Start(ctx, "recv", 0)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := k.Run(ctx, id); done <- err }()
		for info, _ := k.Log().Info(ctx, id); info.Head < 3; info, _ = k.Log().Info(ctx, id) {
			time.Sleep(time.Millisecond)
		}
		n := 0
		for b.Loop() {
			n++
			if err := k.Send(ctx, id, "in", n, sdk.MessageID(fmt.Sprintf("m%d", n))); err != nil {
				b.Fatal(err)
			}
			<-got
		}
		if err := k.Send(ctx, id, "in", -1, sdk.MessageID("end")); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}
