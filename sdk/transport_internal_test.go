package sdk

import (
	"net/http"
	"testing"
	"time"
)

// TestTransientStatus: 429 and every 5xx are failed attempts; nothing
// else is, the statuses around them included.
func TestTransientStatus(t *testing.T) {
	for code, want := range map[int]bool{
		200: false, 428: false, 429: true, 430: false, 499: false,
		500: true, 503: true, 599: true, 600: false,
	} {
		if got := transientStatus(code); got != want {
			t.Errorf("transientStatus(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestRetryAfter: a Retry-After of seconds, capped at a day, or of an HTTP
// date still to come; anything else asks for no wait.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"1", time.Second},
		{"7", 7 * time.Second},
		{"86400", day},
		{"86401", day},
		{"9223372036854775807", day},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Format(http.TimeFormat), 0},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
		{"1.5", 0},
	} {
		if got := retryAfter(c.v, now); got != c.want {
			t.Errorf("retryAfter(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}
