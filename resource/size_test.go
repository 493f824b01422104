package resource_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/forkline/forkline/driver"
	"github.com/forkline/forkline/eventlog"
	"github.com/forkline/forkline/resource"
)

// sized is odd that says what each capture stored (driver.Sizer).
type sized struct {
	odd
	stored int64
}

func (s *sized) CheckpointSize(ctx context.Context, h string) (string, int64, error) {
	ref, err := s.Checkpoint(ctx, h)
	if err != nil {
		return "", 0, err
	}
	return ref, s.stored, nil
}

var _ driver.Sizer[string] = (*sized)(nil)

// CaptureSize reports the stored bytes of a driver.Sizer's successful
// capture, and none for a driver without it or a capture that failed;
// the event is Capture's in every case.
func TestCaptureSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		d    driver.Driver[string, any]
		want string
	}{
		{"sizer", &sized{odd{id: "x", ref: "r1"}, 42}, "captured r1 42"},
		{"sizer, nothing new", &sized{odd{id: "x", ref: "r1"}, 0}, "captured r1 0"},
		{"no sizer", &odd{id: "x", ref: "r1"}, "captured r1 unsized"},
		{"error", &sized{odd{id: "x", err: errors.New("disk full")}, 42}, "failed disk full unsized"},
		{"empty ref", &sized{odd{id: "x"}, 42}, "failed driver x returned an empty checkpoint ref unsized"},
		{"panic", &sized{odd{id: "x", panicMsg: "boom"}, 42}, "failed checkpoint panicked: boom unsized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, n, ok := resource.CaptureSize(ctx, erase(t, tc.d), "handle", "k", 4, eventlog.CaptureSteps)
			var got string
			switch p := ev.(type) {
			case *eventlog.ResourceCaptured:
				if p.Generation != 4 || p.Key != "k" || p.Reason != eventlog.CaptureSteps {
					t.Fatalf("captured %+v", p)
				}
				got = "captured " + p.Ref
			case *eventlog.ResourceCaptureFailed:
				got = "failed " + p.Error
			}
			switch {
			case ok:
				got += fmt.Sprint(" ", n)
			case n == 0:
				got += " unsized"
			default:
				got += fmt.Sprint(" unsized but ", n)
			}
			if got != tc.want {
				t.Fatalf("CaptureSize = %q, want %q", got, tc.want)
			}
		})
	}
	if _, _, ok := resource.CaptureSize(ctx, erase(t, &sized{odd{id: "x", ref: "r"}, 1}), 7, "k", 1, eventlog.CaptureSteps); ok {
		t.Fatal("CaptureSize of a handle of the wrong type reported a size")
	}
}
