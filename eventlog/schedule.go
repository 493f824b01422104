package eventlog

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Schedule is a schedule's store record (DESIGN §19, §21½.14): an agent
// started with one input at every tick of a spec. The kernel decides what
// a spec means (sdk.Kernel.Schedule parses it); the store keeps the record
// and moves LastTick forward by compare-and-set, and that record decides
// which ticks were started: a tick at or before LastTick is never started
// again, even after a gc freed its idempotency key.
//
// Its invariants, checked by CheckSchedule where a record enters a store:
//  1. Name is non-empty UTF-8 of at most MaxScheduleName bytes without NUL.
//  2. Agent and Spec are non-empty.
//  3. 1 ≤ CatchUp ≤ MaxCatchUp.
//  4. Created is set; LastTick is zero or not before Created. Both lie
//     within the years 1678–2262 (Unix nanoseconds in an int64) and are
//     not the Unix epoch itself (0 stands for the zero time).
type Schedule struct {
	// Name identifies the schedule on the store; a second PutSchedule of
	// a name replaces the record.
	Name string
	// Agent is the agent each tick starts.
	Agent string
	// Spec is the schedule's spec as the user wrote it: a cron spec or
	// "@every d", with an optional CRON_TZ= prefix.
	Spec string
	// Input is the encoded input of every tick's execution.
	Input []byte
	// CatchUp is how many of the ticks missed while no worker ran start
	// when a worker comes back: the newest CatchUp of them.
	CatchUp int
	// Created is when the record was put: the first tick is the spec's
	// first after it.
	Created time.Time
	// LastTick is the newest tick started (zero: none yet).
	LastTick time.Time
}

// MaxScheduleName bounds a schedule's name, so that name plus a tick's
// time stays a valid idempotency key.
const MaxScheduleName = 512

// MaxCatchUp bounds Schedule.CatchUp.
const MaxCatchUp = 1000

// Scheduler keeps schedules as store records (DESIGN §19): every kernel
// on the store reads them, and Serve moves a schedule's LastTick forward
// with AdvanceSchedule once it started the ticks up to it. Kernels find it
// with As; a store without one has no schedules.
type Scheduler interface {
	// PutSchedule creates the record s.Name, or replaces it whole (the
	// newest wins), synced before it returns. A record that breaks
	// CheckSchedule wraps ErrInvalid and nothing is written.
	PutSchedule(ctx context.Context, s Schedule) error
	// DeleteSchedule removes the record name; an unknown name wraps
	// ErrNotFound.
	DeleteSchedule(ctx context.Context, name string) error
	// Schedules returns every record, ordered by name.
	Schedules(ctx context.Context) ([]Schedule, error)
	// AdvanceSchedule sets the LastTick of the record name to to when the
	// record is still the one put at created and its LastTick is still
	// from (compare-and-set), and reports whether it did. A record
	// replaced, removed or advanced by someone else since it was read is
	// left as it is (false, nil). to not after from (or not after created
	// when from is zero) wraps ErrInvalid.
	AdvanceSchedule(ctx context.Context, name string, created, from, to time.Time) (bool, error)
}

// minScheduleTime and maxScheduleTime bound the times a schedule record
// keeps: what Unix nanoseconds in an int64 can say.
var (
	minScheduleTime = time.Unix(0, -1<<63+1)
	maxScheduleTime = time.Unix(0, 1<<63-1)
)

// CheckScheduleName validates a schedule's name (Schedule's invariant 1).
// Its error wraps ErrInvalid.
func CheckScheduleName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty schedule name", ErrInvalid)
	case len(name) > MaxScheduleName:
		return fmt.Errorf("%w: schedule name of %d bytes, more than %d", ErrInvalid, len(name), MaxScheduleName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: schedule name %q is not UTF-8", ErrInvalid, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: schedule name %q has a NUL byte", ErrInvalid, name)
	}
	return nil
}

// CheckSchedule validates a schedule record (Schedule's invariants). Its
// error wraps ErrInvalid.
func CheckSchedule(s Schedule) error {
	if err := CheckScheduleName(s.Name); err != nil {
		return err
	}
	switch {
	case s.Agent == "":
		return fmt.Errorf("%w: schedule %q has no agent", ErrInvalid, s.Name)
	case s.Spec == "":
		return fmt.Errorf("%w: schedule %q has no spec", ErrInvalid, s.Name)
	case s.CatchUp < 1 || s.CatchUp > MaxCatchUp:
		return fmt.Errorf("%w: schedule %q catches up %d ticks; it must be in 1..%d", ErrInvalid, s.Name, s.CatchUp, MaxCatchUp)
	case s.Created.IsZero():
		return fmt.Errorf("%w: schedule %q has no creation time", ErrInvalid, s.Name)
	case !inScheduleRange(s.Created):
		return fmt.Errorf("%w: schedule %q created at %v, out of range", ErrInvalid, s.Name, s.Created)
	case !s.LastTick.IsZero() && (!inScheduleRange(s.LastTick) || s.LastTick.Before(s.Created)):
		return fmt.Errorf("%w: schedule %q has last tick %v, before its creation %v or out of range", ErrInvalid, s.Name, s.LastTick, s.Created)
	}
	return nil
}

// CheckAdvance validates AdvanceSchedule's arguments. Its error wraps
// ErrInvalid.
func CheckAdvance(name string, created, from, to time.Time) error {
	if err := CheckScheduleName(name); err != nil {
		return err
	}
	floor := from
	if floor.IsZero() {
		floor = created
	}
	switch {
	case created.IsZero() || !inScheduleRange(created):
		return fmt.Errorf("%w: advance of schedule %q with creation time %v", ErrInvalid, name, created)
	case !to.After(floor) || !inScheduleRange(to):
		return fmt.Errorf("%w: advance of schedule %q to %v, not after %v", ErrInvalid, name, to, floor)
	}
	return nil
}

// inScheduleRange reports whether a schedule record can keep t: within
// int64 Unix nanoseconds, and not the Unix epoch itself (0 stands for the
// zero time).
func inScheduleRange(t time.Time) bool {
	return !t.Before(minScheduleTime) && !t.After(maxScheduleTime) && t.UnixNano() != 0
}

// ScheduleNanos is t in Unix nanoseconds, 0 for the zero time: how both
// stores keep a schedule's times (in range by CheckSchedule).
func ScheduleNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// ScheduleTime is the inverse of ScheduleNanos, in UTC.
func ScheduleTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
