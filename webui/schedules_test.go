package webui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestListShowsSchedules (DESIGN §19): the list page shows the store's
// schedules — name, agent, spec, the last tick the record keeps and the
// next tick — whatever the executions' filter, and none once
// unscheduled.
func TestListShowsSchedules(t *testing.T) {
	r := newRig(t)
	if _, body := r.get(t, "/"); strings.Contains(body, `id="schedules"`) {
		t.Fatalf("GET / with no schedule shows a schedules table:\n%s", body)
	}
	ctx := context.Background()
	if err := r.k.Schedule(ctx, "morning-run", "two", "0 8 * * *", 3); err != nil {
		t.Fatal(err)
	}
	all, err := r.k.Schedules(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("Schedules = %+v, %v", all, err)
	}
	// The spec's next 08:00 UTC after the schedule was put.
	created := all[0].Created.UTC()
	next := time.Date(created.Year(), created.Month(), created.Day(), 8, 0, 0, 0, time.UTC)
	if !next.After(created) {
		next = next.AddDate(0, 0, 1)
	}
	row := func(path string) string {
		t.Helper()
		code, body := r.get(t, path)
		if code != 200 {
			t.Fatalf("GET %s = %d:\n%s", path, code, body)
		}
		_, table, ok := strings.Cut(body, `<table id="schedules">`)
		if !ok {
			t.Fatalf("GET %s shows no schedules table:\n%s", path, body)
		}
		return table
	}
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	for _, path := range []string{"/", "/?agent=nobody"} {
		table := row(path)
		for _, want := range []string{"morning-run", "<td>two</td>", "0 8 * * *", "none yet", stamp(next)} {
			if !strings.Contains(table, want) {
				t.Errorf("GET %s: the schedules table lacks %q:\n%s", path, want, table)
			}
		}
	}

	// The record's last tick moves (as a Serve's start of the tick would
	// move it): the page shows it, and the next tick a day later.
	var sch eventlog.Scheduler
	if !eventlog.As(r.k.Log(), &sch) {
		t.Fatal("the rig's log keeps no schedules")
	}
	if ok, err := sch.AdvanceSchedule(ctx, "morning-run", all[0].Created, time.Time{}, next); err != nil || !ok {
		t.Fatalf("AdvanceSchedule = %v, %v", ok, err)
	}
	table := row("/")
	if strings.Contains(table, "none yet") || !strings.Contains(table, stamp(next)) || !strings.Contains(table, stamp(next.AddDate(0, 0, 1))) {
		t.Errorf("after a tick at %s the schedules table is:\n%s", stamp(next), table)
	}

	if err := r.k.Unschedule(ctx, "morning-run"); err != nil {
		t.Fatal(err)
	}
	if _, body := r.get(t, "/"); strings.Contains(body, "morning-run") {
		t.Fatalf("GET / still shows the removed schedule:\n%s", body)
	}
}
