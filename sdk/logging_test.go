package sdk_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/forkline/forkline/sdk"
)

// TestReplayAwareLogger: a handler's progress lines logged while it replays
// are dropped; IsReplaying is true exactly until the
// dispatch has reached every recorded step; the kernel logs each dispatch's
// start and end and nothing per replayed step.
func TestReplayAwareLogger(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	var replaying []bool
	var stop context.CancelFunc
	k := newKernel(t, newStore(t), func(k *sdk.Kernel) {
		_, _ = sdk.Register(k, "a", func(ctx context.Context, _ none) (int, error) {
			sum := 0
			for i := range 3 {
				replaying = append(replaying, sdk.IsReplaying(ctx))
				n, err := sdk.Step(ctx, "step", func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return 0, err
				}
				sum += n
				sdk.Logger(ctx).Info("progress", "step", i)
				if i == 1 && stop != nil {
					stop() // the first dispatch is cancelled here: it resumes
					stop = nil
					return 0, ctx.Err()
				}
			}
			return sum, nil
		})
	}, sdk.WithLogger(logger))
	if sdk.IsReplaying(context.Background()) {
		t.Fatal("IsReplaying outside a handler")
	}
	ctx := context.Background()
	id, _ := k.Start(ctx, "a", none{})
	cctx, cancel := context.WithCancel(ctx)
	stop = cancel
	if _, err := k.Run(cctx, id); err == nil {
		t.Fatal("the cancelled dispatch completed")
	}
	if _, err := k.Run(ctx, id); err != nil {
		t.Fatal(err)
	}
	// First dispatch: live, live. Second: replays steps 0 and 1, then live.
	if diff := cmp.Diff([]bool{false, false, true, true, false}, replaying); diff != "" {
		t.Fatalf("IsReplaying before each step (-want +got):\n%s", diff)
	}
	var progress []string
	var kernel []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "msg=progress") {
			progress = append(progress, line[strings.Index(line, "step="):])
		} else {
			kernel = append(kernel, line[:strings.Index(line, " execution=")])
		}
	}
	// DESIGN §13: replaying ends when the last recorded step is reached
	// again, so the line logged after it (step=1) prints on both
	// dispatches; step=0's, logged between two recorded steps, prints once.
	if diff := cmp.Diff([]string{"step=0", "step=1", "step=1", "step=2"}, progress); diff != "" {
		t.Fatalf("progress lines (-want +got):\n%s\nlog:\n%s", diff, buf.String())
	}
	want := []string{
		`level=INFO msg="forkline: dispatch started"`,
		`level=INFO msg="forkline: dispatch stopped; the execution can resume"`,
		`level=INFO msg="forkline: dispatch started"`,
		`level=INFO msg="forkline: execution completed"`,
	}
	if diff := cmp.Diff(want, kernel); diff != "" {
		t.Fatalf("kernel lines (-want +got):\n%s\nlog:\n%s", diff, buf.String())
	}
}
