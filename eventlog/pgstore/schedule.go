package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.Scheduler = (*Store)(nil)

// migrateSchedules adds the schedules' table (DESIGN §19, §21½.14): one
// row per schedule, its times in Unix nanoseconds (0: none), so that
// AdvanceSchedule compares them exactly.
func migrateSchedules(sc string) []string {
	return []string{`CREATE TABLE ` + sc + `.schedules (
		name         text PRIMARY KEY,
		agent        text NOT NULL,
		spec         text NOT NULL,
		input        bytea NOT NULL,
		catch_up     integer NOT NULL,
		created_ns   bigint NOT NULL,
		last_tick_ns bigint NOT NULL
	)`}
}

// PutSchedule implements eventlog.Scheduler in one INSERT … ON CONFLICT
// DO UPDATE: the newest record of a name wins. It commits as the store's
// appends do (synchronous unless WithoutSync).
func (s *Store) PutSchedule(ctx context.Context, sc eventlog.Schedule) error {
	if err := eventlog.CheckSchedule(sc); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	input := sc.Input
	if input == nil {
		input = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.schedules
		(name, agent, spec, input, catch_up, created_ns, last_tick_ns) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (name) DO UPDATE SET (agent, spec, input, catch_up, created_ns, last_tick_ns) =
		(excluded.agent, excluded.spec, excluded.input, excluded.catch_up, excluded.created_ns, excluded.last_tick_ns)`,
		sc.Name, sc.Agent, sc.Spec, input, sc.CatchUp, eventlog.ScheduleNanos(sc.Created), eventlog.ScheduleNanos(sc.LastTick))
	if err != nil {
		return s.wrap(err, "schedule %q", sc.Name)
	}
	return nil
}

// DeleteSchedule implements eventlog.Scheduler.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	if err := eventlog.CheckScheduleName(name); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.q.schema+`.schedules WHERE name = $1`, name)
	if err != nil {
		return s.wrap(err, "delete schedule %q", name)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: schedule %q: %w", name, eventlog.ErrNotFound)
	}
	return nil
}

// Schedules implements eventlog.Scheduler.
func (s *Store) Schedules(ctx context.Context) ([]eventlog.Schedule, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	rows, err := s.pool.Query(ctx, `SELECT name, agent, spec, input, catch_up, created_ns, last_tick_ns
		FROM `+s.q.schema+`.schedules ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, s.wrap(err, "read schedules")
	}
	defer rows.Close()
	var out []eventlog.Schedule
	for rows.Next() {
		var (
			sc                eventlog.Schedule
			created, lastTick int64
		)
		if err := rows.Scan(&sc.Name, &sc.Agent, &sc.Spec, &sc.Input, &sc.CatchUp, &created, &lastTick); err != nil {
			return nil, s.wrap(err, "read schedules")
		}
		sc.Created, sc.LastTick = eventlog.ScheduleTime(created), eventlog.ScheduleTime(lastTick)
		if err := eventlog.CheckSchedule(sc); err != nil {
			return nil, &eventlog.CorruptionError{What: fmt.Sprintf("schedule row %q", sc.Name), Err: err}
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err, "read schedules")
	}
	return out, nil
}

// AdvanceSchedule implements eventlog.Scheduler in one conditional UPDATE:
// the row's lock orders concurrent advances from any process, and the
// second finds its expected last tick gone.
func (s *Store) AdvanceSchedule(ctx context.Context, name string, created, from, to time.Time) (bool, error) {
	if err := eventlog.CheckAdvance(name, created, from, to); err != nil {
		return false, err
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.leave()
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.q.schema+`.schedules SET last_tick_ns = $4
		WHERE name = $1 AND created_ns = $2 AND last_tick_ns = $3`,
		name, eventlog.ScheduleNanos(created), eventlog.ScheduleNanos(from), eventlog.ScheduleNanos(to))
	if err != nil {
		return false, s.wrap(err, "advance schedule %q", name)
	}
	return tag.RowsAffected() == 1, nil
}
