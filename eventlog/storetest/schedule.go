package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forkline/forkline/eventlog"
)

// TestScheduler checks the eventlog.Scheduler contract (DESIGN §19,
// §21½.14) of a store that implements it (found with eventlog.As): bad
// records are ErrInvalid and write nothing; a record reads back as put,
// ordered by name, and a second put replaces it; AdvanceSchedule is a
// compare-and-set on the record's creation and last tick; delete removes
// one record and an unknown name is ErrNotFound; and of many concurrent
// advances from one last tick exactly one wins.
func TestScheduler(t *testing.T, open func(t *testing.T) eventlog.Log) {
	s := open(t)
	var sch eventlog.Scheduler
	if !eventlog.As(s, &sch) {
		t.Skip("the store keeps no schedules")
	}
	t.Run("BadInput", func(t *testing.T) { testSchedulerBadInput(t, sch) })
	t.Run("Record", func(t *testing.T) { testSchedulerRecord(t, sch) })
	t.Run("Advance", func(t *testing.T) { testSchedulerAdvance(t, sch) })
	t.Run("ConcurrentAdvance", func(t *testing.T) { testSchedulerConcurrent(t, sch) })
}

// schedT0 is a schedule's creation time in these tests.
var schedT0 = time.Date(2026, 12, 5, 8, 0, 0, 123, time.UTC)

func goodSchedule(name string) eventlog.Schedule {
	return eventlog.Schedule{Name: name, Agent: "report", Spec: "0 8 * * *", Input: []byte(`{"to":"ops"}`),
		CatchUp: 1, Created: schedT0}
}

// schedules reads every record, failing the test on an error.
func schedules(t *testing.T, sch eventlog.Scheduler) []eventlog.Schedule {
	t.Helper()
	all, err := sch.Schedules(t.Context())
	if err != nil {
		t.Fatalf("Schedules: %v", err)
	}
	return all
}

// sameSchedule reports how a differs from b ("" when alike).
func sameSchedule(a, b eventlog.Schedule) string {
	switch {
	case a.Name != b.Name, a.Agent != b.Agent, a.Spec != b.Spec, string(a.Input) != string(b.Input), a.CatchUp != b.CatchUp:
		return fmt.Sprintf("%+v, want %+v", a, b)
	case !a.Created.Equal(b.Created), !a.LastTick.Equal(b.LastTick):
		return fmt.Sprintf("times %v/%v, want %v/%v", a.Created, a.LastTick, b.Created, b.LastTick)
	}
	return ""
}

func testSchedulerBadInput(t *testing.T, sch eventlog.Scheduler) {
	ctx := t.Context()
	bad := map[string]func(*eventlog.Schedule){
		"empty name":       func(s *eventlog.Schedule) { s.Name = "" },
		"long name":        func(s *eventlog.Schedule) { s.Name = strings.Repeat("n", eventlog.MaxScheduleName+1) },
		"NUL in name":      func(s *eventlog.Schedule) { s.Name = "a\x00b" },
		"non-UTF-8 name":   func(s *eventlog.Schedule) { s.Name = "a\xffb" },
		"no agent":         func(s *eventlog.Schedule) { s.Agent = "" },
		"no spec":          func(s *eventlog.Schedule) { s.Spec = "" },
		"catch-up 0":       func(s *eventlog.Schedule) { s.CatchUp = 0 },
		"catch-up too big": func(s *eventlog.Schedule) { s.CatchUp = eventlog.MaxCatchUp + 1 },
		"no creation":      func(s *eventlog.Schedule) { s.Created = time.Time{} },
		"tick before creation": func(s *eventlog.Schedule) {
			s.LastTick = s.Created.Add(-time.Second)
		},
		"creation out of range": func(s *eventlog.Schedule) { s.Created = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
	for what, change := range bad {
		sc := goodSchedule("bad")
		change(&sc)
		if err := sch.PutSchedule(ctx, sc); !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("PutSchedule with %s: %v; want ErrInvalid", what, err)
		}
	}
	if err := sch.DeleteSchedule(ctx, ""); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("DeleteSchedule(\"\"): %v; want ErrInvalid", err)
	}
	if all := schedules(t, sch); len(all) != 0 {
		t.Fatalf("after refused puts the store holds %d schedules: %+v", len(all), all)
	}
	// Bad advances, on a record that exists: none changes it.
	sc := goodSchedule("adv-bad")
	if err := sch.PutSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	for what, args := range map[string][3]time.Time{
		"to before creation": {sc.Created, {}, sc.Created.Add(-time.Second)},
		"to at creation":     {sc.Created, {}, sc.Created},
		"no creation":        {{}, {}, sc.Created.Add(time.Second)},
		"to not after from":  {sc.Created, sc.Created.Add(time.Hour), sc.Created.Add(time.Hour)},
	} {
		if ok, err := sch.AdvanceSchedule(ctx, sc.Name, args[0], args[1], args[2]); ok || !errors.Is(err, eventlog.ErrInvalid) {
			t.Errorf("AdvanceSchedule with %s = %v, %v; want ErrInvalid", what, ok, err)
		}
	}
	if ok, err := sch.AdvanceSchedule(ctx, "", sc.Created, time.Time{}, sc.Created.Add(time.Hour)); ok || !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("AdvanceSchedule of an empty name = %v, %v; want ErrInvalid", ok, err)
	}
	if all := schedules(t, sch); len(all) != 1 || sameSchedule(all[0], sc) != "" {
		t.Fatalf("after refused advances: %+v; want only %+v", all, sc)
	}
	if err := sch.DeleteSchedule(ctx, sc.Name); err != nil {
		t.Fatal(err)
	}
}

func testSchedulerRecord(t *testing.T, sch eventlog.Scheduler) {
	ctx := t.Context()
	b, a, z := goodSchedule("rec/b"), goodSchedule("rec/a"), goodSchedule("rec/z")
	a.Spec, a.CatchUp, a.Input = "CRON_TZ=Europe/Paris @every 1h", 7, nil
	z.LastTick = z.Created.Add(90 * time.Minute)
	for _, sc := range []eventlog.Schedule{b, a, z} {
		if err := sch.PutSchedule(ctx, sc); err != nil {
			t.Fatalf("PutSchedule(%q): %v", sc.Name, err)
		}
	}
	all := schedules(t, sch)
	if len(all) != 3 {
		t.Fatalf("Schedules: %d records, want 3: %+v", len(all), all)
	}
	for i, want := range []eventlog.Schedule{a, b, z} {
		if d := sameSchedule(all[i], want); d != "" {
			t.Errorf("Schedules[%d]: %s", i, d)
		}
	}
	// A second put of a name replaces the whole record.
	b2 := goodSchedule("rec/b")
	b2.Agent, b2.Spec, b2.Created = "digest", "*/5 * * * *", schedT0.Add(time.Hour)
	if err := sch.PutSchedule(ctx, b2); err != nil {
		t.Fatal(err)
	}
	all = schedules(t, sch)
	if len(all) != 3 || sameSchedule(all[1], b2) != "" {
		t.Fatalf("after replacing rec/b: %+v; want rec/b = %+v", all, b2)
	}
	if err := sch.DeleteSchedule(ctx, "rec/b"); err != nil {
		t.Fatalf("DeleteSchedule(rec/b): %v", err)
	}
	if err := sch.DeleteSchedule(ctx, "rec/b"); !errors.Is(err, eventlog.ErrNotFound) {
		t.Fatalf("second DeleteSchedule(rec/b): %v; want ErrNotFound", err)
	}
	all = schedules(t, sch)
	if len(all) != 2 || all[0].Name != "rec/a" || all[1].Name != "rec/z" {
		t.Fatalf("after deleting rec/b: %+v; want rec/a and rec/z", all)
	}
	for _, name := range []string{"rec/a", "rec/z"} {
		if err := sch.DeleteSchedule(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
}

func testSchedulerAdvance(t *testing.T, sch eventlog.Scheduler) {
	ctx := t.Context()
	sc := goodSchedule("adv")
	if err := sch.PutSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	t1, t2 := sc.Created.Add(time.Second), sc.Created.Add(2*time.Second)
	advance := func(created, from, to time.Time, want bool) {
		t.Helper()
		ok, err := sch.AdvanceSchedule(ctx, sc.Name, created, from, to)
		if err != nil || ok != want {
			t.Fatalf("AdvanceSchedule(created %v, from %v, to %v) = %v, %v; want %v", created, from, to, ok, err, want)
		}
	}
	lastTick := func() time.Time {
		t.Helper()
		for _, s := range schedules(t, sch) {
			if s.Name == sc.Name {
				return s.LastTick
			}
		}
		t.Fatalf("schedule %q is gone", sc.Name)
		return time.Time{}
	}
	advance(sc.Created, t1, t2, false) // the record has no last tick yet
	advance(sc.Created.Add(time.Nanosecond), time.Time{}, t1, false)
	if got := lastTick(); !got.IsZero() {
		t.Fatalf("failed advances set the last tick to %v", got)
	}
	advance(sc.Created, time.Time{}, t1, true)
	if got := lastTick(); !got.Equal(t1) {
		t.Fatalf("last tick %v after an advance to %v", got, t1)
	}
	advance(sc.Created, time.Time{}, t2, false) // from is stale
	advance(sc.Created, t1, t2, true)
	if got := lastTick(); !got.Equal(t2) {
		t.Fatalf("last tick %v after an advance to %v", got, t2)
	}
	// A replaced record (a new creation time) refuses the old one's advance.
	re := sc
	re.Created = sc.Created.Add(time.Minute)
	if err := sch.PutSchedule(ctx, re); err != nil {
		t.Fatal(err)
	}
	advance(sc.Created, time.Time{}, re.Created.Add(time.Second), false)
	if got := lastTick(); !got.IsZero() {
		t.Fatalf("an advance of the replaced record set the new one's last tick to %v", got)
	}
	// An unknown name is not advanced and not created.
	if ok, err := sch.AdvanceSchedule(ctx, "adv-unknown", sc.Created, time.Time{}, t1); ok || err != nil {
		t.Fatalf("AdvanceSchedule of an unknown name = %v, %v; want false, nil", ok, err)
	}
	if err := sch.DeleteSchedule(ctx, sc.Name); err != nil {
		t.Fatal(err)
	}
	if ok, err := sch.AdvanceSchedule(ctx, sc.Name, re.Created, time.Time{}, re.Created.Add(time.Second)); ok || err != nil {
		t.Fatalf("AdvanceSchedule of a deleted schedule = %v, %v; want false, nil", ok, err)
	}
	if all := schedules(t, sch); len(all) != 0 {
		t.Fatalf("an advance of a deleted schedule wrote %+v", all)
	}
}

func testSchedulerConcurrent(t *testing.T, sch eventlog.Scheduler) {
	ctx := t.Context()
	sc := goodSchedule("conc")
	if err := sch.PutSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	const rounds, racers = 10, 8
	from := time.Time{}
	for r := range rounds {
		to := sc.Created.Add(time.Duration(r+1) * time.Second)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins int
		)
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := sch.AdvanceSchedule(ctx, sc.Name, sc.Created, from, to)
				if err != nil {
					t.Errorf("AdvanceSchedule: %v", err)
				}
				if ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d of %d concurrent advances from %v won; want exactly 1", r, wins, racers, from)
		}
		from = to
	}
	if err := sch.DeleteSchedule(ctx, sc.Name); err != nil {
		t.Fatal(err)
	}
}
