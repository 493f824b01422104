package eventlog_test

import (
	"errors"
	"testing"

	"github.com/forkline/forkline/eventlog"
)

// TestFilterValidate refuses an unknown status and a negative limit, and
// accepts the zero filter and a limit of 0 (no limit).
func TestFilterValidate(t *testing.T) {
	for _, f := range []eventlog.Filter{
		{Status: []eventlog.Status{eventlog.StatusRunning, 0}},
		{Status: []eventlog.Status{eventlog.Status(7)}},
		{Limit: -1},
	} {
		if err := f.Validate(); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", f, err)
		}
	}
	for _, f := range []eventlog.Filter{{}, {Limit: 0}, {Limit: 1, Status: eventlog.Statuses()}} {
		if err := f.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", f, err)
		}
	}
}

// TestFilterMatch checks each condition alone and together: an empty
// condition matches anything, a set one only its value, and Status matches
// any of its values.
func TestFilterMatch(t *testing.T) {
	p, c, other := eventlog.NewID(), eventlog.NewID(), eventlog.NewID()
	info := eventlog.Info{ID: eventlog.NewID(), Agent: "coder", Parent: p, Caller: c, Status: eventlog.StatusWaiting}
	for _, tc := range []struct {
		name string
		f    eventlog.Filter
		want bool
	}{
		{"zero", eventlog.Filter{}, true},
		{"agent", eventlog.Filter{Agent: "coder"}, true},
		{"other agent", eventlog.Filter{Agent: "reviewer"}, false},
		{"parent", eventlog.Filter{Parent: p}, true},
		{"other parent", eventlog.Filter{Parent: other}, false},
		{"caller", eventlog.Filter{Caller: c}, true},
		{"other caller", eventlog.Filter{Caller: other}, false},
		{"status among", eventlog.Filter{Status: []eventlog.Status{eventlog.StatusRunning, eventlog.StatusWaiting}}, true},
		{"status not among", eventlog.Filter{Status: []eventlog.Status{eventlog.StatusRunning, eventlog.StatusFailed}}, false},
		{"all", eventlog.Filter{Agent: "coder", Parent: p, Caller: c, Status: []eventlog.Status{eventlog.StatusWaiting}}, true},
		{"all but status", eventlog.Filter{Agent: "coder", Parent: p, Caller: c, Status: []eventlog.Status{eventlog.StatusPending}}, false},
		{"paging ignored", eventlog.Filter{After: other, Limit: 1}, true},
	} {
		if got := tc.f.Match(info); got != tc.want {
			t.Errorf("%s: Match = %t, want %t", tc.name, got, tc.want)
		}
	}
	root := eventlog.Info{Agent: "coder", Status: eventlog.StatusPending}
	if (eventlog.Filter{Parent: p}).Match(root) || (eventlog.Filter{Caller: c}).Match(root) {
		t.Error("a root execution matches a filter on Parent or Caller")
	}
}

// TestNewCreateOptions applies options in order and skips a nil one.
func TestNewCreateOptions(t *testing.T) {
	a, b := eventlog.NewID(), eventlog.NewID()
	if o := eventlog.NewCreateOptions(nil); !o.Caller.IsZero() {
		t.Errorf("no options: caller %s", o.Caller)
	}
	if o := eventlog.NewCreateOptions([]eventlog.CreateOption{eventlog.WithCaller(a), nil, eventlog.WithCaller(b)}); o.Caller != b {
		t.Errorf("caller %s, want the last one %s", o.Caller, b)
	}
}
