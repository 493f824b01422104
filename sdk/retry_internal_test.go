package sdk

import (
	"testing"
	"time"
)

// TestRetryPolicyDefaults: check fills in exactly the fields left zero —
// Initial, Max (at least Initial), Multiplier — and keeps every field given.
func TestRetryPolicyDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   RetryPolicy
		want RetryPolicy
	}{
		{"all defaults", RetryPolicy{MaxAttempts: 1},
			RetryPolicy{MaxAttempts: 1, Initial: DefaultRetryInitial, Max: DefaultRetryMax, Multiplier: DefaultRetryMultiplier}},
		{"all given", RetryPolicy{MaxAttempts: 4, Initial: time.Second, Max: time.Minute, Multiplier: 3},
			RetryPolicy{MaxAttempts: 4, Initial: time.Second, Max: time.Minute, Multiplier: 3}},
		{"Initial above the default Max", RetryPolicy{MaxAttempts: 2, Initial: DefaultRetryMax + time.Second},
			RetryPolicy{MaxAttempts: 2, Initial: DefaultRetryMax + time.Second, Max: DefaultRetryMax + time.Second, Multiplier: DefaultRetryMultiplier}},
		{"Multiplier 1", RetryPolicy{MaxAttempts: 2, Multiplier: 1},
			RetryPolicy{MaxAttempts: 2, Initial: DefaultRetryInitial, Max: DefaultRetryMax, Multiplier: 1}},
	} {
		got, err := tc.in.check()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.MaxAttempts != tc.want.MaxAttempts || got.Initial != tc.want.Initial || got.Max != tc.want.Max || got.Multiplier != tc.want.Multiplier {
			t.Errorf("%s: check() = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
