package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/forkline/forkline/eventlog"
	"github.com/robfig/cron/v3"
)

// ScheduleOption configures Schedule.
type ScheduleOption func(*scheduleOptions) error

type scheduleOptions struct {
	catchUp int // 1 by default
}

// CatchUp makes a worker that comes back after no worker ran start the
// newest n of the ticks missed meanwhile (default 1: missed ticks start
// once). n is in 1..eventlog.MaxCatchUp.
func CatchUp(n int) ScheduleOption {
	return func(o *scheduleOptions) error {
		if n < 1 || n > eventlog.MaxCatchUp {
			return fmt.Errorf("%w: catch-up of %d ticks; it must be in 1..%d", ErrInvalid, n, eventlog.MaxCatchUp)
		}
		o.catchUp = n
		return nil
	}
}

// ScheduleInfo is a schedule as Schedules shows it.
type ScheduleInfo struct {
	// Name, Agent and Spec are as Schedule was given them.
	Name, Agent, Spec string
	// Input is every tick's input, as JSON.
	Input json.RawMessage
	// CatchUp is how many missed ticks a returning worker starts.
	CatchUp int
	// Created is when Schedule put the schedule (the kernel's clock).
	Created time.Time
	// LastTick is the newest tick started; zero: none yet.
	LastTick time.Time
	// NextTick is the next tick a Serve starts: the spec's first tick
	// after LastTick (after Created when none started). It is in the past
	// when the schedule is overdue (no Serve of its agent runs). Zero for a
	// spec this build cannot read.
	NextTick time.Time
}

// Schedule makes every Serve of the store that has agent registered start
// an execution of agent with input at every tick of spec (DESIGN §19,
// §21½.14). A second Schedule of a name replaces the schedule, which
// starts counting ticks afresh from now.
//
// spec is a cron spec of five fields (minute hour day-of-month month
// day-of-week) or six (a seconds field first), a descriptor (@yearly,
// @monthly, @weekly, @daily, @hourly), or "@every d" for a whole number
// of seconds d ≥ 1s (ticks d apart, counted from when the schedule was
// put). A cron spec is read in UTC unless it starts with CRON_TZ=zone and
// a space ("CRON_TZ=Europe/Paris 0 8 * * *").
//
// The schedule is a store record (eventlog.Scheduler) that keeps the last
// tick started, and that record decides: Serve starts each tick after it
// with WithKey(name + "@" + the tick's time in UTC, RFC 3339), then moves
// it forward by compare-and-set, so two workers never start one tick twice
// and a gc that freed an old tick's key never starts it again. A Serve
// starts every tick that comes due while it runs; of the ticks that came
// due before (while no worker ran), only the newest starts, or the newest
// n with CatchUp(n).
//
// An empty or malformed name, an agent not registered in this kernel, a
// malformed spec or time zone, a spec that never fires, an input that
// does not encode or does not decode into the agent's input type, or a
// store that keeps no schedules: ErrInvalid, and nothing is written.
func (k *Kernel) Schedule(ctx context.Context, name, agent, spec string, input any, opts ...ScheduleOption) error {
	o := scheduleOptions{catchUp: 1}
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil schedule option", ErrInvalid)
		}
		if err := opt(&o); err != nil {
			return err
		}
	}
	if err := eventlog.CheckScheduleName(name); err != nil {
		return err
	}
	k.mu.Lock()
	r, ok := k.mu.agents[agent]
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: schedule %q: unknown agent %q (register it first)", ErrInvalid, name, agent)
	}
	ts, err := parseSpec(spec)
	if err != nil {
		return fmt.Errorf("%w: schedule %q: %v", ErrInvalid, name, err)
	}
	now := k.now()
	if ts.next(now, now).IsZero() {
		return fmt.Errorf("%w: schedule %q: spec %q never fires", ErrInvalid, name, spec)
	}
	in, err := encodeValue(input)
	if err != nil {
		return fmt.Errorf("%w: schedule %q: input of agent %q does not encode: %v", ErrInvalid, name, agent, err)
	}
	if err := r.check(in); err != nil {
		return fmt.Errorf("%w: schedule %q: agent %q: %v", ErrInvalid, name, agent, err)
	}
	sch, err := k.scheduler()
	if err != nil {
		return err
	}
	return sch.PutSchedule(ctx, eventlog.Schedule{Name: name, Agent: agent, Spec: spec, Input: in,
		CatchUp: o.catchUp, Created: now})
}

// Unschedule removes the schedule name: no Serve starts its ticks any
// more (a tick a Serve was starting as it was removed may still start).
// Executions it started are left as they are. An unknown name wraps
// eventlog.ErrNotFound.
func (k *Kernel) Unschedule(ctx context.Context, name string) error {
	if err := eventlog.CheckScheduleName(name); err != nil {
		return err
	}
	sch, err := k.scheduler()
	if err != nil {
		return err
	}
	return sch.DeleteSchedule(ctx, name)
}

// Schedules returns the store's schedules, ordered by name; none for a
// store that keeps none.
func (k *Kernel) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	var sch eventlog.Scheduler
	if !eventlog.As(k.log, &sch) {
		return nil, nil
	}
	all, err := sch.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleInfo, 0, len(all))
	for _, s := range all {
		info := ScheduleInfo{Name: s.Name, Agent: s.Agent, Spec: s.Spec, Input: json.RawMessage(s.Input),
			CatchUp: s.CatchUp, Created: s.Created, LastTick: s.LastTick}
		if ts, err := parseSpec(s.Spec); err == nil {
			base := scheduleBase(s)
			info.NextTick = ts.next(s.Created, base)
		}
		out = append(out, info)
	}
	return out, nil
}

// scheduler returns the store's Scheduler, or ErrInvalid.
func (k *Kernel) scheduler() (eventlog.Scheduler, error) {
	var sch eventlog.Scheduler
	if !eventlog.As(k.log, &sch) {
		return nil, fmt.Errorf("%w: the log keeps no schedules (eventlog.Scheduler)", ErrInvalid)
	}
	return sch, nil
}

// scheduleBase is the time after which s's next tick falls: its last tick
// started, or its creation.
func scheduleBase(s eventlog.Schedule) time.Time {
	if !s.LastTick.IsZero() {
		return s.LastTick
	}
	return s.Created
}

// TickKey is the idempotency key (WithKey) of the execution that schedule
// name starts at tick: the name, "@" and the tick's time in UTC, RFC 3339
// with nanoseconds when it has any.
func TickKey(name string, tick time.Time) string {
	return name + "@" + tick.UTC().Format(time.RFC3339Nano)
}

// tickSpec is a parsed schedule spec: "@every d" (every > 0) or a cron
// spec with its location.
type tickSpec struct {
	every time.Duration
	cron  cron.Schedule
}

// specParser reads cron specs of five fields or six (seconds first) and
// the descriptors; parseSpec handles CRON_TZ= and @every itself.
var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseSpec parses a schedule spec (Schedule's doc). Its errors say what
// is wrong, without a classification.
func parseSpec(spec string) (ts tickSpec, err error) {
	loc := time.UTC
	rest := strings.TrimSpace(spec)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if !strings.HasPrefix(rest, prefix) {
			continue
		}
		zone, after, ok := strings.Cut(rest[len(prefix):], " ")
		if !ok || strings.TrimSpace(after) == "" {
			return tickSpec{}, fmt.Errorf("spec %q has a time zone and no schedule after it", spec)
		}
		if zone == "" {
			return tickSpec{}, fmt.Errorf("spec %q has an empty time zone", spec)
		}
		l, lerr := time.LoadLocation(zone)
		if lerr != nil {
			return tickSpec{}, fmt.Errorf("spec %q: unknown time zone %q: %v", spec, zone, lerr)
		}
		loc, rest = l, strings.TrimSpace(after)
		break
	}
	switch {
	case rest == "":
		return tickSpec{}, errors.New("empty schedule spec")
	case strings.HasPrefix(rest, "@every"):
		d, derr := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(rest, "@every")))
		if derr != nil {
			return tickSpec{}, fmt.Errorf("spec %q: %v", spec, derr)
		}
		if d < time.Second || d%time.Second != 0 {
			return tickSpec{}, fmt.Errorf("spec %q: @every takes a whole number of seconds, at least 1s", spec)
		}
		return tickSpec{every: d}, nil
	}
	defer func() {
		if r := recover(); r != nil { // the parser must not take the process down on a bad spec
			ts, err = tickSpec{}, fmt.Errorf("spec %q: %v", spec, r)
		}
	}()
	c, perr := specParser.Parse(rest)
	if perr != nil {
		return tickSpec{}, fmt.Errorf("spec %q: %v", spec, perr)
	}
	if s, ok := c.(*cron.SpecSchedule); ok {
		s.Location = loc
	}
	return tickSpec{cron: c}, nil
}

// next returns the first tick after t of a schedule put at created
// (@every's ticks are counted from it), in UTC; zero when there is none
// (a cron spec that never fires within five years of t).
func (ts tickSpec) next(created, t time.Time) time.Time {
	if ts.every > 0 {
		first := created.Truncate(time.Second).Add(ts.every)
		if t.Before(first) {
			return first.UTC()
		}
		k := t.Sub(first) / ts.every
		if k >= math.MaxInt64/ts.every-1 {
			return time.Time{} // past what a time.Duration can count
		}
		return first.Add((k + 1) * ts.every).UTC()
	}
	n := ts.cron.Next(t)
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// maxTickWindow bounds newest's windows: past it, a window reaches back
// to lo at once (a cron spec's Next gives up after five years anyway).
const maxTickWindow = 50 * 365 * 24 * time.Hour

// newest returns, oldest first, the newest n ticks in (lo, hi] of a
// schedule put at created. For a cron spec it reads back from hi in
// doubling windows, so a long gap costs about as much as the ticks it
// returns, never a walk over every tick since lo.
func (ts tickSpec) newest(created, lo, hi time.Time, n int) []time.Time {
	if n < 1 || !hi.After(lo) {
		return nil
	}
	if ts.every > 0 {
		first := created.Truncate(time.Second).Add(ts.every)
		if hi.Before(first) {
			return nil
		}
		kmax := int64(hi.Sub(first) / ts.every)
		kmin := int64(0)
		if !lo.Before(first) {
			kmin = int64(lo.Sub(first)/ts.every) + 1
		}
		kmin = max(kmin, kmax-int64(n)+1)
		var out []time.Time
		for k := kmin; k <= kmax; k++ {
			out = append(out, first.Add(time.Duration(k)*ts.every).UTC())
		}
		return out
	}
	for w := time.Minute; ; w *= 2 {
		from := hi.Add(-w)
		if !from.After(lo) || w >= maxTickWindow {
			from = lo
		}
		var out []time.Time
		for t := ts.next(created, from); !t.IsZero() && !t.After(hi); t = ts.next(created, t) {
			out = append(out, t)
			if len(out) > n {
				out = out[1:]
			}
		}
		if len(out) == n || from.Equal(lo) {
			return out
		}
	}
}

// scheduleRound is what a Serve remembers of its schedules between
// rounds.
type scheduleRound struct {
	// prev is the kernel's time of the previous round (at first, of
	// Serve's start): a tick after it came due while this Serve ran, and
	// starts; one at or before it not started yet was missed, and starts
	// only within the schedule's catch-up.
	prev time.Time
	// wall is the wall time of the previous round (rounds run at most
	// every half poll).
	wall time.Time
	// logged is the last problem logged per schedule, so each is logged
	// once, when it changes.
	logged map[string]string
}

// tickSchedules runs one round of Serve's schedules (Schedule's doc): for
// each schedule of an agent registered in this kernel, it starts the
// ticks due and moves the record's last tick to the newest of them. A
// problem with one schedule (a record this build cannot read, an input the
// agent no longer takes, a store error) is logged at Warn once and leaves
// the schedule for the next round; it does not stop Serve.
func (k *Kernel) tickSchedules(ctx context.Context, sch eventlog.Scheduler, round *scheduleRound) {
	now := k.now()
	prev := round.prev
	round.prev, round.wall = now, time.Now()
	all, err := sch.Schedules(ctx)
	if err != nil {
		if ctx.Err() == nil {
			k.noteSchedule(round, "", err)
		}
		return
	}
	k.noteSchedule(round, "", nil)
	for _, s := range all {
		if _, ok := k.handler(s.Agent); !ok {
			continue // left to a worker that has the agent
		}
		err := k.tickSchedule(ctx, sch, s, prev, now)
		if ctx.Err() != nil {
			return // Serve is stopping: not the schedule's problem
		}
		k.noteSchedule(round, s.Name, err)
	}
}

// tickSchedule starts s's due ticks: those in (base, now] after prev, and
// the newest s.CatchUp of those at or before prev (at most MaxCatchUp in
// all, the newest). Each is started with its TickKey before the record
// moves, so a crash in between leaves the record behind and the next round
// starts the tick again under the same key: the same execution.
func (k *Kernel) tickSchedule(ctx context.Context, sch eventlog.Scheduler, s eventlog.Schedule, prev, now time.Time) error {
	ts, err := parseSpec(s.Spec)
	if err != nil {
		return fmt.Errorf("the spec does not parse: %w", err)
	}
	base := scheduleBase(s)
	missedTo, currentFrom := prev, prev
	if now.Before(missedTo) {
		missedTo = now
	}
	if base.After(currentFrom) {
		currentFrom = base
	}
	due := ts.newest(s.Created, base, missedTo, s.CatchUp)
	due = append(due, ts.newest(s.Created, currentFrom, now, eventlog.MaxCatchUp)...)
	if len(due) == 0 {
		return nil
	}
	if len(due) > eventlog.MaxCatchUp {
		due = due[len(due)-eventlog.MaxCatchUp:]
	}
	for _, tick := range due {
		_, err := k.Start(ctx, s.Agent, json.RawMessage(s.Input), WithKey(TickKey(s.Name, tick)))
		if err != nil {
			return fmt.Errorf("tick %s: %w", tick.Format(time.RFC3339Nano), err)
		}
	}
	if _, err := sch.AdvanceSchedule(ctx, s.Name, s.Created, s.LastTick, due[len(due)-1]); err != nil {
		return fmt.Errorf("advance the last tick: %w", err)
	}
	return nil
}

// noteSchedule logs err of schedule name (the listing when name is "") at
// Warn when it differs from the last one logged, and forgets it on nil.
func (k *Kernel) noteSchedule(round *scheduleRound, name string, err error) {
	if err == nil {
		delete(round.logged, name)
		return
	}
	if round.logged == nil {
		round.logged = map[string]string{}
	}
	if round.logged[name] == err.Error() {
		return
	}
	round.logged[name] = err.Error()
	if name == "" {
		k.logger.Warn("forkline: serve: cannot read the schedules", "error", err.Error())
		return
	}
	k.logger.Warn("forkline: serve: cannot start a schedule's ticks; trying again next round", "schedule", name, "error", err.Error())
}
