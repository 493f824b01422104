package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// DESIGN §5: EverySteps(n) must be ≥ 1; defaults are 1 and true.
func TestCheckpointsValidate(t *testing.T) {
	if got, want := DefaultCheckpoints(), (Checkpoints{EverySteps: 1, OnCompletion: true}); got != want {
		t.Errorf("DefaultCheckpoints() = %+v, want %+v", got, want)
	}
	tests := []struct {
		c       Checkpoints
		wantErr string // "" = valid
	}{
		{DefaultCheckpoints(), ""},
		{Checkpoints{EverySteps: 5}, ""},
		{Checkpoints{EverySteps: 1 << 40, OnCompletion: true}, ""},
		{Checkpoints{EverySteps: 0, OnCompletion: true}, "every steps 0, must be at least 1"},
		{Checkpoints{EverySteps: -3}, "every steps -3, must be at least 1"},
	}
	for _, tc := range tests {
		err := tc.c.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%+v.Validate() = %v, want nil", tc.c, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "policy: ") {
			t.Errorf("%+v.Validate() = %v, want an error with %q", tc.c, err, tc.wantErr)
		}
		if !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("%+v.Validate() = %v, does not wrap eventlog.ErrInvalid", tc.c, err)
		}
	}
}
