package pebblestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/forkline/forkline/eventlog"
)

var _ eventlog.Scheduler = (*Store)(nil)

// scheduleVersion is the first byte of a schedule record; its JSON
// (scheduleRecord) follows.
const scheduleVersion = 1

// scheduleRecord is a schedule record's value: the schedule without its
// name, which is the key's. Times are Unix nanoseconds, 0 for none.
type scheduleRecord struct {
	Agent    string `json:"agent"`
	Spec     string `json:"spec"`
	Input    []byte `json:"input"`
	CatchUp  int    `json:"catch_up"`
	Created  int64  `json:"created_ns"`
	LastTick int64  `json:"last_tick_ns"`
}

// scheduleKey is the key of the schedule record name.
func scheduleKey(name string) []byte {
	k := make([]byte, 0, 1+len(name))
	k = append(k, tagSchedule)
	return append(k, name...)
}

// PutSchedule implements eventlog.Scheduler. The record is committed as an
// append is: synced, unless the store was opened WithoutSync, before it
// returns.
func (s *Store) PutSchedule(ctx context.Context, sc eventlog.Schedule) error {
	if err := eventlog.CheckSchedule(sc); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	s.schedules.Lock()
	defer s.schedules.Unlock()
	return s.writeScheduleLocked(sc)
}

// DeleteSchedule implements eventlog.Scheduler.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	if err := eventlog.CheckScheduleName(name); err != nil {
		return err
	}
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	s.schedules.Lock()
	defer s.schedules.Unlock()
	if _, found, err := s.readSchedule(name); err != nil {
		return err
	} else if !found {
		return fmt.Errorf("pebblestore: schedule %q: %w", name, eventlog.ErrNotFound)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(scheduleKey(name), nil)
	if err := s.commit(b, s.write); err != nil {
		return fmt.Errorf("pebblestore: delete schedule %q: %w", name, err)
	}
	return nil
}

// Schedules implements eventlog.Scheduler.
func (s *Store) Schedules(ctx context.Context) ([]eventlog.Schedule, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagSchedule}, UpperBound: []byte{tagSchedule + 1}})
	if err != nil {
		return nil, s.readErr(eventlog.ID{}, "schedules", err)
	}
	defer it.Close()
	var out []eventlog.Schedule
	for ok := it.First(); ok; ok = it.Next() {
		name := string(it.Key()[1:])
		sc, err := decodeSchedule(name, it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	if err := it.Error(); err != nil {
		return nil, s.readErr(eventlog.ID{}, "schedules", err)
	}
	return out, nil
}

// AdvanceSchedule implements eventlog.Scheduler: the compare and the set
// run under one lock that every write of a schedule record takes (one
// process owns a Pebble store).
func (s *Store) AdvanceSchedule(ctx context.Context, name string, created, from, to time.Time) (bool, error) {
	if err := eventlog.CheckAdvance(name, created, from, to); err != nil {
		return false, err
	}
	if err := s.writable(); err != nil {
		return false, err
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.leave()
	s.schedules.Lock()
	defer s.schedules.Unlock()
	sc, found, err := s.readSchedule(name)
	if err != nil || !found {
		return false, err
	}
	if !sc.Created.Equal(created) || !sc.LastTick.Equal(from) {
		return false, nil
	}
	sc.LastTick = to
	if err := s.writeScheduleLocked(sc); err != nil {
		return false, err
	}
	return true, nil
}

// writeScheduleLocked commits sc's record; s.schedules is held.
func (s *Store) writeScheduleLocked(sc eventlog.Schedule) error {
	v, err := json.Marshal(scheduleRecord{Agent: sc.Agent, Spec: sc.Spec, Input: sc.Input, CatchUp: sc.CatchUp,
		Created: eventlog.ScheduleNanos(sc.Created), LastTick: eventlog.ScheduleNanos(sc.LastTick)})
	if err != nil {
		return fmt.Errorf("pebblestore: encode schedule %q: %w", sc.Name, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(scheduleKey(sc.Name), append([]byte{scheduleVersion}, v...), nil)
	if err := s.commit(b, s.write); err != nil {
		return fmt.Errorf("pebblestore: schedule %q: %w", sc.Name, err)
	}
	return nil
}

// readSchedule returns the record name, found false when there is none.
func (s *Store) readSchedule(name string) (eventlog.Schedule, bool, error) {
	v, closer, err := s.db.Get(scheduleKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return eventlog.Schedule{}, false, nil
	}
	if err != nil {
		return eventlog.Schedule{}, false, s.readErr(eventlog.ID{}, "schedule "+strconv.Quote(name), err)
	}
	defer closer.Close()
	sc, err := decodeSchedule(name, v)
	return sc, err == nil, err
}

// decodeSchedule decodes the record of name; a record that does not decode
// or breaks eventlog.CheckSchedule is a CorruptionError.
func decodeSchedule(name string, v []byte) (eventlog.Schedule, error) {
	corrupt := func(err error) error {
		return &eventlog.CorruptionError{What: "schedule record " + strconv.Quote(name), Err: err}
	}
	if len(v) == 0 || v[0] != scheduleVersion {
		return eventlog.Schedule{}, corrupt(fmt.Errorf("%d bytes without version %d", len(v), scheduleVersion))
	}
	var r scheduleRecord
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return eventlog.Schedule{}, corrupt(err)
	}
	sc := eventlog.Schedule{Name: name, Agent: r.Agent, Spec: r.Spec, Input: r.Input, CatchUp: r.CatchUp,
		Created: eventlog.ScheduleTime(r.Created), LastTick: eventlog.ScheduleTime(r.LastTick)}
	if err := eventlog.CheckSchedule(sc); err != nil {
		return eventlog.Schedule{}, corrupt(err)
	}
	return sc, nil
}
