package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog/pebblestore"
	"github.com/forkline/forkline/sdk"
)

// fixedClock is an sdk.Clock that stands still.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                         { return c.t }
func (c fixedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestSchedulesCLI (DESIGN §19): forkline schedules lists the store's
// schedules with their spec and next tick (text and --json); forkline
// unschedule removes one from the store and leaves the others; an unknown
// name is exit 2 and removes nothing.
func TestSchedulesCLI(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s, sdk.WithClock(fixedClock{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Register(k, "report", func(ctx context.Context, to string) (string, error) { return to, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Start(t.Context(), "report", "x"); err != nil { // a log needs an execution to be one
		t.Fatal(err)
	}
	for _, c := range []struct{ name, spec string }{{"morning", "0 8 * * *"}, {"pulse", "@every 30s"}} {
		if err := k.Schedule(t.Context(), c.name, "report", c.spec, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, append([]string{"--dir", dir}, args...)...)
	}
	out, stderr, code := cli("schedules")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.Contains(lines[1], "morning") || !strings.Contains(lines[1], "0 8 * * *") || !strings.Contains(lines[1], "2026-01-02T08:00:00.000Z") ||
		!strings.Contains(lines[2], "pulse") || !strings.Contains(lines[2], "@every 30s") || !strings.Contains(lines[2], "2026-01-02T03:04:35.000Z") {
		t.Fatalf("schedules: exit %d:\n%s%s\nwant morning next at 08:00 and pulse next at 03:04:35", code, out, stderr)
	}
	// --json gives ticks as times, null for none: neither schedule has
	// ticked.
	out, _, _ = cli("--json", "schedules")
	var ticks struct {
		Schedules []struct {
			LastTick *time.Time `json:"last_tick"`
			NextTick *time.Time `json:"next_tick"`
		}
	}
	if err := json.Unmarshal([]byte(out), &ticks); err != nil || len(ticks.Schedules) != 2 || ticks.Schedules[0].LastTick != nil ||
		ticks.Schedules[0].NextTick == nil || !ticks.Schedules[0].NextTick.Equal(time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("--json schedules ticks (%v):\n%s\nwant last_tick null and next_tick 08:00", err, out)
	}
	names := func() []string {
		t.Helper()
		out, stderr, code := cli("--json", "schedules")
		var got struct {
			Schedules []struct{ Name, Agent, Spec string }
		}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("--json schedules: exit %d, %v:\n%s%s", code, err, out, stderr)
		}
		var ns []string
		for _, s := range got.Schedules {
			if s.Agent != "report" {
				t.Fatalf("schedule %+v: want agent report", s)
			}
			ns = append(ns, s.Name)
		}
		return ns
	}
	if got := names(); strings.Join(got, ",") != "morning,pulse" {
		t.Fatalf("--json schedules names %v, want morning, pulse", got)
	}
	if out, stderr, code := cli("unschedule", "morning"); code != 0 || !strings.Contains(out, `removed schedule "morning"`) {
		t.Fatalf("unschedule morning: exit %d: %s%s", code, out, stderr)
	}
	if got := names(); strings.Join(got, ",") != "pulse" {
		t.Fatalf("after unschedule morning the store keeps %v, want pulse", got)
	}
	if _, stderr, code := cli("unschedule", "nope"); code != 2 || !strings.Contains(stderr, "nope") {
		t.Fatalf("unschedule nope: exit %d, %s; want exit 2 naming it", code, stderr)
	}
	if got := names(); strings.Join(got, ",") != "pulse" {
		t.Fatalf("after a refused unschedule the store keeps %v, want pulse", got)
	}
}

// TestSchedulesThroughServe (DESIGN §11, §19): while forkline serve holds
// the Pebble log, forkline schedules reads the schedules through its API
// and prints exactly what it prints reading the log directly (text and
// --json); forkline unschedule fails naming the server and removes
// nothing.
func TestSchedulesThroughServe(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(logDir(dir), pebblestore.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	k, err := sdk.New(s, sdk.WithClock(fixedClock{time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Register(k, "report", func(ctx context.Context, to string) (string, error) { return to, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Start(t.Context(), "report", "x"); err != nil {
		t.Fatal(err)
	}
	if err := k.Schedule(t.Context(), "nightly", "report", "CRON_TZ=Europe/Paris 0 2 * * *", "ops", sdk.CatchUp(2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{{"schedules"}, {"--json", "schedules"}}
	var direct []string
	for _, c := range cmds {
		stdout, stderr, code := runCLI(t, append([]string{"--dir", dir}, c...)...)
		if code != 0 || !strings.Contains(stdout, "nightly") {
			t.Fatalf("%v directly: exit %d:\n%s%s", c, code, stdout, stderr)
		}
		direct = append(direct, stdout)
	}
	srv := startServe(t, dir)
	for i, c := range cmds {
		stdout, stderr, code := runCLI(t, append([]string{"--dir", dir}, c...)...)
		if code != 0 || stdout != direct[i] {
			t.Errorf("%v through serve: exit %d:\n%s%s\nwant what it printed directly:\n%s", c, code, stdout, stderr, direct[i])
		}
	}
	stdout, stderr, code := runCLI(t, "--dir", dir, "unschedule", "nightly")
	if code == 0 || stdout != "" || !strings.Contains(stderr, srv.url) {
		t.Fatalf("unschedule while served: exit %d, stdout %q, stderr %q; want a failure naming the server", code, stdout, stderr)
	}
	srv.stop(t)
	if stdout, _, _ := runCLI(t, "--dir", dir, "schedules"); stdout != direct[0] {
		t.Fatalf("after the refused unschedule, schedules prints:\n%s\nwant:\n%s", stdout, direct[0])
	}
}
